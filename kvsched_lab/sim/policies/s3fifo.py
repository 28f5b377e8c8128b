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

Those are the course's rules (`COURSE_RULES`, behind every number the course reports for
``s3fifo``). libCacheSim's ``S3FIFO`` (the paper's authors' simulator) differs in four places,
each a field of `S3FIFORules`; `LIBCACHESIM_RULES` sets all four, and with them this policy makes
libCacheSim 0.3.5's decision on every access (tests/test_crosscheck_libcachesim.py, at capacities
such as 2,005 blocks too, where its ``int(0.9 * capacity)`` ghost is a block short of M's share):

1. ``promote_hits``: hits while in S that earn a move to M (course 1, libCacheSim 2).
2. ``warmup_to_main``: until the first eviction, a new key goes to M once S holds its 10%
   (libCacheSim), instead of S growing to the whole cache (course).
3. ``drain_small``: an eviction that starts in S keeps taking S's oldest until one key leaves the
   cache or S is empty (libCacheSim), instead of re-checking S's share after each promotion.
4. ``ghost_fifo``: G is a FIFO of ``int(0.9 * capacity)`` bytes in which a returning key frees
   its room (libCacheSim's ``S3FIFO_init`` sizes it so, S as ``int(0.1 * capacity)`` and M as the
   rest), instead of the clock above over M's share, where it does not. It is then an
   ``OrderedDict`` key -> bytes, oldest first, trimmed at each insertion. (The two sizes agree
   when the capacity is a multiple of 10; ``int(0.1 * capacity)`` is ``capacity // 10``.)

docs/policy-notes.md measures what each rule is worth. The inlined `_replay` runs the course's
rules; other rules replay through the hooks (the same decisions, a few times slower). It counts a
request's prefix hits before touching any block, as the hooks' replay does.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict, deque
from dataclasses import dataclass
from itertools import islice
from typing import Deque, Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE
from kvsched_lab.sim.policies.base import Policy, hashable_lead, prefix_hits

MAX_FREQ = 3  # two bits


@dataclass(frozen=True)
class S3FIFORules:
    """The four rules on which S3-FIFO implementations differ (module docstring); defaults: the course's."""

    promote_hits: int = 1  # hits while in S that move a key to M when it reaches S's head (1..3)
    warmup_to_main: bool = False  # before the first eviction, new keys go to M once S holds its share
    drain_small: bool = False  # an eviction begun in S pops S until a key leaves (no share re-check)
    ghost_fifo: bool = False  # G: a FIFO of int(0.9 * capacity) bytes, a ghost hit freeing room (else a clock)

    def __post_init__(self) -> None:
        if self.promote_hits not in range(1, MAX_FREQ + 1):
            raise ValueError(f"promote_hits must be 1, 2 or 3 (a 2-bit frequency), got {self.promote_hits!r}")


COURSE_RULES = S3FIFORules()
LIBCACHESIM_RULES = S3FIFORules(promote_hits=2, warmup_to_main=True, drain_small=True, ghost_fifo=True)


class S3FIFOPolicy(Policy):
    """S3-FIFO; ``small``, ``main`` are key deques oldest first, ``ghost`` maps key -> ghost clock
    (key -> bytes with ``rules.ghost_fifo``), oldest first."""

    name = "s3fifo"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None,
                 rules: S3FIFORules = COURSE_RULES) -> None:
        super().__init__(capacity_bytes, future=future)
        if not isinstance(rules, S3FIFORules):
            raise TypeError(f"rules must be an S3FIFORules, got {rules!r}")
        self.rules = rules
        self.small_target = capacity_bytes // 10
        # libCacheSim's ghost: int(0.9 * capacity), in floating point as its C does; the clock's: M's share
        self.ghost_target = int(capacity_bytes * 0.9) if rules.ghost_fifo else capacity_bytes - self.small_target
        self.small: Deque[Hashable] = deque()
        self.main: Deque[Hashable] = deque()
        # key -> ghost_clock when it entered G (may be expired); key -> bytes for a FIFO ghost
        self.ghost: Dict[Hashable, int] = OrderedDict() if rules.ghost_fifo else {}
        self.ghost_clock = 0  # bytes evicted from S into G so far
        self.ghost_bytes = 0  # bytes G holds (a FIFO ghost only)
        self.ghost_limit = 64  # cut G's expired keys off once it holds more keys than this
        self.main_bytes = 0  # S holds the rest (`small_bytes`)
        self.freq: Dict[Hashable, int] = {}  # cached keys with a frequency of 1..3
        self.has_evicted = False  # for `warmup_to_main`: the cache has evicted at least once
        self._to_main = False  # the miss in progress was remembered by the ghost queue

    def on_hit(self, key: Hashable) -> None:
        self.freq[key] = min(self.freq.get(key, 0) + 1, MAX_FREQ)

    @property
    def small_bytes(self) -> int:
        """S's bytes: all but M's."""
        return self.current_bytes - self.main_bytes

    def is_ghost(self, key: Hashable) -> bool:
        """Whether G remembers `key`: at most ``ghost_target`` bytes left S after it did (a clock),
        or it is still in G (a FIFO)."""
        entered = self.ghost.get(key)
        if self.rules.ghost_fifo:
            return entered is not None
        return entered is not None and self.ghost_clock - entered <= self.ghost_target

    def on_miss(self, key: Hashable, size: int) -> bool:
        self._to_main = self.is_ghost(key)
        forgotten = self.ghost.pop(key, None)
        if self.rules.ghost_fifo and forgotten is not None:
            self.ghost_bytes -= forgotten
        return True

    def _evict_from_small(self) -> bool:
        """S's share rule (with one block size: M is not over its share), or M is empty."""
        return bool(self.small) and (self.current_bytes - self.main_bytes >= self.small_target or not self.main)

    def victim(self) -> Hashable:
        small, main, freq, rules = self.small, self.main, self.freq, self.rules
        self.has_evicted = True
        from_small = self._evict_from_small()
        while True:
            if from_small:
                key = small.popleft()
                if freq.pop(key, 0) >= rules.promote_hits:  # hit enough while in S: to M with freq 0
                    main.append(key)
                    self.main_bytes += self.entries[key]
                    from_small = bool(small) if rules.drain_small else self._evict_from_small()
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
        if self.rules.ghost_fifo:
            self.ghost[key] = size
            self.ghost_bytes += size
            while self.ghost_bytes > self.ghost_target:
                self.ghost_bytes -= self.ghost.popitem(last=False)[1]
            return
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
        warmup = (self.rules.warmup_to_main and not self.has_evicted
                  and self.current_bytes - size - self.main_bytes >= self.small_target)  # S was full
        if self._to_main or warmup:
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
        if self.rules != COURSE_RULES:  # the loop below inlines the course's rules only
            return super()._replay(hash_id_lists, bytes_)
        entries, freq, small, main, ghost = self.entries, self.freq, self.small, self.main, self.ghost
        pop_small, pop_main, push_small, push_main = small.popleft, main.popleft, small.append, main.append
        pop_freq, get_freq, pop_ghost = freq.pop, freq.get, ghost.pop
        contains = entries.__contains__
        emit = self.log.append_event
        add, evict, reuse, max_freq = ADD, EVICT, REUSE, MAX_FREQ  # locals: faster than globals
        cap, cur, hits, time = self.capacity_bytes, self.current_bytes, self.hits, self.time
        small_target, ghost_target = self.small_target, self.ghost_target
        main_bytes, clock, ghost_limit = self.main_bytes, self.ghost_clock, self.ghost_limit
        has_evicted = self.has_evicted
        out: List[int] = []
        ids: Sequence[Hashable] = ()
        begun = time  # the clock when the request in progress began
        try:
            for ids in hash_id_lists:
                begun = time
                n = prefix_hits(contains, ids)  # first, as the hooks' replay: an unhashable id among them stops it here
                out.append(n)
                hits += n
                time += len(ids)
                for key in ids[:n]:
                    f = get_freq(key, 0)
                    if f < max_freq:
                        freq[key] = f + 1
                    emit((reuse, key))
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
                        has_evicted = True
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
                if len(ghost) > ghost_limit:  # checked once a request: G may overshoot by a request's keys
                    self.ghost_clock = clock
                    self._forget_expired()
                    ghost, ghost_limit = self.ghost, self.ghost_limit
                    pop_ghost = ghost.pop
        except TypeError:  # an unhashable id raised at its first look-up: only the ids before it were touched
            time = min(time, begun + hashable_lead(ids))
            raise
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time = cur, hits, time
            self.main_bytes, self.ghost_clock, self.has_evicted = main_bytes, clock, has_evicted
        return out
