"""A small class for the scale tests (test_grading_scale.py, test_grading_cluster.py), and what a run writes.

Five learners: the reference, an untouched stub, a file that does not parse, a notebook learner
with stubs, and one wrong answer graded last (it runs, so it takes seconds: time to kill a run).
"""
from __future__ import annotations

from pathlib import Path

import variants as v
from kvsched_lab.sim.scheduler import TODO_METHODS

SIZE = 5


def write_class(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "ref.py").write_text(v.py_submission({}), encoding="utf-8")
    (root / "stub.py").write_text(v.py_submission({t: v.stub(t) for t in TODO_METHODS}), encoding="utf-8")
    (root / "syntax.py").write_text("class KVCacheSchedulerSim(:\n    pass\n", encoding="utf-8")
    v.write_series(root / "nb-stubs", {})
    (root / "wrong.py").write_text(v.py_submission({"score": v.WRONG["score"][0].source,
                                                    "snapshot": v.ALTERNATIVES["snapshot"][0]}), encoding="utf-8")
    return root


def outputs(out: Path) -> dict:
    """Everything a run writes that must not depend on how it was run (the journal's order may)."""
    files = {"grades.csv": (out / "grades.csv").read_bytes(), "manifest.json": (out / "manifest.json").read_bytes()}
    files.update({f"feedback/{p.name}": p.read_bytes() for p in sorted((out / "feedback").iterdir())})
    return files
