"""LFU: evict the least frequently touched block, ties the least recent (SGLang's ``lfu``).

SGLang's radix cache (``mem_cache/radix_cache.py``) evicts leaves by ``(hit_count,
last_access_time)``. Here each key's touch count and last touch time live in `meta`, and a
min-heap of ``(hits, last_used, key)`` records finds the victim in O(log n). A hit pushes a
new record instead of fixing the old one (lazy deletion): a record is valid while its
``last_used`` (the touch clock, unique per push, i.e. a version) equals the key's. Stale
records are dropped by rebuilding the heap when they outnumber the live ones.

Without aging, a block that was hot once is never evicted: GDSF (gdsf.py) adds the aging.
"""
from __future__ import annotations

from heapq import heapify, heappop, heappush, heapreplace
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.events import ADD, EVICT, REUSE
from kvsched_lab.policies.base import Policy


class LFUPolicy(Policy):
    """Least frequently used first out, ties least recently used; ``meta[key] = [hits, last_used]``."""

    name = "lfu"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.meta: Dict[Hashable, List[int]] = {}
        self.heap: List[Tuple[int, int, Hashable]] = []

    def _push(self, key: Hashable, hits: int) -> None:
        self.meta[key] = [hits, self.time]
        heappush(self.heap, (hits, self.time, key))
        if len(self.heap) > 2 * len(self.meta) + 64:  # stale records outnumber live ones
            self.heap = [(h, t, k) for k, (h, t) in self.meta.items()]
            heapify(self.heap)

    def on_hit(self, key: Hashable) -> None:
        self._push(key, self.meta[key][0] + 1)

    def on_insert(self, key: Hashable, size: int) -> None:
        self._push(key, 1)

    def victim(self) -> Hashable:
        while True:
            _, last_used, key = heappop(self.heap)
            m = self.meta.get(key)
            if m is not None and m[1] == last_used:
                return key

    def on_evict(self, key: Hashable, size: int) -> None:
        del self.meta[key]

    def snapshot(self) -> List[Tuple[Hashable, int, int, int]]:
        """``(key, bytes, hits, last_used)``, the last to be evicted first."""
        order = sorted(self.meta.items(), key=lambda kv: (kv[1][0], kv[1][1]), reverse=True)
        return [(k, self.entries[k], h, t) for k, (h, t) in order]

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        entries, meta, heap = self.entries, self.meta, self.heap
        emit = self.log.append_event
        add, evict, reuse = ADD, EVICT, REUSE  # locals: faster than globals in the loop
        cap, cur, hits, time = self.capacity_bytes, self.current_bytes, self.hits, self.time
        push, pop, replace = heappush, heappop, heapreplace
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
                    m = meta.get(key)
                    if m is not None:
                        hits += 1
                        m[0] += 1
                        m[1] = time
                        push(heap, (m[0], time, key))
                        emit((reuse, key))
                    else:
                        record = (1, time, key)
                        while cur + bytes_ > cap:
                            _, last_used, old = heap[0]
                            m = meta.get(old)
                            if m is not None and m[1] == last_used:
                                del meta[old]
                                cur -= entries.pop(old)
                                emit((evict, old))
                                if cur + bytes_ <= cap:  # last victim: one sift swaps its record for the new
                                    replace(heap, record)
                                    record = None
                                    break
                            pop(heap)
                        if record is not None:
                            push(heap, record)
                        entries[key] = bytes_
                        meta[key] = [1, time]
                        cur += bytes_
                        emit((add, key))
                    if len(heap) > 2 * len(meta) + 64:
                        self.heap = heap = [(h, t, k) for k, (h, t) in meta.items()]
                        heapify(heap)
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time = cur, hits, time
        return out
