"""The check of TODO ``heap`` (notebook 03): `_refresh_queue(self, key)` re-scores and pushes a record.

A fake scheduler holds real entries and a real heap (with a stale record in it) and a spy
`_score` that returns set values, so the check sees exactly which record was pushed.
"""
from __future__ import annotations

import heapq
import random
from typing import Any, Callable, Dict, Hashable, List, Sequence

from kvsched_lab.i18n import _
from kvsched_lab.sim.scheduler import CacheEntry
from kvsched_lab.course.checks.common import _close, _fields, _is_heap, _run, _Wrong


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
    """Each message names the property the record breaks (how it would sort, what the evictor could
    not read from it), never the record's fields in order: that is the line to write."""
    priority, last_used, key = want
    if not isinstance(rec, tuple):
        raise _Wrong(_("{what}: a heap record must be a tuple like the others in the queue, got {rec_type} {rec!r}",
                       what=what, rec_type=type(rec).__name__, rec=rec))
    if len(rec) != 3:
        raise _Wrong(_("{what}: your record {rec!r} has {count} fields, unlike the records already in the queue: "
                       "every record must be built alike, so that heapq can compare any two of them",
                       what=what, count=len(rec), rec=rec))
    if rec[0] == last_used and rec[1] == priority and priority != last_used:
        raise _Wrong(_("{what}: your records compare by last use before priority, so they would pop oldest first "
                       "whatever they are worth; the priority must decide, the last use only break ties",
                       what=what))
    if _close(rec[0], -priority) and priority != 0:
        raise _Wrong(_("{what}: the record's priority is negated, so heapq (a min-heap) would pop the entry most "
                       "worth keeping first; eviction wants the least",
                       what=what))
    if rec[2] is entry:
        raise _Wrong(_("{what}: your record holds the CacheEntry object itself; the evictor looks a record's entry "
                       "up in self.entries, and on a tie heapq would have to compare two entries",
                       what=what))
    if rec[2] != key or type(rec[2]) is not type(key):
        raise _Wrong(_("{what}: your record {rec!r} does not say which entry it is about where the records already in "
                       "the queue do, so the evictor would look up {value!r} instead of {key!r}",
                       what=what, rec=rec, key=key, value=rec[2]))
    if not _close(rec[0], priority):
        if _close(rec[0], old_priority):
            raise _Wrong(_("{what}: the newest heap record must carry the entry's new priority, this one carries the "
                           "priority from before re-scoring",
                           what=what))
        raise _Wrong(_("{what}: your record {rec!r} would sort by something other than the entry's new priority "
                       "(what self._score just returned), so the heap would pop entries in the wrong order",
                       what=what, rec=rec))
    if rec[1] != last_used:
        raise _Wrong(_("{what}: your record {rec!r} does not carry the entry's current last_used, so priority ties "
                       "would not pop the older entry first, and the stale check could not tell the record is current",
                       what=what, rec=rec))


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
