"""Instructor grading and the student release (instructor-only: left out of the student bundle).

`grade_main` and `release_main` are the ``kvsched grade`` and ``kvsched release`` commands;
`bench_grading` times the grader. docs/grading.md explains the rules and the threat model.

Which file holds what:

* command.py: ``kvsched grade`` (and ``kvsched grade merge``) argument parsing;
* batch.py: the batch loop (learners, shard, journal, workers, progress), `grade_submissions`;
* grade.py: one submission in its sandbox (`grade_one`), its feedback, ``grades.csv``;
* journal.py: each learner's grade written as it is known, read back by ``--resume``;
* shards.py: ``--shard K/N``; merge.py: ``kvsched grade merge``;
* manifest.py: the end of a run: feedback, ``grades.csv`` and ``manifest.json``, one writer;
* stamp.py: the version stamp (grader version and code, hidden cases' SHA-256);
* progress.py: the batch's progress bar or lines; steps.py: the release's checks by name;
* intake.py, submissions.py: from paths to learners to their TODO code;
* cases.py, verdict.py, compare.py, stubs.py: the hidden cases and how answers are scored;
* harness.py, fakes.py, nbrun.py, kernel_launcher.py, sandbox.py: the sandbox and kernel side;
* release.py: ``kvsched release``; bench.py: the grader's timing for ``kvsched bench``.
"""
from __future__ import annotations

import importlib
from typing import Any

# Imported on first use: the nbval runner process (``python -m kvsched_lab.grading.nbrun``)
# then loads only what it needs, and runpy does not see its module imported twice.
_EXPORTS = {"bench_grading": "bench", "grade_main": "command", "grade_submissions": "batch",
            "release_main": "release"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"kvsched_lab.grading.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'kvsched_lab.grading' has no attribute {name!r}")
