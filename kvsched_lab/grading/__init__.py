"""Instructor grading and the student release (instructor-only: left out of the student bundle).

`grade_main` and `release_main` are the ``kvsched grade`` and ``kvsched release`` commands;
`grade_submissions` grades a batch; `bench_grading` times the grader. docs/grading.md explains
the rules and the threat model, and has the file map.

Rooms, lowest first; a room imports only itself and the rooms before it (tests/test_layout.py):
learner/ (learner text made safe, a learner's files read as data, finding learners), kernel/ (the
sandbox's side: the kernel harness, the nbval runner, observing a case, the audit hook, the
stand-ins; this folder, whole, is all the sandbox's library holds of this package, and it imports
no other room), box/ (bubblewrap, caps on a sandbox's processes, uid leases), judging/ (hidden
cases, submissions parsed as data, stubs, comparison, validation and points), release/ (``kvsched
release``: the student bundle and its checks), classroom/ (around a class's grades: overrides,
grades.csv rows and details, HTML feedback, roster, late rule, LMS export, report, similarity) and
batch/ (one submission in its sandbox, the batch and its `BatchOptions`, journal, shards, merge,
manifest, progress, version stamp, regrade).

Loose, above every room: command.py (``kvsched grade`` and ``kvsched grade merge``: the command
lines), class_commands.py (the checks before grading; ``kvsched grade report|export``) and
bench.py (the grader's submissions per second per core).
"""
from __future__ import annotations

import importlib
from typing import Any

# Imported on first use: the nbval runner process (``python -m kvsched_lab.grading.kernel.nbrun``)
# then loads only what it needs, and runpy does not see its module imported twice.
_EXPORTS = {"bench_grading": "bench", "grade_main": "command", "grade_submissions": "batch.batch",
            "release_main": "release.release"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"kvsched_lab.grading.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'kvsched_lab.grading' has no attribute {name!r}")
