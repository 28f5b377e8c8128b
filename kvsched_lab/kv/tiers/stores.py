"""Where KV blocks live below the GPU: `HostBlockPool` (host memory) and `DiskBlockStore` (a file on disk).

Both hold real tensors and a `BlockAllocator` with a capacity in blocks, and hand out one
block at a time as a view ``(num_layers, 2, block_size, num_kv_heads, head_dim)``, the same
shape as ``pool.kv[:, :, block_id]`` of the device's `KVBlockPool`, so moving a block is one
``copy_`` between views (`copy_block`).

- The host pool has the device pool's layout, ``(layers, 2, blocks, block_size, kv_heads,
  head_dim)``. On CUDA it is pinned (page-locked): the GPU's DMA engine reads and writes pinned
  memory directly, and only then can a copy run asynchronously (``non_blocking=True``);
  pageable memory is first staged through a pinned buffer by the driver.
- The disk store is one memory-mapped file under a cache folder, block-major
  (``(blocks, layers, 2, block_size, kv_heads, head_dim)``), so each block is one contiguous
  run of bytes in the file. Writes land in the operating system's page cache and reach the
  disk when it flushes them (`DiskBlockStore.flush` forces it); a read of a block still in the
  page cache is a memory copy, so a warm "disk" is much faster than the device itself.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional, Tuple, Union

import torch

from kvsched_lab.kv.block_pool import BlockAllocator, KVBlockPool


def block_shape(pool: KVBlockPool) -> Tuple[int, ...]:
    """Shape of one block of `pool`: (num_layers, 2, block_size, num_kv_heads, head_dim)."""
    return (pool.num_layers, 2, pool.block_size, pool.num_kv_heads, pool.head_dim)


def device_block(pool: KVBlockPool, block_id: int) -> torch.Tensor:
    """Block `block_id` of the device pool, a view (no copy)."""
    return pool.kv[:, :, block_id]


def copy_block(src: torch.Tensor, dst: torch.Tensor) -> None:
    """Copy one block's K/V from view `src` to view `dst` (a real copy; async only from/to pinned memory)."""
    dst.copy_(src, non_blocking=src.is_pinned() or dst.is_pinned())


def copy_blocks_batched(src_kv: torch.Tensor, src_ids: torch.Tensor, dst_kv: torch.Tensor, dst_ids: torch.Tensor,
                        src_staging: torch.Tensor, dst_staging: torch.Tensor) -> None:
    """Copy blocks `src_ids` of pool `src_kv` to blocks `dst_ids` of pool `dst_kv` in ONE transfer.

    Both pools are ``(layers, 2, blocks, block_size, kv_heads, head_dim)``; each staging buffer is
    ``(layers, 2, len(ids), block_size, kv_heads, head_dim)``, contiguous, on its pool's side
    (pinned host memory on CUDA). The blocks are gathered into `src_staging` (one indexing op),
    sent in one ``copy_`` (asynchronous between CUDA and pinned memory; the caller syncs), and
    scattered into `dst_kv` (one ``index_put_``), as engines batch many blocks into one transfer.
    (``index_select(..., out=)`` and ``index_copy_`` along the block dimension were 2-9x slower on CPU.)
    """
    src_staging.copy_(src_kv[:, :, src_ids])
    dst_staging.copy_(src_staging, non_blocking=src_staging.is_pinned() or dst_staging.is_pinned())
    if src_staging.is_cuda and not dst_staging.is_cuda:
        torch.cuda.current_stream(src_staging.device).synchronize()  # the host may read it only once it landed
    dst_kv[:, :, dst_ids] = dst_staging


class HostBlockPool:
    """A second KV pool in host memory with the device pool's layout and dtype; pinned when the device is CUDA."""

    def __init__(self, like: KVBlockPool, num_blocks: int, *, pin: Optional[bool] = None) -> None:
        self.allocator = BlockAllocator(num_blocks)  # validates num_blocks
        self.num_blocks = num_blocks
        self.pinned = like.device.type == "cuda" if pin is None else bool(pin)
        if self.pinned and not torch.cuda.is_available():
            raise ValueError("pinned host memory needs CUDA; pass pin=False on a machine without a GPU")
        shape = (like.num_layers, 2, num_blocks, like.block_size, like.num_kv_heads, like.head_dim)
        self.kv = torch.zeros(shape, dtype=like.dtype, device="cpu", pin_memory=self.pinned)
        self.bytes_per_block = like.bytes_per_block

    def block(self, block_id: int) -> torch.Tensor:
        return self.kv[:, :, block_id]

    def __repr__(self) -> str:
        return (f"HostBlockPool(num_blocks={self.num_blocks}, pinned={self.pinned}, "
                f"{self.num_blocks * self.bytes_per_block / 2**20:.1f} MiB, used={self.allocator.num_used_blocks})")


class DiskBlockStore:
    """Blocks in one memory-mapped file ``<folder>/kv_blocks.<dtype>.bin``, one contiguous run per block."""

    def __init__(self, like: KVBlockPool, num_blocks: int, folder: Union[str, Path, None] = None) -> None:
        self.allocator = BlockAllocator(num_blocks)
        self.num_blocks = num_blocks
        self._tmp = tempfile.TemporaryDirectory(prefix="kvsched-disk-") if folder is None else None
        self.folder = Path(self._tmp.name if self._tmp else folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        dtype_name = str(like.dtype).replace("torch.", "")
        self.path = self.folder / f"kv_blocks.{dtype_name}.bin"
        shape = (num_blocks, *block_shape(like))
        numel = 1
        for n in shape:
            numel *= n
        with open(self.path, "wb") as f:  # a sparse file of the right size: no bytes written yet
            f.truncate(numel * like.kv.element_size())
        # shared=True maps the file (MAP_SHARED): writes to the tensor are writes to the file.
        self.kv = torch.from_file(str(self.path), shared=True, size=numel, dtype=like.dtype).view(shape)
        self.bytes_per_block = like.bytes_per_block

    def block(self, block_id: int) -> torch.Tensor:
        return self.kv[block_id]

    def flush(self) -> None:
        """Ask the operating system to write the file's dirty pages to the disk now."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Drop the mapping and delete a temporary folder (a folder you gave is kept)."""
        self.kv = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __repr__(self) -> str:
        return (f"DiskBlockStore(num_blocks={self.num_blocks}, path={str(self.path)!r}, "
                f"{self.num_blocks * self.bytes_per_block / 2**20:.1f} MiB, used={self.allocator.num_used_blocks})")
