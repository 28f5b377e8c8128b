"""The files of a graded class folder (``--out``) other than the feedback prose: how they are written and read.

* ``grades.csv``: written atomically (`atomic_write`); its cells are spreadsheet-safe (`cell`), and a
  regrade (``--learner``) replaces one row of it in place (`replace_rows`);
* ``details.json``: one record per row, in row order (`write_details`): per TODO the status, points,
  the case families not passed and the feedback's headline message, the code graded, and the
  seconds grading took. ``kvsched grade report`` reads it; grades.csv never holds timings, so
  re-runs give the same grades.csv bytes;
* ``overrides.csv``: the overrides last applied, kept for a later ``--learner`` regrade;
* ``feedback/<name>.md`` and ``.html``: named by `feedback_name`, unique within the class.
"""
from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Sequence

from kvsched_lab.grading.overrides import HEADER, Override, resolve
from kvsched_lab.grading.verdict import bounded
from kvsched_lab.sim.scheduler import TODO_METHODS

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# Feedback lines that only summarise counts: the report's "most common message" skips them.
SUMMARY_TEMPLATES = ("All {n} hidden cases passed.", "Passed {passed} of {n} hidden cases. By family: {families}.",
                     "Failing: {families}.")


def cell(text: str) -> str:
    """A status a spreadsheet shows as text, never runs as a formula."""
    return "'" + text if text[:1] in FORMULA_START else text


def uncell(text: str) -> str:
    """The text `cell` was given."""
    return text[1:] if text[:1] == "'" and text[1:2] in FORMULA_START else text


def feedback_name(name: str, used: set) -> str:
    """A file name for `name`'s feedback (``.md``), not in `used` (which it joins)."""
    base = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name.strip("./"))[:150] or "submission"
    stem, k = base, 1
    while stem in used:
        k += 1
        stem = f"{base}-{k}"
    used.add(stem)
    return stem + ".md"


def atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_rows(out: Path) -> List[List[str]]:
    """The rows of ``out/grades.csv`` as graded (submission, the TODOs, total, status), header left out."""
    path = out / "grades.csv"
    if not path.is_file():
        raise ValueError(f"{path} does not exist: grade the class into {out} first, then regrade one learner")
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    width = 3 + len(TODO_METHODS)
    if not rows or rows[0][:width] != ["submission", *TODO_METHODS, "total", "status"]:
        raise ValueError(f"{path} is not a grades.csv written by kvsched grade")
    return [r[:width] for r in rows[1:]]


def match_row(rows: Sequence[Sequence[str]], name: str) -> str:
    """The row name of `rows` that `name` (a path as typed now) refers to: equal, or the one with its last part."""
    names = [r[0] for r in rows]
    if cell(name) in names:
        return cell(name)
    tail = Path(name).name
    hits = [n for n in names if Path(uncell(n)).name == tail]
    if len(hits) != 1:
        why = f"several rows end with {tail!r}" if hits else f"no row of grades.csv is {name!r} or ends with {tail!r}"
        raise ValueError(f"--learner {name}: {why}; give the path as it was graded")
    return hits[0]


def replace_rows(out: Path, mine: Sequence[Sequence[Any]]) -> List[List[Any]]:
    """The class's rows as graded (before overrides: from ``details.json``), each of `mine` in place of the
    row of the same name."""
    rows: List[List[Any]] = [[d["submission"], *(d["todos"][t]["points"] for t in TODO_METHODS), d["total"],
                              d["status"]] for d in read_details(out)]
    at = {r[0]: i for i, r in enumerate(rows)}
    for new in mine:
        rows[at[new[0]]] = list(new)
    return rows


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
    return {"submission": cell(g.submission), "total": g.total, "status": cell(g.status), "error": g.error,
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


def write_details(out: Path, grades: Sequence[Any], replace: bool) -> None:
    """``out/details.json`` for `grades` (`replace`: put them in place of the records of the same rows)."""
    mine = [record(g) for g in grades]
    if replace:
        by_name = {r["submission"]: r for r in mine}
        rows = [by_name.get(r["submission"], r) for r in read_details(out)]
    else:
        rows = mine
    atomic_write(out / "details.json", json.dumps({"rows": rows}, ensure_ascii=False, indent=1).encode("utf-8"))
