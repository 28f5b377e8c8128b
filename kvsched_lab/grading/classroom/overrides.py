"""The instructor's corrections: an overrides file read, checked, and applied to grade rows.

The file is CSV with the header ``submission,todo,points,reason`` (any column order; blank
lines and lines starting with ``#`` are skipped). One line sets one TODO of one submission to
`points` (a whole number, 0 to 20) for the stated `reason`, which the learner's feedback shows.
`submission` is the ``grades.csv`` name (``class/alice.py``) or its last part (``alice.py``)
when only one row ends that way.

Everything an instructor can mistype fails before any grading, naming the file's line:
a bad header or CSV, an unknown TODO, points out of range, an empty reason, a submission no
row has (or several rows end with), the same TODO of a submission set twice. `apply_overrides`
is pure: ``kvsched grade`` calls it while writing its reports, and the shard merge on the rows it
merged; the rows it returns keep the graded points (``graded_total``, ``overrides``) beside the
final ones.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Sequence

from kvsched_lab.grading.judging.verdict import POINTS
from kvsched_lab.i18n.messages import Deferred as _  # feedback lines: rendered in --lang's language when written
from kvsched_lab.sim.scheduler import TODO_METHODS

HEADER = ("submission", "todo", "points", "reason")
MAX_REASON = 500  # characters: a reason is a sentence for the learner, not an essay
# Columns the rows gain: the total before corrections, and each correction as "todo graded->final: reason".
EXTRA_COLUMNS = ("graded_total", "overrides")


class OverridesError(ValueError):
    """A mistake in the overrides file; the message names the file and line."""


@dataclass(frozen=True)
class Override:
    """One corrected TODO of one submission."""

    submission: str  # as written in the file; `resolve` maps it to a grades.csv name
    todo: str  # a key of TODO_METHODS
    points: int  # the final points for this TODO, 0..POINTS
    reason: str  # shown to the learner in the feedback
    line: int  # the file's line, for error messages


def read_instructor_file(path: Path, error: type) -> str:
    """The text of an instructor's CSV (UTF-8, a spreadsheet's BOM allowed), or `error` saying why not."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (byte {e.start}); save it as UTF-8 CSV") from None
    except OSError as e:
        raise error(f"{path}: cannot read it: {e.strerror}") from None


def read_overrides(path: Path) -> List[Override]:
    """Parse and check `path` on its own (names are checked against the class by `resolve`)."""
    return parse_overrides(read_instructor_file(path, OverridesError), str(path))


def parse_overrides(text: str, where: str = "overrides") -> List[Override]:
    """`read_overrides` on text already read; `where` names it in errors."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header, columns, out = None, {}, []
    try:
        for row in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in row) or row[0].lstrip().startswith("#"):
                continue
            if header is None:
                header = [cell.strip().lower() for cell in row]
                missing = [c for c in HEADER if c not in header]
                extra = [c for c in header if c not in HEADER]
                if missing or extra or len(set(header)) != len(header):
                    raise OverridesError(f"{where}, line {line}: the header must be {','.join(HEADER)} "
                                         f"(got {','.join(header)})")
                columns = {c: header.index(c) for c in HEADER}
                continue
            if len(row) != len(header):
                raise OverridesError(f"{where}, line {line}: {len(row)} fields, the header has {len(header)}")
            out.append(_override({c: row[i].strip() for c, i in columns.items()}, where, line))
    except csv.Error as e:
        raise OverridesError(f"{where}, line {reader.line_num}: not valid CSV ({e})") from None
    if header is None:
        raise OverridesError(f"{where}: empty; the first line must be the header {','.join(HEADER)}")
    return out


def _override(cells: Dict[str, str], where: str, line: int) -> Override:
    todo = cells["todo"]
    if todo not in TODO_METHODS:
        raise OverridesError(f"{where}, line {line}: unknown TODO {todo!r} (one of {', '.join(TODO_METHODS)})")
    try:
        points = int(cells["points"])
    except ValueError:
        raise OverridesError(f"{where}, line {line}: points {cells['points']!r} is not a whole number") from None
    if not 0 <= points <= POINTS:
        raise OverridesError(f"{where}, line {line}: points {points} is out of range (0 to {POINTS} per TODO)")
    if not cells["submission"]:
        raise OverridesError(f"{where}, line {line}: no submission named")
    if not cells["reason"]:
        raise OverridesError(f"{where}, line {line}: give a reason (the learner's feedback shows it)")
    if len(cells["reason"]) > MAX_REASON:
        raise OverridesError(f"{where}, line {line}: the reason is longer than {MAX_REASON} characters")
    return Override(cells["submission"], todo, points, " ".join(cells["reason"].split()), line)


def _tail(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1]


def resolve(overrides: Sequence[Override], submissions: Sequence[str]) -> Dict[str, List[Override]]:
    """Submission name (as in `submissions`) -> its overrides in file order; raises on any mismatch."""
    names = list(submissions)
    by_tail: Dict[str, List[str]] = {}
    for name in names:
        by_tail.setdefault(_tail(name), []).append(name)
    out: Dict[str, List[Override]] = {}
    seen: Dict[tuple, int] = {}
    for o in overrides:
        if o.submission in names:
            name = o.submission
        else:
            hits = by_tail.get(_tail(o.submission), [])  # a path as typed finds its row (rows are relative names)
            if len(hits) != 1:
                why = (f"several submissions end with {o.submission!r} ({', '.join(hits[:3])}): write the full name"
                       if hits else f"no submission is named {o.submission!r}")
                raise OverridesError(f"overrides, line {o.line}: {why}")
            name = hits[0]
        if (name, o.todo) in seen:
            raise OverridesError(f"overrides, line {o.line}: {name} {o.todo} is already set on line "
                                 f"{seen[(name, o.todo)]}")
        seen[(name, o.todo)] = o.line
        out.setdefault(name, []).append(o)
    return out


def apply_overrides(rows: Sequence[Mapping[str, object]], overrides: Sequence[Override]) -> List[Dict[str, object]]:
    """New rows with the overrides applied; the input rows are left as they were.

    A row holds grades.csv's columns (``submission``, one per TODO, ``total``, ``status``; points as
    int or str). The result's TODO columns and ``total`` are the final points; ``graded_total`` is
    the total as graded and ``overrides`` lists each correction (``score 12->20: reason``; empty
    when none), so the graded points stay in the file. Raises `OverridesError` when an override
    names no row (or is ambiguous, or repeats a TODO).
    """
    by_name = resolve(overrides, [str(r["submission"]) for r in rows])
    out = []
    for row in rows:
        new = dict(row)
        graded = {t: int(row[t]) for t in TODO_METHODS}
        notes = []
        for o in by_name.get(str(row["submission"]), []):
            new[o.todo] = o.points
            notes.append(f"{o.todo} {graded[o.todo]}->{o.points}: {o.reason}")
        new.update({t: int(new[t]) for t in TODO_METHODS})
        new["total"] = sum(int(new[t]) for t in TODO_METHODS)
        new["graded_total"] = sum(graded.values())
        new["overrides"] = "; ".join(notes)
        out.append(new)
    return out


def feedback_section(mine: Sequence[Override], graded: Mapping[str, int]) -> List[str]:
    """Feedback lines (`Deferred`) for one submission's corrections; [] when it has none.

    `graded`: TODO -> points as graded."""
    if not mine:
        return []
    final = {**graded, **{o.todo: o.points for o in mine}}
    lines = [_("## Corrected by the instructor")]
    for o in mine:
        lines.append(_("{todo}: {graded} -> {points} points. Reason: {reason}", todo=o.todo,
                       graded=graded[o.todo], points=o.points, reason=o.reason))
    lines.append(_("Final total: {total} / {points} (graded {graded}).", total=sum(final.values()),
                   points=POINTS * len(TODO_METHODS), graded=sum(graded.values())))
    return lines
