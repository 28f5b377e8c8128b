"""Trace replay: the normative protocol and metric every notebook, policy and test uses.

1. Requests in arrival order (stable sort by timestamp).
2. A request's prefix hits = the leading run of its block ids cached at arrival,
   before the request touches anything.
3. Then each of its blocks is touched, head to tail, as one cache entry (size: one block).
4. ``prefix_hit_rate = sum(prefix hits) / sum(len(hash_ids))``: the share of block references
   found as a cached prefix (``metric="blocks"``, the default and the course's protocol).

``metric="vllm-tokens"`` measures what vLLM v1 reports instead (``PrefixCacheStats``: hit tokens
over prompt tokens, from ``KVCacheManager.get_computed_blocks``), from each request's
``input_length``: only a prompt's *full* blocks are cached (vLLM hashes full blocks only; the
partial last block is computed, never cached), and a hit is capped at ``input_length - 1``
tokens in whole blocks (vLLM recomputes the last prompt token for its logits). So
``prefix_hit_rate = sum(block_tokens * min(prefix hits, (input_length - 1) // block_tokens)) /
sum(input_length)``, each request replaying its first ``input_length // block_tokens`` ids. A
policy with ``hold_uncached`` (`vllm`) also gives each prompt with a partial last block that
block's pool slot while the request runs, as vLLM does: it may evict a cached block and is free
again when the request ends. Other policies' partial blocks take no room.

Any scheduler with the chapter's API replays: the learner's class, the reference, a library
policy. Library policies may offer ``replay_requests(id_lists, bytes_)``, a hot loop that gives
the same hits as touching one block at a time (the policy tests prove it).

With ``KVSCHED_REPLAY_CACHE=<folder>`` set, a library policy given by name is replayed once per
key and its result shared through that folder (`kvsched_lab.sim.replay_cache`); a learner's class
or instance is always replayed.
"""
from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Hashable, List, Optional, Sequence, Union

from kvsched_lab.i18n import _
from kvsched_lab.sim import replay_cache
from kvsched_lab.sim.policies.base import Policy, gc_paused, generic_replay_requests
from kvsched_lab.sim.traces import MOONCAKE_BLOCK_TOKENS, Request, sort_by_arrival

_CHUNK_REQUESTS = 500  # progress granularity; state carries across chunks, so results do not depend on it
METRICS = ("blocks", "vllm-tokens")  # what prefix_hit_rate counts; see the module docstring


@dataclass
class ReplayResult:
    policy: str
    capacity_blocks: int
    requests: int
    block_refs: int
    prefix_hits: int
    prefix_hit_rate: float
    wall_seconds: float
    block_hits: Optional[int] = None  # touches that found their block cached (library policies)
    block_hit_rate: Optional[float] = None
    metric: str = "blocks"  # "blocks": prefix hits / block refs; "vllm-tokens": hit tokens / prompt tokens
    prompt_tokens: Optional[int] = None  # vllm-tokens: sum of input_length
    prefix_hit_tokens: Optional[int] = None  # vllm-tokens: cached prompt tokens, vLLM's way
    hits_per_request: Optional[List[int]] = None  # per_request=True: each request's prefix hits, arrival order
    from_cache: bool = False  # read back from KVSCHED_REPLAY_CACHE: wall_seconds is the computing run's, not this one's

    def to_dict(self) -> dict:
        return asdict(self)


def replay(
    requests: Sequence[Request],
    policy: Union[str, Any, Callable[[int], Any]],
    capacity_blocks: int,
    *,
    block_bytes: int = 1,
    progress: bool = False,
    metric: str = "blocks",
    block_tokens: int = MOONCAKE_BLOCK_TOKENS,
    per_request: bool = False,
) -> ReplayResult:
    """Replay `requests` through a scheduler holding `capacity_blocks` blocks.

    `policy` is a library policy name, a scheduler class or factory called with
    ``capacity_bytes``, or a fresh scheduler instance (its capacity must match). `metric` is
    ``"blocks"`` (the protocol) or ``"vllm-tokens"`` (vLLM's own count, `block_tokens` a block).
    `per_request` keeps each request's prefix hits (``hits_per_request``), so that a later
    comparison of two policies, request by request, need not replay them again.
    """
    if isinstance(capacity_blocks, bool) or not isinstance(capacity_blocks, int) or capacity_blocks <= 0:
        raise ValueError(f"capacity_blocks must be a positive int, got {capacity_blocks!r}")
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    if isinstance(block_tokens, bool) or not isinstance(block_tokens, int) or block_tokens <= 0:
        raise ValueError(f"block_tokens must be a positive int, got {block_tokens!r}")
    ordered = sort_by_arrival(requests)
    tokens = metric == "vllm-tokens"
    # vLLM caches a prompt's full blocks only: the request replays those.
    id_lists = [r.hash_ids[:r.input_length // block_tokens] if tokens else r.hash_ids for r in ordered]

    def compute() -> ReplayResult:
        return _replay_ordered(ordered, id_lists, policy, capacity_blocks, block_bytes=block_bytes,
                               progress=progress, metric=metric, block_tokens=block_tokens, per_request=per_request)

    folder = replay_cache.cache_folder() if replay_cache.is_library_policy(policy) else None
    key = folder and replay_cache.replay_key(policy, capacity_blocks, ordered, block_bytes=block_bytes, metric=metric,
                                             block_tokens=block_tokens, per_request=per_request,
                                             sources=replay_cache.source_digest())
    if not key:
        return compute()
    expect = {"policy": policy, "capacity_blocks": capacity_blocks, "requests": len(ordered), "metric": metric,
              "block_refs": sum(len(ids) for ids in id_lists),
              "prompt_tokens": sum(r.input_length for r in ordered) if tokens else None}
    return replay_cache.cached_replay(key, folder, expect, ReplayResult, compute, per_request=per_request,
                                      block_tokens=block_tokens)


def _replay_ordered(ordered: Sequence[Request], id_lists: Sequence[Sequence[Hashable]], policy: Any,
                    capacity_blocks: int, *, block_bytes: int, progress: bool, metric: str, block_tokens: int,
                    per_request: bool) -> ReplayResult:
    """`replay` proper, on requests already in arrival order and the block ids each one replays."""
    tokens = metric == "vllm-tokens"
    capacity_bytes = capacity_blocks * block_bytes
    sim, name = _build(policy, capacity_bytes, id_lists)

    fast = getattr(sim, "replay_requests", None)
    run = fast if callable(fast) else (lambda lists, b: generic_replay_requests(sim, lists, b))
    # vLLM's partial last block holds a pool slot while its request runs (see the docstring).
    tails = ([r.input_length % block_tokens != 0 for r in ordered]
             if tokens and callable(fast) and callable(getattr(sim, "hold_uncached", None)) else None)
    chunks = range(0, len(id_lists), _CHUNK_REQUESTS)
    bar = _progress_bar(len(id_lists), name, progress)
    start = time.perf_counter()
    hits = hit_tokens = 0
    kept: Optional[List[int]] = [] if per_request else None
    with gc_paused():  # the same for every scheduler, so timings compare like with like
        for i in chunks:
            chunk = id_lists[i:i + _CHUNK_REQUESTS]
            if tails is None:
                chunk_hits = run(chunk, block_bytes)
            else:
                chunk_hits = fast(chunk, block_bytes, uncached_tails=tails[i:i + _CHUNK_REQUESTS])
            hits += sum(chunk_hits)
            if kept is not None:
                kept.extend(chunk_hits)
            if tokens:  # at most input_length - 1 tokens, in whole blocks
                hit_tokens += block_tokens * sum(min(h, (r.input_length - 1) // block_tokens)
                                                 for h, r in zip(chunk_hits, ordered[i:i + _CHUNK_REQUESTS]))
            if bar is not None:
                bar.update(len(chunk))
    wall = time.perf_counter() - start
    if bar is not None:
        bar.close()

    refs = sum(len(ids) for ids in id_lists)
    # Library policies count every touch that found its block cached; the bound's block hits
    # cap any prefix-hit rate, and block minus prefix hits are cached blocks behind a miss.
    block_hits = sim.hits if isinstance(sim, Policy) else None
    prompt_tokens = sum(r.input_length for r in ordered) if tokens else None
    if tokens:
        rate = hit_tokens / prompt_tokens if prompt_tokens else 0.0
    else:
        rate = hits / refs if refs else 0.0
    return ReplayResult(
        policy=name,
        capacity_blocks=capacity_blocks,
        requests=len(ordered),
        block_refs=refs,
        prefix_hits=hits,
        prefix_hit_rate=rate,
        wall_seconds=wall,
        block_hits=block_hits,
        block_hit_rate=(block_hits / refs if refs else 0.0) if block_hits is not None else None,
        metric=metric,
        prompt_tokens=prompt_tokens,
        prefix_hit_tokens=hit_tokens if tokens else None,
        hits_per_request=kept,
    )


def metric_meaning(metric: str) -> str:
    """One line saying what `prefix_hit_rate` counts under `metric` (the replay's output prints it)."""
    if metric == "vllm-tokens":
        return _("prefix_hit_rate = cached prompt tokens / prompt tokens, as vLLM counts them: only a prompt's "
                 "full blocks are cached, and a hit covers at most input_length - 1 tokens")
    if metric == "blocks":
        return _("prefix_hit_rate = blocks found as a cached prefix / block references (the course's replay "
                 "protocol; vLLM counts tokens instead: --metric vllm-tokens)")
    raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")


def _build(policy: Any, capacity_bytes: int, id_lists: Sequence[Sequence[Hashable]]):
    if isinstance(policy, str):
        from kvsched_lab.sim.policies import POLICIES, make_policy

        # Only an offline policy reads the future; the others need not pay for a copy of the trace.
        needs_future = getattr(POLICIES.get(policy), "needs_future", False)
        future = [key for ids in id_lists for key in ids] if needs_future else None
        return make_policy(policy, capacity_bytes, future=future), policy
    if isinstance(policy, type) or (callable(policy) and not hasattr(policy, "touch")):
        sim = policy(capacity_bytes)
        return sim, getattr(policy, "__name__", type(sim).__name__)
    if getattr(policy, "capacity_bytes", capacity_bytes) != capacity_bytes:
        raise ValueError(
            f"scheduler has capacity_bytes={policy.capacity_bytes}, but the replay asks for "
            f"{capacity_bytes} (capacity_blocks x block_bytes)"
        )
    if policy.entries:
        raise ValueError("pass a fresh scheduler: this one already holds entries")
    return policy, type(policy).__name__


def _progress_bar(total: int, name: str, enabled: bool):
    if not enabled or total < 2 * _CHUNK_REQUESTS:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=_("replay {name}", name=name), unit="req", file=sys.stderr, leave=False)
