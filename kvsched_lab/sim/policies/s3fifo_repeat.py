"""Repeat-aware S3-FIFO: s3fifo-prefix's admission, a main queue ranked by request, and a bonus
for prompts sent again word for word.

Like s3fifo-prefix (s3fifo_prefix.py), it keeps S3-FIFO's filter (Yang et al., SOSP'23): new
blocks wait in a small FIFO S and reach the main cache M only if touched again while there, or
if a ghost list G remembers them. It never caches a prompt's last block (partial, so the next
turn re-hashes it). It differs in four rules, each measured on both Mooncake traces:

1. **G remembers every block that leaves**: evicted from S or from M, or bypassed as a last
   block (s3fifo-prefix remembers S's victims only). A block that comes back after falling out of
   M is usually a shared prefix; it should not restart in S. G holds 4x the capacity in bytes.
2. **M ranks blocks by the request that last touched them**, oldest evicted first and, within a
   request, deepest block first: a cold prompt loses its tail before its head, so what stays
   cached is still a prefix (vLLM frees a finished request's blocks tail first; SGLang evicts
   radix-tree leaves). A block promoted from S keeps the rank of its own last request.
3. **Exact repeats rank higher.** A request all of whose blocks but the last are cached or in G
   re-sends a known prompt (on the Mooncake synthetic trace this bonus raises the share of
   the gap closed at 4k blocks from 12.9% to 19.7%: docs/policy-notes.md). Blocks touched
   by any other request rank `REPEAT_BONUS` requests lower, as if that much older. The server
   knows every block id of a prompt at arrival, so this is online: `begin_request` receives
   them before the first touch.
4. **S is 1% of the bytes.**

The constants were chosen on the first half of each Mooncake trace (by requests), maximizing
the smallest share of the LRU-to-Belady gap closed at 4k and 8k blocks, and then scored on whole
traces and on the second halves, warmed by the first (the private column of notebook 07). Without `begin_request` (plain
``touch`` calls) every request counts as a repeat of rank 0, so M is an LRU.

M is a binary heap with lazy deletion. A record is one int, `order`, packing (rank, deeper
first, push number), so the heap compares ints, not tuples (a fifth off a replay's time);
``owner`` maps a record to its key and ``main`` maps M's keys to their live record. A re-ranked
key pushes a new record; the heap is compacted when stale records outnumber live ones, so it
holds at most 2 x M's keys + 64 records. S is an `OrderedDict` key -> (request, depth) of its
last touch, oldest first; G an `OrderedDict` key -> bytes, oldest first. A touch costs O(log n).
"""
from __future__ import annotations

import heapq
from collections import OrderedDict
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Set, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP
from kvsched_lab.sim.policies.base import PromptAwarePolicy, prefix_hits

SMALL_SHARE = 0.01  # S's share of the bytes
GHOST_FACTOR = 4  # G remembers this many times the capacity, in bytes
REPEAT_BONUS = 800  # requests of rank a block loses when touched by a request that is not a repeat

MAX_DEPTH = 0xFFFF  # `order` keeps 16 bits for the depth (deeper blocks tie) and 40 for the push


def order(rank: int, depth: int, seq: int) -> int:
    """M's eviction order as one int, smallest first: by rank, then deepest block, then push."""
    return (rank << 56) + ((MAX_DEPTH - depth if depth < MAX_DEPTH else 0) << 40) + seq


class RepeatS3FIFOPolicy(PromptAwarePolicy):
    """Repeat-aware S3-FIFO; ``heap`` holds M's records, ``main`` maps M's keys -> their live record."""

    name = "s3fifo-repeat"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.small_target = int(capacity_bytes * SMALL_SHARE)
        self.ghost_target = GHOST_FACTOR * capacity_bytes
        self.small: "OrderedDict[Hashable, Tuple[int, int]]" = OrderedDict()  # key -> (request, depth)
        self.small_hit: Set[Hashable] = set()  # keys of S touched again since they arrived
        self.small_bytes = 0
        self.ghost: "OrderedDict[Hashable, int]" = OrderedDict()  # key -> bytes, oldest first
        self.ghost_bytes = 0
        self.heap: List[int] = []  # M's records (`order` ints), stale ones included
        self.owner: Dict[int, Hashable] = {}  # record -> its key, for every record in the heap
        self.main: Dict[Hashable, int] = {}  # M's keys -> their live record
        self.seq = 0  # records pushed so far: a tie-break that keeps pushes in order
        self.request = 0  # requests begun so far
        self.repeat = True  # the request in progress re-sends a known prompt
        self._depth = 1  # the block being touched: its place in the request
        self._last = False  # ... and whether it is the request's last block, to bypass
        self._to_main = False  # the miss in progress was remembered by G

    @property
    def num_records(self) -> int:
        """Records in M's heap, stale ones included."""
        return len(self.heap)

    def rank(self) -> int:
        """The rank M gives a block the request in progress touches."""
        return self.request if self.repeat else self.request - REPEAT_BONUS

    # -- request structure ---------------------------------------------------------------------
    def begin_request(self, hash_ids: Sequence[Hashable]) -> None:
        entries, ghost = self.entries, self.ghost
        repeat = all(k in entries or k in ghost for k in hash_ids[:-1])  # raises before any change
        self.request += 1
        self.repeat = repeat

    def _start_block(self, depth: int, last: bool) -> None:
        self._depth, self._last = depth, last

    # -- M and G ---------------------------------------------------------------------------------
    def _push(self, key: Hashable, rank: int, depth: int) -> None:
        self.seq += 1
        self.main[key] = o = order(rank, depth, self.seq)
        self.owner[o] = key
        heapq.heappush(self.heap, o)
        if len(self.heap) > 2 * len(self.main) + 64:
            self._compact()

    def _compact(self) -> None:
        # In place: the replay loop holds the heap and owner as locals.
        heap, owner, main = self.heap, self.owner, self.main
        for o in heap:
            if main.get(owner[o]) != o:
                del owner[o]
        heap[:] = owner
        heapq.heapify(heap)

    def _pop_main(self) -> Hashable:
        heap, owner, main = self.heap, self.owner, self.main
        while True:
            o = heapq.heappop(heap)
            key = owner.pop(o)
            if main.get(key) == o:
                del main[key]
                return key

    def _remember(self, key: Hashable, size: int) -> None:
        ghost = self.ghost
        if key in ghost:  # only a bypassed block can be (a cached one never is): now the newest
            ghost.move_to_end(key)
            return
        ghost[key] = size
        self.ghost_bytes += size
        while self.ghost_bytes > self.ghost_target:
            self.ghost_bytes -= ghost.popitem(last=False)[1]

    # -- the hooks -------------------------------------------------------------------------------
    def on_hit(self, key: Hashable) -> None:
        if key in self.main:
            self._push(key, self.rank(), self._depth)
        else:
            self.small_hit.add(key)
            self.small[key] = (self.request, self._depth)

    def on_miss(self, key: Hashable, size: int) -> bool:
        if self._last:
            self._remember(key, size)
            return False
        ghost_size = self.ghost.pop(key, None)
        self._to_main = ghost_size is not None
        if self._to_main:
            self.ghost_bytes -= ghost_size
        return True

    def victim(self) -> Hashable:
        small, entries = self.small, self.entries
        while small and (self.small_bytes >= self.small_target or not self.main):
            key, (request, depth) = small.popitem(last=False)
            self.small_bytes -= entries[key]
            if key in self.small_hit:  # touched again while in S: promote to M
                self.small_hit.discard(key)
                self._push(key, request, depth)
                continue
            self._remember(key, entries[key])
            return key
        key = self._pop_main()
        self._remember(key, entries[key])
        return key

    def on_insert(self, key: Hashable, size: int) -> None:
        if self._to_main:
            self._push(key, self.rank(), self._depth)
        else:
            self.small[key] = (self.request, self._depth)
            self.small_bytes += size

    def snapshot(self) -> List[Tuple[Hashable, str, int]]:
        """``(key, "main"|"small", bytes)``, the last to be evicted first: M, then S."""
        main, entries = self.main, self.entries
        live = sorted(main.values(), reverse=True)
        return [(self.owner[o], "main", entries[self.owner[o]]) for o in live] + [
            (k, "small", entries[k]) for k in reversed(self.small)]

    # -- the replay fast path: the same steps as begin_request and touch, inlined ----------------
    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        # `_pop_main` and `_remember` are inlined too, and the leading cached run is counted by a
        # plain loop, then touched without testing each block again: on the Mooncake traces most
        # touches are misses that evict, and a method call per eviction cost a tenth of a replay.
        entries, small, small_hit, ghost, main = self.entries, self.small, self.small_hit, self.ghost, self.main
        heap, owner, emit, push, pop = self.heap, self.owner, self.log.append_event, heapq.heappush, heapq.heappop
        oldest_small, forget, refresh_ghost, unghost = small.popitem, ghost.popitem, ghost.move_to_end, ghost.pop
        contains = entries.__contains__
        add, evict, reuse, skip = ADD, EVICT, REUSE, SKIP
        cap, cur, hits, time = self.capacity_bytes, self.current_bytes, self.hits, self.time
        small_target, ghost_target, bonus, max_depth = self.small_target, self.ghost_target, REPEAT_BONUS, MAX_DEPTH
        small_bytes, ghost_bytes, request, seq = self.small_bytes, self.ghost_bytes, self.request, self.seq
        room = cap - bytes_  # the bytes a miss finds room in
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                n = prefix_hits(contains, ids)
                out.append(n)
                request += 1
                # The first n blocks are cached: a repeat needs the rest but the last known.
                repeat = True
                for key in ids[n:-1]:
                    if key not in entries and key not in ghost:
                        repeat = False
                        break
                rank_bits = (request if repeat else request - bonus) << 56  # `order`, inlined
                last_depth = len(ids) if len(ids) > 1 else 0
                time += len(ids)
                for depth, key in enumerate(ids, 1):
                    if depth <= n or key in entries:
                        hits += 1
                        emit((reuse, key))
                        if key not in main:
                            small_hit.add(key)
                            small[key] = (request, depth)
                            continue
                    elif depth == last_depth:  # bypass the last block, but remember it
                        if key in ghost:
                            refresh_ghost(key)
                        else:
                            ghost[key] = bytes_
                            ghost_bytes += bytes_
                            while ghost_bytes > ghost_target:
                                ghost_bytes -= forget(False)[1]
                        emit((skip, key))
                        continue
                    else:
                        to_main = key in ghost  # remembered by G; most misses are new: test first
                        if to_main:
                            ghost_bytes -= unghost(key)
                        if cur > room:
                            while True:
                                if small and (small_bytes >= small_target or not main):
                                    old, (old_request, old_depth) = oldest_small(False)
                                    if old in small_hit:  # touched again while in S: promote to M
                                        small_hit.discard(old)
                                        small_bytes -= entries[old]
                                        seq += 1
                                        main[old] = o = order(old_request, old_depth, seq)
                                        owner[o] = old
                                        push(heap, o)
                                        if len(heap) > 2 * len(main) + 64:
                                            self._compact()
                                        continue
                                    size = entries.pop(old)
                                    small_bytes -= size
                                else:  # M's lowest live record (`_pop_main`)
                                    while True:
                                        o = pop(heap)
                                        old = owner.pop(o)
                                        if main.get(old) == o:
                                            del main[old]
                                            break
                                    size = entries.pop(old)
                                ghost[old] = size  # a cached key is never in G: a miss takes it out
                                if ghost_bytes + size <= ghost_target:  # G not full yet
                                    ghost_bytes += size
                                else:
                                    gone = forget(False)[1]
                                    if gone != size:  # sizes differ: G may need more room, or have some left
                                        ghost_bytes += size - gone
                                        while ghost_bytes > ghost_target:
                                            ghost_bytes -= forget(False)[1]
                                if size == bytes_:  # the usual case: room made, the cache stays as full
                                    break
                                cur -= size
                                if cur <= room:
                                    cur += bytes_
                                    break
                                emit((evict, old))  # sizes differ: more victims to come
                            emit((evict, old, add, key))  # the last victim and the add, in one call
                        else:
                            cur += bytes_
                            emit((add, key))
                        entries[key] = bytes_
                        if not to_main:
                            small[key] = (request, depth)
                            small_bytes += bytes_
                            continue
                    # A hit in M, or a miss G remembered: M ranks the key for this request.
                    seq += 1
                    main[key] = o = rank_bits + ((max_depth - depth if depth < max_depth else 0) << 40) + seq
                    owner[o] = key
                    push(heap, o)
                    if len(heap) > 2 * len(main) + 64:
                        self._compact()
                self.repeat = repeat
        finally:  # keep the counters true (`time` to the request begun) even if the replay is interrupted
            self.current_bytes, self.hits, self.time = cur, hits, time
            self.small_bytes, self.ghost_bytes, self.request, self.seq = small_bytes, ghost_bytes, request, seq
        return out
