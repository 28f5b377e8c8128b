"""Real KV blocks: one preallocated tensor (`KVBlockPool`) and torch-free block-id bookkeeping (`BlockAllocator`).

Like nano-vllm, the whole KV cache is a single tensor allocated once (vLLM and SGLang allocate
one buffer per layer instead, with the same paging); a "block" is just an index into it. Allocation never touches the tensor, it only moves an id between a
free deque and a used set, so both directions are O(1) and the allocator can be tested
(and taught) without torch.
"""
from __future__ import annotations

from collections import deque
from typing import Deque, Optional, Set, Tuple

import torch

from kvsched_lab.kv.device import DeviceLike, default_dtype, try_gpu
from kvsched_lab.kv.model_configs import kv_bytes_per_token


class BlockAllocator:
    """Hands out block ids ``0..num_blocks-1``; O(1) `allocate` and `free`.

    A rejected call (double free, foreign id, exhausted pool) raises before changing anything.
    """

    def __init__(self, num_blocks: int) -> None:
        if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or num_blocks <= 0:
            raise ValueError(f"num_blocks must be an int > 0, got {num_blocks!r}")
        self.num_blocks = num_blocks
        # Freed ids go to the back, so a just-freed block is reused last (easier to debug stale reads).
        self.free_block_ids: Deque[int] = deque(range(num_blocks))
        self.used_block_ids: Set[int] = set()

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_ids)

    @property
    def num_used_blocks(self) -> int:
        return len(self.used_block_ids)

    def is_used(self, block_id: int) -> bool:
        return block_id in self.used_block_ids

    def allocate(self) -> int:
        """Take a free block id; RuntimeError when every block is in use."""
        if not self.free_block_ids:
            raise RuntimeError(
                f"KV block pool exhausted: all {self.num_blocks} blocks are in use; "
                "free finished requests' blocks, evict cached blocks, or build a larger pool"
            )
        block_id = self.free_block_ids.popleft()
        self.used_block_ids.add(block_id)
        return block_id

    def free(self, block_id: int) -> None:
        """Return `block_id` to the free list; ValueError for an id that is not currently allocated."""
        if isinstance(block_id, bool) or not isinstance(block_id, int) or not 0 <= block_id < self.num_blocks:
            raise ValueError(
                f"block id {block_id!r} does not belong to this pool (valid ids are 0..{self.num_blocks - 1}); "
                "pass an id returned by allocate()"
            )
        if block_id not in self.used_block_ids:
            raise ValueError(
                f"block {block_id} is already free (double free); free each allocated block exactly once"
            )
        self.used_block_ids.remove(block_id)
        self.free_block_ids.append(block_id)

    def __repr__(self) -> str:
        return f"BlockAllocator(num_blocks={self.num_blocks}, used={self.num_used_blocks})"


class KVBlockPool:
    """The KV cache of every layer in one tensor, plus its `BlockAllocator`.

    ``kv`` has shape ``(num_layers, 2, num_blocks, block_size, num_kv_heads, head_dim)``;
    index 0 of dim 1 holds keys, index 1 values. Token ``pos`` of a request lives at block
    ``block_table[pos // block_size]``, offset ``pos % block_size``.
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        *,
        device: DeviceLike = None,
        dtype: Optional[torch.dtype] = None,
    ) -> None:
        for name, value in (("block_size", block_size), ("num_layers", num_layers),
                            ("num_kv_heads", num_kv_heads), ("head_dim", head_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be an int > 0, got {value!r}")
        self.allocator = BlockAllocator(num_blocks)
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.num_layers = num_layers
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.device = try_gpu(device)
        self.dtype = dtype if dtype is not None else default_dtype(self.device)
        # Allocated once, like vLLM's KV cache; zeros so an unwritten slot reads as 0, not garbage.
        self.kv = torch.zeros(
            (num_layers, 2, num_blocks, block_size, num_kv_heads, head_dim), device=self.device, dtype=self.dtype
        )

    @property
    def bytes_per_token(self) -> int:
        return kv_bytes_per_token(self.num_layers, self.num_kv_heads, self.head_dim, self.kv.element_size())

    @property
    def bytes_per_block(self) -> int:
        return self.bytes_per_token * self.block_size

    @property
    def num_slots(self) -> int:
        """Token slots in the pool: num_blocks * block_size."""
        return self.num_blocks * self.block_size

    def layer(self, i: int) -> torch.Tensor:
        """View ``(2, num_blocks, block_size, num_kv_heads, head_dim)`` of layer `i` (no copy)."""
        return self.kv[i]

    def k_cache(self, i: int) -> torch.Tensor:
        """Keys of layer `i`, a view ``(num_blocks, block_size, num_kv_heads, head_dim)``."""
        return self.kv[i, 0]

    def v_cache(self, i: int) -> torch.Tensor:
        """Values of layer `i`, a view ``(num_blocks, block_size, num_kv_heads, head_dim)``."""
        return self.kv[i, 1]

    def slot_views(self, i: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of layer `i` as ``(num_slots, num_kv_heads, head_dim)`` views.

        Slot ``block * block_size + offset`` is token `offset` of block `block`.
        """
        k = self.kv[i, 0].view(self.num_slots, self.num_kv_heads, self.head_dim)
        v = self.kv[i, 1].view(self.num_slots, self.num_kv_heads, self.head_dim)
        return k, v

    def __repr__(self) -> str:
        return (
            f"KVBlockPool(num_blocks={self.num_blocks}, block_size={self.block_size}, layers={self.num_layers}, "
            f"kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, {self.dtype}, {self.device}, "
            f"{self.num_blocks * self.bytes_per_block / 2**20:.1f} MiB, used={self.allocator.num_used_blocks})"
        )
