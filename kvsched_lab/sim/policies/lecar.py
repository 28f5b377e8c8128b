"""LeCaR (Vietri et al., "Driving cache replacement with ML-based LeCaR", HotStorage'18).

Two experts, LRU and LFU, each naming a victim; a learned weight chooses between them, and
regret, measured with ghost lists, trains the weight online.

Rules (as libCacheSim 0.3.5 runs them, ``cache/eviction/LeCaR.c``; this policy makes its decision
on every access, tests/test_crosscheck_libcachesim.py):

1. Every cached block has a recency (an LRU list) and a frequency (hits + 1; LFU ties go to the
   block that reached that frequency first).
2. To evict, the LRU expert names the least recently used block and the LFU expert the first
   block of the lowest frequency. If both name the same block it is evicted and remembered by
   neither. Otherwise a random draw ``r`` picks LRU's block when ``r < w_lru``, else LFU's, and
   the block goes to the ghost list of the expert that chose it (key and eviction time only).
3. Each ghost list is a FIFO of at most half the capacity in bytes.
4. A miss on a block in a ghost list is a *regret* of the expert that evicted it: that expert's
   weight is multiplied by ``exp(-lr * dr ** t)``, ``t`` the touches since the eviction, and the
   two weights are renormalised (``1e-10`` added to each, so none reaches 0). ``lr = 0.45``,
   ``dr = 0.005 ** (1 / capacity)`` (a regret a cache's length late counts 0.5% of a fresh one),
   both weights start at 0.5. The block leaves the ghost list and is cached as a new block.

The draw. libCacheSim 0.3.5 draws ``r = (x % 100) / 100`` where ``x`` is the high 64 bits of a
128-bit Lehmer generator, ``state <- state * 0xda942042e4dd58b5 (mod 2**128)`` (``next_rand`` in
``utils/include/mymath.h``; the Knuth MMIX step written above it there is commented out). The
state is one per thread and starts at ``0xdeadbeef``; LeCaR draws only when the experts disagree.
`LeCaRPolicy` runs the same generator from ``seed`` (default ``0xdeadbeef``): the same seed, the
same decisions, on every access (tests/test_crosscheck_libcachesim.py, including a small hot/cold
workload where draws decide hits). In libCacheSim the state is shared by every cache of a thread,
so its LeCaR matches this one as the first user of a fresh thread's generator, which is how the
crosscheck runs it.

Layout. ``entries`` is an `OrderedDict` in LRU order; ``freq`` maps each key hit at least once to
its frequency (the others, most blocks, have 1) and ``by_freq`` each frequency from 2 up to an
insertion-ordered dict of its keys (a bucket is never removed, so every frequency from 2 to
``max_freq`` has one); count 1's keys are a deque, ``ones``, oldest first, where a key hit (or
refreshed by lecar-prefix) leaves a stale copy counted in ``ones_stale`` (dropped when it reaches
the front, or all at once when stale copies outnumber the live keys). ``min_freq`` is the lowest
frequency in use. Ghosts are `OrderedDict`s key -> (bytes, eviction time). O(1) per touch (amortised)
but for the rare walk up to the next used frequency when the lowest one empties. A block's last
touch is when it reached its frequency, so each bucket is in LRU order too: the experts agree
exactly when the LRU block has the lowest frequency, and an evicted block of count 1 is always
the oldest live key of ``ones`` (lecar_replay.py's fast loop relies on both; tests/test_policy_lecar.py checks them).
`replay_requests` runs that loop (the hooks inlined, same decisions) when every block has the
replay's size; `lecar-prefix` (lecar_prefix.py) adds two rules for whole requests.
"""
from __future__ import annotations

import math
from collections import OrderedDict, deque
from typing import Deque, Dict, Hashable, Iterable, Iterator, List, Optional, Sequence, Tuple

from kvsched_lab.sim.policies.base import Policy
from kvsched_lab.sim.policies.lecar_replay import compact_ones, pop_one, refresh_ones, regret, replay_one_size
from kvsched_lab.sim.policies.lehmer import LEHMER_MULTIPLIER, LEHMER_SEED, MASK128, check_seed

LEARNING_RATE = 0.45
DISCOUNT_AT_CAPACITY = 0.005  # dr ** capacity: the weight of a regret one cache length late


class LeCaRPolicy(Policy):
    """LeCaR; ``w_lru`` and ``w_lfu`` are the experts' weights, ``ghost_lru``/``ghost_lfu`` their regrets."""

    name = "lecar"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None, seed: int = LEHMER_SEED) -> None:
        super().__init__(capacity_bytes, future=future)
        self.entries: "OrderedDict[Hashable, int]" = OrderedDict()  # LRU order, oldest first
        self.freq: Dict[Hashable, int] = {}  # cached keys hit at least once -> frequency (2+); the others have 1
        # frequency (2+) -> its keys, first to reach it first. OrderedDict: popping a plain dict's
        # first key again and again scans its deleted slots.
        self.by_freq: Dict[int, "OrderedDict[Hashable, None]"] = {}
        # Count 1's keys, oldest first, as a deque: every miss adds one and most evictions take
        # the oldest, and a deque's two ends cost a fraction of an OrderedDict's insert and delete.
        # A key hit (or refreshed by lecar-prefix) leaves a stale copy behind, counted in
        # `ones_stale`; its copies all stand before its live one, and are dropped at the front.
        self.ones: Deque[Hashable] = deque()
        self.ones_stale: Dict[Hashable, int] = {}
        self.min_freq = 1
        self.max_freq = 1
        self.ghost_lru: "OrderedDict[Hashable, Tuple[int, int]]" = OrderedDict()  # key -> (bytes, evicted at)
        self.ghost_lfu: "OrderedDict[Hashable, Tuple[int, int]]" = OrderedDict()
        self.ghost_lru_bytes = self.ghost_lfu_bytes = 0
        self.ghost_limit = capacity_bytes // 2
        self.w_lru = self.w_lfu = 0.5
        self.lr = LEARNING_RATE
        self.dr = DISCOUNT_AT_CAPACITY ** (1.0 / capacity_bytes)
        self.rand_state = check_seed(seed)
        self._expert = 0  # who chose the victim being evicted: 1 LRU, 2 LFU, 0 both
        # Every int key that missed is at most this (inf once any other key missed): an int above
        # it is in no structure. The bench's traces number blocks in order of first appearance,
        # so most misses are such keys, and the fast loop skips their look-ups in the cache and ghosts.
        self.key_bound: float = -math.inf
        # lecar-prefix's request state (lecar_prefix.py; unused while `prefix_rules` is off):
        self.finished: Sequence[Hashable] = ()  # the block ids of the request in progress
        self._last = False  # the block being touched is its prompt's last (bypassed on a miss)

    # -- the LFU expert's lists --------------------------------------------------------------
    def count_one_keys(self) -> Iterator[Hashable]:
        """The cached keys of count 1, oldest first: `ones` without its stale copies."""
        skip = dict(self.ones_stale)
        for key in self.ones:
            n = skip.get(key)
            if n:
                skip[key] = n - 1
            else:
                yield key

    def _unlinked(self, f: int) -> None:
        """A key left count `f` (its `freq` entry already gone or raised): the lowest count moves
        up when that count emptied."""
        if f == self.min_freq and (len(self.entries) == len(self.freq) if f == 1 else not self.by_freq[f]):
            while self.min_freq < self.max_freq:  # the walk up to the next used frequency
                self.min_freq += 1
                if self.by_freq.get(self.min_freq):
                    break

    def _link_freq(self, key: Hashable, f: int) -> None:
        if f == 1:  # most blocks are never hit: they stay out of `freq`
            self.ones.append(key)
        else:
            node = self.by_freq.get(f)
            if node is None:
                node = self.by_freq[f] = OrderedDict()
            node[key] = None
        if f > self.max_freq:
            self.max_freq = f
        if f < self.min_freq or len(self.entries) == 1:  # lower, or the only block
            self.min_freq = f

    # -- hooks ---------------------------------------------------------------------------------
    def on_hit(self, key: Hashable) -> None:
        self.entries.move_to_end(key)
        f = self.freq.get(key, 1)
        self.freq[key] = f + 1
        if f == 1:  # its copy in `ones` goes stale
            self.ones_stale[key] = self.ones_stale.get(key, 0) + 1
            compact_ones(self)
        else:
            del self.by_freq[f][key]
        self._unlinked(f)
        self._link_freq(key, f + 1)

    def begin_request(self, hash_ids: Sequence[Hashable]) -> None:
        if self.prefix_rules:  # lecar-prefix's rule 1: the previous request ended, its head becomes the newest
            self._refresh_tail_first(self.finished)
            self.finished = tuple(hash_ids)

    def on_miss(self, key: Hashable, size: int) -> bool:
        if type(key) is not int:  # a bool, a float, a numpy int may equal an int key
            self.key_bound = math.inf
        elif key > self.key_bound:
            self.key_bound = key
        if self._last:  # lecar-prefix's rule 2: a prompt's last block is not cached, nothing else changes
            return False
        ghost = self.ghost_lru.pop(key, None)
        if ghost is not None:
            self.ghost_lru_bytes -= ghost[0]
            self.w_lru, self.w_lfu = regret(self.w_lru, self.w_lfu, self.lr, self.dr ** (self.time - ghost[1]))
            return True
        ghost = self.ghost_lfu.pop(key, None)
        if ghost is not None:
            self.ghost_lfu_bytes -= ghost[0]
            self.w_lfu, self.w_lru = regret(self.w_lfu, self.w_lru, self.lr, self.dr ** (self.time - ghost[1]))
        return True

    def draw(self) -> float:
        """The next ``r`` in [0, 1): libCacheSim's Lehmer step, ``((state >> 64) % 100) / 100``."""
        self.rand_state = (self.rand_state * LEHMER_MULTIPLIER) & MASK128
        return ((self.rand_state >> 64) % 100) / 100.0

    def victim(self) -> Hashable:
        lru_key = next(iter(self.entries))
        lfu_key = next(self.count_one_keys() if self.min_freq == 1 else iter(self.by_freq[self.min_freq]))
        if lru_key == lfu_key:
            self._expert = 0
            return lru_key
        if self.draw() < self.w_lru:
            self._expert = 1
            return lru_key
        self._expert = 2
        return lfu_key

    def on_evict(self, key: Hashable, size: int) -> None:
        f = self.freq.pop(key, 1)
        if f == 1:  # the oldest key of count 1 (its bucket is in LRU order): the front of `ones`
            pop_one(self.ones, self.ones_stale, self.ones.popleft())
        else:
            del self.by_freq[f][key]
        self._unlinked(f)
        if self._expert == 1:
            self.ghost_lru[key] = (size, self.time)
            self.ghost_lru_bytes += size
            while self.ghost_lru_bytes > self.ghost_limit:
                self.ghost_lru_bytes -= self.ghost_lru.popitem(last=False)[1][0]
        elif self._expert == 2:
            self.ghost_lfu[key] = (size, self.time)
            self.ghost_lfu_bytes += size
            while self.ghost_lfu_bytes > self.ghost_limit:
                self.ghost_lfu_bytes -= self.ghost_lfu.popitem(last=False)[1][0]

    def on_insert(self, key: Hashable, size: int) -> None:
        self._link_freq(key, 1)

    def snapshot(self) -> List[Tuple[Hashable, int, int]]:
        """``(key, bytes, frequency)``, most recently used first."""
        freq = self.freq
        return [(k, b, freq.get(k, 1)) for k, b in reversed(self.entries.items())]

    # lecar-prefix (lecar_prefix.py) replays through the same loop with both of its rules on.
    prefix_rules = False  # refresh the previous request's blocks tail first; bypass a prompt's last block

    def _refresh_tail_first(self, ids: Sequence[Hashable]) -> None:
        """lecar-prefix's rule 1: the finished request `ids`, cached blocks refreshed tail to head,
        in the LRU list and in their frequency's bucket alike (no count changes)."""
        entries, freq, by_freq = self.entries, self.freq, self.by_freq
        tail = []  # the cached blocks of count 1, tail first
        for key in reversed(ids):
            if key in entries:
                entries.move_to_end(key)
                if key in freq:
                    by_freq[freq[key]].move_to_end(key)
                else:
                    tail.append(key)
        refresh_ones(self.ones, self.ones_stale, tail)
        compact_ones(self)

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        return replay_one_size(self, hash_id_lists, bytes_)
