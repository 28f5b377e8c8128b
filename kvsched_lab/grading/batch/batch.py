"""The batch: from command-line paths to every learner's `Grade`, journalled, with progress.

`grade_submissions` finds the learners (intake.py), keeps those of ``--shard K/N`` (shards.py),
opens the journal in ``--out`` (journal.py: with ``--resume``, what an earlier run graded is
kept), copies every learner's files before any learner code runs, then grades the rest on
``--jobs`` workers (grade.py's `grade_one`, one sandbox slot each). Each result goes to the
journal the moment it is known and moves the progress on (progress.py). When every learner is
graded, the feedback, ``grades.csv`` (once, atomically) and ``manifest.json`` are written in the
class's order (manifest.py), so an interrupted-then-resumed run and a merge of shards give the
same bytes as one uninterrupted run.
"""
from __future__ import annotations

import os
import queue
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, TextIO

from kvsched_lab.grading.box import sandbox
from kvsched_lab.grading.batch.grade import Grade, build_library, grade_one
from kvsched_lab.grading.learner.intake import Learner, copy_in, discover
from kvsched_lab.grading.box.leases import UidLease, lease_uids
from kvsched_lab.grading.batch.journal import Header, Journal, files_digest, open_journal
from kvsched_lab.grading.batch.manifest import Manifest, write_class
from kvsched_lab.grading.batch.options import BatchOptions
from kvsched_lab.grading.batch.progress import BatchProgress, is_failure
from kvsched_lab.grading.batch.shards import Shard, shard_members
from kvsched_lab.grading.batch.stamp import current_stamp
from kvsched_lab.grading.judging.error_texts import GRADER_FAILURE
from kvsched_lab.grading.judging.submissions import UNREADABLE, Submission, load
from kvsched_lab.grading.judging.verdict import Reference, TodoGrade
from kvsched_lab.grading.learner.writers import bounded
from kvsched_lab.sim.scheduler import TODO_METHODS


def _read_learner(learner: Learner, dest: Path, ref: Reference) -> Submission:
    """Copy and parse one learner's files inside that learner's own error handling: a file no check
    foresaw (nested too deep, an odd name, a reader bug) becomes this row's error, never the batch's."""
    try:
        path = copy_in(learner, dest)
        return (Submission(learner.name, path, error=learner.error) if learner.error
                else load(learner.name, path, ref.stubs))
    except (Exception, RecursionError, MemoryError) as e:  # noqa: B902 - one learner's file, one row
        return Submission(learner.name, dest, error=UNREADABLE.format(error=type(e).__name__))


def grade_submissions(paths: Sequence[str], out: Optional[Path] = None, options: BatchOptions = BatchOptions(),
                      ref: Optional[Reference] = None, progress: Optional[TextIO] = None,
                      learners: Optional[List[Learner]] = None) -> List[Grade]:
    """Grade the learners in `paths` (those of `options.shard` only, when given); write `out` when given.

    Never raises for a bad submission. `options` (options.py) is how: its `lang` is the feedback
    files' language; grades and grades.csv do not depend on it. Its `sandboxed` None means:
    sandboxed when bubblewrap works here. With its `resume`, the journal in `out` supplies every
    learner it holds whose files are unchanged (ValueError, before any work, when it was written
    with another grader, other options or another shard). Its `overrides` (overrides.py): applied
    to the rows written. `ref`: the expected observations, when already built. `progress`: where
    to show it (None: nowhere). `learners`: given instead of found in `paths` (``--learner``: one
    learner, `out` None). Its `reveal_expected`: feedback shows the reference's value at a first
    difference (recorded in the journal and manifest only when set).
    """
    if options.sandboxed is None:
        options = replace(options, sandboxed=sandbox.probe()[0])
    timeout, jobs, memory_mb, sandboxed = options.timeout, options.jobs, options.memory_mb, options.sandboxed
    shard = options.shard
    ref = ref or Reference.build()
    stamp = current_stamp(ref.cases)
    recorded = {"timeout": timeout, "memory_mb": memory_mb, "sandboxed": sandboxed}  # in the journal and manifest
    if options.reveal_expected:  # absent when not set: an ordinary run's manifest is unchanged
        recorded["reveal_expected"] = True
    learners = discover(list(paths)) if learners is None else learners
    members = shard_members([x.name for x in learners], shard)
    mine = [x for x in learners if x.name in members]
    # As root each sandbox runs as a uid of its own: leased for this batch alone (leases.py), before
    # anything is written (LeaseError: nothing is).
    lease: Optional[UidLease] = lease_uids() if sandboxed and os.geteuid() == 0 else None
    try:
        journal = (open_journal(out, Header(stamp, recorded, shard), options.resume) if out is not None
                   else Journal(Path()))
    except BaseException:
        if lease is not None:
            lease.release()
        raise
    if journal.rejected and progress is not None:
        progress.write(f"journal: {len(journal.rejected)} entry(ies) did not check and are graded again: "
                       + "; ".join(f"{bounded(who)} ({why})" for who, why in list(journal.rejected.items())[:10])
                       + (" ..." if len(journal.rejected) > 10 else "") + "\n")
    if lease is not None:
        print(f"sandbox uids {lease.first_uid}-{lease.uid(max(1, jobs) - 1)} (leased for this batch)")
    base = Path(tempfile.mkdtemp(prefix="kvsched-grade-"))
    try:
        subs: List[Submission] = []
        digests: List[str] = []
        for k, learner in enumerate(mine):  # every copy is made before any learner code runs
            sub = _read_learner(learner, base / f"{k:05d}" / "copy", ref)
            digests.append(files_digest(sub.path, sub.error))
            subs.append(sub)
        grades: Dict[int, Grade] = {}
        for k, sub in enumerate(subs):
            prior = journal.done(sub.name, digests[k])
            if prior is not None:
                grades[k] = prior
        todo = [k for k in range(len(subs)) if k not in grades]
        shown = (BatchProgress(len(subs), len(grades), progress, sum(map(is_failure, grades.values())))
                 if progress is not None else None)
        lib = build_library(base / "lib") if todo else base
        slots: "queue.Queue[int]" = queue.Queue()
        for slot in range(max(1, jobs)):
            slots.put(slot)

        def one(k: int) -> None:
            slot = slots.get()
            started = time.monotonic()
            try:
                uid = lease.uid(slot) if lease is not None else slot
                g = grade_one(subs[k], ref, base / f"{k:05d}", lib, uid, options)
            except Exception as e:  # a grader bug on one submission must not sink the batch
                g = Grade(subs[k].name, {n: TodoGrade("error") for n in TODO_METHODS},
                          error=GRADER_FAILURE.format(error=bounded(repr(e))), sandboxed=sandboxed)
            finally:
                slots.put(slot)
            g.skipped = list(mine[k].skipped)
            g.elapsed_s = time.monotonic() - started
            if out is not None:
                journal.record(subs[k].name, digests[k], g)
            grades[k] = g
            if shown is not None:
                shown.update(g)

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            list(pool.map(one, todo))  # list(): a worker's exception is raised here
        if shown is not None:
            shown.close()
    finally:
        if lease is not None:
            lease.release()
        if options.keep_work and out is not None:
            shutil.copytree(base, out / "work", dirs_exist_ok=True, symlinks=True)
        shutil.rmtree(base, ignore_errors=True)
    rows = [grades[k] for k in range(len(subs))]
    if out is not None:
        digest = write_class(rows, out, Manifest(stamp, recorded, options.lang, shard, [x.name for x in learners], []),
                             options.overrides)
        print(f"grades.csv sha256 {digest}")
    return rows
