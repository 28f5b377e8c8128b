"""The files of a graded class folder (``--out``) other than the feedback prose: how they are written and read.

* ``grades.csv``: written atomically (`atomic_write`); its cells are spreadsheet-safe (`cell`);
* ``details.json``: one record per row, in row order (`write_details`): per TODO the status, points,
  the case families not passed and the feedback's headline message, the code graded, and the
  seconds grading took. ``kvsched grade report`` reads it; grades.csv never holds timings, so
  re-runs give the same grades.csv bytes;
* ``overrides.csv``: the overrides last applied, kept for a later ``--learner`` regrade (`match_row`
  finds its learner);
* ``feedback/<name>.md`` and ``.html``: named by `feedback_name`, unique within the class.
"""
from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Sequence

from kvsched_lab.grading.classroom.overrides import HEADER, Override, matches, resolve
from kvsched_lab.grading.learner.writers import atomic_write, bounded, csv_cell, display_name, encoded

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# Feedback lines that only summarise counts: the report's "most common message" skips them.
SUMMARY_TEMPLATES = ("All {n} hidden cases passed.", "Passed {passed} of {n} hidden cases. By family: {families}.",
                     "Failing: {families}.")


def match_row(names: Sequence[str], name: str) -> str:
    """The learner of `names` (a graded class's, in manifest.json) that `name` (a path as typed now) refers
    to: equal, the one its path ends with (``/srv/class/sec2/alice.py``: ``sec2/alice.py``), or the one
    ending with it (overrides.matches); its parts are compared escaped, as the names are."""
    typed = "/".join(display_name(part) for part in name.split(os.sep) if part and part != ".")
    hits = sorted(set(matches(typed, list(names))))
    if len(hits) != 1:
        why = (f"several learners end with {typed!r} ({', '.join(hits[:3])})" if hits
               else f"no learner of the class is {name!r} or ends with {Path(name).name!r}")
        raise ValueError(f"--learner {name}: {why}; give the path as it was graded")
    return hits[0]


def resolved(overrides: Sequence[Override], rows: Sequence[Sequence[Any]]) -> Dict[str, List[Override]]:
    """Row name -> its overrides."""
    return resolve(overrides, [str(r[0]) for r in rows])


def write_overrides(out: Path, overrides: Sequence[Override]) -> None:
    """Keep the overrides applied in ``out/overrides.csv`` (none: remove it)."""
    path = out / "overrides.csv"
    if not overrides:
        path.unlink(missing_ok=True)
        return
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(HEADER)
    writer.writerows([o.submission, o.todo, o.points, o.reason] for o in overrides)
    atomic_write(path, buffer.getvalue().encode("utf-8"))


def _headline(lines: Sequence[str]) -> str:
    """A TODO's feedback message that says what went wrong (in English), skipping count summaries."""
    for line in lines:
        if line and getattr(line, "template", str(line)) not in SUMMARY_TEMPLATES:
            return bounded(str(line).replace("\n\n", " "), 240)
    return ""


def record(g: Any) -> Dict[str, Any]:
    """The details of one graded row (`g`: a grade.Grade)."""
    return {"submission": csv_cell(g.submission), "total": g.total, "status": csv_cell(g.status), "error": g.error,
            "elapsed_s": round(g.elapsed_s, 3), "sandboxed": g.sandboxed,
            "todos": {n: {"status": t.status, "points": t.points, "passed": t.passed, "cases": t.total,
                          "failing": list(t.failing), "message": _headline(t.lines), "origin": t.origin}
                      for n, t in g.todos.items()},
            "sources": dict(g.sources)}


def read_details(out: Path) -> List[Dict[str, Any]]:
    path = out / "details.json"
    if not path.is_file():
        raise ValueError(f"{path} does not exist: it is written by kvsched grade (this folder was not graded by it)")
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise ValueError(f"{path} is not a details file written by kvsched grade")
    return data["rows"]


def write_details(out: Path, grades: Sequence[Any]) -> None:
    """``out/details.json`` for `grades`, in row order."""
    rows = [record(g) for g in grades]
    atomic_write(out / "details.json", encoded(json.dumps({"rows": rows}, ensure_ascii=False, indent=1)))
