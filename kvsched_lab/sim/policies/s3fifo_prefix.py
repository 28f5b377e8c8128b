"""Prefix-aware S3-FIFO: S3-FIFO (Yang et al., SOSP'23) adapted to chained KV-block prompts.

It keeps S3-FIFO's admission filter (a small FIFO S for new blocks, a ghost queue G of keys
evicted from S, a main queue M for blocks that proved themselves) and changes three things for
prefix caching, where a block is only worth keeping while its whole prefix is cached:

1. **A long ghost** (4x the capacity in bytes instead of M's share). Mooncake reuse gaps are
   about the cache size or longer (median ~9,000 touches), so a ghost as long as M forgets most
   blocks before they come back; with a longer one, a block's second touch sends it to M.
2. **M is a request-grouped LRU, tail first.** The replay touches a prompt head to tail, so a
   plain LRU evicts a prompt's head first and leaves its tail cached but unreachable (a prefix
   hit stops at the first missing block). Here the blocks M receives during one request form a
   group; the least recently used group is evicted deepest block first, like vLLM's tail-first
   release of a finished request's blocks and SGLang's leaf-only eviction.
3. **The last block of a prompt is not cached** (a bypass, logged ``skip``). Mooncake's last
   block is partial (the prompt length is rarely a multiple of 512 tokens), so the next turn of
   a conversation re-hashes it: on the Mooncake traces it is reused 0.7% / 2.7% of the time,
   against 25% / 46% for the other new blocks. A server knows the prompt length at arrival, so
   this is an online rule.

Hits while in S set a flag; evicting from S promotes a flagged block to M (into the current
group), else forgets it into G. A miss remembered by G enters M directly. S holds 5% of the
bytes. Every operation is O(1).

Request structure is explicit: ``touch(key, bytes_, depth=d, last=False)``; depth 1 starts a new
group (a new request), ``last=True`` marks a prompt's final block (bypassed). A plain
``touch(key, bytes_)`` is a one-block request of its own, so M is then a plain LRU.
`replay_requests` passes each block's depth, and ``last`` for the final block of prompts of two
blocks or more (a one-block prompt is usually a shared head, kept).
"""
from __future__ import annotations

from collections import OrderedDict, deque
from typing import Deque, Dict, Hashable, Iterable, List, Optional, Sequence, Set, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP
from kvsched_lab.sim.policies.base import PromptAwarePolicy, prefix_hits

SMALL_SHARE = 0.05  # S's share of the bytes
GHOST_FACTOR = 4  # G remembers this many times the capacity, in bytes


class PrefixS3FIFOPolicy(PromptAwarePolicy):
    """Prefix-aware S3-FIFO; ``groups`` maps request number -> OrderedDict of M's keys (head first)."""

    name = "s3fifo-prefix"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.small_target = int(capacity_bytes * SMALL_SHARE)
        self.ghost_target = GHOST_FACTOR * capacity_bytes
        self.small: Deque[Hashable] = deque()
        self.small_hit: Set[Hashable] = set()  # keys of S touched again since they arrived
        self.small_bytes = 0
        self.ghost: "OrderedDict[Hashable, int]" = OrderedDict()
        self.ghost_bytes = 0
        self.groups: "OrderedDict[int, OrderedDict]" = OrderedDict()  # never holds an empty group
        self.group_of: Dict[Hashable, int] = {}  # M's keys -> their group
        self.request = 0  # number of the request in progress (its group, once it has one)
        self._to_main = False
        self._last = False

    def _start_block(self, depth: int, last: bool) -> None:
        if depth == 1:
            self.request += 1
        self._last = last

    # -- M: request-grouped LRU ----------------------------------------------------------
    def _to_group(self, key: Hashable) -> None:
        group = self.groups.get(self.request)
        if group is None:
            group = self.groups[self.request] = OrderedDict()
        group[key] = None
        self.group_of[key] = self.request

    def on_hit(self, key: Hashable) -> None:
        g = self.group_of.get(key)
        if g is None:
            self.small_hit.add(key)
            return
        if g == self.request:
            self.groups[g].move_to_end(key)
            return
        group = self.groups[g]
        del group[key]
        if not group:
            del self.groups[g]
        self._to_group(key)

    def on_miss(self, key: Hashable, size: int) -> bool:
        if self._last:
            return False
        ghost_size = self.ghost.pop(key, None)
        self._to_main = ghost_size is not None
        if self._to_main:
            self.ghost_bytes -= ghost_size
        return True

    def victim(self) -> Hashable:
        small = self.small
        while True:
            if small and (self.small_bytes >= self.small_target or not self.group_of):
                key = small.popleft()
                size = self.entries[key]
                self.small_bytes -= size
                if key in self.small_hit:  # touched again while in S: promote to M
                    self.small_hit.discard(key)
                    self._to_group(key)
                    continue
                self.ghost[key] = size
                self.ghost_bytes += size
                while self.ghost_bytes > self.ghost_target:
                    self.ghost_bytes -= self.ghost.popitem(last=False)[1]
                return key
            g, group = next(iter(self.groups.items()))
            key = group.popitem(last=True)[0]  # the deepest block of the oldest group
            if not group:
                del self.groups[g]
            del self.group_of[key]
            return key

    def on_insert(self, key: Hashable, size: int) -> None:
        if self._to_main:
            self._to_group(key)
        else:
            self.small.append(key)
            self.small_bytes += size

    def snapshot(self) -> List[Tuple[Hashable, str, int]]:
        """``(key, "main"|"small", bytes)`` in eviction order, the last to go first."""
        entries = self.entries
        main = [k for group in self.groups.values() for k in reversed(group)]  # eviction order
        return [(k, "main", entries[k]) for k in reversed(main)] + [
            (k, "small", entries[k]) for k in reversed(self.small)]

    # -- the replay fast path: the same steps as `touch` with depth and last -----------------
    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        entries, small, small_hit, ghost = self.entries, self.small, self.small_hit, self.ghost
        groups, group_of = self.groups, self.group_of
        emit = self.log.append_event
        add, evict, reuse, skip = ADD, EVICT, REUSE, SKIP
        pop_small, push_small, pop_ghost, pop_oldest_ghost = small.popleft, small.append, ghost.pop, ghost.popitem
        cap, cur, hits, time = self.capacity_bytes, self.current_bytes, self.hits, self.time
        small_target, ghost_target = self.small_target, self.ghost_target
        small_bytes, ghost_bytes, request = self.small_bytes, self.ghost_bytes, self.request
        contains = entries.__contains__
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                n = prefix_hits(contains, ids)
                out.append(n)
                request += 1
                self.request = request
                group = None  # this request's group, once M receives a key
                last_i = len(ids) - 1 if len(ids) > 1 else -1
                for i, key in enumerate(ids):
                    time += 1
                    if key in entries:
                        hits += 1
                        g = group_of.get(key)
                        if g is None:
                            small_hit.add(key)
                        elif g == request:
                            group.move_to_end(key)
                        else:
                            og = groups[g]
                            del og[key]
                            if not og:
                                del groups[g]
                            if group is None:
                                group = groups[request] = OrderedDict()
                            group[key] = None
                            group_of[key] = request
                        emit((reuse, key))
                        continue
                    if i == last_i:
                        emit((skip, key))
                        continue
                    ghost_size = pop_ghost(key, None)
                    if ghost_size is not None:
                        ghost_bytes -= ghost_size
                    while cur + bytes_ > cap:
                        if small and (small_bytes >= small_target or not group_of):
                            old = pop_small()
                            size = entries[old]
                            small_bytes -= size
                            if old in small_hit:
                                small_hit.discard(old)
                                if group is None:
                                    group = groups[request] = OrderedDict()
                                group[old] = None
                                group_of[old] = request
                                continue
                            ghost[old] = size
                            ghost_bytes += size
                            while ghost_bytes > ghost_target:
                                ghost_bytes -= pop_oldest_ghost(False)[1]
                        else:
                            g, og = next(iter(groups.items()))
                            old = og.popitem(True)[0]
                            if not og:
                                del groups[g]
                                if g == request:
                                    group = None
                            del group_of[old]
                        cur -= entries.pop(old)
                        emit((evict, old))
                    entries[key] = bytes_
                    cur += bytes_
                    if ghost_size is None:
                        push_small(key)
                        small_bytes += bytes_
                    else:
                        if group is None:
                            group = groups[request] = OrderedDict()
                        group[key] = None
                        group_of[key] = request
                    emit((add, key))
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time = cur, hits, time
            self.small_bytes, self.ghost_bytes = small_bytes, ghost_bytes
        return out
