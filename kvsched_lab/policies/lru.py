"""LRU: evict the least recently touched block, like vLLM v1's free-block queue.

vLLM keeps free blocks (``ref_cnt == 0``) in an intrusive doubly linked list and reuses the
least recently freed one first (``vllm/v1/core/block_pool.py``). Here ``entries`` itself is an
`OrderedDict` ordered oldest touch first, so a hit is ``move_to_end`` and a victim is the first
key: O(1) per touch. (A plain dict would also keep order, but popping its first key repeatedly
scans the deleted slots in front of it.)
"""
from __future__ import annotations

from collections import OrderedDict, deque
from itertools import chain, repeat, takewhile
from typing import Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.events import ADD, EVICT, REUSE
from kvsched_lab.policies.base import Policy


def consume(iterator) -> None:
    """Run an iterator to its end in C (a zero-length deque keeps nothing)."""
    deque(iterator, maxlen=0)


class LRUPolicy(Policy):
    """Least recently used first out; ``entries`` is ordered oldest touch first."""

    name = "lru"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.entries: "OrderedDict[Hashable, int]" = OrderedDict()

    def on_hit(self, key: Hashable) -> None:
        self.entries.move_to_end(key)

    def victim(self) -> Hashable:
        return next(iter(self.entries))

    def snapshot(self) -> List[Tuple[Hashable, int]]:
        """``(key, bytes)``, most recently touched first (the last to be evicted first)."""
        return list(reversed(self.entries.items()))

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        entries = self.entries
        contains, pop_oldest, move_to_end = entries.__contains__, entries.popitem, entries.move_to_end
        emit = self.log.append_event  # list.extend: one call records one or two events
        add, evict, reuse = ADD, EVICT, REUSE  # locals: faster than globals in the loop
        cap, cur, hits, time = self.capacity_bytes, self.current_bytes, self.hits, self.time
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                # The leading cached run is all hits and hits never evict, so it is found and
                # touched with C-level iterators (takewhile, map) instead of a Python loop.
                n = len(list(takewhile(contains, ids)))
                out.append(n)
                hits += n
                time += len(ids)
                if n:
                    head = ids[:n]
                    consume(map(move_to_end, head))
                    emit(chain.from_iterable(zip(repeat(reuse, n), head)))
                for key in ids[n:]:
                    if key in entries:
                        hits += 1
                        move_to_end(key)
                        emit((reuse, key))
                        continue
                    if cur + bytes_ <= cap:
                        entries[key] = bytes_
                        cur += bytes_
                        emit((add, key))
                        continue
                    old, size = pop_oldest(False)
                    cur -= size
                    while cur + bytes_ > cap:  # only when sizes differ: several victims
                        emit((evict, old))
                        old, size = pop_oldest(False)
                        cur -= size
                    entries[key] = bytes_
                    cur += bytes_
                    emit((evict, old, add, key))  # the last victim and the add, in one call
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time = cur, hits, time
        return out
