"""`seed-compact`: the seed chapter's policy with exactly one record per cached entry.

Same score, decisions, log and snapshot as `seed` (seed.py) and the chapter's reference, but no
stale records at all: ``len(queue) == len(entries)`` after every touch (the issue's bound is
``2 * live + 64``; rebuilding the heap when stale records outnumber live ones, as CPython's asyncio
and Go's runtime do for cancelled timers, would meet it too, and `gdsf` does that).

Records are kept per priority in a `BucketQueue` (buckets.py) of `OrderedDict` buckets: a min-heap
``levels`` of the priorities that have a bucket. A hit moves its key from its old bucket to the end
of its new one (the key was just touched, so it has the newest ``last_used`` there), so each bucket
stays sorted by ``last_used`` and the victim, the lowest ``(priority, last_used)``, is the first
key of the lowest bucket: O(1) per touch, plus O(log #priorities) when a priority appears. This is
the O(1) LFU of Shah, Mitra & Matani (2010), keyed by the chapter's priority instead of the hit
count (`lfu`). Only the records differ from `seed`, so `touch` and `snapshot` are inherited.
"""
from __future__ import annotations

from collections import OrderedDict
from heapq import heappop, heappush
from typing import Hashable, Iterable, List, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE
from kvsched_lab.sim.policies.base import prefix_hits
from kvsched_lab.sim.policies.seed import SeedEntry, SeedPolicy


class SeedCompactPolicy(SeedPolicy):
    """The chapter's score and tie-breaks; ``records.buckets[priority]`` holds its keys, oldest touch first."""

    name = "seed-compact"
    record_bucket = OrderedDict

    @property
    def num_records(self) -> int:
        return len(self.records)

    @property
    def queue(self) -> List[Tuple[float, int, Hashable]]:
        """The records as the chapter's ``queue`` would hold them, ``(priority, last_used, key)``, in pop order."""
        entries = self.entries
        return [(p, entries[k].last_used, k) for p, bucket in self.records.in_order() for k in bucket]

    def _unrecord(self, key: Hashable, entry: SeedEntry) -> None:
        self.records.unfile(key, entry.priority)

    def _record(self, key: Hashable, entry: SeedEntry) -> None:
        self.records.file(key, entry.priority)

    def victim(self) -> Hashable:
        """The first key of the lowest non-empty bucket; it leaves the bucket."""
        return self.records.pop()

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        entries = self.entries
        buckets, levels = self.records.buckets, self.records.levels  # its `file` and `lowest`, inlined
        contains, get_bucket = entries.__contains__, buckets.get
        emit = self.log.append_event
        add, evict, reuse = ADD, EVICT, REUSE  # locals: faster than globals in the loop
        cap, cur, hits, time = self.capacity_bytes, self.current_bytes, self.hits, self.time
        new_priority = 1 + 0.5 - 0.25 * (bytes_ / cap)  # a new entry's score, as in `_score`
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                out.append(prefix_hits(contains, ids))
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
