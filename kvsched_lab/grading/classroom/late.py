"""Late work: submission times against a due date, and the stated penalty rule.

Times come from a CSV (an LMS download's submission list, trimmed to two columns): ``id`` (the
roster's) or ``file`` (a grades.csv submission name or its last part), and ``submitted`` (ISO 8601,
``2026-12-01T23:59:00+08:00``; ``Z`` for UTC). The due date is ISO 8601 too; both must carry a UTC
offset, or neither (then they are read as the same clock).

The rule (docs/grading.md): a submission ``d`` days late, counting every started day (one second
late is one day), loses ``penalty_percent`` of its total per day, at most all of it:
``final = floor(total * max(0, 100 - penalty_percent * d) / 100)``. Per-TODO points are not
changed; the exports' total is the penalised one, beside the late days.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Dict, Optional

from kvsched_lab.grading.classroom.overrides import read_instructor_file


class LateError(ValueError):
    """A mistake in the due date or the times file; the message names the line."""


@dataclass(frozen=True)
class LateRule:
    due: datetime
    penalty_percent: float = 10.0  # of the total, per started day late

    def days_late(self, submitted: datetime) -> int:
        seconds = (submitted - self.due).total_seconds()
        return max(0, math.ceil(seconds / 86400))

    def apply(self, total: int, submitted: Optional[datetime]) -> tuple:
        """(days late, final total) for a submission handed in at `submitted` (None: on time)."""
        days = self.days_late(submitted) if submitted is not None else 0
        kept = max(0.0, 100.0 - self.penalty_percent * days)
        return days, math.floor(total * kept / 100 + 1e-9)


def parse_time(text: str, where: str) -> datetime:
    try:
        return datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise LateError(f"{where}: {text!r} is not an ISO 8601 time (e.g. 2026-12-01T23:59:00+08:00)") from None


def rule(due: str, penalty_percent: float) -> LateRule:
    if not 0 <= penalty_percent <= 100:
        raise LateError(f"--late-penalty {penalty_percent}: a percentage of the total per day, 0 to 100")
    return LateRule(parse_time(due, "--due"), penalty_percent)


def read_times(path: Path, due: datetime) -> Dict[str, datetime]:
    """Key (``id:<id>`` or ``file:<name>``) -> submission time, checked against `due`'s kind of clock."""
    text = read_instructor_file(path, LateError)
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    fields = [f.strip().lower() for f in reader.fieldnames or []]
    key = "id" if "id" in fields else "file" if "file" in fields else None
    if key is None or "submitted" not in fields:
        raise LateError(f"{path}, line 1: the header must have submitted and id (or file); got {','.join(fields)}")
    out: Dict[str, datetime] = {}
    try:
        for row in reader:
            row = {k.strip().lower(): (v or "").strip() for k, v in row.items() if k}
            where = f"{path}, line {reader.line_num}"
            if not any(row.values()):
                continue
            if not row.get(key):
                raise LateError(f"{where}: no {key}")
            when = parse_time(row.get("submitted", ""), where)
            if (when.tzinfo is None) != (due.tzinfo is None):
                raise LateError(f"{where}: give both this time and --due with a UTC offset, or neither")
            if f"{key}:{row[key]}" in out:
                raise LateError(f"{where}: {key} {row[key]!r} is listed twice")
            out[f"{key}:{row[key]}"] = when
    except csv.Error as e:
        raise LateError(f"{path}, line {reader.line_num}: not valid CSV ({e})") from None
    return out
