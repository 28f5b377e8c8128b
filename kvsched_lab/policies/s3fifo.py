"""S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction", SOSP'23).

Three FIFO queues: a small queue S (10% of the bytes), a main queue M (the rest) and a ghost
queue G of recently evicted keys (no data, as many bytes as M). Each cached key has a 2-bit
frequency, capped at 3, raised by hits. A new key enters S, or M if G remembers it. To evict:
while S holds at least its 10% (or M is empty), take S's oldest key: accessed again since it
arrived (freq >= 1) -> move it to M with freq 0, else evict it into G. Otherwise take M's oldest:
freq > 0 -> reinsert it at M's head with freq - 1 (a 2-bit CLOCK), else evict it. Most one-hit
blocks leave from S quickly, before they can push reused blocks out of M.

S and M are deques of keys (sizes are in ``entries``), G an `OrderedDict` key -> bytes (a ghost
hit removes a key from its middle), and ``freq`` holds only the keys whose frequency is not 0:
most blocks are never hit again, so they never enter it, and one ``freq.pop`` both reads and
clears a frequency. Every operation is O(1). One victim is chosen per call (the paper's
evict-from-S may also evict from M when a promotion overfills it; here the next eviction does
that, since S is then under its share).
"""
from __future__ import annotations

from collections import OrderedDict, deque
from typing import Deque, Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.events import ADD, EVICT, REUSE
from kvsched_lab.policies.base import Policy

MAX_FREQ = 3  # two bits


class S3FIFOPolicy(Policy):
    """S3-FIFO; ``small``, ``main`` are key deques oldest first, ``ghost`` maps key -> bytes oldest first."""

    name = "s3fifo"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.small_target = capacity_bytes // 10
        self.ghost_target = capacity_bytes - self.small_target
        self.small: Deque[Hashable] = deque()
        self.main: Deque[Hashable] = deque()
        self.ghost: "OrderedDict[Hashable, int]" = OrderedDict()
        self.small_bytes = self.ghost_bytes = 0  # M's bytes are current_bytes - small_bytes
        self.freq: Dict[Hashable, int] = {}  # cached keys with a frequency of 1..3
        self._to_main = False  # the miss in progress was remembered by the ghost queue

    def on_hit(self, key: Hashable) -> None:
        self.freq[key] = min(self.freq.get(key, 0) + 1, MAX_FREQ)

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
                key = small.popleft()
                size = self.entries[key]
                self.small_bytes -= size
                if freq.pop(key, 0):  # hit while in S: promote to M with freq 0
                    main.append(key)
                    continue
                self._remember(key, size)
                return key
            key = main.popleft()
            f = freq.pop(key, 0)
            if f:
                if f > 1:
                    freq[key] = f - 1
                main.append(key)
                continue
            return key

    def _remember(self, key: Hashable, size: int) -> None:
        # A key evicted from S goes to G; G forgets its oldest keys beyond M's share of bytes.
        self.ghost[key] = size
        self.ghost_bytes += size
        while self.ghost_bytes > self.ghost_target:
            self.ghost_bytes -= self.ghost.popitem(last=False)[1]

    def on_insert(self, key: Hashable, size: int) -> None:
        if self._to_main:
            self.main.append(key)
        else:
            self.small.append(key)
            self.small_bytes += size

    def snapshot(self) -> List[Tuple[Hashable, str, int, int]]:
        """``(key, "main"|"small", bytes, freq)``: M newest first, then S newest first."""
        entries, freq = self.entries, self.freq
        return [(k, "main", entries[k], freq.get(k, 0)) for k in reversed(self.main)] + [
            (k, "small", entries[k], freq.get(k, 0)) for k in reversed(self.small)
        ]

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        entries, freq, small, main, ghost = self.entries, self.freq, self.small, self.main, self.ghost
        pop_small, pop_main, push_small, push_main = small.popleft, main.popleft, small.append, main.append
        pop_freq, get_freq, pop_ghost, pop_oldest_ghost = freq.pop, freq.get, ghost.pop, ghost.popitem
        emit = self.log.append_event
        add, evict, reuse, max_freq = ADD, EVICT, REUSE, MAX_FREQ  # locals: faster than globals
        cap, cur, hits, time = self.capacity_bytes, self.current_bytes, self.hits, self.time
        small_target, ghost_target = self.small_target, self.ghost_target
        small_bytes, ghost_bytes = self.small_bytes, self.ghost_bytes
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                n = 0
                for key in ids:
                    if key not in entries:
                        break
                    f = get_freq(key, 0)
                    if f < max_freq:
                        freq[key] = f + 1
                    emit((reuse, key))
                    n += 1
                out.append(n)
                hits += n
                time += len(ids)
                for key in ids[n:]:
                    if key in entries:
                        hits += 1
                        f = get_freq(key, 0)
                        if f < max_freq:
                            freq[key] = f + 1
                        emit((reuse, key))
                        continue
                    ghost_size = pop_ghost(key, None)
                    if ghost_size is not None:
                        ghost_bytes -= ghost_size
                    while cur + bytes_ > cap:
                        if small and (small_bytes >= small_target or not main):
                            old = pop_small()
                            if pop_freq(old, 0):
                                small_bytes -= entries[old]
                                push_main(old)
                                continue
                            size = entries.pop(old)
                            small_bytes -= size
                            ghost[old] = size
                            ghost_bytes += size
                            while ghost_bytes > ghost_target:
                                ghost_bytes -= pop_oldest_ghost(False)[1]
                        else:
                            old = pop_main()
                            f = pop_freq(old, 0)
                            if f:
                                if f > 1:
                                    freq[old] = f - 1
                                push_main(old)
                                continue
                            size = entries.pop(old)
                        cur -= size
                        emit((evict, old))
                    entries[key] = bytes_
                    cur += bytes_
                    if ghost_size is None:
                        push_small(key)
                        small_bytes += bytes_
                    else:
                        push_main(key)
                    emit((add, key))
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time = cur, hits, time
            self.small_bytes, self.ghost_bytes = small_bytes, ghost_bytes
        return out
