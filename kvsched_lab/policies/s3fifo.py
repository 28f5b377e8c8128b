"""S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction", SOSP'23).

Three FIFO queues: a small queue S (10% of the bytes), a main queue M (the rest) and a ghost
queue G of recently evicted keys (no data, as many bytes as M). Each cached key has a 2-bit
frequency, capped at 3, raised by hits. A new key enters S, or M if G remembers it. To evict:
while S holds at least its 10% (or M is empty), take S's oldest key: accessed again since it
arrived (freq >= 1) -> move it to M with freq 0, else evict it into G. Otherwise take M's oldest:
freq > 0 -> reinsert it at M's head with freq - 1 (a 2-bit CLOCK), else evict it. Most one-hit
blocks leave from S quickly, before they can push reused blocks out of M.

Every operation is a dict or `OrderedDict` operation: O(1) amortized per touch. One victim is
chosen per call (the paper's evict-from-S may also evict from M when a promotion overfills it;
here the next eviction does that, since S is then under its share).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.events import ADD, EVICT, REUSE
from kvsched_lab.policies.base import Policy

MAX_FREQ = 3  # two bits


class S3FIFOPolicy(Policy):
    """S3-FIFO; ``small``, ``main``, ``ghost`` map key -> bytes, oldest first; ``freq`` per cached key."""

    name = "s3fifo"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.small_target = capacity_bytes // 10
        self.ghost_target = capacity_bytes - self.small_target
        self.small: "OrderedDict[Hashable, int]" = OrderedDict()
        self.main: "OrderedDict[Hashable, int]" = OrderedDict()
        self.ghost: "OrderedDict[Hashable, int]" = OrderedDict()
        self.small_bytes = self.main_bytes = self.ghost_bytes = 0
        self.freq: Dict[Hashable, int] = {}
        self._to_main = False  # the miss in progress was remembered by the ghost queue

    def on_hit(self, key: Hashable) -> None:
        if self.freq[key] < MAX_FREQ:
            self.freq[key] += 1

    def on_miss(self, key: Hashable, size: int) -> bool:
        ghost_size = self.ghost.pop(key, None)
        self._to_main = ghost_size is not None
        if self._to_main:
            self.ghost_bytes -= ghost_size
        return True

    def victim(self) -> Hashable:
        small, main, freq = self.small, self.main, self.freq
        while True:
            if small and (self.small_bytes >= self.small_target or not main):
                key, size = small.popitem(last=False)
                self.small_bytes -= size
                if freq[key]:
                    freq[key] = 0
                    main[key] = size
                    self.main_bytes += size
                    continue
                self._remember(key, size)
                return key
            key, size = main.popitem(last=False)
            if freq[key]:
                freq[key] -= 1
                main[key] = size
                continue
            self.main_bytes -= size
            return key

    def _remember(self, key: Hashable, size: int) -> None:
        # A key evicted from S goes to G; G forgets its oldest keys beyond M's share of bytes.
        self.ghost[key] = size
        self.ghost_bytes += size
        while self.ghost_bytes > self.ghost_target:
            self.ghost_bytes -= self.ghost.popitem(last=False)[1]

    def on_evict(self, key: Hashable, size: int) -> None:
        del self.freq[key]

    def on_insert(self, key: Hashable, size: int) -> None:
        self.freq[key] = 0
        if self._to_main:
            self.main[key] = size
            self.main_bytes += size
        else:
            self.small[key] = size
            self.small_bytes += size

    def snapshot(self) -> List[Tuple[Hashable, str, int, int]]:
        """``(key, "main"|"small", bytes, freq)``: M newest first, then S newest first."""
        return [(k, "main", b, self.freq[k]) for k, b in reversed(self.main.items())] + [
            (k, "small", b, self.freq[k]) for k, b in reversed(self.small.items())
        ]

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        entries, freq, small, main, ghost = self.entries, self.freq, self.small, self.main, self.ghost
        pop_small, pop_main, pop_ghost = small.popitem, main.popitem, ghost.popitem
        emit = self.log.append_event
        add, evict, reuse = ADD, EVICT, REUSE  # locals: faster than globals in the loop
        cap, cur, hits, time = self.capacity_bytes, self.current_bytes, self.hits, self.time
        small_target, ghost_target = self.small_target, self.ghost_target
        small_bytes, main_bytes, ghost_bytes = self.small_bytes, self.main_bytes, self.ghost_bytes
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                n = 0
                for key in ids:
                    if key not in entries:
                        break
                    f = freq[key]
                    if f < MAX_FREQ:
                        freq[key] = f + 1
                    emit((reuse, key))
                    n += 1
                out.append(n)
                hits += n
                time += len(ids)
                for key in ids[n:]:
                    if key in entries:
                        hits += 1
                        f = freq[key]
                        if f < MAX_FREQ:
                            freq[key] = f + 1
                        emit((reuse, key))
                        continue
                    ghost_size = ghost.pop(key, None)
                    if ghost_size is not None:
                        ghost_bytes -= ghost_size
                    while cur + bytes_ > cap:
                        if small and (small_bytes >= small_target or not main):
                            old, size = pop_small(False)
                            small_bytes -= size
                            if freq[old]:
                                freq[old] = 0
                                main[old] = size
                                main_bytes += size
                                continue
                            ghost[old] = size
                            ghost_bytes += size
                            while ghost_bytes > ghost_target:
                                ghost_bytes -= pop_ghost(False)[1]
                        else:
                            old, size = pop_main(False)
                            if freq[old]:
                                freq[old] -= 1
                                main[old] = size
                                continue
                            main_bytes -= size
                        del freq[old]
                        del entries[old]
                        cur -= size
                        emit((evict, old))
                    entries[key] = bytes_
                    freq[key] = 0
                    cur += bytes_
                    if ghost_size is not None:
                        main[key] = bytes_
                        main_bytes += bytes_
                    else:
                        small[key] = bytes_
                        small_bytes += bytes_
                    emit((add, key))
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time = cur, hits, time
            self.small_bytes, self.main_bytes, self.ghost_bytes = small_bytes, main_bytes, ghost_bytes
        return out
