"""What the six checks share: the verdict types, the guard that runs learner code, small comparisons.

`Result` is one check's verdict (`kvsched_lab.course.check` prints or raises it); `CheckFailed`
and `NotAttempted` are what a check cell raises. `_run` calls learner code under an opcode and
wall-clock budget and turns whatever it raises into `_NotDone` (the untouched stub) or `_Wrong`
(one broken expectation, worded for the learner); the check files raise `_Wrong` themselves.
The underscore names are this package's internals, imported only by its own check files.
"""
from __future__ import annotations

import contextlib
import math
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Hashable, Iterator, List, Sequence, Tuple

from kvsched_lab.i18n import _
from kvsched_lab.sim.scheduler import OPTIONAL_TODO_METHODS, TODO_METHODS, CacheEntry

TODO_NAMES: Tuple[str, ...] = tuple(TODO_METHODS)
TOL = 1e-9  # absolute and relative tolerance wherever a float is compared

# Where each TODO is written: a failing or missing answer points the learner there.
NOTEBOOK_OF: Dict[str, str] = {
    "score": "02_why_scheduling_and_the_score.ipynb",
    "heap": "03_eviction_heap_and_lazy_deletion.ipynb",
    "stale": "03_eviction_heap_and_lazy_deletion.ipynb",
    "entry": "04_adding_entries_and_evicting_to_fit.ipynb",
    "snapshot": "05_snapshot_and_the_whole_scheduler.ipynb",
    "aging": "05_snapshot_and_the_whole_scheduler.ipynb",  # optional, beyond the chapter
}

MAX_OPCODES = 2_000_000  # per call of learner code; the checks' cases need a few thousand
MAX_SECONDS = 10.0  # wall-clock guard where SIGALRM exists (a sleeping or C-level loop)


# --------------------------------------------------------------------------- results, errors


class CheckFailed(Exception):
    """A check cell's verdict. IPython shows only the message, not a traceback into this module."""

    def _render_traceback_(self) -> List[str]:
        return str(self).splitlines()


class NotAttempted(CheckFailed):
    """The TODO still raises NotImplementedError (the untouched stub)."""


@dataclass(frozen=True)
class Result:
    name: str
    status: str  # "passed", "failed" or "not attempted" (never translated: graders compare it)
    cases: int = 0
    message: str = ""  # what is wrong, in the language current when it was graded

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def stops(self) -> bool:
        """Whether the check cell raises: a failure, or a graded TODO left alone. An optional TODO
        left alone only says so, so that Run All goes on past it."""
        return not self.passed and not (self.status == "not attempted" and self.name in OPTIONAL_TODO_METHODS)

    def line(self) -> str:
        """The one line a check cell shows, in the current language (`message` is already in it)."""
        where = NOTEBOOK_OF[self.name].split("_")[0]
        if self.status == "passed":
            return _("✅ {name}: passed ({cases} cases)", name=self.name, cases=self.cases)
        if self.status == "not attempted" and self.name in OPTIONAL_TODO_METHODS:
            return _("⬜ {name}: not attempted (optional, not graded; the notebook goes on without it). To try it, "
                     "write TODO {name} in the cell above, run it, then run this cell again. Hints: lab.hint({name!r})",
                     name=self.name)
        if self.status == "not attempted":
            return _("⬜ {name}: not attempted: write TODO {name} in the cell above (notebook {where}), run it, "
                     "then run this cell again. Stuck? lab.hint({name!r})", name=self.name, where=where)
        return _("❌ {name}: failed: {message}. Stuck? lab.hint({name!r})", name=self.name, message=self.message)

    def exception(self) -> CheckFailed:
        cls = NotAttempted if self.status == "not attempted" else CheckFailed
        return cls(self.line())


class _Wrong(Exception):
    """One broken expectation; the message tells the learner what is wrong, not the answer."""


class _NotDone(Exception):
    """The learner's code raised NotImplementedError."""


class _OutOfTime(BaseException):
    """Raised inside learner code that runs too long (BaseException: `except Exception` cannot eat it)."""


# --------------------------------------------------------------------------- running learner code


@contextlib.contextmanager
def _budget(max_opcodes: int = MAX_OPCODES, seconds: float = MAX_SECONDS) -> Iterator[None]:
    """Stop learner code that loops forever: an opcode budget (everywhere) plus SIGALRM (Unix)."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "opcode":
            count += 1
            if count > max_opcodes:
                raise _OutOfTime()
        return local

    def on_call(frame, event, arg):
        frame.f_trace_opcodes = True  # line events miss `while True: pass`; opcode events do not
        return local

    use_alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    old_trace = sys.gettrace()
    old_handler = None
    if use_alarm:
        def on_alarm(signum, frame):
            raise _OutOfTime()

        old_handler = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    sys.settrace(on_call)
    try:
        yield
    finally:
        sys.settrace(old_trace)
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)


def _run(fn: Callable, *args: Any) -> Any:
    """Call learner code; turn what it raises into _NotDone / _Wrong with a one-line reason."""
    try:
        with _budget():
            return fn(*args)
    except (_Wrong, _NotDone):
        raise
    except NotImplementedError as e:
        raise _NotDone() from e
    except _OutOfTime:
        raise _Wrong(_("did not finish (an endless loop?) within the step budget")) from None
    except RecursionError:
        raise _Wrong(_("did not finish: it recursed without end")) from None
    except Exception as e:  # the learner's bug, reported in one line
        raise _Wrong(_("it raised {e_type}: {e}", e_type=type(e).__name__, e=e)) from None


def _close(got: Any, want: float) -> bool:
    return (isinstance(got, (int, float)) and not isinstance(got, bool)
            and math.isclose(got, want, rel_tol=TOL, abs_tol=TOL))


def _is_heap(queue: Sequence) -> bool:
    return all(not (queue[i] < queue[(i - 1) // 2]) for i in range(1, len(queue)))


def _fmt(x: float) -> str:
    return f"{x:.10g}"


def _fields(e: CacheEntry) -> tuple:
    """All of an entry's fields (CacheEntry's own == compares only priority and last_used)."""
    return (e.priority, e.last_used, e.prefix, e.hits, e.bytes)


def _state(entries: Dict[Hashable, CacheEntry]) -> list:
    return [(k, _fields(e)) for k, e in entries.items()]
