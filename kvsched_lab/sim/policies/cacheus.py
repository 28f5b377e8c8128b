"""CACHEUS (Rodriguez et al., "Learning Cache Replacement with CACHEUS", FAST'21): LeCaR's regret
learning over two sturdier experts, SR-LRU and CR-LFU, with a learning rate that tunes itself.

Rules, as libCacheSim 0.3.5 runs them (``cache/eviction/Cacheus.c``, ``SR_LRU.c``, ``CR_LFU.c``);
this policy makes its decision on every access (tests/test_crosscheck_libcachesim.py):

1. **Two experts over the same blocks.** Every cached block is in both.
   *SR-LRU* (scan resistant) splits them into *SR*, where new blocks wait, and *R*, for blocks hit
   again; both are LRU lists, with targets starting at half the capacity each. A hit in SR moves
   the block to R; while R is over its target its least recently used block is *demoted* to SR.
   A miss on a block in the history *H* (an LRU list of blocks that left the cache, under one
   capacity) puts it straight into R. While SR is over its target its oldest block leaves the
   cache for H (an eviction no expert chose). SR's target grows when a block that left SR unhit
   comes back from H (by 1, or ``demoted // new + 0.5`` rounded down), at most to the cached
   bytes less one; R's target is the capacity less SR's. (The rule that shrinks SR when a demoted
   block is hit again never fires in libCacheSim: the flag is read on the block's fresh copy in
   R, where it is always clear. It is left out here.)
   *CR-LFU* (churn resistant) counts hits (1 on insertion, or the count it left with plus 1 if
   it comes back from H) and names the block of the lowest count that reached it *last*: among
   equals the newest goes, so an old working set is not churned by a stream of one-timers.
2. **Eviction.** The next draw ``r`` (below) picks SR-LRU's victim (SR's oldest block, R's if SR
   is empty) if ``r < w_lru``, else CR-LFU's. If both experts name the same block it simply
   leaves. Otherwise the chosen block goes to its expert's *ghost*, an LRU list of half the
   capacity. Either way it enters H with its count.
3. **Regret.** A miss on a block in a ghost multiplies that expert's weight by ``exp(-lr)``;
   on every miss the weights are renormalised (``w_lru /= w_lru + w_lfu``, ``w_lfu = 1 - w_lru``)
   and the block leaves both ghosts. Weights start at 0.5.
4. **Learning rate.** ``lr`` starts at ``0.001 + (x % 1000) / 1000`` for a draw ``x``. Every
   ``capacity`` accesses, with ``h`` the interval's hits divided by ``capacity`` in integer
   arithmetic (libCacheSim's, so 1 only for an interval of all hits, else 0): if ``lr`` moved
   last time, it moves again by ``|lr * dlr|``, up if the hit rate moved the same way as ``lr``
   (``dh / dlr > 0``), else down (to 0.0001 if that would leave it at 0.001 or below); if it did
   not move, an interval whose ``h`` fell or stayed at 0 counts toward a restart, and after 10
   such an improving interval restarts ``lr`` at a fresh draw.

The draws. libCacheSim's ``next_rand`` is a 128-bit Lehmer generator, ``state *= 0xda942042e4dd58b5
(mod 2**128)``, returning the high 64 bits; one state per thread, starting at ``0xdeadbeef``.
CACHEUS draws once at creation (``lr``), once per eviction (even when the experts agree) and at
each restart of ``lr``. This policy runs the same generator from ``seed`` (default ``0xdeadbeef``),
so it makes libCacheSim's decision when its cache is the first user of a fresh thread's generator.

Layout: ``r_list`` is an `OrderedDict`, least recent first; ``sr_list``, ``history`` and the two
ghosts are `LazyFifo`s (cacheus_fifo.py: a dict and a deque of arrival order), oldest first (SR's
values are the block's flags, H's its size, flag and count); ``block_size`` is the size every touch
so far had (0 once two differ), which the fast loop needs; ``freq`` maps a cached key to its count and
``by_freq`` a count to an insertion-ordered dict of its keys (victim: the last; a plain dict, not an
`OrderedDict`: a hit moves a key between two of them and an eviction takes one out, and a plain dict
does each in one hash operation, where an `OrderedDict` looks the key up again for its linked node
and allocates or frees that node; ``next(reversed(d))`` reads the last key, stepping in C over
the slots of keys deleted at the end until the dict next resizes). O(1) per touch but
for the walk up to the next used count when the lowest empties, and that stepping. Replays of one block size run
the same rules in the inlined loop of cacheus_replay.py.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP
from kvsched_lab.sim.policies.base import Policy

from kvsched_lab.sim.policies.cacheus_fifo import LazyFifo
from kvsched_lab.sim.policies.cacheus_replay import DEMOTED, NEW, link, next_used, replay_one_size, to_history
from kvsched_lab.sim.policies.lehmer import LEHMER_MULTIPLIER, LEHMER_SEED, MASK128, check_seed

RESTART_AFTER = 10  # intervals without progress before lr restarts at a draw
MIN_LR = 0.001


class CacheusPolicy(Policy):
    """CACHEUS; ``w_lru``/``w_lfu`` the experts' weights, ``lr`` their learning rate."""

    name = "cacheus"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None,
                 seed: int = LEHMER_SEED) -> None:
        super().__init__(capacity_bytes, future=future)
        self.rand_state = check_seed(seed)
        # SR-LRU: two LRU lists over the cached keys and a history of keys that left.
        self.r_list: "OrderedDict[Hashable, None]" = OrderedDict()
        self.sr_list = LazyFifo()  # key -> DEMOTED | NEW flags, oldest first
        self.history = LazyFifo()  # key -> (bytes, new, count), oldest first
        self.r_bytes = self.sr_bytes = self.history_bytes = 0
        self.sr_target = self.r_target = capacity_bytes // 2
        self.demoted = 0  # SR-LRU's C_demoted: blocks in SR demoted from R (less those that left)
        self.new_in_history = 0  # SR-LRU's C_new: new blocks that ever went to H (never decremented)
        # CR-LFU: counts, and per count the keys in the order they reached it.
        self.freq: Dict[Hashable, int] = {}
        self.by_freq: Dict[int, Dict[Hashable, None]] = {1: {}}  # the last key is the victim
        self.min_freq = self.max_freq = 1
        # The learner: each expert's ghost (key -> bytes, LRU first), weights and learning rate.
        self.ghost_lru, self.ghost_lfu = LazyFifo(), LazyFifo()
        self.ghost_lru_bytes = self.ghost_lfu_bytes = 0
        self.ghost_limit = capacity_bytes // 2
        self.w_lru = self.w_lfu = 0.5
        self.lr = MIN_LR + (self.next_rand() % 1000) / 1000
        self.lr_previous = 0.0
        self.hit_rate_previous = 0.0
        self.unlearn = 0
        self.interval_hits = 0
        self.block_size: Optional[int] = None  # every touch's size so far (None: no touch yet; 0: mixed)

    def next_rand(self) -> int:
        """libCacheSim's ``next_rand``: one Lehmer step, the state's high 64 bits."""
        self.rand_state = (self.rand_state * LEHMER_MULTIPLIER) & MASK128
        return self.rand_state >> 64

    # -- one access ------------------------------------------------------------------------------
    def touch(self, prefix: Hashable, bytes_: int) -> None:
        """Use `prefix`: a hit updates both experts; a miss learns from the ghosts, evicts, inserts."""
        self.validate(prefix, bytes_)
        if bytes_ != self.block_size:
            self.block_size = bytes_ if self.block_size is None else 0
        self.time += 1
        if prefix in self.entries:
            self.hits += 1
            self.interval_hits += 1
            self._hit(prefix)
            self.log.emit(REUSE, prefix)
        else:
            self._regret(prefix)
            while self.current_bytes + bytes_ > self.capacity_bytes:
                self._evict()
            if bytes_ > (self.r_target if prefix in self.history else self.sr_target):
                self.log.emit(SKIP, prefix)  # SR-LRU's can_insert: larger than its list's target
            else:
                self._insert(prefix, bytes_)
                self.log.emit(ADD, prefix)
        if self.time % self.capacity_bytes == 0:
            self._update_lr()

    def _hit(self, key: Hashable) -> None:
        size = self.entries[key]
        if key in self.r_list:
            self.r_list.move_to_end(key)
        else:  # SR -> R; R's overflow demoted to SR's newest end
            self.sr_list.remove(key)
            self.sr_bytes -= size
            self.r_list[key] = None
            self.r_bytes += size
            self._demote_over(self.r_target)
        self._count(key, self._uncount(key) + 1)

    def _demote_over(self, limit: int) -> None:
        """While R holds more than `limit` bytes, its least recent block moves to SR's newest end."""
        while self.r_bytes > limit:
            old, _ = self.r_list.popitem(last=False)
            old_size = self.entries[old]
            self.r_bytes -= old_size
            self.sr_list.add(old, DEMOTED)
            self.sr_bytes += old_size
            self.demoted += 1

    # -- CR-LFU's counts -------------------------------------------------------------------------
    def _uncount(self, key: Hashable) -> int:
        """Unlink `key` from its count (libCacheSim moves min_freq up only on a hit or eviction)."""
        f = self.freq.pop(key)
        del self.by_freq[f][key]
        return f

    def _next_min(self, none_left: int) -> None:
        """The lowest count emptied: walk up to the next used one, or set `none_left` if none is
        (libCacheSim's eviction sets -1 there, its removal leaves min_freq as it was)."""
        self.min_freq = next_used(self.by_freq, self.min_freq, self.max_freq, none_left)

    def _count(self, key: Hashable, f: int) -> None:
        """Link `key` at count `f`, after the keys already there; after a hit's unlink."""
        link(self.freq, self.by_freq, key, f)
        if f > self.max_freq:
            self.max_freq = f
        if not self.by_freq.get(self.min_freq):
            self._next_min(self.min_freq)

    # -- learning --------------------------------------------------------------------------------
    def _regret(self, key: Hashable) -> None:
        """Rule 3, on every miss."""
        if key in self.ghost_lru:
            self.w_lru *= math.exp(-self.lr)
        elif key in self.ghost_lfu:
            self.w_lfu *= math.exp(-self.lr)
        self.w_lru = self.w_lru / (self.w_lru + self.w_lfu)
        self.w_lfu = 1 - self.w_lru
        if key in self.ghost_lru:
            self.ghost_lru_bytes -= self.ghost_lru.remove(key)
        if key in self.ghost_lfu:
            self.ghost_lfu_bytes -= self.ghost_lfu.remove(key)

    def _update_lr(self) -> None:
        """Rule 4, every `capacity` accesses."""
        hit_rate = float(self.interval_hits // self.capacity_bytes)
        d_hit = hit_rate - self.hit_rate_previous
        d_lr = self.lr - self.lr_previous
        self.lr_previous, self.hit_rate_previous = self.lr, hit_rate
        if d_lr != 0:
            sign = 1 if d_hit / d_lr > 0 else -1
            step = self.lr + sign * abs(self.lr * d_lr)
            self.lr = step if step > MIN_LR else 0.0001
            self.unlearn = 0
        elif hit_rate == 0 or d_hit <= 0:
            self.unlearn += 1
        elif self.unlearn >= RESTART_AFTER:
            self.unlearn = 0
            self.lr = MIN_LR + (self.next_rand() % 1000) / 1000
        self.interval_hits = 0

    # -- leaving and entering --------------------------------------------------------------------
    def _to_history(self, key: Hashable, size: int, new: bool) -> None:
        """`key` left the cache: H remembers it with its count, trimmed below the capacity."""
        if new:
            self.new_in_history += 1
        self.history_bytes = to_history(self.freq, self.by_freq, self.history, key, new, size,
                                        self.history_bytes, self.capacity_bytes)

    def _leave(self, key: Hashable, lfu_evicts: bool = False) -> int:
        """Drop `key` from the cache and from both experts' structures; its bytes. `lfu_evicts`:
        CR-LFU evicts it (its own victim), rather than removing it at SR-LRU's request."""
        size = self.entries.pop(key)
        self.current_bytes -= size
        flags = self.sr_list.remove(key) if key in self.sr_list else None
        if flags is None:
            del self.r_list[key]
            self.r_bytes -= size
        else:
            self.sr_bytes -= size
            if flags & DEMOTED:
                self.demoted -= 1
        self._to_history(key, size, bool(flags and flags & NEW))
        if not self.by_freq.get(self.min_freq):
            self._next_min(-1 if lfu_evicts else self.min_freq)
        self.log.emit(EVICT, key)
        return size

    def _evict(self) -> None:
        """Rule 2."""
        lru_key = self.sr_list.oldest() if self.sr_list else next(iter(self.r_list))
        lfu_key = next(reversed(self.by_freq[self.min_freq]))
        lru_chosen = (self.next_rand() % 100) / 100 < self.w_lru
        victim = lru_key if lru_chosen else lfu_key
        size = self._leave(victim, lfu_evicts=victim == lfu_key)
        if lru_key == lfu_key:
            return
        if lru_chosen:
            self.ghost_lru.add(victim, size)
            self.ghost_lru_bytes += size
            while self.ghost_lru_bytes > self.ghost_limit:
                self.ghost_lru_bytes -= self.ghost_lru.pop_oldest()[1]
        else:
            self.ghost_lfu.add(victim, size)
            self.ghost_lfu_bytes += size
            while self.ghost_lfu_bytes > self.ghost_limit:
                self.ghost_lfu_bytes -= self.ghost_lfu.pop_oldest()[1]

    def _insert(self, key: Hashable, size: int) -> None:
        self.entries[key] = size
        self.current_bytes += size
        past = self.history.remove(key) if key in self.history else None
        if past is None:  # new: count 1, SR's newest end
            self._link_new(key, 1)
            self.sr_list.add(key, NEW)
            self.sr_bytes += size
        else:  # back from H: its count + 1, straight into R
            self.history_bytes -= past[0]
            self._link_new(key, past[2] + 1)
            self._demote_over(self.r_target - size)
            self.r_list[key] = None
            self.r_bytes += size
            if past[1]:  # it left SR unhit: SR was too small
                ratio = self.demoted // self.new_in_history
                delta = 1.0 if ratio == 0 else ratio + 0.5
                if self.sr_target + delta > self.current_bytes - 1:
                    self.sr_target = self.current_bytes - 1
                else:
                    self.sr_target = int(self.sr_target + delta)
                self.r_target = self.capacity_bytes - self.sr_target
        while self.sr_bytes > self.sr_target:  # SR's oldest leave the cache, no expert asked
            self._leave(self.sr_list.oldest())
        while self.history_bytes >= self.capacity_bytes:
            self.history_bytes -= self.history.pop_oldest()[1][0]

    def _link_new(self, key: Hashable, f: int) -> None:
        link(self.freq, self.by_freq, key, f)
        if f > self.max_freq:
            self.max_freq = f
        if f == 1 or self.min_freq > f or self.min_freq == -1:
            self.min_freq = f

    def snapshot(self) -> List[Tuple[Hashable, str, int, int]]:
        """``(key, "R"|"SR", bytes, count)``, most recently used first in each list."""
        e, f = self.entries, self.freq
        return ([(k, "R", e[k], f[k]) for k in reversed(self.r_list)]
                + [(k, "SR", e[k], f[k]) for k, _ in reversed(self.sr_list.ordered_items())])

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        return replay_one_size(self, hash_id_lists, bytes_)
