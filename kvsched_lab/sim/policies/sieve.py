"""SIEVE (Zhang et al., "SIEVE is simpler than LRU", NSDI'24): one FIFO queue, one bit, one hand.

Rules. New blocks enter at the queue's head (the newest end); a hit only sets the block's
*visited* bit, nothing moves. To evict, a hand walks from the tail (the oldest) toward the head:
a visited block has its bit cleared and stays where it is, the first unvisited block is evicted,
and the hand stays there (at the next newer block) for the next eviction. Past the newest block
it wraps to the tail. Unlike CLOCK, a block that survives is not moved to the head: new blocks
stay near the head and are the first the hand reaches once it wraps, so one-hit blocks leave
quickly (a "lazy promotion, quick demotion" policy, like S3-FIFO) while old popular blocks stay
behind the hand.

Layout. The queue is cut at the hand into two deques, both oldest first: ``ahead`` runs from
the hand to the head (the hand is its first key, new keys are appended), ``behind`` holds the
blocks the hand has passed. A step pops ``ahead``'s first key: visited -> bit cleared, appended
to ``behind`` (still older than all of ``ahead``); else evicted. When ``ahead`` is empty the hand
wraps: ``behind`` becomes ``ahead``. ``visited`` is the set of keys whose bit is set. Every
operation is O(1) amortized (each step of the hand clears a bit some hit set).

libCacheSim 0.3.5's ``Sieve`` (``cache/eviction/Sieve.c``) runs these rules; with them this policy
makes its decision on every access (tests/test_crosscheck_libcachesim.py). One detail matters for
that: when the evicted block was the newest, the hand wraps at once (libCacheSim's pointer
becomes NULL, meaning "start at the tail"), so blocks inserted before the next eviction are
examined last, not first.
"""
from __future__ import annotations

from collections import deque
from typing import Deque, Hashable, Iterable, List, Optional, Sequence, Set, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE
from kvsched_lab.sim.policies.base import Policy, prefix_hits


class SievePolicy(Policy):
    """SIEVE; ``ahead`` (hand first) and ``behind`` are key deques oldest first, ``visited`` the set bits."""

    name = "sieve"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.ahead: Deque[Hashable] = deque()  # from the hand to the head (newest last)
        self.behind: Deque[Hashable] = deque()  # passed by the hand, oldest first
        self.visited: Set[Hashable] = set()

    def on_hit(self, key: Hashable) -> None:
        self.visited.add(key)

    def victim(self) -> Hashable:
        visited = self.visited
        while True:
            if not self.ahead:  # past the head: wrap to the tail
                self.ahead, self.behind = self.behind, self.ahead
            key = self.ahead.popleft()
            if key in visited:
                visited.discard(key)
                self.behind.append(key)
                continue
            if not self.ahead:  # the newest block left: the hand wraps now (libCacheSim's NULL pointer)
                self.ahead, self.behind = self.behind, self.ahead
            return key

    def on_insert(self, key: Hashable, size: int) -> None:
        self.ahead.append(key)

    def snapshot(self) -> List[Tuple[Hashable, int, bool]]:
        """``(key, bytes, visited)`` from the head (newest) to the tail, the hand between them."""
        entries, visited = self.entries, self.visited
        order = list(self.behind) + list(self.ahead)  # the queue, oldest first
        return [(k, entries[k], k in visited) for k in reversed(order)]

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        if any(size != bytes_ for size in self.entries.values()):  # mixed sizes: the hooks
            return super()._replay(hash_id_lists, bytes_)
        entries, visited = self.entries, self.visited
        ahead, behind = self.ahead, self.behind
        mark = visited.add
        emit = self.log.append_event
        add, evict, reuse = ADD, EVICT, REUSE  # locals: faster than globals in the loop
        cap, cur, hits, time = self.capacity_bytes, self.current_bytes, self.hits, self.time
        out: List[int] = []
        contains = entries.__contains__
        try:
            for ids in hash_id_lists:
                out.append(prefix_hits(contains, ids))
                time += len(ids)
                for key in ids:
                    if key in entries:
                        hits += 1
                        mark(key)
                        emit((reuse, key))
                        continue
                    if cur + bytes_ <= cap:
                        cur += bytes_
                        emit((add, key))
                    else:  # one block of one size out: the hand's step
                        while True:
                            if not ahead:
                                ahead, behind = behind, ahead
                            old = ahead.popleft()
                            if old in visited:
                                visited.discard(old)
                                behind.append(old)
                                continue
                            break
                        if not ahead:
                            ahead, behind = behind, ahead
                        del entries[old]
                        emit((evict, old, add, key))
                    entries[key] = bytes_
                    ahead.append(key)
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time = cur, hits, time
            self.ahead, self.behind = ahead, behind
        return out
