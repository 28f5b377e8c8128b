"""ARC: Adaptive Replacement Cache (Megiddo & Modha, FAST'03), measured in bytes.

Two LRU lists of cached keys, T1 (seen once recently) and T2 (seen at least twice), and two
ghost lists of evicted keys, B1 and B2 (keys only). A hit moves a key to T2's MRU end. A miss
that finds the key in B1 means "T1 was too small": the target size p of T1 grows; one found in
B2 shrinks it. REPLACE evicts T1's LRU key into B1 when T1 is over p (or at p, for a B2 hit),
else T2's LRU key into B2. The ghost lists are trimmed so that ``|T1| + |B1| <= c`` and, with
blocks of one size (replays and the engine), ``|T1| + |T2| + |B1| + |B2| <= 2c`` as in the
paper. With mixed sizes case IV.A, which trims only B1, can leave that total a few blocks' bytes
over 2c. vLLM's CPU offload tier offers ARC next to LRU.

Sizes are counted in bytes (c = capacity_bytes), and a ghost hit moves p by
``max(ratio, 1) * size``; with unit sizes this is exactly the paper's Figure 4. All list
operations are `OrderedDict` operations: O(1) per touch. Two other layouts were measured on the
Mooncake replays and kept out: T1 and B1 as plain dicts with deques of lazily deleted keys (5-7%
faster, for twice the code), and one append-only log per side (L1 = B1 + T1, L2 = B2 + T2) with a
boundary index, where an eviction from T1 only moves the boundary (no faster: in CPython the
loop's time goes to its bytecodes more than to its dict operations).
"""
from __future__ import annotations

from collections import OrderedDict, deque
from itertools import chain
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP
from kvsched_lab.sim.policies.base import Policy, hashable_lead, prefix_hits


class ARCPolicy(Policy):
    """ARC; ``t1``, ``t2``, ``b1``, ``b2`` map key -> bytes, LRU first; ``p`` is T1's target."""

    name = "arc"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.t1: "OrderedDict[Hashable, int]" = OrderedDict()
        self.t2: "OrderedDict[Hashable, int]" = OrderedDict()
        self.b1: "OrderedDict[Hashable, int]" = OrderedDict()
        self.b2: "OrderedDict[Hashable, int]" = OrderedDict()
        self.t1_bytes = self.t2_bytes = self.b1_bytes = self.b2_bytes = 0
        self.p = 0.0
        self.sizes: Dict[int, int] = {}  # size -> keys of that size in T1, T2, B1 and B2 (the replay loop needs one)
        # State of the miss in progress, read by victim/on_evict/on_insert:
        self._ghost_hit = False  # found in B1 or B2: goes to T2
        self._from_b2 = False  # found in B2: REPLACE prefers T1 at |T1| == p
        self._discard = False  # T1 alone fills the cache: evict from T1 without a ghost

    def on_hit(self, key: Hashable) -> None:
        size = self.t1.pop(key, None)
        if size is None:
            self.t2.move_to_end(key)
            return
        self.t1_bytes -= size
        self.t2[key] = size
        self.t2_bytes += size

    def on_miss(self, key: Hashable, size: int) -> bool:
        c = self.capacity_bytes
        self._from_b2 = self._discard = False
        if key in self.b1:  # case II
            self.p = min(c, self.p + max(self.b2_bytes / self.b1_bytes, 1) * size)
            self._forget(self.b1, key)
            self._ghost_hit = True
        elif key in self.b2:  # case III
            self.p = max(0.0, self.p - max(self.b1_bytes / self.b2_bytes, 1) * size)
            self._forget(self.b2, key)
            self._ghost_hit = self._from_b2 = True
        else:  # case IV
            self._ghost_hit = False
            if self.t1_bytes + self.b1_bytes + size > c:  # IV.A: L1 is full
                while self.b1 and self.t1_bytes + self.b1_bytes + size > c:
                    self._forget(self.b1, next(iter(self.b1)))
                self._discard = self.t1_bytes + size > c
            else:  # IV.B
                while self.b2 and self.t1_bytes + self.t2_bytes + self.b1_bytes + self.b2_bytes + size > 2 * c:
                    self._forget(self.b2, next(iter(self.b2)))
        return True

    def victim(self) -> Hashable:
        """REPLACE: T1's LRU key when T1 is over its target p, else T2's."""
        t1 = self.t1
        if t1 and (self._discard or not self.t2 or self.t1_bytes > self.p
                   or (self._from_b2 and self.t1_bytes == self.p)):
            return next(iter(t1))
        return next(iter(self.t2))

    def on_evict(self, key: Hashable, size: int) -> None:
        if self.t1.pop(key, None) is not None:
            self.t1_bytes -= size
            if self._discard:
                self._count(size, -1)
            else:
                self.b1[key] = size
                self.b1_bytes += size
        else:
            del self.t2[key]
            self.t2_bytes -= size
            self.b2[key] = size
            self.b2_bytes += size

    def on_insert(self, key: Hashable, size: int) -> None:
        self._count(size, 1)
        if self._ghost_hit:
            self.t2[key] = size
            self.t2_bytes += size
        else:
            self.t1[key] = size
            self.t1_bytes += size

    def _forget(self, ghosts: "OrderedDict[Hashable, int]", key: Hashable) -> None:
        """Drop the ghost `key` from B1 or B2 (`ghosts`)."""
        size = ghosts.pop(key)
        if ghosts is self.b1:
            self.b1_bytes -= size
        else:
            self.b2_bytes -= size
        self._count(size, -1)

    def _count(self, size: int, change: int) -> None:
        left = self.sizes.get(size, 0) + change
        if left:
            self.sizes[size] = left
        else:
            del self.sizes[size]

    def snapshot(self) -> List[Tuple[Hashable, str, int]]:
        """``(key, "t2"|"t1", bytes)``: T2 MRU first, then T1 MRU first."""
        return [(k, "t2", b) for k, b in reversed(self.t2.items())] + [
            (k, "t1", b) for k, b in reversed(self.t1.items())
        ]

    # arc-prefix (arc_prefix.py) replays through the loop below with both of its rules on.
    prefix_rules = False  # refresh the previous request's blocks tail first; bypass a prompt's last block

    def _refresh_tail_first(self, ids: Sequence[Hashable]) -> None:
        """arc-prefix's rule 1: the finished request `ids`, cached blocks refreshed tail to head."""
        t1, t2 = self.t1, self.t2
        for key in reversed(ids):
            if key in t1:
                t1.move_to_end(key)
            elif key in t2:
                t2.move_to_end(key)

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        # The hooks inlined for blocks of one size, as replays have: then B1 and B2 lose at most one
        # ghost per miss and the cache at most one block (the module docstring), so each `while` of
        # the hooks is an `if`. Mixed sizes left by earlier touches take the hooks. With
        # `prefix_rules` it is arc-prefix's `begin_request` and `touch_in_request` inlined too.
        # Where the time goes, measured on the Mooncake conversation trace at 8k blocks: 62% of
        # touches are misses of case IV.A that evict T1's LRU key into B1, so that case has its
        # own branch, which leaves |T1| and |B1| as they were and skips their counters.
        # One size: checked on the counts, since reading every value of an OrderedDict costs a
        # look-up each (a sixth of this loop's time when it was done so, once per chunk of a replay).
        if self.sizes.keys() - {bytes_}:
            return Policy._replay(self, hash_id_lists, bytes_)
        entries, t1, t2, b1, b2 = self.entries, self.t1, self.t2, self.b1, self.b2
        oldest_t1, oldest_t2, forget_b1, forget_b2 = t1.popitem, t2.popitem, b1.popitem, b2.popitem
        refresh_t1, refresh_t2 = t1.move_to_end, t2.move_to_end
        in_t1, in_t2 = t1.__contains__, t2.__contains__
        drain = deque(maxlen=0).extend  # runs an iterator of calls to its end, keeping nothing
        contains = entries.__contains__
        emit = self.log.append_event
        add, evict, reuse, skip = ADD, EVICT, REUSE, SKIP  # locals: faster than globals in the loop
        c, cur, hits, time, p = self.capacity_bytes, self.current_bytes, self.hits, self.time, self.p
        t1_bytes, t2_bytes, b1_bytes, b2_bytes = self.t1_bytes, self.t2_bytes, self.b1_bytes, self.b2_bytes
        room = c - bytes_  # the bytes a miss finds room in
        prefix_rules = self.prefix_rules
        finished = self.finished if prefix_rules else ()  # arc-prefix: the request refreshed next
        # `steady`: the last miss was case IV.A replacing from T1 and nothing has moved since, so the
        # next new key is one too (that case leaves every term of its test as it was): one test
        # instead of four. Whatever changes a term (a hit from T1, any other case) clears it.
        steady = False
        out: List[int] = []
        ids: Sequence[Hashable] = ()
        begun = time  # the clock when the request in progress began
        # arc-prefix: a block of the finished request is in T2 only if a touch put it there, and its
        # first n touches are its prefix hits. When no later touch did (no hit past them: `hits`
        # grew by n; no ghost hit: `late`), every T2 block of the request, with all its positions,
        # lies in those n, so T2's pass reads them alone: 51,245 ids of the bench's 288,500. A
        # request finished before this call (its touches unseen here) gets the whole pass.
        in_t2_upto, hits_then, late = 0, hits, True
        try:
            for ids in hash_id_lists:
                begun = time
                n = prefix_hits(contains, ids)  # first, as the hooks' replay: an unhashable id stops it here
                out.append(n)
                if prefix_rules:  # rule 1: the finished request's cached blocks, tail first, list by list
                    drain(map(refresh_t1, filter(in_t1, reversed(finished))))
                    if late or hits - hits_then != in_t2_upto:
                        in_t2_upto = len(finished)
                    drain(map(refresh_t2, filter(in_t2, reversed(finished[:in_t2_upto]))))
                    finished, in_t2_upto, hits_then, late = ids, n, hits, False
                time += len(ids)
                # arc-prefix: a prompt's last block is touched only if it is still cached then (a
                # hit; `filter` reads it after the others), else it is bypassed below.
                bypass = prefix_rules and len(ids) > 1
                for key in chain(ids[:-1], filter(contains, ids[-1:])) if bypass else ids:
                    if key in entries:  # case I
                        hits += 1
                        if key in t1:
                            del t1[key]
                            t1_bytes -= bytes_
                            t2[key] = bytes_
                            t2_bytes += bytes_
                            steady = False
                        else:
                            refresh_t2(key)
                        emit((reuse, key))
                        continue
                    if key in b1:  # case II
                        p = min(c, p + max(b2_bytes / b1_bytes, 1) * bytes_)
                        del b1[key]
                        b1_bytes -= bytes_
                        to_t2, from_b2, late = True, False, True
                    elif key in b2:  # case III
                        p = max(0.0, p - max(b1_bytes / b2_bytes, 1) * bytes_)
                        del b2[key]
                        b2_bytes -= bytes_
                        to_t2 = from_b2 = late = True
                    elif steady or (t1_bytes + b1_bytes > room and b1 and cur > room
                                    and (t1_bytes > p or (t1 and not t2))):
                        # Case IV.A, L1 full, REPLACE from T1: 61% of the touches of the bench's
                        # replay. B1's oldest ghost goes, T1's LRU key becomes B1's newest and the
                        # new key T1's newest, so |T1| and |B1| stay as they were.
                        steady = True
                        forget_b1(False)
                        old = oldest_t1(False)[0]
                        b1[old] = bytes_
                        del entries[old]
                        emit((evict, old, add, key))
                        entries[key] = bytes_
                        t1[key] = bytes_
                        continue
                    elif t1_bytes + b1_bytes <= room:  # case IV.B
                        to_t2 = from_b2 = False
                        if t1_bytes + t2_bytes + b1_bytes + b2_bytes + bytes_ > 2 * c:
                            forget_b2(False)
                            b2_bytes -= bytes_
                    elif b1:  # case IV.A, L1 full: its oldest ghost goes; REPLACE below (from T2)
                        forget_b1(False)
                        b1_bytes -= bytes_
                        to_t2 = from_b2 = False
                    else:  # case IV.A, T1 alone fills L1: T1's LRU key goes, unremembered
                        old = oldest_t1(False)[0]
                        del entries[old]
                        emit((evict, old, add, key))
                        entries[key] = bytes_
                        t1[key] = bytes_
                        continue
                    steady = False
                    if cur > room:  # REPLACE
                        if t1 and (not t2 or t1_bytes > p or (from_b2 and t1_bytes == p)):
                            old = oldest_t1(False)[0]
                            t1_bytes -= bytes_
                            b1[old] = bytes_
                            b1_bytes += bytes_
                        else:
                            old = oldest_t2(False)[0]
                            t2_bytes -= bytes_
                            b2[old] = bytes_
                            b2_bytes += bytes_
                        del entries[old]
                        emit((evict, old, add, key))  # the victim and the add, in one call
                    else:
                        cur += bytes_
                        emit((add, key))
                    entries[key] = bytes_
                    if to_t2:
                        t2[key] = bytes_
                        t2_bytes += bytes_
                    else:
                        t1[key] = bytes_
                        t1_bytes += bytes_
                if bypass and ids[-1] not in entries:  # arc-prefix: a prompt's missed last block is not cached
                    emit((skip, ids[-1]))
        except TypeError:  # an unhashable id raised at its first look-up: only the ids before it were touched
            time = min(time, begun + hashable_lead(ids))
            raise
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time, self.p = cur, hits, time, p
            self.t1_bytes, self.t2_bytes, self.b1_bytes, self.b2_bytes = t1_bytes, t2_bytes, b1_bytes, b2_bytes
            if prefix_rules:
                self.finished = tuple(finished)
            total = len(t1) + len(t2) + len(b1) + len(b2)
            self.sizes = {bytes_: total} if total else {}
        return out

