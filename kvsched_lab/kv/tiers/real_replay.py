"""`tiered_real_kv_replay`: a Mooncake trace slice through device, host and disk tiers on real KV blocks.

The tiny model prefills every request, reading its cached prefix from whichever tier holds it;
every `check_every`-th request is also recomputed from scratch, which checks the logits and
times the recompute next to the cached prefill of the same prompt. The report says how many
blocks the engine really copied each way (it must equal what the hierarchy counted) and how
long the copies took.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Union

import torch

from kvsched_lab.kv.device import DeviceLike
from kvsched_lab.kv.engine import block_id_tokens
from kvsched_lab.kv.model import TinyDecoderConfig
from kvsched_lab.kv.real_kv import replay_model
from kvsched_lab.kv.tiers.costs import TierCosts, move_name
from kvsched_lab.kv.tiers.engine import TieredPrefixCacheEngine
from kvsched_lab.kv.tiers.placement import PlacementRule
from kvsched_lab.kv.tiers.replay import PolicySpec, build_hierarchy

# The largest cached-vs-recomputed logit difference accepted per dtype (as tests/test_model.py).
LOGIT_BOUNDS = {torch.float16: 2e-2, torch.float32: 1e-4}


def tiered_real_kv_replay(
    requests: Iterable[Any],
    policy: PolicySpec = "lru",
    capacity_blocks: int = 64,
    host_blocks: int = 0,
    disk_blocks: int = 0,
    *,
    rule: Union[str, PlacementRule] = "demote",
    lower_policy: PolicySpec = "lru",
    min_hits: int = 2,
    costs: Optional[TierCosts] = None,
    tokens_per_block: int = 16,
    max_requests: Optional[int] = None,
    device: DeviceLike = None,
    dtype: Optional[torch.dtype] = None,
    model_config: Optional[TinyDecoderConfig] = None,
    check_every: Optional[int] = 20,
    disk_folder: Union[str, Path, None] = None,
) -> Dict[str, Any]:
    """Serve `requests` (with ``.hash_ids``, in arrival order) on real blocks in the tiers; the report.

    Keys: the hierarchy's report (per-tier prefix hits, blocks and bytes moved in this pool's
    block size), ``real_copies`` and ``copy_seconds`` per move, ``copies_match_hierarchy``,
    ``prefill_tokens_total`` and ``prefill_tokens_computed``, ``prefill_seconds`` and
    ``load_seconds`` (all requests), ``checked`` (requests recomputed
    from scratch: their ``cached_seconds`` = load + prefill, ``recompute_seconds``), the largest
    logit difference and its bound, device, dtype, wall_seconds.
    """
    started = time.perf_counter()
    reqs, model, max_tokens = replay_model(requests, max_requests, tokens_per_block, model_config, device, dtype)
    hierarchy = build_hierarchy(policy, capacity_blocks, host_blocks, disk_blocks, rule=rule,
                                lower_policy=lower_policy, min_hits=min_hits, costs=costs)
    engine = TieredPrefixCacheEngine(model, hierarchy, tokens_per_block=tokens_per_block,
                                     max_tokens_per_request=max_tokens, disk_folder=disk_folder)
    prefill_s = load_s = cached_s = recompute_s = max_diff = 0.0
    checked = tokens_total = tokens_cached = 0
    sync = torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)
    try:
        for i, req in enumerate(reqs):
            tokens = [t for b in req.hash_ids for t in block_id_tokens(b, tokens_per_block, model.config.vocab_size)]
            result = engine.serve_tokens(tokens)
            prefill_s += result.prefill_seconds
            load_s += result.load_seconds
            tokens_total += result.num_prompt_tokens
            tokens_cached += result.num_cached_tokens
            if check_every and i % check_every == 0:
                sync()
                start = time.perf_counter()
                reference = model.forward(tokens)
                sync()
                recompute_s += time.perf_counter() - start
                cached_s += result.prefill_seconds + result.load_seconds
                diff = (result.logits.float() - reference[result.num_cached_tokens:].float()).abs().max().item()
                max_diff = max(max_diff, diff)
                checked += 1
                engine.check_consistency()
        engine.check_consistency()
        report = hierarchy.report(engine.pool.bytes_per_block)
        real = {move_name(s, d): n for (s, d), n in sorted(engine.copies.items())}
        bound = LOGIT_BOUNDS.get(model.dtype, LOGIT_BOUNDS[torch.float16])
        return {
            "capacity_blocks": capacity_blocks, "host_blocks": host_blocks, "disk_blocks": disk_blocks,
            "write_policy": hierarchy.rule.name, **report,
            "real_copies": real, "copies_match_hierarchy": real == report["blocks_moved"],
            "copy_seconds": {move_name(s, d): v for (s, d), v in sorted(engine.copy_seconds.items())},
            "prefill_tokens_total": tokens_total, "prefill_tokens_computed": tokens_total - tokens_cached,
            "prefill_seconds": prefill_s, "load_seconds": load_s,
            "checked": {"requests": checked, "cached_seconds": cached_s, "recompute_seconds": recompute_s},
            "max_abs_logit_diff": max_diff, "logit_bound": bound, "logits_ok": checked > 0 and max_diff <= bound,
            "block_bytes": engine.pool.bytes_per_block, "tokens_per_block": tokens_per_block,
            "device": str(model.device), "dtype": str(model.dtype).replace("torch.", ""),
            "host_pinned": bool(engine.host is not None and engine.host.pinned),
            "wall_seconds": time.perf_counter() - started,
        }
    finally:
        engine.close()
