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

from kvsched_lab.scheduler import TODO_METHODS, CacheEntry, SchedulerSkeleton

TODO_NAMES: Tuple[str, ...] = tuple(TODO_METHODS)
TOL = 1e-9  # absolute and relative tolerance wherever a float is compared

# Where each TODO is written: a failing or missing answer points the learner there.
NOTEBOOK_OF: Dict[str, str] = {
    "score": "02_why_scheduling_and_the_score.ipynb",
    "heap": "03_eviction_heap_and_lazy_deletion.ipynb",
    "stale": "03_eviction_heap_and_lazy_deletion.ipynb",
    "entry": "04_adding_entries_and_evicting_to_fit.ipynb",
    "snapshot": "05_snapshot_and_the_whole_scheduler.ipynb",
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
    status: str  # "passed", "failed" or "not attempted"
    cases: int = 0
    message: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def line(self) -> str:
        """The one line a check cell shows."""
        where = NOTEBOOK_OF[self.name].split("_")[0]
        if self.status == "passed":
            return f"✅ {self.name}: passed ({self.cases} cases)"
        if self.status == "not attempted":
            return (f"⬜ {self.name}: not attempted: write TODO {self.name} in the cell above "
                    f"(notebook {where}), run it, then run this cell again. Stuck? lab.hint({self.name!r})")
        return f"❌ {self.name}: failed: {self.message}. Stuck? lab.hint({self.name!r})"

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
        raise _Wrong("did not finish (an endless loop?) within the step budget") from None
    except RecursionError:
        raise _Wrong("did not finish: it recursed without end") from None
    except Exception as e:  # the learner's bug, reported in one line
        raise _Wrong(f"it raised {type(e).__name__}: {e}") from None


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
        raise _Wrong(f"_score must return a number, it returned {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise _Wrong(f"_score returned {value} for hits={hits}, size={size}, last_used={last_used}")
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
        raise _Wrong("more hits must give a higher score (reuse is the main reason to keep an entry)"
                     if d_hits < -TOL else "the score ignores hits: one more hit must raise it")
    if not _close(d_hits, 1.0):
        raise _Wrong(f"each extra hit must add exactly 1.0 to the score (reuse_bonus counts at full "
                     f"weight); yours adds {_fmt(d_hits)}")
    d_recent = s(0, 0, 10) - s(0, 0, 9)  # recency 1.0 vs 0.5
    if d_recent <= TOL:
        raise _Wrong("a more recently used entry must score higher (recency is a bonus)"
                     if d_recent < -TOL else "the score ignores recency: last used now vs 1 step ago must differ")
    if not _close(d_recent, 0.25):
        raise _Wrong(f"the recency term has the wrong weight: last used now (recency 1.0) vs one step ago "
                     f"(recency 0.5) should differ by 0.25, yours differ by {_fmt(d_recent)}")
    d_size = s(0, 50, 10) - s(0, 0, 10)  # size_penalty 0.5 vs 0
    if d_size >= -TOL:
        raise _Wrong("a bigger entry must score lower (size is a penalty)"
                     if d_size > TOL else "the score ignores size: a bigger entry must score lower")
    if not _close(d_size, -0.125):
        raise _Wrong(f"the size penalty has the wrong weight: growing from 0 to half the capacity should "
                     f"lower the score by 0.125, yours lowers it by {_fmt(-d_size)}")
    base = s(0, 0, 10)
    if not _close(base, 0.5):
        raise _Wrong(f"with hits=0, size=0 and last_used == time only the recency term is left, "
                     f"so the score should be 0.5; yours is {_fmt(base)}")
    cases = 4
    for (capacity, time, hits, size, last_used), want in _SCORE_CASES:
        got = s(hits, size, last_used, capacity, time)
        if not _close(got, want):
            raise _Wrong(f"_score(hits={hits}, size={size}, last_used={last_used}) with time={time}, "
                         f"capacity_bytes={capacity} should be {want!r} (within {TOL}), got {got!r}")
        cases += 1
    rng = random.Random(41)
    for _ in range(30):
        capacity = rng.randint(1, 4096)
        time = rng.randint(0, 500)
        hits = rng.randint(0, 50)
        size = rng.randint(1, capacity)
        last_used = rng.randint(0, time)
        got = s(hits, size, last_used, capacity, time)
        if not _close(s(hits + 1, size, last_used, capacity, time) - got, 1.0):
            raise _Wrong("each extra hit must add exactly 1.0 to the score, at any time and size")
        shifted = s(hits, size, last_used + 7, capacity, time + 7)
        if not _close(shifted, got):
            raise _Wrong("recency must depend only on how long ago the entry was used (time - last_used), "
                         "not on the clock's absolute value")
        if not _close(s(hits, 2 * size, last_used, 2 * capacity, time), got):
            raise _Wrong("the size penalty must depend on size relative to capacity_bytes "
                         "(twice the size in twice the capacity costs the same)")
        if time > last_used and not s(hits, size, last_used + 1, capacity, time) > got:
            raise _Wrong("a more recently used entry must score higher, at every age")
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
            raise _Wrong(f"{what}: the queue lost an older record; records stay in the heap until "
                         "they are popped (lazy deletion)")
    if len(rest) != 1:
        raise _Wrong(f"{what}: must push exactly one new record, pushed {len(rest)}")
    return rest[0]


def _check_record(rec: Any, want: tuple, entry: CacheEntry, old_priority: float, what: str) -> None:
    priority, last_used, key = want
    if not isinstance(rec, tuple):
        raise _Wrong(f"{what}: a heap record must be a tuple like the others in the queue, got "
                     f"{type(rec).__name__} {rec!r}")
    if len(rec) != 3:
        raise _Wrong(f"{what}: a heap record has three fields (priority, last_used, key), got {len(rec)}: {rec!r}")
    if rec[0] == last_used and rec[1] == priority and priority != last_used:
        raise _Wrong(f"{what}: the record's fields are in the wrong order: the heap must order records "
                     "by priority first, last_used only to break ties")
    if _close(rec[0], -priority) and priority != 0:
        raise _Wrong(f"{what}: the record's priority is negated; this min-heap must pop the LOWEST "
                     "priority first (the eviction victim), so store it as it is")
    if rec[2] is entry:
        raise _Wrong(f"{what}: the record's last field must be the entry's key, not the CacheEntry object")
    if rec[2] != key or type(rec[2]) is not type(key):
        raise _Wrong(f"{what}: the record's last field must be the key of the entry being refreshed "
                     f"({key!r}), got {rec[2]!r}")
    if not _close(rec[0], priority):
        if _close(rec[0], old_priority):
            raise _Wrong(f"{what}: the newest heap record must carry the entry's new priority, "
                         "this one carries the priority from before re-scoring")
        raise _Wrong(f"{what}: the record's first field must be the entry's new priority "
                     f"({priority!r}, what self._score returned), got {rec[0]!r}")
    if rec[1] != last_used:
        raise _Wrong(f"{what}: the record's second field must be the entry's last_used ({last_used}), "
                     f"got {rec[1]!r}")


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
            raise _Wrong(f"{what}: must re-score the entry with self._score(...)")
        raise _Wrong(f"{what}: must call self._score once, with the entry's own hits, bytes and last_used "
                     f"(in that order); it was called with {sim.score_calls}")
    if sim.entries.get(key) is not entry:
        raise _Wrong(f"{what}: must update the existing entry in self.entries, not replace or remove it")
    if (entry.hits, entry.last_used, entry.bytes, entry.prefix) != fields:
        raise _Wrong(f"{what}: must change only the entry's priority (hits, last_used, bytes stay as they are)")
    if [(k, _fields(e)) for k, e in sim.entries.items() if k != key] != others:
        raise _Wrong(f"{what}: must not change other entries")
    if not _close(entry.priority, new_priority):
        raise _Wrong(f"{what}: must store the new score in entry.priority")
    rec = _new_record(before, sim.queue, what)
    _check_record(rec, (new_priority, entry.last_used, key), entry, old_priority, what)
    if not _is_heap(sim.queue):
        raise _Wrong(f"{what}: the queue is no longer a min-heap; add records with heapq.heappush")


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
    _refresh(fn, sim, "p", 1.25, "refreshing a new entry")
    # A hit on 'p': hits and last_used moved on; the newest record must carry the new priority and
    # the old record stays (it is dropped only when popped).
    sim.entries["p"].hits = 2
    sim.entries["p"].last_used = 9
    sim.time = 9
    _refresh(fn, sim, "p", 2.25, "after a hit")
    if (1.25, 7, "p") not in sim.queue:
        raise _Wrong("after a hit the previous record must stay in the queue (lazy deletion drops it later)")
    cases = 2
    # Keys of other hashable types, ties on priority: records must sort by (priority, last_used).
    rng = random.Random(2)
    sim = _HeapSelf({}, [], [])
    keys: List[Hashable] = [17, ("sys", 3), "x", 4.5, frozenset({1})]
    for t, key in enumerate(keys, start=1):
        sim.entries[key] = CacheEntry(0.0, t, key, 1, rng.randint(1, 64))
        sim.time = t
        _refresh(fn, sim, key, 1.5, f"refreshing entry {key!r}")
        cases += 1
    order = [heapq.heappop(sim.queue)[1] for _ in range(len(sim.queue))]
    if order != sorted(order):
        raise _Wrong("records with equal priority must pop oldest last_used first")
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
        _refresh(fn, sim, key, round(rng.uniform(-2, 9), 3), f"touch {t} of a random sequence")
        cases += 1
    if len(sim.queue) != 40:
        raise _Wrong("every refresh must add one record: the heap grows with every touch")
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
    what: str  # what the case exercises, as the failure message's lead
    capacity: int
    entries: Tuple[Tuple[str, float, int, int], ...]  # (key, priority, last_used, bytes)
    stale: Tuple[tuple, ...]  # extra out-of-date records in the heap
    needed: int
    victims: Tuple[str, ...]  # expected eviction order
    current_records: bool = True  # False: the heap holds only stale records


_E = _EvictCase
_EVICT_CASES: Tuple[_EvictCase, ...] = (
    _E("evicting the lowest-priority entry", 100,
       (("a", 1.4, 1, 40), ("b", 1.3, 2, 40)), (), 30, ("b",)),
    _E("popped a record whose entry was re-scored later, but it was used for eviction", 100,
       (("a", 2.2, 3, 40), ("b", 1.3, 2, 40)), ((1.2, 1, "a"),), 30, ("b",)),
    _E("used a record whose priority still matches but whose last_used is out of date: "
       "a record is current only if both fields match the entry", 100,
       (("a", 1.3, 4, 40), ("b", 1.3, 2, 40)), ((1.3, 1, "a"),), 30, ("b",)),
    _E("used a record whose last_used still matches but whose priority is out of date: "
       "a record is current only if both fields match the entry", 100,
       (("a", 1.6, 3, 40), ("b", 1.3, 2, 40)), ((1.1, 3, "a"),), 30, ("b",)),
    _E("skipping records of entries already evicted, and evicting twice in priority order", 100,
       (("a", 1.5, 1, 30), ("b", 1.25, 2, 30), ("c", 2.5, 3, 30)), ((0.5, 1, "z"), (1.0, 2, "y")), 50,
       ("b", "a")),
    _E("when every popped record is stale, the fallback after the loop must pick the victim", 100,
       (("a", 2.5, 5, 50), ("b", 2.5, 3, 50)), ((1.5, 1, "a"), (1.5, 2, "b")), 10, ("b",), False),
    _E("nothing may be evicted when the new entry already fits (exactly)", 100,
       (("a", 1.5, 1, 30), ("b", 1.25, 2, 30)), ((0.5, 1, "b"),), 40, ()),
    _E("evicting one entry of four: the records left behind must still form a heap", 100,
       (("a", 1.5, 1, 20), ("b", 1.25, 2, 20), ("c", 2.5, 3, 20), ("d", 2.0, 4, 20)), ((0.5, 1, "z"),), 30,
       ("b",)),
    _E("making room for an entry as big as the whole cache", 90,
       (("a", 3.5, 5, 30), ("b", 1.5, 4, 30), ("c", 2.5, 6, 30)), ((1.5, 2, "a"), (1.0, 1, "c")), 90,
       ("b", "c", "a")),
)


def _evict_case(fn: Callable, case: _EvictCase) -> None:
    entries = [CacheEntry(p, lu, key, 1, size) for key, p, lu, size in case.entries]
    current = [(e.priority, e.last_used, e.prefix) for e in entries] if case.current_records else []
    sim = _EvictSelf(case.capacity, entries, current + list(case.stale))
    before = dict(sim.entries)
    fields_before = _state(sim.entries)
    _run(fn, sim, case.needed)
    evicted = [item.split(":", 1)[1] for item in sim.log if isinstance(item, str) and item.startswith("evict:")]
    if len(evicted) != len(sim.log):
        raise _Wrong(f"{case.what}: the log may only gain 'evict:<prefix>' lines, got {sim.log}")
    if tuple(evicted) != case.victims:
        detail = f"(it evicted {evicted or 'nothing'}, the lowest-priority live entries were {list(case.victims)})"
        raise _Wrong(f"{case.what} {detail}")
    survivors = {k: e for k, e in before.items() if k not in case.victims}
    if _state(sim.entries) != [(k, f) for k, f in fields_before if k not in case.victims]:
        raise _Wrong(f"{case.what}: self.entries must lose exactly the evicted entries, and nothing else may change")
    if sim.current_bytes != sum(e.bytes for e in survivors.values()):
        raise _Wrong(f"{case.what}: current_bytes must drop by the evicted entries' bytes")
    records = set(sim.queue)
    for key, e in survivors.items():
        if case.current_records and (e.priority, e.last_used, key) not in records:
            raise _Wrong(f"{case.what}: the current record of live entry {key!r} was popped and dropped, so "
                         f"{key!r} could never be evicted; only out-of-date records may be skipped")
    if not _is_heap(sim.queue):
        raise _Wrong(f"{case.what}: the queue is no longer a heap; take records out with heapq.heappop")


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
            raise _Wrong("_refresh_queue was called before the new entry was stored in self.entries")
        if not isinstance(entry, CacheEntry):
            raise _Wrong(f"the new entry must be a CacheEntry (the dataclass given above), got {type(entry).__name__}")
        self.calls.append(("refresh", prefix, entry, self.current_bytes))
        entry.priority = self.next_priority
        heapq.heappush(self.queue, (self.next_priority, entry.last_used, prefix))


def _touch_miss(fn: Callable, sim: _TouchSelf, key: Hashable, size: int) -> CacheEntry:
    time, before_keys, current = sim.time, frozenset(sim.entries), sim.current_bytes
    sizes = {k: e.bytes for k, e in sim.entries.items()}
    log_len = len(sim.log)
    sim.calls.clear()
    _run(fn, sim, key, size)
    what = f"touch({key!r}, {size}) on a miss"
    if sim.time != time + 1:
        raise _Wrong(f"{what}: the clock must advance by one per touch")
    kinds = [c[0] for c in sim.calls]
    if kinds != ["evict", "refresh"]:
        raise _Wrong(f"{what}: must call self._evict_until_fit(bytes_) first, then self._refresh_queue(prefix) "
                     f"once the entry is stored; calls were {kinds}")
    if sim.calls[0][1] != size:
        raise _Wrong(f"{what}: must make room for the new entry's bytes_ ({size}), asked for {sim.calls[0][1]!r}")
    if key in sim.calls[0][2] or sim.calls[0][2] != before_keys:
        raise _Wrong(f"{what}: must evict before the new entry is stored")
    entry = sim.entries.get(key)
    if entry is None:
        raise _Wrong(f"{what}: the new entry must be stored in self.entries[prefix]")
    if not isinstance(entry, CacheEntry):
        raise _Wrong(f"{what}: the new entry must be a CacheEntry (the dataclass given above), "
                     f"got {type(entry).__name__}")
    if sim.calls[1][1] != key or sim.calls[1][2] is not entry:
        raise _Wrong(f"{what}: must refresh the new entry's heap record with self._refresh_queue(prefix)")
    if entry.hits == size and entry.bytes == 1 and size != 1:
        raise _Wrong(f"{what}: the new entry's hits and bytes are swapped")
    if entry.hits != 1:
        raise _Wrong(f"{what}: the newest entry must start with one hit (this access counts), it has {entry.hits!r}")
    if entry.last_used != sim.time:
        raise _Wrong(f"{what}: a new entry's last_used must be the current time (self.time after the tick, "
                     f"{sim.time}), it is {entry.last_used!r}")
    if entry.bytes != size:
        raise _Wrong(f"{what}: the new entry must record its size bytes_ ({size}), it has {entry.bytes!r}")
    if entry.prefix != key:
        raise _Wrong(f"{what}: the new entry must record its own prefix ({key!r}), it has {entry.prefix!r}")
    if isinstance(entry.priority, bool) or not isinstance(entry.priority, (int, float)):
        raise _Wrong(f"{what}: the new entry's priority must be a number (any placeholder; "
                     f"_refresh_queue sets the real one), got {entry.priority!r}")
    evicted = [k for k in before_keys if k not in sim.entries]
    if sim.current_bytes != current - sum(sizes[k] for k in evicted) + size:
        raise _Wrong(f"{what}: current_bytes must grow by the new entry's bytes")
    if sim.calls[1][3] != sim.current_bytes:
        raise _Wrong(f"{what}: current_bytes must grow by the new entry's bytes before its heap record is refreshed")
    if sim.log[-1:] != [f"add:{key}"] or len(sim.log) != log_len + len(evicted) + 1:
        raise _Wrong(f"{what}: the log must end with one 'add:{key}' line")
    return entry


def _touch_hit(fn: Callable, sim: _TouchSelf, key: Hashable, size: int) -> None:
    entry = sim.entries[key]
    hits, log_len, current = entry.hits, len(sim.log), sim.current_bytes
    sim.calls.clear()
    _run(fn, sim, key, size)
    what = f"touch({key!r}, {size}) on a hit"
    if sim.entries.get(key) is not entry:
        raise _Wrong(f"{what}: a hit must update the existing entry, not replace it")
    if entry.hits != hits + 1 or entry.last_used != sim.time:
        raise _Wrong(f"{what}: a hit must add one hit and set last_used to the current time")
    if [c[0] for c in sim.calls] != ["refresh"] or sim.current_bytes != current:
        raise _Wrong(f"{what}: a hit only re-scores the entry (no eviction, no new bytes)")
    if sim.log[log_len:] != [f"reuse:{key}"]:
        raise _Wrong(f"{what}: the log must gain exactly one 'reuse:{key}' line")


def grade_entry(fn: Callable) -> int:
    sim = _TouchSelf(capacity_bytes=100)
    first = _touch_miss(fn, sim, "a", 40)
    second = _touch_miss(fn, sim, "b", 50)
    if first is second:
        raise _Wrong("each new prefix needs its own, new CacheEntry")
    _touch_hit(fn, sim, "a", 40)
    _touch_miss(fn, sim, "c", 30)  # the spy evicts to make room: the entry is built after that
    if "a" in sim.entries:
        raise _Wrong("touch must let _evict_until_fit make room before adding")
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
        raise _Wrong("did not finish (an endless loop?) within the step budget") from None
    except Exception as e:
        raise _Wrong(f"an entry bigger than the capacity must raise ValueError, it raised {type(e).__name__}: {e}") from None
    else:
        raise _Wrong("an entry bigger than the capacity must raise ValueError (keep the given input check)")
    if (sim.time, _state(sim.entries), sim.current_bytes, list(sim.log)) != state:
        raise _Wrong("a rejected touch must not change anything (keep the input check first)")
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
    ("the chapter's final state",
     ((1.40625, 5, "d", 1, 48), (3.421875, 6, "a", 3, 40)),
     [("a", 40, 3.4219, 3), ("d", 48, 1.4062, 1)]),
    ("entries with equal priority",
     ((1.5, 4, "x", 2, 10), (1.5, 2, "y", 2, 20), (2.0, 1, "w", 3, 30), (1.5, 7, "z", 2, 40), (0.75, 3, "v", 1, 50)),
     [("w", 30, 2.0, 3), ("y", 20, 1.5, 2), ("x", 10, 1.5, 2), ("z", 40, 1.5, 2), ("v", 50, 0.75, 1)]),
    ("three entries with one priority and one last_used",
     ((1.5, 3, "m", 1, 8), (1.5, 3, "b", 1, 8), (1.5, 3, "k", 1, 8), (2.5, 9, "q", 2, 8)),
     [("q", 8, 2.5, 2), ("b", 8, 1.5, 1), ("k", 8, 1.5, 1), ("m", 8, 1.5, 1)]),
    ("priorities that only differ after rounding",
     ((1.00001, 1, "e1", 1, 4), (1.00004, 2, "e2", 1, 4), (-0.12345, 3, "neg", 0, 4)),
     [("e2", 4, 1.0, 1), ("e1", 4, 1.0, 1), ("neg", 4, -0.1235, 0)]),
    ("an empty cache", (), []),
)


def _snapshot_message(what: str, got: Any, want: list, entries: Dict[Hashable, CacheEntry]) -> str:
    if not isinstance(got, list):
        return f"{what}: snapshot must return a list, got {type(got).__name__}"
    if len(got) != len(want) or not all(isinstance(r, tuple) and len(r) == 4 for r in got):
        return f"{what}: snapshot must return one (prefix, bytes, round(priority, 4), hits) tuple per live entry"
    keys = [r[0] for r in got]
    if sorted(map(repr, keys)) != sorted(repr(r[0]) for r in want):
        return f"{what}: snapshot must list every live entry exactly once"
    if set(got) != set(want):
        return f"{what}: each row must be (prefix, bytes, round(priority, 4), hits)"
    es = [entries[k] for k in keys]
    for a, b in zip(es, es[1:]):
        if a.priority < b.priority:
            if [e.prefix for e in es] == [r[0] for r in reversed(want)] and len(set(e.priority for e in es)) > 1:
                return f"{what}: entries came out lowest priority first; the highest must come first"
            if round(a.priority, 4) == round(b.priority, 4):
                return (f"{what}: entries must be ordered by their full priority; "
                        "rounding is for display only")
            return f"{what}: entries are not ordered by priority, highest first"
        if a.priority == b.priority and a.last_used > b.last_used:
            return f"{what}: two entries with equal priority came out newest first; the older goes first"
        if a.priority == b.priority and a.last_used == b.last_used and a.prefix > b.prefix:
            return f"{what}: entries tied on priority and last_used must come in prefix order"
    return f"{what}: rows are not in the expected order"


def grade_snapshot(fn: Callable) -> int:
    cases = 0
    for what, rows, want in _SNAP_CASES:
        sim = _SnapSelf([CacheEntry(p, lu, key, hits, size) for p, lu, key, hits, size in rows])
        before = _state(sim.entries)
        got = _run(fn, sim)
        if _state(sim.entries) != before:
            raise _Wrong(f"{what}: snapshot must not change self.entries")
        if got != want:
            raise _Wrong(_snapshot_message(what, got, want, sim.entries))
        cases += 1
    # Property: random priorities with many ties, compared with a hand-checked ordering rule.
    rng = random.Random(5)
    for _ in range(20):
        entries = []
        for i, key in enumerate(rng.sample("abcdefghijklmnop", rng.randint(1, 10))):
            entries.append(CacheEntry(rng.choice([0.5, 1.25, 2.0, rng.uniform(-1, 5)]), rng.randint(1, 4),
                                      key, rng.randint(0, 9), rng.randint(1, 64)))
        sim = _SnapSelf(entries)
        got = _run(fn, sim)
        # Expected order, built by insertion: a row goes before the first row it beats.
        ordered: List[CacheEntry] = []
        for e in entries:
            pos = next((i for i, o in enumerate(ordered) if _beats(e, o)), len(ordered))
            ordered.insert(pos, e)
        want = [(e.prefix, e.bytes, round(e.priority, 4), e.hits) for e in ordered]
        if got != want:
            raise _Wrong(_snapshot_message("random entries with ties", got, want, sim.entries))
        cases += 1
    return cases


def _beats(e: CacheEntry, o: CacheEntry) -> bool:
    """Does `e` come before `o` in a snapshot? Higher priority; then older; then smaller prefix."""
    if e.priority != o.priority:
        return e.priority > o.priority
    if e.last_used != o.last_used:
        return e.last_used < o.last_used
    return e.prefix < o.prefix


# --------------------------------------------------------------------------- entry point

GRADERS: Dict[str, Callable[[Callable], int]] = {
    "score": grade_score,
    "heap": grade_heap,
    "stale": grade_stale,
    "entry": grade_entry,
    "snapshot": grade_snapshot,
}


def grade(name: str, fn: Any) -> Result:
    """Grade learner function `fn` for TODO `name`; never raises for the learner's mistakes."""
    if name not in GRADERS:
        raise ValueError(f"unknown TODO {name!r}; the five are {', '.join(TODO_NAMES)}")
    if not callable(fn):
        return Result(name, "failed", 0, f"pass the function itself, e.g. lab.check({name!r}, "
                                          f"{TODO_METHODS[name]}), not {type(fn).__name__}")
    try:
        cases = GRADERS[name](fn)
    except _NotDone:
        return Result(name, "not attempted")
    except _Wrong as e:
        return Result(name, "failed", 0, str(e))
    return Result(name, "passed", cases)
