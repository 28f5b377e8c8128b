"""W-TinyLFU (Einziger, Friedman & Manes, "TinyLFU: a highly efficient cache admission policy",
ACM ToS 2017; the admission policy of Caffeine): a frequency sketch decides who enters the main cache.

Rules (libCacheSim 0.3.5's ``WTinyLFU`` with its defaults, ``main-cache=SLRU, window-size=0.01``;
this policy makes its decision on every access, tests/test_crosscheck_libcachesim.py):

1. **Window.** New blocks enter a small LRU *window* (1% of the bytes, rounded down). A block
   larger than the window, or than the main cache's probation segment, is not cached (``skip``).
2. **Main cache: SLRU.** The rest of the bytes hold a segmented LRU: *probation* (1/5) and
   *protected* (4/5). A block admitted to main enters probation if it has room, else protected
   if it has room, else probation; a hit in probation moves it to protected, whose overflow (its
   least recently used blocks) goes back to probation's head; a hit in protected refreshes it.
3. **Sketch.** A counting Bloom filter (sketch.py) counts each block at its insertion, at each
   hit in main (hits in the window are not counted) and each time it is compared at the window's
   exit; every ``32 x main`` hits in main all counts halve.
4. **Admission.** To make room, the window's least recently used block *w* leaves it: while
   main has room, *w* moves into main (and the next window block is taken). Once main is full,
   *w* is compared with main's next victim *m* (probation's least recently used block, or
   protected's when probation is empty): if the sketch counts *w* more often, *m* is evicted and
   *w* admitted; otherwise *w* is evicted. Either way the eviction ends there (one block left
   the cache). An empty window evicts main's victim.

Two details of rule 4 are libCacheSim's reading of the paper, kept so the decisions match. The
window has no size limit of its own: before the cache first fills it holds everything, and the
first eviction drains it into main. And a block that moves into main while main has room frees
nothing, so one eviction moves window blocks in until main is full, then compares once.
(An earlier version of this policy went on comparing after an admission; it evicted more and
differed from libCacheSim on 2 to 121 accesses of the trace heads at 200, 333 and 2,000 blocks.)

Layout: ``window``, ``probation`` and ``protected`` are `OrderedDict`s key -> bytes, least
recently used first; ``entries`` holds every cached key. One touch costs O(1) plus the sketch's
10 counters. Replays of one block size run the same rules in the inlined loop of wtinylfu_replay.py.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP
from kvsched_lab.sim.policies.base import Policy
from kvsched_lab.sim.policies.sketch import CountingBloomFilter
from kvsched_lab.sim.policies.wtinylfu_replay import replay_one_size

WINDOW_SHARE = 0.01  # of the bytes, rounded down
PROBATION_SHARE = 1 / 5  # of the main cache's bytes (libCacheSim's SLRU "seg-size=1:4"); protected: 4 / 5
DECAY_PER_MAIN_BYTE = 32  # halve the sketch every 32 x main-cache-bytes hits in main


class WTinyLFUPolicy(Policy):
    """W-TinyLFU; ``window``, ``probation``, ``protected`` map key -> bytes, LRU first; ``sketch`` counts keys."""

    name = "wtinylfu"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.window_bytes_max = int(capacity_bytes * WINDOW_SHARE)
        self.main_bytes_max = capacity_bytes - self.window_bytes_max
        self.probation_max = int(PROBATION_SHARE * self.main_bytes_max)
        self.protected_max = int(4 / 5 * self.main_bytes_max)  # as libCacheSim computes it, 4 / 5 first
        self.window: "OrderedDict[Hashable, int]" = OrderedDict()
        self.probation: "OrderedDict[Hashable, int]" = OrderedDict()
        self.protected: "OrderedDict[Hashable, int]" = OrderedDict()
        self.window_bytes = self.probation_bytes = self.protected_bytes = 0
        self.sketch = CountingBloomFilter(self.main_bytes_max)
        self.decay_every = DECAY_PER_MAIN_BYTE * self.main_bytes_max
        self.main_hits = 0  # since the last decay

    @property
    def main_bytes(self) -> int:
        return self.probation_bytes + self.protected_bytes

    def touch(self, prefix: Hashable, bytes_: int) -> None:
        """Use `prefix`: a hit refreshes it; a miss enters the window after the evictions of rule 4."""
        self.validate(prefix, bytes_)
        self.time += 1
        if prefix in self.entries:
            self.hits += 1
            self._hit(prefix)
            self.log.emit(REUSE, prefix)
            return
        if bytes_ > self.window_bytes_max or bytes_ > self.probation_max:
            self.log.emit(SKIP, prefix)
            return
        while self.current_bytes + bytes_ > self.capacity_bytes:
            self._evict()
        self.window[prefix] = bytes_
        self.window_bytes += bytes_
        self.entries[prefix] = bytes_
        self.current_bytes += bytes_
        self.sketch.add(prefix)
        self.log.emit(ADD, prefix)

    def _hit(self, key: Hashable) -> None:
        if key in self.window:
            self.window.move_to_end(key)
            return
        if key in self.protected:
            self.protected.move_to_end(key)
        else:  # probation -> protected; protected's overflow back to probation's head
            size = self.probation.pop(key)
            self.probation_bytes -= size
            self.protected[key] = size
            self.protected_bytes += size
            while self.protected_bytes > self.protected_max:
                old, old_size = self.protected.popitem(last=False)
                self.protected_bytes -= old_size
                self.probation[old] = old_size  # probation's most recent end, not its exit
                self.probation_bytes += old_size
                while self.probation_bytes > self.probation_max:  # checked only after such a move
                    self._drop(self._main_victim())
        self.sketch.add(key)
        self.main_hits += 1
        if self.main_hits >= self.decay_every:
            self.main_hits = 0
            self.sketch.decay()

    def _main_victim(self) -> Hashable:
        return next(iter(self.probation if self.probation else self.protected))

    def _drop(self, key: Hashable) -> None:
        """Evict `key` from main."""
        size = self.probation.pop(key, None)
        if size is None:
            size = self.protected.pop(key)
            self.protected_bytes -= size
        else:
            self.probation_bytes -= size
        self._evicted(key)

    def _evicted(self, key: Hashable) -> None:
        self.current_bytes -= self.entries.pop(key)
        self.log.emit(EVICT, key)

    def _admit(self, key: Hashable, size: int) -> None:
        """Insert `key` into main: probation if it has room, else protected if it has, else probation."""
        if self.probation_bytes + size <= self.probation_max:
            self.probation[key] = size
            self.probation_bytes += size
        elif self.protected_bytes + size <= self.protected_max:
            self.protected[key] = size
            self.protected_bytes += size
        else:
            while self.main_bytes + size > self.main_bytes_max:
                self._drop(self._main_victim())
            self.probation[key] = size
            self.probation_bytes += size

    def _evict(self) -> None:
        """Rule 4: one eviction of libCacheSim's, which may evict several blocks."""
        window, sketch = self.window, self.sketch
        while window:
            key, size = next(iter(window.items()))
            if self.main_bytes + size <= self.main_bytes_max:  # main has room: move in
                del window[key]
                self.window_bytes -= size
                self._admit(key, size)
            elif sketch.estimate(key) > sketch.estimate(self._main_victim()):  # admitted
                self._drop(self._main_victim())
                del window[key]
                self.window_bytes -= size
                self._admit(key, size)
                sketch.add(key)
                return
            else:  # rejected: the window's block leaves the cache
                del window[key]
                self.window_bytes -= size
                sketch.add(key)
                self._evicted(key)
                return
            sketch.add(key)
        self._drop(self._main_victim())

    def snapshot(self) -> List[Tuple[Hashable, str, int]]:
        """``(key, "protected"|"probation"|"window", bytes)``, most recently used first in each."""
        return ([(k, "protected", b) for k, b in reversed(self.protected.items())]
                + [(k, "probation", b) for k, b in reversed(self.probation.items())]
                + [(k, "window", b) for k, b in reversed(self.window.items())])

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        return replay_one_size(self, hash_id_lists, bytes_)
