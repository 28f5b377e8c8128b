"""What ``kvsched grade`` checks before grading anything, and its subcommands for a graded class.

`plan`: the learners to grade and the overrides to apply, with every instructor mistake (a typo in
the overrides file, ``--learner`` naming no learner of the class in ``--out``, a folder that is
no finished class) raised before any submission is copied or run. ``kvsched grade report OUT``
(report.py) and ``kvsched grade export OUT`` (export.py) work on a graded class folder and run
no learner code.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from kvsched_lab.grading.classroom.class_files import match_row
from kvsched_lab.grading.learner.writers import csv_cell
from kvsched_lab.grading.classroom.export import export_main
from kvsched_lab.grading.learner.intake import Learner, discover, one_learner
from kvsched_lab.grading.batch.journal import JOURNAL, read_journal
from kvsched_lab.grading.batch.manifest import read_manifest
from kvsched_lab.grading.classroom.overrides import Override, read_overrides, resolve
from kvsched_lab.grading.classroom.report import report_main

COMMANDS: Dict[str, Callable[[List[str]], int]] = {"report": report_main, "export": export_main}


def plan(paths: Sequence[str], learner: Optional[str], out: Path,
         overrides_path: Optional[str]) -> Tuple[List[Learner], List[Override]]:
    """The learners to grade and the checked overrides; raises ValueError (OverridesError) on a mistake.

    With `learner` (``--learner PATH``): that one learner, renamed to its name in the class graded
    into `out` (manifest.json), and the overrides given, else those last applied (``out/overrides.csv``)."""
    if learner is None:
        learners = discover(list(paths))
        names = [x.name for x in learners]
    else:
        manifest = read_manifest(out)
        if manifest.shard is not None:
            raise ValueError(f"{out} holds shard {manifest.shard[0]}/{manifest.shard[1]}: regrade a learner in the "
                             "merged folder (kvsched grade merge ... --out OUT)")
        read_journal(out / JOURNAL)  # the regrade rewrites the class from it: it must be readable
        one = one_learner(learner)
        one.name = match_row(manifest.learners, learner)
        learners, names = [one], manifest.learners
        if overrides_path is None and (out / "overrides.csv").is_file():
            overrides_path = str(out / "overrides.csv")
    overrides = read_overrides(Path(overrides_path)) if overrides_path else []
    resolve(overrides, [csv_cell(n) for n in names])
    return learners, overrides
