"""`seed-compact`: the seed chapter's policy with exactly one record per cached entry.

Same score, decisions, log and snapshot as `seed` (seed.py) and the chapter's reference, but no
stale records at all: ``len(queue) == len(entries)`` after every touch (the issue's bound is
``2 * live + 64``; rebuilding the heap when stale records outnumber live ones, as CPython's asyncio
and Go's runtime do for cancelled timers, would meet it too, and `gdsf` does that).

Records are kept per priority in an `OrderedDict` (a bucket), plus a min-heap ``levels``
of the priorities that have a bucket. A hit moves its key from its old bucket to the end of its
new one (the key was just touched, so it has the newest ``last_used`` there), so each bucket stays
sorted by ``last_used`` and the victim, the lowest ``(priority, last_used)``, is the first key of
the lowest bucket: O(1) per touch, plus O(log #priorities) when a priority appears. This is the
O(1) LFU of Shah, Mitra & Matani (2010), keyed by the chapter's priority instead of the hit count.
A bucket emptied by a hit stays (empty) until it reaches the top of ``levels``, so ``levels``
always holds exactly the keys of ``buckets``.
"""
from __future__ import annotations

from collections import OrderedDict
from heapq import heappop, heappush
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.events import ADD, EVICT, REUSE
from kvsched_lab.policies.base import Policy
from kvsched_lab.policies.seed import SeedEntry


class SeedCompactPolicy(Policy):
    """The chapter's score and tie-breaks; ``buckets[priority]`` holds its keys, oldest touch first."""

    name = "seed-compact"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.entries: Dict[Hashable, SeedEntry] = {}
        self.buckets: Dict[float, "OrderedDict[Hashable, None]"] = {}
        self.levels: List[float] = []  # min-heap of the keys of `buckets`

    @property
    def num_records(self) -> int:
        return sum(map(len, self.buckets.values()))

    @property
    def queue(self) -> List[Tuple[float, int, Hashable]]:
        """The records as the chapter's ``queue`` would hold them, ``(priority, last_used, key)``, in pop order."""
        entries = self.entries
        return [(p, entries[k].last_used, k) for p in sorted(self.buckets) for k in self.buckets[p]]

    def _file(self, priority: float, key: Hashable) -> None:
        bucket = self.buckets.get(priority)
        if bucket is None:
            self.buckets[priority] = bucket = OrderedDict()
            heappush(self.levels, priority)
        bucket[key] = None

    def touch(self, prefix: Hashable, bytes_: int) -> None:
        self.validate(prefix, bytes_)
        self.time += 1
        entry = self.entries.get(prefix)
        if entry is not None:
            self.hits += 1
            del self.buckets[entry.priority][prefix]
            entry.hits += 1
            entry.last_used = self.time
            # The chapter's `_score` at touch time (recency 1.0), same float operations.
            entry.priority = entry.hits + 0.5 - 0.25 * (entry.bytes / self.capacity_bytes)
            self._file(entry.priority, prefix)
            self.log.emit(REUSE, prefix)
            return
        while self.current_bytes + bytes_ > self.capacity_bytes:
            key = self.victim()
            self.current_bytes -= self.entries.pop(key).bytes
            self.log.emit(EVICT, key)
        priority = 1 + 0.5 - 0.25 * (bytes_ / self.capacity_bytes)
        self.entries[prefix] = SeedEntry(priority, self.time, 1, bytes_)
        self.current_bytes += bytes_
        self._file(priority, prefix)
        self.log.emit(ADD, prefix)

    def victim(self) -> Hashable:
        """The first key of the lowest non-empty bucket; it leaves the bucket."""
        levels, buckets = self.levels, self.buckets
        while not buckets[levels[0]]:
            del buckets[heappop(levels)]
        return buckets[levels[0]].popitem(last=False)[0]

    def snapshot(self) -> List[Tuple[Hashable, int, float, int]]:
        """The chapter's snapshot: ``(key, bytes, round(priority, 4), hits)``, highest priority
        first, ties older ``last_used`` first (unique, so keys are never compared)."""
        ordered = sorted(self.entries.items(), key=lambda kv: (-kv[1].priority, kv[1].last_used))
        return [(k, e.bytes, round(e.priority, 4), e.hits) for k, e in ordered]

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        entries, buckets, levels = self.entries, self.buckets, self.levels
        get_bucket = buckets.get
        emit = self.log.append_event
        add, evict, reuse = ADD, EVICT, REUSE  # locals: faster than globals in the loop
        cap, cur, hits, time = self.capacity_bytes, self.current_bytes, self.hits, self.time
        new_priority = 1 + 0.5 - 0.25 * (bytes_ / cap)  # a new entry's score, as in `touch`
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                n = 0
                for key in ids:
                    if key not in entries:
                        break
                    n += 1
                out.append(n)
                for key in ids:
                    time += 1
                    entry = entries.get(key)
                    if entry is not None:
                        hits += 1
                        del buckets[entry.priority][key]
                        entry.hits += 1
                        entry.last_used = time
                        entry.priority = p = entry.hits + 0.5 - 0.25 * (entry.bytes / cap)
                        emit((reuse, key))
                    else:
                        while cur + bytes_ > cap:
                            bucket = buckets[levels[0]]
                            if not bucket:
                                del buckets[heappop(levels)]
                                continue
                            old = bucket.popitem(False)[0]
                            cur -= entries.pop(old).bytes
                            emit((evict, old))
                        p = new_priority
                        entries[key] = SeedEntry(p, time, 1, bytes_)
                        cur += bytes_
                        emit((add, key))
                    bucket = get_bucket(p)
                    if bucket is None:
                        buckets[p] = bucket = OrderedDict()
                        heappush(levels, p)
                    bucket[key] = None
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time = cur, hits, time
        return out
