"""What ``kvsched grade`` checks before grading anything, and its subcommands for a graded class.

`plan`: the learners to grade and the overrides to apply, with every instructor mistake (a typo in
the overrides file, ``--learner`` naming no row of the class in ``--out``) raised before any
submission is copied or run. ``kvsched grade report OUT`` (report.py) and ``kvsched grade export
OUT`` (export.py) work on a graded class folder and run no learner code.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from kvsched_lab.grading import class_files
from kvsched_lab.grading.export import export_main
from kvsched_lab.grading.intake import Learner, discover, one_learner
from kvsched_lab.grading.overrides import Override, read_overrides, resolve
from kvsched_lab.grading.report import report_main

COMMANDS: Dict[str, Callable[[List[str]], int]] = {"report": report_main, "export": export_main}


def plan(paths: Sequence[str], learner: Optional[str], out: Path,
         overrides_path: Optional[str]) -> Tuple[List[Learner], List[Override]]:
    """The learners to grade and the checked overrides; raises ValueError (OverridesError) on a mistake.

    With `learner` (``--learner PATH``): that one learner, renamed to its row in ``out/grades.csv``,
    and the overrides given, else those last applied to that class (``out/overrides.csv``)."""
    if learner is None:
        learners = discover(list(paths))
        names = [class_files.cell(x.name) for x in learners]
    else:
        rows = class_files.read_rows(out)
        class_files.read_details(out)  # a regrade updates it: it must be there
        one = one_learner(learner)
        one.name = class_files.uncell(class_files.match_row(rows, learner))
        learners, names = [one], [r[0] for r in rows]
        if overrides_path is None and (out / "overrides.csv").is_file():
            overrides_path = str(out / "overrides.csv")
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"the same submission is given twice: {', '.join(twice[:3])}")
    overrides = read_overrides(Path(overrides_path)) if overrides_path else []
    resolve(overrides, names)
    return learners, overrides
