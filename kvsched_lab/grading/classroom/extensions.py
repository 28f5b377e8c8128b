"""Per-student extensions and accommodations: a due date of a student's own, by roster id.

``kvsched grade export ... --due D --times T --extensions extensions.csv``. The file is CSV with
the header ``id`` and ``due`` and/or ``extra_days``, and an optional ``reason`` (any order, case
ignored)::

    id,due,extra_days,reason
    s017,2026-12-04T23:59:00+08:00,,"medical certificate"
    s042,,3,"accessibility plan: three extra days on every lab"

Each row gives one student (the roster's ``id``) exactly one of: ``due``, that student's own due
date (ISO 8601, with a UTC offset exactly when ``--due`` has one), or ``extra_days``, a whole
number of days (ASCII digits, 1 to `MAX_EXTRA_DAYS`) added to ``--due``. The late rule
(late.py) then counts that student's late days from the new date. An extension never moves a
due date earlier: a ``due`` before ``--due`` is refused as a typo.

Every bad row is reported, all of them in one `LateError` (one line each, naming the file's line),
before anything is written: a bad header or CSV, an id the roster does not have or that is listed
twice, both or neither of ``due`` and ``extra_days``, a time that is no ISO 8601 or is on the
other kind of clock, days that are not ASCII digits (``３``, ``+2``, ``2_0``, ``1.5``) or out of range.
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Collection, Dict, List

from kvsched_lab.grading.classroom.late import LateError, parse_time
from kvsched_lab.grading.classroom.overrides import read_instructor_file

COLUMNS = ("id", "due", "extra_days", "reason")
MAX_EXTRA_DAYS = 365  # more than a year is a typo, not an accommodation
_DIGITS = re.compile("[0-9]+")  # ASCII only: str.isdigit() accepts "３" and "²"


@dataclass(frozen=True)
class Extension:
    """One student's own due date."""

    id: str  # the roster's id
    due: datetime  # the due date the late rule counts from for this student
    reason: str  # the instructor's note (shown in points-by-todo.csv, never in an import file)
    line: int  # in the extensions file


def read_extensions(path: Path, due: datetime, roster_ids: Collection[str]) -> Dict[str, Extension]:
    """Roster id -> its `Extension`; raises `LateError` listing every bad row of `path`."""
    text = read_instructor_file(path, LateError)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    known = set(roster_ids)
    header: List[str] = []
    out: Dict[str, Extension] = {}
    problems: List[str] = []
    try:
        for row in reader:
            where = f"{path}, line {reader.line_num}"
            if not any(c.strip() for c in row):
                continue
            if not header:
                header = [c.strip().lower() for c in row]
                unknown = [c for c in header if c not in COLUMNS]
                if (unknown or "id" not in header or not {"due", "extra_days"} & set(header)
                        or len(set(header)) != len(header)):
                    raise LateError(f"{where}: the header must have id and due and/or extra_days (and may have "
                                    f"reason), each once; got {','.join(header)}")
                continue
            if len(row) != len(header):
                problems.append(f"{where}: {len(row)} fields, the header has {len(header)}")
                continue
            cells = {c: v.strip() for c, v in zip(header, row)}
            try:
                ext = _extension(cells, due, where, reader.line_num)
                if ext.id not in known:
                    raise LateError(f"{where}: id {ext.id!r} is not in the roster")
                if ext.id in out:
                    raise LateError(f"{where}: id {ext.id!r} is already on line {out[ext.id].line}")
                out[ext.id] = ext
            except LateError as e:
                problems.append(str(e))
    except csv.Error as e:
        problems.append(f"{path}, line {reader.line_num}: not valid CSV ({e})")
    if not header:
        raise LateError(f"{path}: empty; the first line must be a header such as id,due,extra_days,reason")
    if problems:
        raise LateError("\n".join(problems))
    return out


def _extension(cells: Dict[str, str], due: datetime, where: str, line: int) -> Extension:
    sid, own, days = cells.get("id", ""), cells.get("due", ""), cells.get("extra_days", "")
    if not sid:
        raise LateError(f"{where}: no id")
    if bool(own) == bool(days):
        raise LateError(f"{where}: give {sid!r} either a due date or extra_days (not both, not neither)")
    if days:
        if not _DIGITS.fullmatch(days) or not 1 <= int(days) <= MAX_EXTRA_DAYS:
            raise LateError(f"{where}: extra_days {days!r} is not a whole number of days, 1 to {MAX_EXTRA_DAYS} "
                            "(ASCII digits)")
        return Extension(sid, due + timedelta(days=int(days)), cells.get("reason", ""), line)
    when = parse_time(own, where)
    if (when.tzinfo is None) != (due.tzinfo is None):
        raise LateError(f"{where}: give both this due date and --due with a UTC offset, or neither")
    if when < due:
        raise LateError(f"{where}: {own} is before --due: an extension moves a due date later, never earlier")
    return Extension(sid, when, cells.get("reason", ""), line)
