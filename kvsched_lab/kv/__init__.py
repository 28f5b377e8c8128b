"""The KV machinery: real KV blocks in one tensor on the GPU (CPU where there is none), and engines that use them.

- device.py: `try_gpu` and `default_dtype` (GPU when there is one, else CPU; fp16 on CUDA).
- model_configs.py: KV bytes per token of real models, from their config.json (`MODEL_KV_SPECS`).
- block_pool.py: `KVBlockPool` (one tensor, ``[layers, 2, blocks, block_size, kv_heads, head_dim]``,
  with per-layer views) and `BlockAllocator` (torch-free free-list bookkeeping).
- model.py: `TinyDecoder`, a small transformer whose prefill reads and writes the pool through a
  block table.
- engine.py: `PrefixCacheEngine`, driven by any scheduler of ``kvsched_lab.sim``: the scheduler
  decides which blocks stay cached, the engine keeps the real blocks to match.
- real_kv.py: `real_kv_replay`, a Mooncake trace through that engine, logits checked.
- block_manager.py: `RefCountedBlockManager` (reference counts, the prefix cache and vLLM's
  free-block queue); concurrent.py: `ConcurrentEngine`, several requests prefilled (in chunks,
  under a per-step token budget) and decoded at once, the blocks of running requests pinned,
  preemption when a step runs out of blocks; concurrent_report.py: its `ConcurrentReport`;
  waiting_queue.py: its `WaitingQueue` (arrivals over
  time, vLLM's fcfs and priority orders and preemption victims); serving_run.py: `serve_on_real_kv`,
  notebook 10's service classes through that engine, each class's TTFT in engine steps.
- tiers/: KV blocks in device, host and disk tiers (notebook 09): `HostBlockPool` (pinned on CUDA)
  and `DiskBlockStore` (a memory-mapped file), placement rules, the torch-free `TierHierarchy`
  run by any policy per tier, `TieredPrefixCacheEngine` on real blocks, trace and real-KV replays,
  measured costs and the break-even model; its `__init__.py` says which file holds what.

Above the scheduling lab (it drives the lab's schedulers and policies), below the course.

The names below are imported when first asked for: the torch-free parts (``tiers.placement``,
``tiers.hierarchy``, ``block_manager``) are read by the course's checks and so by the grader,
whose every sandboxed run would otherwise pay for importing torch.
"""
from importlib import import_module
from typing import Any

# public name -> module of this folder that defines it
_LAZY = {
    "RefCountedBlockManager": "block_manager",
    "ConcurrentConfig": "concurrent", "ConcurrentEngine": "concurrent", "ConcurrentReport": "concurrent_report",
    "run_concurrent": "concurrent",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f"kvsched_lab.kv.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'kvsched_lab.kv' has no attribute {name!r}")
