"""The instructor's corrections: an overrides file read, checked, and applied to grade rows.

The file is CSV with the header ``submission,todo,points,reason`` (any column order; blank
lines are skipped, and nothing else: there are no comments). One line sets one TODO of one
submission to `points` (a whole number in ASCII digits, 0 to 20) for the stated `reason`, which
the learner's feedback shows. `submission` is read exactly as written (never stripped: a name
that starts with a space or ``#`` is a name): the ``grades.csv`` name (``sec1/alice.py``) or its
last part (``alice.py``) when only one row ends that way.

Everything an instructor can mistype fails before any grading, naming the file's line, and every
bad line is named at once, not the first: a bad header or CSV, an unknown TODO, points out of
range or not ASCII digits (``+20``, ``2_0``, ``٢٠``), an empty reason, a submission no row has
(or several rows end with), the same TODO of a submission set twice. `apply_overrides`
is pure: ``kvsched grade`` calls it while writing its reports, and the shard merge on the rows it
merged; the rows it returns keep the graded points (``graded_total``, ``overrides``) beside the
final ones.
"""
from __future__ import annotations

import csv
import io
import re
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
    """`read_overrides` on text already read; `where` names it in errors.

    Names are exact: a cell is never stripped or read as a comment (`` alice.py`` and ``#7.py``
    are names), and every bad line is reported, not the first (one `OverridesError`)."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header, columns, out, problems = None, {}, [], []
    try:
        for row in reader:
            line = reader.line_num
            if not any(row):  # a blank line (every cell empty); a space is a name
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
                problems.append(f"{where}, line {line}: {len(row)} fields, the header has {len(header)}")
                continue
            try:
                out.append(_override({c: row[i] for c, i in columns.items()}, where, line))
            except OverridesError as e:
                problems.append(str(e))
    except csv.Error as e:
        problems.append(f"{where}, line {reader.line_num}: not valid CSV ({e})")
    if header is None and not problems:
        raise OverridesError(f"{where}: empty; the first line must be the header {','.join(HEADER)}")
    _raise_all(problems)
    return out


def _raise_all(problems: Sequence[str]) -> None:
    if len(problems) == 1:
        raise OverridesError(problems[0])
    if problems:
        raise OverridesError(f"{len(problems)} lines of the overrides file are wrong (nothing was applied):\n  "
                             + "\n  ".join(problems))


def _override(cells: Dict[str, str], where: str, line: int) -> Override:
    todo, points = cells["todo"].strip(" "), cells["points"].strip(" ")
    if todo not in TODO_METHODS:
        raise OverridesError(f"{where}, line {line}: unknown TODO {todo!r} (one of {', '.join(TODO_METHODS)})")
    if not re.fullmatch(r"[0-9]+", points):  # int() takes "+20", "2_0" and other scripts' digits
        raise OverridesError(f"{where}, line {line}: points {points!r} is not a whole number (ASCII digits 0-9 only)")
    if not 0 <= int(points) <= POINTS:
        raise OverridesError(f"{where}, line {line}: points {int(points)} is out of range (0 to {POINTS} per TODO)")
    if not cells["submission"]:
        raise OverridesError(f"{where}, line {line}: no submission named")
    reason = " ".join(cells["reason"].split())
    if not reason:
        raise OverridesError(f"{where}, line {line}: give a reason (the learner's feedback shows it)")
    if len(reason) > MAX_REASON:
        raise OverridesError(f"{where}, line {line}: the reason is longer than {MAX_REASON} characters")
    return Override(cells["submission"], todo, int(points), reason, line)


def matches(typed: str, names: Sequence[str]) -> List[str]:
    """The names of `names` that `typed` refers to (one, or several when it is ambiguous): itself; else, for a
    longer path as typed (``/srv/class/sec2/alice.py``), the longest name it ends with at a ``/``; else the
    names that end with it (``alice.py`` for ``sec2/alice.py``); else those with its last part."""
    if typed in names:
        return [typed]
    longer = [n for n in names if typed.endswith("/" + n)]
    if longer:
        return [max(longer, key=len)]
    shorter = [n for n in names if n.endswith("/" + typed)]
    if shorter:
        return shorter
    tail = typed.rsplit("/", 1)[-1]
    return [n for n in names if n.rsplit("/", 1)[-1] == tail] if tail else []


def resolve(overrides: Sequence[Override], submissions: Sequence[str]) -> Dict[str, List[Override]]:
    """Submission name (as in `submissions`) -> its overrides in file order; `OverridesError` naming every
    line that matches no row, matches several, or sets a TODO already set."""
    names = list(submissions)
    out: Dict[str, List[Override]] = {}
    seen: Dict[tuple, int] = {}
    problems = []
    for o in overrides:
        hits = matches(o.submission, names)
        if len(hits) != 1:
            why = (f"several submissions end with {o.submission!r} ({', '.join(hits[:3])}"
                   f"{', ...' if len(hits) > 3 else ''}): write the full name as in grades.csv"
                   if hits else f"no submission is named {o.submission!r}")
            problems.append(f"overrides, line {o.line}: {why}")
            continue
        name = hits[0]
        if (name, o.todo) in seen:
            problems.append(f"overrides, line {o.line}: {name} {o.todo} is already set on line {seen[(name, o.todo)]}")
            continue
        seen[(name, o.todo)] = o.line
        out.setdefault(name, []).append(o)
    _raise_all(problems)
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
