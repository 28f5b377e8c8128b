"""The files of a graded class folder (``--out``) other than the feedback prose: how they are written and read.

* ``grades.csv``: written atomically (`atomic_write`); its cells are spreadsheet-safe (`cell`);
* ``details.json``: one record per row, in row order (`write_details`): per TODO the status, points,
  the case families not passed, the code graded, the review
  notes, the row's feedback file (its stem in ``feedback/``) and the seconds grading took. ``kvsched grade report`` reads it; grades.csv never holds timings, so
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

DETAIL_KEYS = {"submission", "total", "status", "error", "elapsed_s", "feedback", "review", "todos", "sources"}


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


def record(g: Any, feedback: str) -> Dict[str, Any]:
    """The details of one graded row (`g`: a grade.Grade; `feedback`: its feedback file's stem)."""
    return {"submission": csv_cell(g.submission), "total": g.total, "status": csv_cell(g.status), "error": g.error,
            "elapsed_s": round(g.elapsed_s, 3), "sandboxed": g.sandboxed, "feedback": feedback,
            "review": [bounded(r, 200) for r in g.review],
            "todos": {n: {"status": t.status, "points": t.points, "passed": t.passed, "cases": t.total,
                          "failing": list(t.failing), "origin": t.origin}
                      for n, t in g.todos.items()},
            "sources": dict(g.sources)}


def read_details(out: Path) -> List[Dict[str, Any]]:
    path = out / "details.json"
    if not path.is_file():
        raise ValueError(f"{path} does not exist: it is written by kvsched grade (this folder was not graded by it)")
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise ValueError(f"{path} is not a details file written by kvsched grade")
    for row in data["rows"]:
        if not isinstance(row, dict) or not DETAIL_KEYS <= set(row):
            raise ValueError(f"{path} lacks what this kvsched's report reads (written by an older one?): regrade "
                             "the class, or kvsched grade --resume into it")
    return data["rows"]


def write_details(out: Path, grades: Sequence[Any], feedback: Sequence[str]) -> None:
    """``out/details.json`` for `grades`, in row order; `feedback`: each row's feedback file stem."""
    rows = [record(g, name) for g, name in zip(grades, feedback, strict=True)]
    atomic_write(out / "details.json", encoded(json.dumps({"rows": rows}, ensure_ascii=False, indent=1)))
