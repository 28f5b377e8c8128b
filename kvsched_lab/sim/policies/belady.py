"""Belady's MIN with bypass: the offline optimum, at block level.

Belady (1966) evicts the cached block whose next use is farthest in the future. With bypass,
a missed block whose own next use is farther still (or never) is not cached at all (logged
``skip``). For unit-size blocks this maximizes block hits, so its block-hit rate ``hits / time``
bounds every policy's prefix-hit rate. It needs `future`: every key that will be touched, in
order; each touch must be the next key of it.

``next_use[i]`` is the position of the next touch of ``future[i]``, or ``len(future) + i`` when
there is none (never, farther than any real use; distinct, so records never tie). A max-heap of
records with lazy deletion finds the farthest block in O(log n); a record is valid while it holds
the key's current next use (unique, so it is its own version). A stale record holds a use already
made, so it never rises above a live one and is never popped as a victim; the heap is rebuilt when
stale records outnumber live ones, to bound its size.

A record is the plain int ``-next_use``, not a ``(-next_use, key)`` tuple: the position names
its block, ``future[next_use]`` (or ``future[next_use - len(future)]`` for never), which
``key_at``, the future written twice, reads in one index. Ints compare in one C call where tuples
take three, and the heap's comparisons are most of a replay's time.
"""
from __future__ import annotations

from heapq import heapify, heappop, heappush, heapreplace
from itertools import chain
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP
from kvsched_lab.sim.policies.base import Policy, prefix_hits


def next_uses(future: Sequence[Hashable]) -> List[int]:
    """``out[i]`` = position of the next occurrence of ``future[i]``, else ``len(future) + i``."""
    n = len(future)
    out = [0] * n
    seen: Dict[Hashable, int] = {}
    for i in range(n - 1, -1, -1):
        key = future[i]
        out[i] = seen.get(key, n + i)
        seen[key] = i
    return out


class BeladyPolicy(Policy):
    """Offline optimal eviction with bypass; ``next_of[key]`` is each cached key's next use."""

    name = "belady"
    needs_future = True

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        if future is None:
            raise ValueError("belady needs future= (every key that will be touched, in order)")
        self.future = list(future)
        self.next_use = next_uses(self.future)
        self.key_at = self.future * 2  # key_at[u]: the block a next use u names (u >= len(future): never)
        self.next_of: Dict[Hashable, int] = {}
        self.heap: List[int] = []  # -next_use of each record, stale ones included

    @property
    def num_records(self) -> int:
        """Heap records, stale ones included."""
        return len(self.heap)

    def validate(self, prefix: Hashable, bytes_: int) -> None:
        super().validate(prefix, bytes_)
        if self.time >= len(self.future) or self.future[self.time] != prefix:
            expected = self.future[self.time] if self.time < len(self.future) else "nothing (future exhausted)"
            raise ValueError(f"touch #{self.time + 1} is {prefix!r}, but the future says {expected!r}")

    def _farthest(self) -> Tuple[int, Hashable]:
        # The top is always live: a stale record holds its key's earlier next use, a touch already
        # made, while every live record holds a use still ahead, so no stale record is ever above
        # a live one (the rebuild clears stale records only to bound memory).
        nxt = -self.heap[0]
        return nxt, self.key_at[nxt]

    def _push(self, key: Hashable) -> None:
        nxt = self.next_use[self.time - 1]
        self.next_of[key] = nxt
        heappush(self.heap, -nxt)
        if len(self.heap) > 2 * len(self.next_of) + 64:  # stale records outnumber live ones
            self.heap = [-t for t in self.next_of.values()]
            heapify(self.heap)

    def on_hit(self, key: Hashable) -> None:
        self._push(key)

    def on_miss(self, key: Hashable, size: int) -> bool:
        if self.current_bytes + size <= self.capacity_bytes:
            return True
        return self.next_use[self.time - 1] < self._farthest()[0]

    def victim(self) -> Hashable:
        return self.key_at[-heappop(self.heap)]

    def on_evict(self, key: Hashable, size: int) -> None:
        del self.next_of[key]

    def on_insert(self, key: Hashable, size: int) -> None:
        self._push(key)

    def snapshot(self) -> List[Tuple[Hashable, int, Optional[int]]]:
        """``(key, bytes, next use)``, soonest next use first (the farthest is evicted first);
        next use is a 0-based position in `future`, None for never."""
        n = len(self.future)
        order = sorted(self.next_of.items(), key=lambda kv: kv[1])
        return [(k, self.entries[k], t if t < n else None) for k, t in order]

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        lists = hash_id_lists if isinstance(hash_id_lists, list) else list(hash_id_lists)
        flat = list(chain.from_iterable(lists))
        if flat != self.future[self.time:self.time + len(flat)]:
            raise ValueError("the requests' ids are not the next keys of the future this policy was given")
        entries, next_of, heap, next_use, key_at = self.entries, self.next_of, self.heap, self.next_use, self.key_at
        contains = entries.__contains__
        emit = self.log.append_event
        add, evict, reuse, skip = ADD, EVICT, REUSE, SKIP  # locals: faster than globals in the loop
        cap, cur, hits, time = self.capacity_bytes, self.current_bytes, self.hits, self.time
        out: List[int] = []
        try:
            for ids in lists:
                out.append(prefix_hits(contains, ids))
                for key in ids:
                    nxt = next_use[time]
                    time += 1
                    if key in entries:
                        hits += 1
                        next_of[key] = nxt
                        heappush(heap, -nxt)
                        emit((reuse, key))
                    else:
                        if cur + bytes_ > cap:
                            if nxt > -heap[0]:  # the top is live: see `_farthest`
                                emit((skip, key))
                                continue
                            while True:
                                old = key_at[-heap[0]]
                                del next_of[old]
                                cur -= entries.pop(old)
                                emit((evict, old))
                                if cur + bytes_ <= cap:
                                    break
                                heappop(heap)
                            heapreplace(heap, -nxt)  # one sift swaps the last victim's record for the new one
                        else:
                            heappush(heap, -nxt)
                        entries[key] = bytes_
                        next_of[key] = nxt
                        cur += bytes_
                        emit((add, key))
                    if len(heap) > 2 * len(next_of) + 64:
                        self.heap = heap = [-t for t in next_of.values()]
                        heapify(heap)
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time = cur, hits, time
        return out
