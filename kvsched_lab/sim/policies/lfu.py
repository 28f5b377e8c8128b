"""LFU: evict the least frequently touched block, ties the least recent, among all cached blocks.

SGLang's ``lfu`` strategy uses the same order, ``(hit_count, last_access_time)``, but its radix
cache (``mem_cache/radix_cache.py``) applies it only to leaves no running request locks. This is the O(1) LFU of Shah, Mitra & Matani ("An O(1) algorithm for
implementing the LFU cache eviction scheme", 2010), the `BucketQueue` of buckets.py with the hit
count as the level: a hit moves its key to the end of the next bucket (it is that bucket's most
recent touch); the victim is the first key of the lowest non-empty bucket. One record per cached
block, no stale ones: O(1) per touch plus O(log #counts) when a count appears.

Without aging, a block that was hot once is never evicted: GDSF (gdsf.py) adds the aging.
"""
from __future__ import annotations

from collections import OrderedDict
from heapq import heappop, heappush
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE
from kvsched_lab.sim.policies.base import Policy, prefix_hits
from kvsched_lab.sim.policies.buckets import BucketQueue


class LFUPolicy(Policy):
    """Least frequently used first out, ties least recently used; ``meta[key] = [hits, last_used]``."""

    name = "lfu"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.meta: Dict[Hashable, List[int]] = {}
        self.records = BucketQueue()  # level: hits; each bucket oldest touch first

    @property
    def num_records(self) -> int:
        return len(self.records)

    def on_hit(self, key: Hashable) -> None:
        m = self.meta[key]
        self.records.unfile(key, m[0])
        m[0] += 1
        m[1] = self.time
        self.records.file(key, m[0])

    def on_insert(self, key: Hashable, size: int) -> None:
        self.meta[key] = [1, self.time]
        self.records.file(key, 1)

    def victim(self) -> Hashable:
        return self.records.pop()

    def on_evict(self, key: Hashable, size: int) -> None:
        del self.meta[key]

    def snapshot(self) -> List[Tuple[Hashable, int, int, int]]:
        """``(key, bytes, hits, last_used)``, the last to be evicted first."""
        order = sorted(self.meta.items(), key=lambda kv: (kv[1][0], kv[1][1]), reverse=True)
        return [(k, self.entries[k], h, t) for k, (h, t) in order]

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        entries, meta = self.entries, self.meta
        buckets, levels = self.records.buckets, self.records.levels  # its `file` and `lowest`, inlined
        contains, get_bucket = entries.__contains__, buckets.get
        emit = self.log.append_event
        add, evict, reuse = ADD, EVICT, REUSE  # locals: faster than globals in the loop
        cap, cur, hits, time = self.capacity_bytes, self.current_bytes, self.hits, self.time
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                out.append(prefix_hits(contains, ids))
                for key in ids:
                    time += 1
                    m = meta.get(key)
                    if m is not None:
                        hits += 1
                        count = m[0]
                        del buckets[count][key]
                        m[0] = count = count + 1
                        m[1] = time
                        emit((reuse, key))
                    else:
                        while cur + bytes_ > cap:
                            bucket = buckets[levels[0]]
                            if not bucket:
                                del buckets[heappop(levels)]
                                continue
                            old = bucket.popitem(False)[0]
                            del meta[old]
                            cur -= entries.pop(old)
                            emit((evict, old))
                        entries[key] = bytes_
                        meta[key] = [1, time]
                        count = 1
                        cur += bytes_
                        emit((add, key))
                    bucket = get_bucket(count)
                    if bucket is None:
                        buckets[count] = bucket = OrderedDict()
                        heappush(levels, count)
                    bucket[key] = None
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time = cur, hits, time
        return out
