"""`real_kv_replay`: replay a Mooncake trace through a scheduler with real KV blocks and a real model.

The trace-only replay counts hits; this one also computes them: every request is prefilled
by the tiny model, reading its cached prefix out of a `KVBlockPool`, and a sample of requests
is checked against a full recompute, so a cache bug shows up as wrong logits, not just a
wrong number. Each Mooncake block id becomes `tokens_per_block` tokens (not 512) to keep it
fast on a CPU; hits in blocks are unaffected.
"""
from __future__ import annotations

import dataclasses
import sys
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

import torch

from kvsched_lab.kv.device import DeviceLike
from kvsched_lab.kv.engine import PrefixCacheEngine, block_id_tokens, chain_block_keys
from kvsched_lab.i18n import _
from kvsched_lab.kv.model import TinyDecoder, TinyDecoderConfig


def replay_model(requests: Iterable[Any], max_requests: Optional[int], tokens_per_block: int,
                 model_config: Optional[TinyDecoderConfig], device: DeviceLike,
                 dtype: Optional[torch.dtype]) -> Tuple[List[Any], TinyDecoder, int]:
    """The requests to replay, a model whose positions fit the longest, and its length in tokens."""
    reqs = list(requests)[:max_requests]
    if not reqs:
        raise ValueError("no requests to replay")
    max_tokens = max(len(r.hash_ids) for r in reqs) * tokens_per_block
    cfg = model_config or TinyDecoderConfig()
    cfg = dataclasses.replace(cfg, max_positions=max(cfg.max_positions, max_tokens))
    return reqs, TinyDecoder(cfg, device=device, dtype=dtype), max_tokens


def real_kv_replay(
    requests: Iterable[Any],
    scheduler: Union[str, Any],
    *,
    capacity_blocks: Optional[int] = None,
    tokens_per_block: int = 16,
    max_requests: Optional[int] = None,
    device: DeviceLike = None,
    dtype: Optional[torch.dtype] = None,
    model_config: Optional[TinyDecoderConfig] = None,
    block_bytes: Optional[int] = None,
    check_every: Optional[int] = 20,
    progress: bool = False,
) -> Dict[str, Any]:
    """Serve `requests` (objects with ``.hash_ids``, already in timestamp order) and report the cost.

    `scheduler` is a scheduler instance, whose capacity is ``scheduler.capacity_bytes //
    block_bytes`` blocks, or a library policy name, built here with ``capacity_blocks`` blocks
    (and, for ``belady``, the future in the engine's block keys). `block_bytes` (what each
    touch reports) defaults to the tiny model's real block bytes.
    Every `check_every`-th request (0, k, 2k, ...) is compared with ``model.forward`` and the
    engine's pool is checked against the scheduler's entries; ``None`` or 0 turns checks off.

    Returned keys: requests, prefill_tokens_total, prefill_tokens_computed, hit_tokens
    (= total - computed), token_hit_rate, protocol_hit_blocks and block_refs (the replay
    protocol's counts, `kvsched_lab.sim.replay`; they differ from hit_tokens only when a whole prompt was cached, whose
    last block is recomputed to get logits), prefix_hit_rate, capacity_blocks, pool_blocks,
    blocks_in_use_max, requests_checked, max_abs_logit_diff, device, dtype, wall_seconds.
    """
    started = time.perf_counter()
    reqs, model, max_tokens = replay_model(requests, max_requests, tokens_per_block, model_config, device, dtype)
    token_lists = [[t for b in req.hash_ids for t in block_id_tokens(b, tokens_per_block, model.config.vocab_size)]
                   for req in reqs]
    if isinstance(scheduler, str):
        if capacity_blocks is None:
            raise ValueError("a policy given by name needs capacity_blocks")
        block_bytes = block_bytes or model.kv_bytes_per_token * tokens_per_block
        scheduler = _make_policy(scheduler, capacity_blocks * block_bytes, token_lists, tokens_per_block)
    engine = PrefixCacheEngine(model, scheduler, tokens_per_block=tokens_per_block,
                               max_tokens_per_request=max_tokens, block_bytes=block_bytes,
                               capacity_blocks=capacity_blocks)

    protocol_hit_blocks = block_refs = requests_checked = 0
    max_abs_logit_diff = 0.0
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(reqs), desc=_("real-KV replay"), unit="req", file=sys.stderr, leave=False)
    for i, (req, tokens) in enumerate(zip(reqs, token_lists)):
        if bar is not None:
            bar.update(1)
        result = engine.serve_tokens(tokens)
        protocol_hit_blocks += result.num_hit_blocks
        block_refs += len(req.hash_ids)
        if check_every and i % check_every == 0:
            reference = model.forward(tokens)[result.num_cached_tokens:]
            diff = (result.logits.float() - reference.float()).abs().max().item()
            max_abs_logit_diff = max(max_abs_logit_diff, diff)
            requests_checked += 1
            engine.check_consistency()
    engine.check_consistency()
    if bar is not None:
        bar.close()

    return {
        "requests": len(reqs),
        "prefill_tokens_total": engine.prefill_tokens_total,
        "prefill_tokens_computed": engine.prefill_tokens_computed,
        "hit_tokens": engine.hit_tokens,
        "token_hit_rate": engine.hit_tokens / engine.prefill_tokens_total,
        "protocol_hit_blocks": protocol_hit_blocks,
        "block_refs": block_refs,
        "prefix_hit_rate": protocol_hit_blocks / block_refs,
        "capacity_blocks": engine.capacity_blocks,
        "pool_blocks": engine.pool.num_blocks,
        "blocks_in_use_max": engine.blocks_in_use_max,
        "requests_checked": requests_checked,
        "max_abs_logit_diff": max_abs_logit_diff,
        "device": str(model.device),
        "dtype": str(model.dtype).replace("torch.", ""),
        "wall_seconds": time.perf_counter() - started,
    }


def _make_policy(name: str, capacity_bytes: int, token_lists: List[List[int]], tokens_per_block: int) -> Any:
    from kvsched_lab.sim.policies import POLICIES, make_policy

    future = None
    if getattr(POLICIES.get(name), "needs_future", False):  # the engine's keys, in touch order
        future = [key for tokens in token_lists for key in chain_block_keys(tokens, tokens_per_block)]
    return make_policy(name, capacity_bytes, future=future)
