"""`RefCountedBlockManager`: real KV blocks shared by running requests, pinned by a reference count, cached when free.

The concurrent engine's memory, modelled on vLLM v1's block pool (``vllm/v1/core/block_pool.py``):
every block of the `KVBlockPool` is either in use (``ref_cnt > 0``: a running request reads it,
so it is pinned) or free. Free blocks wait in one queue, front first out; a free block may still
hold a cached prefix block (it has a key, vLLM's block hash), and taking it from the queue evicts
that key. A request that finishes or is preempted releases its blocks tail first (``free_blocks``):
those with a key join the queue's back, so its deepest cached block is evicted before its
parents; those without one (a partly filled last block) go to the queue's **front**, to be
reused first, since no request can ever hit them. Only free blocks are ever taken: a pinned block
cannot be evicted, by construction.

Like vLLM, the cache does not deduplicate: when two requests compute the same prefix block (both
admitted before either cached it, or a fully cached prompt recomputing its last block), both
blocks are cached under that key. A lookup returns the one cached first that is still cached;
evicting one leaves the other.
"""
from __future__ import annotations

from collections import Counter, OrderedDict
from typing import Dict, Hashable, List, Optional, Sequence

from kvsched_lab.kv.block_pool import KVBlockPool


class RefCountedBlockManager:
    """Reference counts, the prefix cache (key -> block) and the free-block queue over one pool."""

    def __init__(self, pool: KVBlockPool) -> None:
        self.pool = pool
        self.ref_cnt: List[int] = [0] * pool.num_blocks  # running requests reading each block
        self.free: "OrderedDict[int, None]" = OrderedDict((b, None) for b in range(pool.num_blocks))  # front first
        # prefix-block key -> the blocks holding its K/V, cached first first (vLLM's BlockHashToBlockMap)
        self.cached: Dict[Hashable, Dict[int, None]] = {}
        self.key_of: Dict[int, Hashable] = {}  # the reverse: each cached block's key
        self.num_evictions = 0  # cached blocks whose K/V was overwritten

    @property
    def num_free_blocks(self) -> int:
        return len(self.free)

    @property
    def num_used_blocks(self) -> int:
        """Blocks pinned by running requests."""
        return self.pool.num_blocks - len(self.free)

    def cached_prefix(self, keys: Sequence[Hashable]) -> List[int]:
        """Blocks of the leading run of `keys` that are cached (the prefix hit), head first."""
        out = []
        for key in keys:
            blocks = self.cached.get(key)
            if blocks is None:
                break
            out.append(next(iter(blocks)))
        return out

    def pin(self, block: int) -> None:
        """One more running request reads `block` (a cached one leaves the free queue)."""
        if self.ref_cnt[block] == 0:
            del self.free[block]
        self.ref_cnt[block] += 1

    def allocate(self) -> Optional[int]:
        """A pinned empty block, evicting the cached key of the free queue's front; None when every block is pinned."""
        if not self.free:
            return None
        block, _ = self.free.popitem(last=False)
        key = self.key_of.pop(block, None)
        if key is not None:
            holders = self.cached[key]
            del holders[block]
            if not holders:
                del self.cached[key]
            self.num_evictions += 1
        self.ref_cnt[block] = 1
        return block

    def cache(self, key: Hashable, block: int) -> None:
        """`block`, pinned and now full, holds the prefix block `key` (a second block of a key cached already too)."""
        if block not in self.key_of:
            self.cached.setdefault(key, {})[block] = None
            self.key_of[block] = key

    def release(self, blocks: Sequence[int]) -> None:
        """A request lets go of `blocks` (its block table, head first), tail first: cached ones to the free
        queue's back, the others to its front (vLLM's prepend_n: the first of them ends at the front)."""
        for block, n in Counter(blocks).items():  # checked before anything changes
            if self.ref_cnt[block] < n:
                raise ValueError(f"block {block} is released but no request holds it")
        uncached = []
        for block in reversed(blocks):
            self.ref_cnt[block] -= 1
            if self.ref_cnt[block] == 0:
                if block in self.key_of:
                    self.free[block] = None
                else:
                    uncached.append(block)
        for block in reversed(uncached):
            self.free[block] = None
            self.free.move_to_end(block, last=False)

    def check(self, tables: Sequence[Sequence[int]]) -> None:
        """Raise AssertionError unless the reference counts are exactly the running requests' block tables."""
        expected = [0] * len(self.ref_cnt)
        for table in tables:
            for block in table:
                expected[block] += 1
        assert expected == self.ref_cnt, "reference counts disagree with the running requests' block tables"
        assert set(self.free) == {b for b, n in enumerate(self.ref_cnt) if n == 0}, "free queue != unpinned blocks"
        assert all(self.key_of[b] == k for k, held in self.cached.items() for b in held), "cached != key_of"
        assert len(self.key_of) == sum(map(len, self.cached.values())) and all(self.cached.values())
