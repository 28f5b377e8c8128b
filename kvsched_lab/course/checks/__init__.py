"""The learner checks: graders for the five TODOs (and the optional ``aging``), each testing ONE function alone.

Every grader calls the learner's function with a small fake ``self`` built in its file (spies
that record calls, a hand-built heap with stale records, entries with priority ties), never with
the learner's other methods, so a bug in one TODO cannot fail another TODO's check. Expectations
are literal numbers and records for fixed cases plus properties over seeded random cases; no
file here holds a reference answer or imports the instructor-only ``solutions``.

Which file holds what:
- `common.py`: what the checks share: `Result`, `CheckFailed`, `NotAttempted`, `TODO_NAMES`,
  `NOTEBOOK_OF`, the guard that runs learner code and the small comparisons.
- `score.py`, `heap.py`, `stale.py`, `entry.py`, `snapshot.py`: one file per graded TODO.
- `aging.py`: the optional TODO of notebook 05.
- here: `grade(name, fn)`, the entry point; it returns a `Result`, which `kvsched_lab.course.check`
  prints or raises.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

from kvsched_lab.i18n import _
from kvsched_lab.sim.scheduler import ALL_TODO_METHODS, TODO_METHODS
from kvsched_lab.course.checks.aging import grade_aging
from kvsched_lab.course.checks.common import NOTEBOOK_OF, TODO_NAMES, CheckFailed, NotAttempted, Result, _NotDone, _Wrong
from kvsched_lab.course.checks.entry import grade_entry
from kvsched_lab.course.checks.heap import grade_heap
from kvsched_lab.course.checks.score import grade_score
from kvsched_lab.course.checks.snapshot import grade_snapshot
from kvsched_lab.course.checks.stale import grade_stale

GRADERS: Dict[str, Callable[[Callable], int]] = {
    "score": grade_score,
    "heap": grade_heap,
    "stale": grade_stale,
    "entry": grade_entry,
    "snapshot": grade_snapshot,
    "aging": grade_aging,  # optional, beyond the chapter: not one of the five graded TODOs
}


def grade(name: str, fn: Any) -> Result:
    """Grade learner function `fn` for TODO `name`; never raises for the learner's mistakes."""
    if name not in GRADERS:
        raise ValueError(_("unknown TODO {name!r}; the five are {todos} (optional: {optional})", name=name,
                           todos=", ".join(TODO_NAMES),
                           optional=", ".join(n for n in ALL_TODO_METHODS if n not in TODO_METHODS)))
    if not callable(fn):
        return Result(name, "failed", 0,
                      _("pass the function itself, e.g. lab.check({name!r}, {method}), not {fn_type}",
                        name=name, method=ALL_TODO_METHODS[name], fn_type=type(fn).__name__))
    try:
        cases = GRADERS[name](fn)
    except _NotDone:
        return Result(name, "not attempted")
    except _Wrong as e:
        return Result(name, "failed", 0, str(e))
    return Result(name, "passed", cases)


__all__ = ["CheckFailed", "GRADERS", "NOTEBOOK_OF", "NotAttempted", "Result", "TODO_NAMES", "grade"]
