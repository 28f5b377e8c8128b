"""FIFO: evict the block cached longest ago, whatever its hits, among all cached blocks.

SGLang's and LMCache's ``fifo`` strategies use the same order; SGLang applies it only to
radix-tree leaves no running request locks (see lru.py for what that changes).

``entries`` is an `OrderedDict` in insertion order; a hit changes nothing, a victim is the first
key: O(1) per touch. FIFO is the floor the smarter policies must beat. LRU (lru.py) is this policy
with one change: a hit moves its key to the end (``refresh_hits``), so the replay loop is shared.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE
from kvsched_lab.sim.policies.base import Policy


class FIFOPolicy(Policy):
    """First in, first out; ``entries`` is ordered oldest insertion first."""

    name = "fifo"
    refresh_hits = False  # LRU: a hit moves its key to the end of ``entries`` (the newest)

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.entries: "OrderedDict[Hashable, int]" = OrderedDict()

    def victim(self) -> Hashable:
        return next(iter(self.entries))

    def snapshot(self) -> List[Tuple[Hashable, int]]:
        """``(key, bytes)``, newest insertion first (the last to be evicted first)."""
        return list(reversed(self.entries.items()))

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        entries = self.entries
        pop_oldest, move_to_end = entries.popitem, entries.move_to_end
        refresh = self.refresh_hits
        emit = self.log.append_event  # list.extend: one call records one event, or two
        add, evict, reuse = ADD, EVICT, REUSE  # locals: faster than globals in the loop
        cap, cur, hits, time = self.capacity_bytes, self.current_bytes, self.hits, self.time
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                n = 0
                for key in ids:  # the prefix hits: they never evict
                    if key not in entries:
                        break
                    if refresh:
                        move_to_end(key)
                    emit((reuse, key))
                    n += 1
                out.append(n)
                hits += n
                time += len(ids)
                for key in ids[n:]:
                    if key in entries:
                        hits += 1
                        if refresh:
                            move_to_end(key)
                        emit((reuse, key))
                        continue
                    if cur + bytes_ <= cap:
                        entries[key] = bytes_
                        cur += bytes_
                        emit((add, key))
                        continue
                    old, size = pop_oldest(False)
                    if size == bytes_:  # the usual case: one victim, and the cache stays as full
                        entries[key] = bytes_
                        emit((evict, old, add, key))  # the victim and the add, in one call
                        continue
                    cur -= size
                    while cur + bytes_ > cap:  # sizes differ: maybe several victims
                        emit((evict, old))
                        old, size = pop_oldest(False)
                        cur -= size
                    entries[key] = bytes_
                    cur += bytes_
                    emit((evict, old, add, key))  # the last victim and the add, in one call
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time = cur, hits, time
        return out
