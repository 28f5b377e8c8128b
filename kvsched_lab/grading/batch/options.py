"""`BatchOptions`: how a batch grades, one typed value from the command line down to each box.

``kvsched grade``'s options (command.py), a regrade's (the class's manifest.json, regrade.py) and
the grader's benchmark (bench.py) build one; `grade_submissions` (batch.py) resolves `sandboxed`
and hands it to `grade_one` (grade.py) for every submission. Frozen: no worker can change what
the others grade with.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from kvsched_lab.grading.batch.shards import Shard
from kvsched_lab.grading.classroom.overrides import Override


@dataclass(frozen=True)
class BatchOptions:
    timeout: float = 10.0  # CPU seconds each TODO may run in all, in one submission's box (--timeout)
    jobs: int = 1  # submissions graded at once, one sandbox slot each (--jobs)
    memory_mb: int = 2048  # address space of one submission's kernel, MiB (--memory-mb)
    keep_work: bool = False  # copy the grading inputs and logs into OUT/work when done (--keep-work)
    sandboxed: Optional[bool] = None  # in bubblewrap; None: wherever bubblewrap works here (--no-sandbox: False)
    lang: str = "en"  # the feedback files' language, en or zh: grades never depend on it (--lang)
    shard: Optional[Shard] = None  # grade only this shard's learners (--shard K/N); None: all of them
    resume: bool = False  # keep what OUT's journal holds for every learner whose files are unchanged (--resume)
    overrides: Tuple[Override, ...] = ()  # the instructor's corrections, applied to the rows written (--overrides)
    reveal_expected: bool = False  # feedback shows the reference's value at a first difference (--reveal-expected)
