"""Measured `TierCosts` on this machine: copy time per block for each move, and recompute time, side by side.

One run fills `num_blocks` device blocks with the course's tiny model, then times, interleaved
so that drifting machine load hits every case alike (median of `repeats`):

- copying every block one at a time device -> host -> disk -> host -> device (per-block `copy_`,
  the way the tiered engine moves them; on CUDA the host pool is pinned and each round syncs);
- the same two moves between device and host batched: all blocks gathered into one contiguous
  staging buffer, sent in one ``copy_`` and scattered (`copy_blocks_batched`, pinned staging on
  CUDA), the way engines move many blocks per transfer (``*_batched_s``);
- prefilling all ``num_blocks * tokens_per_block`` tokens from scratch: its share per block is
  the recompute time of one block's tokens in a long prefill;
- prefilling only the last block after the others are cached: the marginal cost of one block,
  fixed per-call costs included.

The copies are checked bit for bit after the round trip.
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

import torch

from kvsched_lab.kv.device import DeviceLike
from kvsched_lab.kv.model import TinyDecoder, TinyDecoderConfig
from kvsched_lab.kv.tiers.costs import TierCosts
from kvsched_lab.kv.tiers.stores import DiskBlockStore, HostBlockPool, copy_block, copy_blocks_batched, device_block


def _model(config: Optional[TinyDecoderConfig], num_tokens: int, device: DeviceLike) -> TinyDecoder:
    """The tiny model (or `config`'s), long enough for `num_tokens` positions."""
    cfg = config or TinyDecoderConfig()
    return TinyDecoder(dataclasses.replace(cfg, max_positions=max(cfg.max_positions, num_tokens)), device=device)


def measure_tier_costs(num_blocks: int = 64, tokens_per_block: int = 16, repeats: int = 5, *,
                       device: DeviceLike = None, model_config: Optional[TinyDecoderConfig] = None,
                       disk_folder: Union[str, Path, None] = None) -> Dict[str, Any]:
    """Seconds per block of each move and of recomputing, for the tiny model (see the module docstring).

    Returned keys: ``costs`` (a `TierCosts`), ``per_block_s`` (every figure by name),
    ``recompute_last_block_s``, ``round_trip_exact``, ``block_bytes``, ``num_blocks``,
    ``tokens_per_block``, ``device``, ``dtype``, ``host_pinned``, ``repeats``.
    """
    if num_blocks < 2 or repeats < 1:
        raise ValueError("need num_blocks >= 2 and repeats >= 1")
    num_tokens = num_blocks * tokens_per_block
    model = _model(model_config, num_tokens, device)
    cfg = model.config
    pool = model.make_pool(num_blocks, tokens_per_block)
    host = HostBlockPool(pool, num_blocks)
    disk = DiskBlockStore(pool, num_blocks, disk_folder)
    ids = torch.randint(0, cfg.vocab_size, (num_tokens,), generator=torch.Generator().manual_seed(0)).tolist()
    table = list(range(num_blocks))
    sync = torch.cuda.synchronize if pool.device.type == "cuda" else (lambda: None)
    try:
        model.prefill(ids, table, 0, pool)  # fills every block; a warm-up too
        original = pool.kv.clone()
        views = {"device": lambda i: device_block(pool, i), "host": host.block, "disk": disk.block}

        def copy_all(src: str, dst: str) -> Callable[[], None]:
            def run() -> None:
                for i in range(num_blocks):
                    copy_block(views[src](i), views[dst](i))
            return run

        dev_ids = torch.arange(num_blocks, device=pool.device)
        host_ids = torch.arange(num_blocks)
        staging_shape = (pool.num_layers, 2, num_blocks, tokens_per_block, pool.num_kv_heads, pool.head_dim)
        dev_staging = torch.empty(staging_shape, dtype=pool.dtype, device=pool.device)
        host_staging = torch.empty(staging_shape, dtype=pool.dtype, pin_memory=host.pinned)

        cases = {
            "device_to_host_batched_s": lambda: copy_blocks_batched(pool.kv, dev_ids, host.kv, host_ids,
                                                                    dev_staging, host_staging),
            "host_to_device_batched_s": lambda: copy_blocks_batched(host.kv, host_ids, pool.kv, dev_ids,
                                                                    host_staging, dev_staging),
            "device_to_host_s": copy_all("device", "host"), "host_to_disk_s": copy_all("host", "disk"),
            "disk_to_host_s": copy_all("disk", "host"), "host_to_device_s": copy_all("host", "device"),
            "recompute_s": lambda: model.prefill(ids, table, 0, pool),
            "recompute_last_block_s": lambda: model.prefill(ids, table, num_tokens - tokens_per_block, pool),
        }
        runs: Dict[str, List[float]] = {name: [] for name in cases}
        for round_ in range(repeats + 1):  # round 0 warms up every case
            for name, run in cases.items():
                sync()
                start = time.perf_counter()
                run()
                sync()
                if round_:
                    runs[name].append(time.perf_counter() - start)
        exact = bool(torch.equal(pool.kv, original))  # a round trip through host and disk, and recomputes
        per_block = {name: statistics.median(v) / (1 if name == "recompute_last_block_s" else num_blocks)
                     for name, v in runs.items()}
    finally:
        disk.close()
    costs = TierCosts(recompute_s=per_block["recompute_s"], device_to_host_s=per_block["device_to_host_s"],
                      host_to_device_s=per_block["host_to_device_s"], host_to_disk_s=per_block["host_to_disk_s"],
                      disk_to_host_s=per_block["disk_to_host_s"], block_bytes=pool.bytes_per_block)
    return {"costs": costs, "per_block_s": per_block, "recompute_last_block_s": per_block["recompute_last_block_s"],
            "round_trip_exact": exact, "block_bytes": pool.bytes_per_block, "num_blocks": num_blocks,
            "tokens_per_block": tokens_per_block, "device": str(pool.device),
            "dtype": str(pool.dtype).replace("torch.", ""), "host_pinned": host.pinned, "repeats": repeats}


def prefix_ttft(num_blocks: int = 64, tokens_per_block: int = 16, repeats: int = 3, *,
                device: DeviceLike = None, model_config: Optional[TinyDecoderConfig] = None,
                disk_folder: Union[str, Path, None] = None) -> Dict[str, Any]:
    """Time to prefill one prompt of `num_blocks` blocks by where its first ``num_blocks - 1`` blocks are.

    ``recompute``: nothing cached, the whole prompt is prefilled. ``device``: the prefix is in the
    pool, only the last block is computed. ``host`` and ``disk``: the prefix blocks are copied up
    into the pool one by one first (as the tiered engine does), then the last block is computed.
    Returns seconds per source (median of `repeats`, interleaved) and whether every source gave
    the same logits for the last block (``logits_identical``).
    """
    num_tokens = num_blocks * tokens_per_block
    model = _model(model_config, num_tokens, device)
    cfg = model.config
    pool = model.make_pool(2 * num_blocks, tokens_per_block)
    host, disk = HostBlockPool(pool, num_blocks), DiskBlockStore(pool, num_blocks, disk_folder)
    ids = torch.randint(0, cfg.vocab_size, (num_tokens,), generator=torch.Generator().manual_seed(1)).tolist()
    home, work = list(range(num_blocks)), list(range(num_blocks, 2 * num_blocks))  # cached copy, blocks filled anew
    sync = torch.cuda.synchronize if pool.device.type == "cuda" else (lambda: None)
    cached = num_tokens - tokens_per_block
    try:
        model.prefill(ids, home, 0, pool)
        for i in range(num_blocks):
            copy_block(device_block(pool, i), host.block(i))
            copy_block(host.block(i), disk.block(i))
        sync()

        def from_store(store: Any) -> torch.Tensor:
            for i in range(num_blocks - 1):
                copy_block(store.block(i), device_block(pool, work[i]))
            return model.prefill(ids, work, cached, pool)

        cases: Dict[str, Callable[[], torch.Tensor]] = {
            "recompute": lambda: model.prefill(ids, work, 0, pool)[-tokens_per_block:],
            "device": lambda: model.prefill(ids, home[:-1] + work[-1:], cached, pool),
            "host": lambda: from_store(host), "disk": lambda: from_store(disk),
        }
        runs: Dict[str, List[float]] = {name: [] for name in cases}
        last: Dict[str, torch.Tensor] = {}
        for round_ in range(repeats + 1):  # round 0 warms up
            for name, run in cases.items():
                sync()
                start = time.perf_counter()
                last[name] = run()
                sync()
                if round_:
                    runs[name].append(time.perf_counter() - start)
    finally:
        disk.close()
    same = all(torch.equal(last["device"], last[name]) for name in ("host", "disk"))
    diff = (last["device"].float() - last["recompute"].float()).abs().max().item()
    return {"seconds": {name: statistics.median(v) for name, v in runs.items()}, "num_blocks": num_blocks,
            "tokens_per_block": tokens_per_block, "logits_identical": same, "max_diff_vs_recompute": diff,
            "device": str(pool.device), "dtype": str(pool.dtype).replace("torch.", ""), "repeats": repeats}
