"""`vllm`: pinned blocks and a free-block queue, the way vLLM v1's block pool evicts.

vLLM counts every KV block against one pool: blocks a running request reads are pinned
(``ref_cnt > 0``) and cannot be evicted; cached blocks nobody reads sit in a free-block queue,
and a request that needs a new block takes the queue's front, evicting the block cached there.
A finished request frees its blocks tail first, so a prompt's deepest block is evicted before
its parents and what stays cached is still a prefix. Under the replay protocol
(`kvsched_lab.sim.replay`, one request at a time) that is:

1. the request's prefix hits are the leading run of its ids cached at arrival;
2. head to tail, each block: cached and not yet pinned by this request -> it leaves the free
   queue and is pinned (``reuse``); missing -> when the free queue plus the pinned blocks
   already fill the capacity, the free queue's front is evicted (``evict``); a block that got
   room is pinned (``add``);
3. when the request ends, its pinned blocks join the back of the free queue in reverse order,
   tail block first.

One request at a time, the free queue runs empty only when a single prompt is longer than the
whole cache. vLLM never serves one: a request whose blocks do not fit is refused its allocation
(``allocate_slots`` returns None: a waiting request waits, a running one preempts another), and
at startup vLLM checks that the pool holds one request of ``max_model_len`` tokens. The replay's
simplification instead computes such a prompt but caches only its first blocks: once every
cached block is pinned, the rest is logged ``skip``. (SGLang refuses such a prompt when it
arrives; `radix` makes the same simplification.)

A request ends when the next one begins (`begin_request`) or at `end_request`. A plain
``touch`` outside a request is a one-block request of its own, so a ``touch``-only caller (the
chapter's ``schedule``) sees LRU. Sizes in bytes generalise step 2: a miss is skipped when the
pinned bytes plus its own exceed the capacity, so no block is evicted for nothing.

A prompt's partial last block (``input_length`` not a multiple of the block size) is never
cached: vLLM hashes full blocks only (``FullAttentionManager.cache_blocks`` caches
``num_tokens // block_size`` blocks). It still takes a pool block while the request runs
(``allocate_new_blocks`` gives a request ``cdiv(num_tokens, block_size)`` blocks, new ones from
the free queue's front, evicting what is cached there), and when the request ends that block,
holding no hash, goes to the queue's *front* (``BlockPool.free_blocks``: ``prepend_n``), empty,
to be taken first. ``hold_uncached(bytes_)`` models it after the request's last full block: it
evicts the queue's front until the block fits and holds the room (``uncached_bytes``) until the
request ends, when the room is simply free; ``replay_requests(..., uncached_tails=...)`` does the
same for each request whose flag is true (`kvsched_lab.sim.replay` passes them for
``metric="vllm-tokens"``).

``free`` is an `OrderedDict` (front = next victim) and ``pinned`` a dict in pin order: every
step is O(1), like vLLM's intrusive doubly linked list.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP
from kvsched_lab.sim.policies.base import Policy, gc_paused, prefix_hits


class VLLMPolicy(Policy):
    """vLLM's block pool, one request at a time; ``free`` front is the next victim."""

    name = "vllm"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.free: "OrderedDict[Hashable, None]" = OrderedDict()  # cached, unpinned; front evicted first
        self.pinned: Dict[Hashable, None] = {}  # the request in progress's cached blocks, in pin order
        self.pinned_bytes = 0
        self.uncached_bytes = 0  # the request in progress's partial last block: held, never cached

    # -- requests ----------------------------------------------------------------------------
    def begin_request(self, hash_ids: Sequence[Hashable]) -> None:
        for key in hash_ids:  # a TypeError for an unhashable id, before anything changes
            hash(key)
        self.end_request()

    def end_request(self) -> None:
        """The request in progress ends: its pinned blocks join the free queue's back, tail first."""
        free = self.free
        for key in reversed(self.pinned):
            free[key] = None
        self.pinned.clear()
        self.pinned_bytes = 0
        self.uncached_bytes = 0

    def hold_uncached(self, bytes_: int) -> bool:
        """The request in progress takes a pool block it never caches (its partial last block).

        Evicts the free queue's front until `bytes_` more fit, then holds them until the request
        ends. Returns False, holding nothing, when every cached block is pinned (the replay's
        simplification for a prompt longer than the cache, as for a skipped block).
        """
        self._check_size(bytes_)
        if self.pinned_bytes + self.uncached_bytes + bytes_ > self.capacity_bytes:
            return False
        while self.current_bytes + self.uncached_bytes + bytes_ > self.capacity_bytes:
            key = self.victim()
            size = self.entries.pop(key)
            self.current_bytes -= size
            self.on_evict(key, size)
            self.log.emit(EVICT, key)
        self.uncached_bytes += bytes_
        return True

    def touch(self, prefix: Hashable, bytes_: int) -> None:
        """Use `prefix` as a one-block request of its own (inside a request: `touch_in_request`)."""
        self.validate(prefix, bytes_)
        self.end_request()
        super().touch(prefix, bytes_)
        self.end_request()

    def touch_in_request(self, prefix: Hashable, bytes_: int, depth: int, last: bool) -> None:
        if self.uncached_bytes:
            raise ValueError("the request already holds its partial last block (hold_uncached): "
                             "touch its full blocks first, or begin the next request")
        Policy.touch(self, prefix, bytes_)

    # -- the hooks -------------------------------------------------------------------------------
    def on_hit(self, key: Hashable) -> None:
        if key not in self.pinned:
            del self.free[key]
            self.pinned[key] = None
            self.pinned_bytes += self.entries[key]

    def on_miss(self, key: Hashable, size: int) -> bool:
        return self.pinned_bytes + size <= self.capacity_bytes  # else every cached byte is pinned

    def victim(self) -> Hashable:
        return next(iter(self.free))

    def on_evict(self, key: Hashable, size: int) -> None:
        del self.free[key]

    def on_insert(self, key: Hashable, size: int) -> None:
        self.pinned[key] = None
        self.pinned_bytes += size

    def snapshot(self) -> List[Tuple[Hashable, int, str]]:
        """``(key, bytes, "pinned"|"free")``, the last to be evicted first: pinned, then the free queue's back."""
        entries = self.entries
        return [(k, entries[k], "pinned") for k in self.pinned] + [(k, entries[k], "free") for k in reversed(self.free)]

    # -- the replay fast path: begin_request and touch_in_request, inlined -------------------------
    def replay_requests(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int,
                        uncached_tails: Optional[Sequence[bool]] = None) -> List[int]:
        """`Policy.replay_requests`; request ``i`` also holds a partial last block (`hold_uncached`)
        after its full blocks when ``uncached_tails[i]`` is true (one flag per request)."""
        if uncached_tails is None:
            return super().replay_requests(hash_id_lists, bytes_)
        self._check_size(bytes_)
        hash_id_lists = list(hash_id_lists)
        if len(uncached_tails) != len(hash_id_lists):
            raise ValueError(f"uncached_tails has {len(uncached_tails)} flags for {len(hash_id_lists)} requests")
        with gc_paused():
            return self._replay(hash_id_lists, bytes_, uncached_tails)

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int,
                uncached_tails: Optional[Sequence[bool]] = None) -> List[int]:
        entries, free, pinned = self.entries, self.free, self.pinned
        pop_front, emit = free.popitem, self.log.append_event
        add, evict, reuse, skip = ADD, EVICT, REUSE, SKIP
        cap, cur, hits, time, pinned_bytes = self.capacity_bytes, self.current_bytes, self.hits, self.time, self.pinned_bytes
        uncached = self.uncached_bytes
        tails = iter(uncached_tails) if uncached_tails is not None else None
        contains = entries.__contains__
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                n = prefix_hits(contains, ids)  # before anything changes
                out.append(n)
                for key in reversed(pinned):  # the previous request ends
                    free[key] = None
                pinned.clear()
                pinned_bytes = uncached = 0
                for key in ids:
                    time += 1
                    if key in entries:
                        hits += 1
                        emit((reuse, key))
                        if key not in pinned:
                            del free[key]
                            pinned[key] = None
                            pinned_bytes += entries[key]
                        continue
                    if pinned_bytes + bytes_ > cap:
                        emit((skip, key))
                        continue
                    while cur + bytes_ > cap:
                        old = pop_front(False)[0]
                        cur -= entries.pop(old)
                        emit((evict, old))
                    entries[key] = bytes_
                    cur += bytes_
                    pinned[key] = None
                    pinned_bytes += bytes_
                    emit((add, key))
                if tails is not None and next(tails) and pinned_bytes + bytes_ <= cap:  # hold_uncached
                    while cur + bytes_ > cap:
                        old = pop_front(False)[0]
                        cur -= entries.pop(old)
                        emit((evict, old))
                    uncached = bytes_
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time, self.pinned_bytes = cur, hits, time, pinned_bytes
            self.uncached_bytes = uncached
        return out
