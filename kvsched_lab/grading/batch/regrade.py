"""``kvsched grade --learner PATH --out OUT``: regrade one learner of a graded class, change only its row.

The learner (a file, or a student's folder taken as one learner: intake.one_learner) is graded
with the options the class was graded with (OUT's manifest.json), by the same grader and hidden
cases (refused otherwise: one grades.csv never mixes two graders). Its entry replaces the old one
in OUT's journal, and the whole class is written again from the journal by the writer every run
uses (manifest.write_class), so every other row, feedback file and the manifest's class stay
byte for byte as they were.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Sequence

from kvsched_lab.grading.batch.batch import grade_submissions
from kvsched_lab.grading.batch.options import BatchOptions
from kvsched_lab.grading.learner.intake import Learner, copy_in
from kvsched_lab.grading.batch.journal import JOURNAL, Entry, files_digest, read_journal, write_journal
from kvsched_lab.grading.batch.manifest import read_manifest, write_class
from kvsched_lab.grading.classroom.overrides import Override
from kvsched_lab.grading.batch.stamp import current_stamp
from kvsched_lab.grading.judging.verdict import Reference


def _digest(learner: Learner) -> str:
    """The journal's SHA-256 of the learner's files, as a batch computes it (from a private copy)."""
    folder = Path(tempfile.mkdtemp(prefix="kvsched-regrade-"))
    try:
        fresh = Learner(learner.name, learner.path, learner.error)
        return files_digest(copy_in(fresh, folder / "copy"), fresh.error)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def regrade(learner: Learner, out: Path, overrides: Sequence[Override], sandboxed: bool) -> str:
    """Regrade `learner` (named as in the class) into `out`; the new grades.csv's SHA-256. ValueError, before
    any grading, when `out` was graded by another grader or cases, or with the sandbox and now without."""
    manifest = read_manifest(out)
    read = read_journal(out / JOURNAL)
    header, entries = read.header, read.entries
    untrusted = [x for x in manifest.learners if x in read.rejected and x != learner.name]
    if untrusted:
        raise ValueError(f"{out / JOURNAL}: the entries of {', '.join(untrusted[:3])} do not check "
                         f"({read.rejected[untrusted[0]]}): grade the class again with --resume, which regrades them")
    lost = [x for x in manifest.learners if x not in entries and x != learner.name]
    if lost:
        raise ValueError(f"{out / JOURNAL} has no grade for {', '.join(lost[:3])}: regrade the whole class")
    ref = Reference.build()
    why = manifest.stamp.differences(current_stamp(ref.cases))
    if why:
        raise ValueError(f"{out} was graded by another grader or other hidden cases ({why}): regrade the whole class")
    if manifest.options.get("sandboxed") and not sandboxed:
        raise ValueError(f"{out} was graded in the sandbox: regrade its learner in the sandbox too")
    digest = _digest(learner)
    options = BatchOptions(timeout=manifest.options["timeout"], memory_mb=manifest.options["memory_mb"],
                           sandboxed=manifest.options["sandboxed"],
                           reveal_expected=bool(manifest.options.get("reveal_expected")))
    [grade] = grade_submissions([], None, options, ref=ref, learners=[learner])
    entries[learner.name] = Entry(digest, grade)
    write_journal(out, header, entries)
    return write_class([entries[x].grade for x in manifest.learners], out, manifest, overrides)
