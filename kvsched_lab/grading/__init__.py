"""Instructor grading and the student release (instructor-only: left out of the student bundle).

`grade_main` and `release_main` are the ``kvsched grade`` and ``kvsched release`` commands;
`bench_grading` times the grader. docs/grading.md explains the rules and the threat model.

Grader side (never in the sandbox): command.py (``kvsched grade`` and ``kvsched grade merge``:
the command lines), batch.py (the batch: learners, ``--shard``, the journal, workers, progress),
grade.py (one submission in its sandbox, its feedback, ``grades.csv``), journal.py (each
learner's grade written as it is known, read back and checked by ``--resume``), journal_key.py
(the key outside OUT that signs journal entries), identity.py (a learner's one name, lookalikes
refused), shards.py (``--shard K/N``),
merge.py (``kvsched grade merge``), manifest.py (the end of a run: feedback, ``grades.csv``,
``manifest.json``), stamp.py (the version stamp: grader version and code, hidden cases'
SHA-256), progress.py (the batch's progress bar or lines), intake.py (finding learners, copying
their files), learner_files.py (a learner's notebook or .py read as untrusted data),
submissions.py (each TODO's code, parsed, nothing run), writers.py (learner text made safe
wherever it is written), leases.py (sandbox uids no other running batch holds), limits.py (caps
on all of one sandbox's processes together), stubs.py (the untouched
stubs and the given code), cases.py (the hidden cases), verdict.py (validating observations,
points), compare.py (first difference from the reference), sandbox.py (bubblewrap), bench.py
(the grader's submissions per second per core); release.py (``kvsched release``),
release_build.py (building the student bundle), release_checks.py (verifying it gives nothing
away), steps.py (the release's checks named as they run).
Sandbox side (the only files of this package the sandbox's library holds, grade.SANDBOX_SIDE):
nbrun.py (nbval in the box), kernel_launcher.py (the kernel's clean import path and limits),
harness.py (the kernel's side: one learner method run in forked children), observe.py (running a
case and recording what it shows; the grader runs it on the reference too), audit.py (the
advisory runtime audit hook), fakes.py (the stand-ins around one TODO).
Around the grades of a class (an ``--out`` folder): overrides.py (the instructor's corrections,
`apply_overrides`), class_files.py (grades.csv rows, details.json, feedback names, atomic writes),
class_commands.py (the checks before grading; ``kvsched grade report|export``), feedback_html.py
(feedback as a self-contained page), roster.py (submissions to student ids), late.py (the late
rule), export.py (Canvas and Moodle CSVs), report.py (the class report), similarity.py (pairs to
review).
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
