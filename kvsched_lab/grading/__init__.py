"""Instructor grading and the student release (instructor-only: left out of the student bundle).

`grade_main` and `release_main` are the ``kvsched grade`` and ``kvsched release`` commands;
`bench_grading` times the grader. docs/grading.md explains the rules and the threat model.

Grader side (never in the sandbox): grade.py (the batch and ``kvsched grade``), intake.py (finding
learners, copying their files), submissions.py (each TODO's code, parsed, nothing run), stubs.py
(the untouched stubs and the given code), cases.py (the hidden cases), verdict.py (validating
observations, points), compare.py (first difference from the reference), sandbox.py (bubblewrap),
bench.py (timing the grader); release.py (``kvsched release``), release_build.py (building the
student bundle), release_checks.py (verifying it gives nothing away).
Sandbox side (the only files of this package the sandbox's library holds, grade.SANDBOX_SIDE):
nbrun.py (nbval in the box), kernel_launcher.py (the kernel's clean import path and limits),
harness.py (the kernel's side: one learner method run in forked children), observe.py (running a
case and recording what it shows; the grader runs it on the reference too), audit.py (the
advisory runtime audit hook), fakes.py (the stand-ins around one TODO).
"""
from __future__ import annotations

import importlib
from typing import Any

# Imported on first use: the nbval runner process (``python -m kvsched_lab.grading.nbrun``)
# then loads only what it needs, and runpy does not see its module imported twice.
_EXPORTS = {"bench_grading": "bench", "grade_main": "grade_cli", "grade_submissions": "grade", "release_main": "release"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"kvsched_lab.grading.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'kvsched_lab.grading' has no attribute {name!r}")
