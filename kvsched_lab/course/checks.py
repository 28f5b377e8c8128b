"""Graders for the five TODOs: each one tests ONE learner function, alone.

Every grader calls the learner's function with a small fake ``self`` built here (spies that
record calls, a hand-built heap with stale records, entries with priority ties), never with the
learner's other methods, so a bug in one TODO cannot fail another TODO's check. Expectations are
literal numbers and records for fixed cases plus properties over seeded random cases; this
module holds no reference answer and does not import the instructor-only ``solutions``.

`grade(name, fn)` returns a `Result`; `kvsched_lab.course.check` prints or raises it.
"""
from __future__ import annotations

import contextlib
import heapq
import math
import random
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Hashable, Iterator, List, Sequence, Tuple

from kvsched_lab.i18n import N_, _
from kvsched_lab.sim.scheduler import ALL_TODO_METHODS, TODO_METHODS, CacheEntry, SchedulerSkeleton

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

    def line(self) -> str:
        """The one line a check cell shows, in the current language (`message` is already in it)."""
        where = NOTEBOOK_OF[self.name].split("_")[0]
        if self.status == "passed":
            return _("✅ {name}: passed ({cases} cases)", name=self.name, cases=self.cases)
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


# --------------------------------------------------------------------------- TODO score


class _ScoreSelf:
    """All `_score` may read: the clock and the capacity."""

    def __init__(self, capacity_bytes: int, time: int):
        self.capacity_bytes = capacity_bytes
        self.time = time


def _score(fn: Callable, capacity: int, time: int, hits: int, size: int, last_used: int) -> float:
    value = _run(fn, _ScoreSelf(capacity, time), hits, size, last_used)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Wrong(_("_score must return a number, it returned {value_type} {value!r}",
                       value_type=type(value).__name__, value=value))
    if not math.isfinite(value):
        raise _Wrong(_("_score returned {value} for hits={hits}, size={size}, last_used={last_used}",
                       value=value, hits=hits, size=size, last_used=last_used))
    return float(value)


# (capacity_bytes, time, hits, size, last_used) -> expected score, worked out by hand.
_SCORE_CASES: List[Tuple[Tuple[int, int, int, int, int], float]] = [
    ((128, 5, 1, 40, 5), 1.421875),  # the chapter's 'a' when added
    ((128, 3, 2, 40, 3), 2.421875),  # ... and after its first reuse
    ((128, 7, 1, 48, 7), 1.40625),  # the chapter's 'd'
    ((100, 10, 3, 20, 6), 3.05),  # used 4 steps ago: recency 0.2
    ((1000, 2, 5, 1000, 0), 4.916666666666667),  # full-capacity entry, recency 1/3
    ((64, 3, 0, 16, 9), 0.4375),  # last_used after time: the gap is clamped at 0
]


def grade_score(fn: Callable) -> int:
    s = lambda hits, size, last_used, capacity=100, time=10: _score(fn, capacity, time, hits, size, last_used)  # noqa: E731
    # Term by term first: each message names the term that is off.
    d_hits = s(3, 0, 10) - s(2, 0, 10)
    if d_hits <= TOL:
        raise _Wrong(_("more hits must give a higher score (reuse is the main reason to keep an entry)")
                     if d_hits < -TOL else _("the score ignores hits: one more hit must raise it"))
    if not _close(d_hits, 1.0):
        raise _Wrong(_("each extra hit must add exactly 1.0 to the score (reuse_bonus counts at full weight); yours "
                       "adds {d_hits}",
                       d_hits=_fmt(d_hits)))
    d_recent = s(0, 0, 10) - s(0, 0, 9)  # recency 1.0 vs 0.5
    if d_recent <= TOL:
        raise _Wrong(_("a more recently used entry must score higher (recency is a bonus)")
                     if d_recent < -TOL else _("the score ignores recency: last used now vs 1 step ago must differ"))
    if not _close(d_recent, 0.25):
        raise _Wrong(_("the recency term has the wrong weight: last used now (recency 1.0) vs one step ago (recency "
                       "0.5) should differ by 0.25, yours differ by {d_recent}",
                       d_recent=_fmt(d_recent)))
    d_size = s(0, 50, 10) - s(0, 0, 10)  # size_penalty 0.5 vs 0
    if d_size >= -TOL:
        raise _Wrong(_("a bigger entry must score lower (size is a penalty)")
                     if d_size > TOL else _("the score ignores size: a bigger entry must score lower"))
    if not _close(d_size, -0.125):
        raise _Wrong(_("the size penalty has the wrong weight: growing from 0 to half the capacity should lower the "
                       "score by 0.125, yours lowers it by {d_size}",
                       d_size=_fmt(-d_size)))
    base = s(0, 0, 10)
    if not _close(base, 0.5):
        raise _Wrong(_("with hits=0, size=0 and last_used == time only the recency term is left, so the score "
                       "should be 0.5; yours is {base}",
                       base=_fmt(base)))
    cases = 4
    for (capacity, time, hits, size, last_used), want in _SCORE_CASES:
        got = s(hits, size, last_used, capacity, time)
        if not _close(got, want):
            raise _Wrong(_("_score(hits={hits}, size={size}, last_used={last_used}) with time={time}, "
                           "capacity_bytes={capacity} should be {want!r} (within {TOL}), got {got!r}",
                           hits=hits, size=size, last_used=last_used, time=time, capacity=capacity, want=want,
                           TOL=TOL, got=got))
        cases += 1
    rng = random.Random(41)
    for _case in range(30):
        capacity = rng.randint(1, 4096)
        time = rng.randint(0, 500)
        hits = rng.randint(0, 50)
        size = rng.randint(1, capacity)
        last_used = rng.randint(0, time)
        got = s(hits, size, last_used, capacity, time)
        if not _close(s(hits + 1, size, last_used, capacity, time) - got, 1.0):
            raise _Wrong(_("each extra hit must add exactly 1.0 to the score, at any time and size"))
        shifted = s(hits, size, last_used + 7, capacity, time + 7)
        if not _close(shifted, got):
            raise _Wrong(_("recency must depend only on how long ago the entry was used (time - last_used), not on the "
                           "clock's absolute value"))
        if not _close(s(hits, 2 * size, last_used, 2 * capacity, time), got):
            raise _Wrong(_("the size penalty must depend on size relative to capacity_bytes (twice the size in twice "
                           "the capacity costs the same)"))
        if time > last_used and not s(hits, size, last_used + 1, capacity, time) > got:
            raise _Wrong(_("a more recently used entry must score higher, at every age"))
        cases += 1
    return cases


# --------------------------------------------------------------------------- TODO heap


class _HeapSelf:
    """A scheduler for `_refresh_queue`: real entries and queue; `_score` is a spy returning set values."""

    def __init__(self, entries: Dict[Hashable, CacheEntry], queue: List[tuple], scores: Sequence[float]):
        self.capacity_bytes = 128
        self.current_bytes = sum(e.bytes for e in entries.values())
        self.time = max((e.last_used for e in entries.values()), default=0)
        self.entries = entries
        self.queue = queue
        self.log: List[str] = []
        self.next_scores = list(scores)
        self.score_calls: List[tuple] = []

    def _score(self, hits: int, size: int, last_used: int) -> float:
        self.score_calls.append((hits, size, last_used))
        return self.next_scores.pop(0) if self.next_scores else -99.0


def _new_record(before: List[tuple], after: List[tuple], what: str) -> tuple:
    """The one record `after` holds beyond `before` (a multiset difference)."""
    rest = list(after)
    for rec in before:
        for i, r in enumerate(rest):
            if r is rec or (type(r) is type(rec) and r == rec):
                del rest[i]
                break
        else:
            raise _Wrong(_("{what}: the queue lost an older record; records stay in the heap until they are popped "
                           "(lazy deletion)",
                           what=what))
    if len(rest) != 1:
        raise _Wrong(_("{what}: must push exactly one new record, pushed {count}", what=what, count=len(rest)))
    return rest[0]


def _check_record(rec: Any, want: tuple, entry: CacheEntry, old_priority: float, what: str) -> None:
    priority, last_used, key = want
    if not isinstance(rec, tuple):
        raise _Wrong(_("{what}: a heap record must be a tuple like the others in the queue, got {rec_type} {rec!r}",
                       what=what, rec_type=type(rec).__name__, rec=rec))
    if len(rec) != 3:
        raise _Wrong(_("{what}: a heap record has three fields (priority, last_used, key), got {count}: {rec!r}",
                       what=what, count=len(rec), rec=rec))
    if rec[0] == last_used and rec[1] == priority and priority != last_used:
        raise _Wrong(_("{what}: the record's fields are in the wrong order: the heap must order records by priority "
                       "first, last_used only to break ties",
                       what=what))
    if _close(rec[0], -priority) and priority != 0:
        raise _Wrong(_("{what}: the record's priority is negated; this min-heap must pop the LOWEST priority first "
                       "(the eviction victim), so store it as it is",
                       what=what))
    if rec[2] is entry:
        raise _Wrong(_("{what}: the record's last field must be the entry's key, not the CacheEntry object",
                       what=what))
    if rec[2] != key or type(rec[2]) is not type(key):
        raise _Wrong(_("{what}: the record's last field must be the key of the entry being refreshed ({key!r}), got "
                       "{value!r}",
                       what=what, key=key, value=rec[2]))
    if not _close(rec[0], priority):
        if _close(rec[0], old_priority):
            raise _Wrong(_("{what}: the newest heap record must carry the entry's new priority, this one carries the "
                           "priority from before re-scoring",
                           what=what))
        raise _Wrong(_("{what}: the record's first field must be the entry's new priority ({priority!r}, what "
                       "self._score returned), got {value!r}",
                       what=what, priority=priority, value=rec[0]))
    if rec[1] != last_used:
        raise _Wrong(_("{what}: the record's second field must be the entry's last_used ({last_used}), got {value!r}",
                       what=what, last_used=last_used, value=rec[1]))


def _refresh(fn: Callable, sim: _HeapSelf, key: Hashable, new_priority: float, what: str) -> None:
    entry = sim.entries[key]
    old_priority = entry.priority
    fields = (entry.hits, entry.last_used, entry.bytes, entry.prefix)
    others = [(k, _fields(e)) for k, e in sim.entries.items() if k != key]
    before = list(sim.queue)
    sim.score_calls.clear()
    sim.next_scores = [new_priority]
    _run(fn, sim, key)
    if sim.score_calls != [(entry.hits, entry.bytes, entry.last_used)]:
        if not sim.score_calls:
            raise _Wrong(_("{what}: must re-score the entry with self._score(...)", what=what))
        raise _Wrong(_("{what}: must call self._score once, with the entry's own hits, bytes and last_used (in that "
                       "order); it was called with {score_calls}",
                       what=what, score_calls=sim.score_calls))
    if sim.entries.get(key) is not entry:
        raise _Wrong(_("{what}: must update the existing entry in self.entries, not replace or remove it",
                       what=what))
    if (entry.hits, entry.last_used, entry.bytes, entry.prefix) != fields:
        raise _Wrong(_("{what}: must change only the entry's priority (hits, last_used, bytes stay as they are)",
                       what=what))
    if [(k, _fields(e)) for k, e in sim.entries.items() if k != key] != others:
        raise _Wrong(_("{what}: must not change other entries", what=what))
    if not _close(entry.priority, new_priority):
        raise _Wrong(_("{what}: must store the new score in entry.priority", what=what))
    rec = _new_record(before, sim.queue, what)
    _check_record(rec, (new_priority, entry.last_used, key), entry, old_priority, what)
    if not _is_heap(sim.queue):
        raise _Wrong(_("{what}: the queue is no longer a min-heap; add records with heapq.heappush",
                       what=what))


def grade_heap(fn: Callable) -> int:
    # A miss: entry 'p' was just added (placeholder priority 0.0); the queue already holds records
    # that sort after the new one, so appending instead of pushing breaks the heap order.
    entries = {
        "q": CacheEntry(5.0, 2, "q", 4, 8),
        "r": CacheEntry(6.0, 3, "r", 5, 8),
        "p": CacheEntry(0.0, 7, "p", 1, 32),
    }
    queue = [(5.0, 2, "q"), (6.0, 3, "r"), (4.0, 1, "q")]  # (4.0, 1, 'q') is an older, stale record
    heapq.heapify(queue)
    sim = _HeapSelf(entries, queue, [])
    _refresh(fn, sim, "p", 1.25, _("refreshing a new entry"))
    # A hit on 'p': hits and last_used moved on; the newest record must carry the new priority and
    # the old record stays (it is dropped only when popped).
    sim.entries["p"].hits = 2
    sim.entries["p"].last_used = 9
    sim.time = 9
    _refresh(fn, sim, "p", 2.25, _("after a hit"))
    if (1.25, 7, "p") not in sim.queue:
        raise _Wrong(_("after a hit the previous record must stay in the queue (lazy deletion drops it later)"))
    cases = 2
    # Keys of other hashable types, ties on priority: records must sort by (priority, last_used).
    rng = random.Random(2)
    sim = _HeapSelf({}, [], [])
    keys: List[Hashable] = [17, ("sys", 3), "x", 4.5, frozenset({1})]
    for t, key in enumerate(keys, start=1):
        sim.entries[key] = CacheEntry(0.0, t, key, 1, rng.randint(1, 64))
        sim.time = t
        _refresh(fn, sim, key, 1.5, _("refreshing entry {key!r}", key=key))
        cases += 1
    order = [heapq.heappop(sim.queue)[1] for _ in range(len(sim.queue))]
    if order != sorted(order):
        raise _Wrong(_("records with equal priority must pop oldest last_used first"))
    # Randomised: hits on random keys, each one re-scored with a fresh priority.
    sim = _HeapSelf({}, [], [])
    for t in range(1, 41):
        key = rng.choice("abcdef")
        if key in sim.entries:
            sim.entries[key].hits += 1
            sim.entries[key].last_used = t
        else:
            sim.entries[key] = CacheEntry(0.0, t, key, 1, rng.randint(1, 64))
        sim.time = t
        _refresh(fn, sim, key, round(rng.uniform(-2, 9), 3), _("touch {t} of a random sequence", t=t))
        cases += 1
    if len(sim.queue) != 40:
        raise _Wrong(_("every refresh must add one record: the heap grows with every touch"))
    return cases


# --------------------------------------------------------------------------- TODO stale


class _EvictSelf:
    """A scheduler for `_evict_until_fit`: hand-built entries and a heap that holds stale records."""

    def __init__(self, capacity_bytes: int, entries: List[CacheEntry], records: List[tuple]):
        self.capacity_bytes = capacity_bytes
        self.entries: Dict[Hashable, CacheEntry] = {e.prefix: e for e in entries}
        self.current_bytes = sum(e.bytes for e in entries)
        self.time = max([e.last_used for e in entries] + [r[1] for r in records] + [0])
        self.queue = list(records)
        heapq.heapify(self.queue)
        self.log: List[str] = []


@dataclass(frozen=True)
class _EvictCase:
    what: str  # what the case exercises, as the failure message's lead (an N_ msgid)
    capacity: int
    entries: Tuple[Tuple[str, float, int, int], ...]  # (key, priority, last_used, bytes)
    stale: Tuple[tuple, ...]  # extra out-of-date records in the heap
    needed: int
    victims: Tuple[str, ...]  # expected eviction order
    current_records: bool = True  # False: the heap holds only stale records


_E = _EvictCase
_EVICT_CASES: Tuple[_EvictCase, ...] = (
    _E(N_("evicting the lowest-priority entry"), 100,
       (("a", 1.4, 1, 40), ("b", 1.3, 2, 40)), (), 30, ("b",)),
    _E(N_("popped a record whose entry was re-scored later, but it was used for eviction"), 100,
       (("a", 2.2, 3, 40), ("b", 1.3, 2, 40)), ((1.2, 1, "a"),), 30, ("b",)),
    _E(N_("used a record whose priority still matches but whose last_used is out of date: "
          "a record is current only if both fields match the entry"), 100,
       (("a", 1.3, 4, 40), ("b", 1.3, 2, 40)), ((1.3, 1, "a"),), 30, ("b",)),
    _E(N_("used a record whose last_used still matches but whose priority is out of date: "
          "a record is current only if both fields match the entry"), 100,
       (("a", 1.6, 3, 40), ("b", 1.3, 2, 40)), ((1.1, 3, "a"),), 30, ("b",)),
    _E(N_("skipping records of entries already evicted, and evicting twice in priority order"), 100,
       (("a", 1.5, 1, 30), ("b", 1.25, 2, 30), ("c", 2.5, 3, 30)), ((0.5, 1, "z"), (1.0, 2, "y")), 50,
       ("b", "a")),
    _E(N_("when every popped record is stale, the fallback after the loop must pick the victim"), 100,
       (("a", 2.5, 5, 50), ("b", 2.5, 3, 50)), ((1.5, 1, "a"), (1.5, 2, "b")), 10, ("b",), False),
    _E(N_("nothing may be evicted when the new entry already fits (exactly)"), 100,
       (("a", 1.5, 1, 30), ("b", 1.25, 2, 30)), ((0.5, 1, "b"),), 40, ()),
    _E(N_("evicting one entry of four: the records left behind must still form a heap"), 100,
       (("a", 1.5, 1, 20), ("b", 1.25, 2, 20), ("c", 2.5, 3, 20), ("d", 2.0, 4, 20)), ((0.5, 1, "z"),), 30,
       ("b",)),
    _E(N_("making room for an entry as big as the whole cache"), 90,
       (("a", 3.5, 5, 30), ("b", 1.5, 4, 30), ("c", 2.5, 6, 30)), ((1.5, 2, "a"), (1.0, 1, "c")), 90,
       ("b", "c", "a")),
)


def _evict_case(fn: Callable, case: _EvictCase) -> None:
    what = _(case.what)
    entries = [CacheEntry(p, lu, key, 1, size) for key, p, lu, size in case.entries]
    current = [(e.priority, e.last_used, e.prefix) for e in entries] if case.current_records else []
    sim = _EvictSelf(case.capacity, entries, current + list(case.stale))
    before = dict(sim.entries)
    fields_before = _state(sim.entries)
    _run(fn, sim, case.needed)
    evicted = [item.split(":", 1)[1] for item in sim.log if isinstance(item, str) and item.startswith("evict:")]
    if len(evicted) != len(sim.log):
        raise _Wrong(_("{what}: the log may only gain 'evict:<prefix>' lines, got {log}",
                       what=what, log=sim.log))
    if tuple(evicted) != case.victims:
        detail = _("(it evicted {evicted}, the lowest-priority live entries were {victims})",
                   evicted=evicted or _("nothing"), victims=list(case.victims))
        raise _Wrong(_("{what} {detail}", what=what, detail=detail))
    survivors = {k: e for k, e in before.items() if k not in case.victims}
    if _state(sim.entries) != [(k, f) for k, f in fields_before if k not in case.victims]:
        raise _Wrong(_("{what}: self.entries must lose exactly the evicted entries, and nothing else may change",
                       what=what))
    if sim.current_bytes != sum(e.bytes for e in survivors.values()):
        raise _Wrong(_("{what}: current_bytes must drop by the evicted entries' bytes", what=what))
    records = set(sim.queue)
    for key, e in survivors.items():
        if case.current_records and (e.priority, e.last_used, key) not in records:
            raise _Wrong(_("{what}: the current record of live entry {key!r} was popped and dropped, so {key!r} could "
                           "never be evicted; only out-of-date records may be skipped",
                           what=what, key=key))
    if not _is_heap(sim.queue):
        raise _Wrong(_("{what}: the queue is no longer a heap; take records out with heapq.heappop",
                       what=what))


def grade_stale(fn: Callable) -> int:
    for case in _EVICT_CASES:
        _evict_case(fn, case)
    return len(_EVICT_CASES)


# --------------------------------------------------------------------------- TODO entry


class _TouchSelf:
    """A scheduler for `touch`: `_evict_until_fit` and `_refresh_queue` are spies that record calls."""

    def __init__(self, capacity_bytes: int = 100):
        self.capacity_bytes = capacity_bytes
        self.current_bytes = 0
        self.time = 0
        self.entries: Dict[Hashable, CacheEntry] = {}
        self.queue: List[tuple] = []
        self.log: List[str] = []
        self.calls: List[tuple] = []
        self.next_priority = 1.25

    def _check_touch(self, prefix: Hashable, bytes_: int) -> None:
        SchedulerSkeleton._check_touch(self, prefix, bytes_)  # the given input check, as is

    def _score(self, hits: int, size: int, last_used: int) -> float:
        # A touch may score its new entry itself (right, if redundant): _refresh_queue rescores it.
        return self.next_priority

    def _evict_until_fit(self, needed: int) -> None:
        self.calls.append(("evict", needed, frozenset(self.entries)))
        while self.entries and self.current_bytes + needed > self.capacity_bytes:
            key = next(iter(self.entries))  # the spy evicts the oldest-inserted entry
            self.current_bytes -= self.entries.pop(key).bytes
            self.log.append(f"evict:{key}")

    def _refresh_queue(self, prefix: Hashable) -> None:
        entry = self.entries.get(prefix, None)
        if entry is None:
            raise _Wrong(_("_refresh_queue was called before the new entry was stored in self.entries"))
        if not isinstance(entry, CacheEntry):
            raise _Wrong(_("the new entry must be a CacheEntry (the dataclass given above), got {entry_type}",
                           entry_type=type(entry).__name__))
        self.calls.append(("refresh", prefix, entry, self.current_bytes))
        entry.priority = self.next_priority
        heapq.heappush(self.queue, (self.next_priority, entry.last_used, prefix))


def _touch_miss(fn: Callable, sim: _TouchSelf, key: Hashable, size: int) -> CacheEntry:
    time, before_keys, current = sim.time, frozenset(sim.entries), sim.current_bytes
    sizes = {k: e.bytes for k, e in sim.entries.items()}
    log_len = len(sim.log)
    sim.calls.clear()
    _run(fn, sim, key, size)
    what = _("touch({key!r}, {size}) on a miss", key=key, size=size)
    if sim.time != time + 1:
        raise _Wrong(_("{what}: the clock must advance by one per touch", what=what))
    kinds = [c[0] for c in sim.calls]
    if kinds != ["evict", "refresh"]:
        raise _Wrong(_("{what}: must call self._evict_until_fit(bytes_) first, then self._refresh_queue(prefix) "
                       "once the entry is stored; calls were {kinds}",
                       what=what, kinds=kinds))
    if sim.calls[0][1] != size:
        raise _Wrong(_("{what}: must make room for the new entry's bytes_ ({size}), asked for {value!r}",
                       what=what, size=size, value=sim.calls[0][1]))
    if key in sim.calls[0][2] or sim.calls[0][2] != before_keys:
        raise _Wrong(_("{what}: must evict before the new entry is stored", what=what))
    entry = sim.entries.get(key)
    if entry is None:
        raise _Wrong(_("{what}: the new entry must be stored in self.entries[prefix]", what=what))
    if not isinstance(entry, CacheEntry):
        raise _Wrong(_("{what}: the new entry must be a CacheEntry (the dataclass given above), got {entry_type}",
                       what=what, entry_type=type(entry).__name__))
    if sim.calls[1][1] != key or sim.calls[1][2] is not entry:
        raise _Wrong(_("{what}: must refresh the new entry's heap record with self._refresh_queue(prefix)",
                       what=what))
    if entry.hits == size and entry.bytes == 1 and size != 1:
        raise _Wrong(_("{what}: the new entry's hits and bytes are swapped", what=what))
    if entry.hits != 1:
        raise _Wrong(_("{what}: the newest entry must start with one hit (this access counts), it has {hits!r}",
                       what=what, hits=entry.hits))
    if entry.last_used != sim.time:
        raise _Wrong(_("{what}: a new entry's last_used must be the current time (self.time after the tick, "
                       "{time}), it is {last_used!r}",
                       what=what, time=sim.time, last_used=entry.last_used))
    if entry.bytes != size:
        raise _Wrong(_("{what}: the new entry must record its size bytes_ ({size}), it has {bytes!r}",
                       what=what, size=size, bytes=entry.bytes))
    if entry.prefix != key:
        raise _Wrong(_("{what}: the new entry must record its own prefix ({key!r}), it has {prefix!r}",
                       what=what, key=key, prefix=entry.prefix))
    if isinstance(entry.priority, bool) or not isinstance(entry.priority, (int, float)):
        raise _Wrong(_("{what}: the new entry's priority must be a number (any placeholder; _refresh_queue sets the "
                       "real one), got {priority!r}",
                       what=what, priority=entry.priority))
    evicted = [k for k in before_keys if k not in sim.entries]
    if sim.current_bytes != current - sum(sizes[k] for k in evicted) + size:
        raise _Wrong(_("{what}: current_bytes must grow by the new entry's bytes", what=what))
    if sim.calls[1][3] != sim.current_bytes:
        raise _Wrong(_("{what}: current_bytes must grow by the new entry's bytes before its heap record is refreshed",
                       what=what))
    if sim.log[-1:] != [f"add:{key}"] or len(sim.log) != log_len + len(evicted) + 1:
        raise _Wrong(_("{what}: the log must end with one 'add:{key}' line", what=what, key=key))
    return entry


def _touch_hit(fn: Callable, sim: _TouchSelf, key: Hashable, size: int) -> None:
    entry = sim.entries[key]
    hits, log_len, current = entry.hits, len(sim.log), sim.current_bytes
    sim.calls.clear()
    _run(fn, sim, key, size)
    what = _("touch({key!r}, {size}) on a hit", key=key, size=size)
    if sim.entries.get(key) is not entry:
        raise _Wrong(_("{what}: a hit must update the existing entry, not replace it", what=what))
    if entry.hits != hits + 1 or entry.last_used != sim.time:
        raise _Wrong(_("{what}: a hit must add one hit and set last_used to the current time", what=what))
    if [c[0] for c in sim.calls] != ["refresh"] or sim.current_bytes != current:
        raise _Wrong(_("{what}: a hit only re-scores the entry (no eviction, no new bytes)", what=what))
    if sim.log[log_len:] != [f"reuse:{key}"]:
        raise _Wrong(_("{what}: the log must gain exactly one 'reuse:{key}' line", what=what, key=key))


def grade_entry(fn: Callable) -> int:
    sim = _TouchSelf(capacity_bytes=100)
    first = _touch_miss(fn, sim, "a", 40)
    second = _touch_miss(fn, sim, "b", 50)
    if first is second:
        raise _Wrong(_("each new prefix needs its own, new CacheEntry"))
    _touch_hit(fn, sim, "a", 40)
    _touch_miss(fn, sim, "c", 30)  # the spy evicts to make room: the entry is built after that
    if "a" in sim.entries:
        raise _Wrong(_("touch must let _evict_until_fit make room before adding"))
    _touch_hit(fn, sim, "c", 30)
    _touch_miss(fn, sim, 7, 100)  # a non-string key, as big as the cache
    _touch_miss(fn, sim, ("req", 2), 1)
    cases = 7
    # The given input check still rejects an oversized entry before any change.
    state = (sim.time, _state(sim.entries), sim.current_bytes, list(sim.log))
    try:
        with _budget():
            fn(sim, "huge", 101)
    except ValueError:
        pass
    except NotImplementedError as e:
        raise _NotDone() from e
    except _OutOfTime:
        raise _Wrong(_("did not finish (an endless loop?) within the step budget")) from None
    except Exception as e:
        raise _Wrong(_("an entry bigger than the capacity must raise ValueError, it raised {e_type}: {e}",
                       e_type=type(e).__name__, e=e)) from None
    else:
        raise _Wrong(_("an entry bigger than the capacity must raise ValueError (keep the given input check)"))
    if (sim.time, _state(sim.entries), sim.current_bytes, list(sim.log)) != state:
        raise _Wrong(_("a rejected touch must not change anything (keep the input check first)"))
    return cases + 1


# --------------------------------------------------------------------------- TODO snapshot


class _SnapSelf:
    def __init__(self, entries: List[CacheEntry], capacity_bytes: int = 128):
        self.capacity_bytes = capacity_bytes
        self.entries: Dict[Hashable, CacheEntry] = {e.prefix: e for e in entries}
        self.current_bytes = sum(e.bytes for e in entries)
        self.time = max([e.last_used for e in entries] + [0])
        self.queue: List[tuple] = []
        self.log: List[str] = []


# (what, entries in insertion order as (priority, last_used, prefix, hits, bytes), expected rows)
_SNAP_CASES: Tuple[Tuple[str, tuple, list], ...] = (
    (N_("the chapter's final state"),
     ((1.40625, 5, "d", 1, 48), (3.421875, 6, "a", 3, 40)),
     [("a", 40, 3.4219, 3), ("d", 48, 1.4062, 1)]),
    (N_("entries with equal priority"),
     ((1.5, 4, "x", 2, 10), (1.5, 2, "y", 2, 20), (2.0, 1, "w", 3, 30), (1.5, 7, "z", 2, 40), (0.75, 3, "v", 1, 50)),
     [("w", 30, 2.0, 3), ("y", 20, 1.5, 2), ("x", 10, 1.5, 2), ("z", 40, 1.5, 2), ("v", 50, 0.75, 1)]),
    (N_("three entries with one priority and one last_used"),
     ((1.5, 3, "m", 1, 8), (1.5, 3, "b", 1, 8), (1.5, 3, "k", 1, 8), (2.5, 9, "q", 2, 8)),
     [("q", 8, 2.5, 2), ("b", 8, 1.5, 1), ("k", 8, 1.5, 1), ("m", 8, 1.5, 1)]),
    (N_("priorities that only differ after rounding"),
     ((1.00001, 1, "e1", 1, 4), (1.00004, 2, "e2", 1, 4), (-0.12345, 3, "neg", 0, 4)),
     [("e2", 4, 1.0, 1), ("e1", 4, 1.0, 1), ("neg", 4, -0.1235, 0)]),
    (N_("an empty cache"), (), []),
)


def _snapshot_message(what: str, got: Any, want: list, entries: Dict[Hashable, CacheEntry]) -> str:
    if not isinstance(got, list):
        return _("{what}: snapshot must return a list, got {got_type}",
                 what=what, got_type=type(got).__name__)
    if len(got) != len(want) or not all(isinstance(r, tuple) and len(r) == 4 for r in got):
        return _("{what}: snapshot must return one (prefix, bytes, round(priority, 4), hits) tuple per live "
                 "entry",
                 what=what)
    keys = [r[0] for r in got]
    if sorted(map(repr, keys)) != sorted(repr(r[0]) for r in want):
        return _("{what}: snapshot must list every live entry exactly once", what=what)
    if set(got) != set(want):
        return _("{what}: each row must be (prefix, bytes, round(priority, 4), hits)", what=what)
    es = [entries[k] for k in keys]
    for a, b in zip(es, es[1:]):
        if a.priority < b.priority:
            if [e.prefix for e in es] == [r[0] for r in reversed(want)] and len(set(e.priority for e in es)) > 1:
                return _("{what}: entries came out lowest priority first; the highest must come first",
                         what=what)
            if round(a.priority, 4) == round(b.priority, 4):
                return (_("{what}: entries must be ordered by their full priority; rounding is for display only",
                          what=what))
            return _("{what}: entries are not ordered by priority, highest first", what=what)
        if a.priority == b.priority and a.last_used > b.last_used:
            return _("{what}: two entries with equal priority came out newest first; the older goes first",
                     what=what)
        if a.priority == b.priority and a.last_used == b.last_used and a.prefix > b.prefix:
            return _("{what}: entries tied on priority and last_used must come in prefix order", what=what)
    return _("{what}: rows are not in the expected order", what=what)


def grade_snapshot(fn: Callable) -> int:
    cases = 0
    for label, rows, want in _SNAP_CASES:
        what = _(label)
        sim = _SnapSelf([CacheEntry(p, lu, key, hits, size) for p, lu, key, hits, size in rows])
        before = _state(sim.entries)
        got = _run(fn, sim)
        if _state(sim.entries) != before:
            raise _Wrong(_("{what}: snapshot must not change self.entries", what=what))
        if got != want:
            raise _Wrong(_snapshot_message(what, got, want, sim.entries))
        cases += 1
    # Property: random priorities with many ties, compared with a hand-checked ordering rule.
    rng = random.Random(5)
    for _case in range(20):
        entries = []
        for i, key in enumerate(rng.sample("abcdefghijklmnop", rng.randint(1, 10))):
            entries.append(CacheEntry(rng.choice([0.5, 1.25, 2.0, rng.uniform(-1, 5)]), rng.randint(1, 4),
                                      key, rng.randint(0, 9), rng.randint(1, 64)))
        sim = _SnapSelf(entries)
        got = _run(fn, sim)
        # The expected order is data, worked out once by hand's rule (higher priority; then older;
        # then smaller prefix): a function computing it would answer the TODO for anyone importing it.
        by_key = {e.prefix: e for e in entries}
        want = [(e.prefix, e.bytes, round(e.priority, 4), e.hits) for e in (by_key[k] for k in _SNAP_ORDERS[_case])]
        if got != want:
            raise _Wrong(_snapshot_message(_("random entries with ties"), got, want, sim.entries))
        cases += 1
    return cases


# The expected prefix order of each of grade_snapshot's 20 seeded random cases (seed 5).
_SNAP_ORDERS = ("ophalfikgm", "cohfjl", "gf", "pck", "p", "foancgd", "fhikmpoe", "fbgokjl", "clnhfkdegj", "bkpoi",
                "pdelbko", "pcekfila", "jlge", "ab", "fnhpb", "ek", "ejfhbc", "i", "ifkl", "dehc")


# --------------------------------------------------------------------------- optional TODO aging


class _AgingSelf:
    """All `_aged_score` may read: the clock, the capacity, ``inflation`` and ``chapter_score``."""

    def __init__(self, capacity_bytes: int, time: int, inflation: float):
        self.capacity_bytes = capacity_bytes
        self.time = time
        self.inflation = inflation

    def chapter_score(self, hits: int, size: int, last_used: int) -> float:
        return _aging_base(self, hits, size, last_used)


def _aging_base(sim: Any, hits: int, size: int, last_used: int) -> float:
    """The check's stand-in for the chapter's score: more hits higher, bigger lower, like it, but not it
    (the library computes the chapter's score nowhere: that would answer TODO score). Aging is
    graded by how L is combined with whatever base score is in scope."""
    return 2.0 * hits - size / max(sim.capacity_bytes, 1)


def _aged(fn: Callable, inflation: float, hits: int, size: int, capacity: int = 100, time: int = 10) -> float:
    value = _run(fn, _AgingSelf(capacity, time, inflation), hits, size, time)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Wrong(_("_aged_score must return a finite number, it returned {value!r}", value=value))
    return float(value)


# (what, capacity in bytes, touches as "key:bytes" words, the keys the aging scheduler evicts, in order).
# Each was worked out once with GDSF's rule over the check's stand-in base score (`_aging_base`); a
# different formula with the same decisions passes.
_AGING_CASES: Tuple[Tuple[str, int, str, str], ...] = (
    (N_("a prefix hit 6 times, then never again, while 20 new prefixes are each used twice (4 one-byte slots)"), 4,
     " ".join(["hot:1"] * 6 + [f"x{i // 2}:1" for i in range(40)]),
     "x0 x1 x2 x3 x4 x5 x6 x7 x8 hot x9 x10 x11 x12 x13 x14 x15"),
    (N_("entries of different sizes (100 bytes)"), 100,
     "doc:40 doc:40 sys:10 sys:10 sys:10 big:60 a:20 b:30 a:20 c:20 d:30 big:60 e:10 f:40 doc:40",
     "doc big sys b c d a big"),
    (N_("300 seeded touches of 12 prefixes of 10-40 bytes (100 bytes)"), 100, "", ""),  # built by _aging_random_case
)
_AGING_RANDOM_VICTIMS = (
    "k1 k7 k10 k11 k4 k6 k8 k9 k6 k5 k4 k1 k8 k10 k5 k7 k1 k8 k9 k4 k5 k9 k2 k7 k4 k2 k7 k5 k1 k8 k2 k5 k7 k4 "
    "k2 k7 k8 k10 k5 k3 k1 k6 k2 k5 k1 k3 k5 k10 k4 k2 k7 k9 k6 k1 k5 k6 k10 k5 k2 k1 k2 k6 k1 k9 k3 k6 k7 "
    "k1 k3 k1 k3 k6 k10 k8 k4 k1 k3 k10 k1 k3 k5 k1 k4 k1 k3 k8 k1 k10 k3 k2 k7 k5 k4 k3 k10 k2 k8 k1 k7 k3 "
    "k4 k1 k11 k1 k11 k7 k2 k8 k9 k8 k9 k1 k11 k10 k9 k1 k4 k5 k1 k4 k5 k3 k6 k2 k1 k9 k11 k1 k4 k2 k6 k1")


def _aging_random_case() -> List[Tuple[str, int]]:
    rng = random.Random(9)
    keys = [f"k{i}" for i in range(12)]
    size = {k: rng.choice([10, 20, 30, 40]) for k in keys}
    return [(k, size[k]) for k in rng.choices(keys, weights=[1 / (i + 1) for i in range(12)], k=300)]


def grade_aging(fn: Callable) -> int:
    from kvsched_lab.course.aging import evictions

    # Probes first, on one score at a time: each message names the part that is off.
    base = _aged(fn, 0.0, 2, 20)
    d_inflation = _aged(fn, 5.0, 2, 20) - base
    if abs(d_inflation) <= TOL:
        raise _Wrong(_("the score ignores self.inflation (L): with L = 5 it must be higher than with L = 0, "
                       "otherwise a prefix that was hot long ago is never evicted"))
    if d_inflation < 0:
        raise _Wrong(_("a higher inflation value must raise the score, not lower it: new priorities start from L"))
    if not _close(d_inflation, 5.0):
        raise _Wrong(_("raising self.inflation by 5 must raise the score by exactly 5 (L is added as it is, not "
                       "scaled); yours rises by {rise}", rise=_fmt(d_inflation)))
    if not _aged(fn, 3.0, 3, 20) > _aged(fn, 3.0, 2, 20):
        raise _Wrong(_("at the same L, more hits must still give a higher score (keep the chapter's score in it)"))
    if not _aged(fn, 3.0, 2, 60) < _aged(fn, 3.0, 2, 20):
        raise _Wrong(_("at the same L, a bigger entry must still score lower (keep the chapter's size penalty)"))
    cases = 5
    # Then the decisions the score leads to, in the aging scheduler (L rises at every eviction).
    for label, capacity, words, want in _AGING_CASES:
        what = _(label)
        touches = ([(k, int(n)) for k, n in (w.split(":") for w in words.split())] if words
                   else _aging_random_case())
        expected = (want or _AGING_RANDOM_VICTIMS).split()
        try:
            with _budget(max_opcodes=20 * MAX_OPCODES):
                got = evictions(fn, _aging_base, capacity, touches)
        except NotImplementedError as e:
            raise _NotDone() from e
        except _OutOfTime:
            raise _Wrong(_("did not finish (an endless loop?) within the step budget")) from None
        except Exception as e:
            raise _Wrong(_("{what}: it raised {e_type}: {e}", what=what, e_type=type(e).__name__, e=e)) from None
        if got != expected:
            if "hot" in expected and "hot" not in got:
                raise _Wrong(_("{what}: 'hot' was never evicted; with aging, a prefix whose hits are old must "
                               "eventually lose to prefixes that are being reused now", what=what))
            k = next((i for i, (g, e) in enumerate(zip(got, expected)) if g != e), min(len(got), len(expected)))
            nothing = repr(_("nothing more"))  # quoted, like the keys beside it
            shown = repr(got[k]) if k < len(got) else nothing
            wanted = repr(expected[k]) if k < len(expected) else nothing
            raise _Wrong(_("{what}: eviction #{number} took {shown}; the aging scheduler takes {wanted} there",
                           what=what, number=k + 1, shown=shown, wanted=wanted))
        cases += 1
    return cases


# --------------------------------------------------------------------------- entry point

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
