"""`bench_grading`: seconds per submission, alone and in a batch (for ``kvsched bench``)."""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Dict

from kvsched_lab.grading.grade import grade_submissions
from kvsched_lab.grading.verdict import Reference


def _submissions(folder: Path, n: int) -> None:
    """`n` .py submissions: the reference, and copies with one wrong line (a realistic mix of grades)."""
    reference = (Path(__file__).resolve().parents[2] / "solutions" / "scheduler.py").read_text(encoding="utf-8")
    edits = [("", ""), ("0.5 * recency", "0.25 * recency"), ("hits=1", "hits=0"),
             ("(entry.priority, entry.last_used, prefix)", "(-entry.priority, entry.last_used, prefix)"),
             ("-e.priority, e.last_used", "-e.priority, -e.last_used")]
    for i in range(n):
        old, new = edits[i % len(edits)]
        (folder / f"student{i:03d}.py").write_text(reference.replace(old, new) if old else reference, encoding="utf-8")


def bench_grading(n: int = 50, jobs: int = 2, timeout: float = 10.0) -> Dict[str, float]:
    """Grade one submission alone, then `n` with `jobs` workers; wall-clock seconds."""
    ref = Reference.build()
    with tempfile.TemporaryDirectory(prefix="kvsched-bench-") as tmp:
        folder = Path(tmp) / "class"
        folder.mkdir()
        _submissions(folder, n)
        started = time.monotonic()
        grade_submissions([str(folder / "student000.py")], timeout=timeout, ref=ref)
        single = time.monotonic() - started
        started = time.monotonic()
        grades = grade_submissions([str(folder)], timeout=timeout, jobs=jobs, ref=ref)
        batch = time.monotonic() - started
    assert len(grades) == n and all(g.status == "ok" for g in grades), "benchmark submissions must grade cleanly"
    return {"submissions": float(n), "jobs": float(jobs), "seconds_single": round(single, 2),
            "seconds_batch": round(batch, 2), "seconds_per_submission_in_batch": round(batch / n, 2)}
