"""S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction", SOSP'23).

Three FIFO queues: a small queue S (10% of the bytes), a main queue M (the rest) and a ghost
queue G of keys recently evicted from S (no data). Each cached key has a 2-bit
frequency, capped at 3, raised by hits. A new key enters S, or M if G remembers it. To evict:
while S holds at least its 10% (or M is empty), take S's oldest key: accessed again since it
arrived (freq >= 1) -> move it to M with freq 0, else evict it into G. Otherwise take M's oldest:
freq > 0 -> reinsert it at M's head with freq - 1 (a 2-bit CLOCK), else evict it. Most one-hit
blocks leave from S quickly, before they can push reused blocks out of M.

G remembers a key until M's share of the bytes (90%) has left S after it, and forgets it when it
is found there (it then enters M). G is a dict key -> ghost clock (the bytes evicted from S so
far when the key arrived): remembering is one store, and forgetting costs nothing at the time, as
a key with too old a clock is simply no longer a ghost; such keys are cut off in bulk once G has
grown four-fold. S and M are deques of keys (sizes are in ``entries``). M's bytes are counted
and S has the rest, because the usual miss, a new block taking the place of S's oldest, changes
neither. ``freq`` holds only the keys whose frequency is not 0: most blocks are never hit again,
so they never enter it, and one ``freq.pop`` both reads and clears a frequency. Every operation
is O(1), G's clean-up amortized. One victim is chosen per call (the paper's evict-from-S may also
evict from M when a promotion overfills it; here the next eviction does that, since S is then
under its share).
"""
from __future__ import annotations

from bisect import bisect_left
from collections import deque
from itertools import islice
from typing import Deque, Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE
from kvsched_lab.sim.policies.base import Policy

MAX_FREQ = 3  # two bits


class S3FIFOPolicy(Policy):
    """S3-FIFO; ``small``, ``main`` are key deques oldest first, ``ghost`` maps key -> ghost clock, oldest first."""

    name = "s3fifo"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.small_target = capacity_bytes // 10
        self.ghost_target = capacity_bytes - self.small_target
        self.small: Deque[Hashable] = deque()
        self.main: Deque[Hashable] = deque()
        self.ghost: Dict[Hashable, int] = {}  # key -> ghost_clock when it entered G (may be expired)
        self.ghost_clock = 0  # bytes evicted from S into G so far
        self.ghost_limit = 64  # cut G's expired keys off once it holds more keys than this
        self.main_bytes = 0  # S holds the rest (`small_bytes`)
        self.freq: Dict[Hashable, int] = {}  # cached keys with a frequency of 1..3
        self._to_main = False  # the miss in progress was remembered by the ghost queue

    def on_hit(self, key: Hashable) -> None:
        self.freq[key] = min(self.freq.get(key, 0) + 1, MAX_FREQ)

    @property
    def small_bytes(self) -> int:
        """S's bytes: all but M's."""
        return self.current_bytes - self.main_bytes

    def is_ghost(self, key: Hashable) -> bool:
        """Whether G remembers `key`: at most ``ghost_target`` bytes left S after it did."""
        entered = self.ghost.get(key)
        return entered is not None and self.ghost_clock - entered <= self.ghost_target

    def on_miss(self, key: Hashable, size: int) -> bool:
        self._to_main = self.is_ghost(key)
        self.ghost.pop(key, None)
        return True

    def victim(self) -> Hashable:
        small, main, freq = self.small, self.main, self.freq
        while True:
            if small and (self.current_bytes - self.main_bytes >= self.small_target or not main):
                key = small.popleft()
                if freq.pop(key, 0):  # hit while in S: promote to M with freq 0
                    main.append(key)
                    self.main_bytes += self.entries[key]
                    continue
                self._remember(key, self.entries[key])
                return key
            key = main.popleft()
            f = freq.pop(key, 0)
            if f:
                if f > 1:
                    freq[key] = f - 1
                main.append(key)
                continue
            self.main_bytes -= self.entries[key]
            return key

    def _remember(self, key: Hashable, size: int) -> None:
        # A key evicted from S goes to G. (It cannot be there already: a miss takes it out.)
        self.ghost[key] = self.ghost_clock
        self.ghost_clock += size
        if len(self.ghost) > self.ghost_limit:
            self._forget_expired()

    def _forget_expired(self) -> None:
        # G is in the order keys entered it, so its clocks only grow and the keys it no longer
        # remembers are a prefix: cut it off with one copy in C. The next cut waits until G has
        # grown four-fold (plus slack), so each cut is paid for by the new ghosts since: O(1)
        # amortized, and cuts rare enough not to show in a replay's time.
        expired = bisect_left(list(self.ghost.values()), self.ghost_clock - self.ghost_target)
        self.ghost = dict(islice(self.ghost.items(), expired, None))
        self.ghost_limit = 4 * len(self.ghost) + 64

    def on_insert(self, key: Hashable, size: int) -> None:
        if self._to_main:
            self.main.append(key)
            self.main_bytes += size
        else:
            self.small.append(key)

    def snapshot(self) -> List[Tuple[Hashable, str, int, int]]:
        """``(key, "main"|"small", bytes, freq)``: M newest first, then S newest first."""
        entries, freq = self.entries, self.freq
        return [(k, "main", entries[k], freq.get(k, 0)) for k in reversed(self.main)] + [
            (k, "small", entries[k], freq.get(k, 0)) for k in reversed(self.small)
        ]

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        entries, freq, small, main, ghost = self.entries, self.freq, self.small, self.main, self.ghost
        pop_small, pop_main, push_small, push_main = small.popleft, main.popleft, small.append, main.append
        pop_freq, get_freq, pop_ghost = freq.pop, freq.get, ghost.pop
        emit = self.log.append_event
        add, evict, reuse, max_freq = ADD, EVICT, REUSE, MAX_FREQ  # locals: faster than globals
        cap, cur, hits, time = self.capacity_bytes, self.current_bytes, self.hits, self.time
        small_target, ghost_target = self.small_target, self.ghost_target
        main_bytes, clock, ghost_limit = self.main_bytes, self.ghost_clock, self.ghost_limit
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
                    entered = pop_ghost(key, None)
                    if entered is not None and clock - entered > ghost_target:
                        entered = None  # G no longer remembers it: a new key
                    if cur + bytes_ > cap:
                        while True:  # one victim per pass
                            if small and (cur - main_bytes >= small_target or not main):
                                old = pop_small()
                                if pop_freq(old, 0):  # hit while in S: promote to M
                                    push_main(old)
                                    main_bytes += entries[old]
                                    continue
                                size = entries.pop(old)
                                ghost[old] = clock
                                clock += size
                            else:
                                old = pop_main()
                                f = pop_freq(old, 0)
                                if f:  # CLOCK: a second chance per hit
                                    if f > 1:
                                        freq[old] = f - 1
                                    push_main(old)
                                    continue
                                size = entries.pop(old)
                                main_bytes -= size
                            if size == bytes_:  # the usual case: room made, the cache stays as full
                                break
                            cur -= size
                            if cur + bytes_ <= cap:
                                cur += bytes_
                                break
                            emit((evict, old))  # sizes differ: more victims to come
                        emit((evict, old, add, key))  # the last victim and the add, in one call
                    else:
                        cur += bytes_
                        emit((add, key))
                    entries[key] = bytes_
                    if entered is None:
                        push_small(key)
                    else:  # remembered by G: straight to M
                        push_main(key)
                        main_bytes += bytes_
                if len(ghost) > ghost_limit:  # checked once a request: G may overshoot by one
                    self.ghost_clock = clock
                    self._forget_expired()
                    ghost, ghost_limit = self.ghost, self.ghost_limit
                    pop_ghost = ghost.pop
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time = cur, hits, time
            self.main_bytes, self.ghost_clock = main_bytes, clock
        return out
