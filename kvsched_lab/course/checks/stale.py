"""The check of TODO ``stale`` (notebook 03): `_evict_until_fit(self, needed)` with lazy deletion.

Each case is a hand-built heap holding stale records (of re-scored or already evicted entries)
and the victims the chapter's rule evicts, in order.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Callable, Dict, Hashable, List, Tuple

from kvsched_lab.i18n import N_, _
from kvsched_lab.sim.scheduler import CacheEntry
from kvsched_lab.course.checks.common import _is_heap, _run, _state, _Wrong


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
