"""`bench_grading`: the grader's throughput, submissions per second per core (for ``kvsched bench --grading``).

One submission alone (a batch's fixed cost, the sandbox library, with one sandbox), then a batch
of `n` on one worker per core, sandboxed where bubblewrap works (the result says whether it was);
the reference's expected observations are built once, before either is timed. The batch's
submissions per second divided by the workers is the per-core rate the README's sizing (one
16-core machine, N Slurm nodes) is computed from: each submission is one sandboxed process tree,
so grading scales with cores until memory runs out.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Optional

from kvsched_lab.grading.box import sandbox
from kvsched_lab.grading.batch.batch import grade_submissions
from kvsched_lab.grading.batch.options import BatchOptions
from kvsched_lab.grading.judging.verdict import Reference


def _submissions(folder: Path, n: int) -> None:
    """`n` .py submissions: the reference, and copies with one wrong line (a realistic mix of grades)."""
    reference = (Path(__file__).resolve().parents[2] / "solutions" / "scheduler.py").read_text(encoding="utf-8")
    edits = [("", ""), ("0.5 * recency", "0.25 * recency"), ("hits=1", "hits=0"),
             ("(entry.priority, entry.last_used, prefix)", "(-entry.priority, entry.last_used, prefix)"),
             ("-e.priority, e.last_used", "-e.priority, -e.last_used")]
    for i in range(n):
        old, new = edits[i % len(edits)]
        (folder / f"student{i:03d}.py").write_text(reference.replace(old, new) if old else reference, encoding="utf-8")


def cores() -> int:
    """The cores this process may run on (a Slurm task's or a container's share, not the machine's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def bench_grading(n: int = 40, jobs: Optional[int] = None, timeout: float = 10.0) -> Dict[str, float]:
    """Grade one submission alone, then `n` on `jobs` workers (default: one per core); rates and seconds."""
    jobs = jobs or cores()
    sandboxed = sandbox.probe()[0]
    ref = Reference.build()
    # The batch's own lines (the uids it leased) go to stderr: stdout may be `kvsched bench --json`.
    with tempfile.TemporaryDirectory(prefix="kvsched-bench-") as tmp, contextlib.redirect_stdout(sys.stderr):
        folder = Path(tmp) / "class"
        folder.mkdir()
        _submissions(folder, n)
        started = time.monotonic()
        grade_submissions([str(folder / "student000.py")], None, BatchOptions(timeout=timeout, sandboxed=sandboxed), ref)
        single = time.monotonic() - started
        started = time.monotonic()
        grades = grade_submissions([str(folder)], None, BatchOptions(timeout=timeout, jobs=jobs, sandboxed=sandboxed), ref)
        batch = time.monotonic() - started
    clean = "ok" if sandboxed else "unsandboxed"
    assert len(grades) == n and all(g.status == clean for g in grades), "benchmark submissions must grade cleanly"
    per_core = n / batch / jobs
    return {"submissions": float(n), "jobs": float(jobs), "cores": float(cores()), "sandboxed": float(sandboxed),
            "seconds_single": round(single, 2),
            "seconds_batch": round(batch, 2), "submissions_per_second": round(n / batch, 3),
            "submissions_per_second_per_core": round(per_core, 3),
            "minutes_for_1000_on_16_cores": round(1000 / (per_core * 16) / 60, 1)}
