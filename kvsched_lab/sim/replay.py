"""Trace replay: the normative protocol and metric every notebook, policy and test uses.

1. Requests in arrival order (stable sort by timestamp).
2. A request's prefix hits = the leading run of its block ids cached at arrival,
   before the request touches anything.
3. Then each of its blocks is touched, head to tail, as one cache entry (size: one block).
4. ``prefix_hit_rate = sum(prefix hits) / sum(len(hash_ids))`` (vLLM's prefix-cache hit rate).

Any scheduler with the chapter's API replays: the learner's class, the reference, a library
policy. Library policies may offer ``replay_requests(id_lists, bytes_)``, a hot loop that gives
the same hits as touching one block at a time (the policy tests prove it).
"""
from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Hashable, Optional, Sequence, Union

from kvsched_lab.i18n import _
from kvsched_lab.sim.policies.base import Policy, gc_paused, generic_replay_requests
from kvsched_lab.sim.traces import Request, sort_by_arrival

_CHUNK_REQUESTS = 500  # progress granularity; state carries across chunks, so results do not depend on it


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

    def to_dict(self) -> dict:
        return asdict(self)


def replay(
    requests: Sequence[Request],
    policy: Union[str, Any, Callable[[int], Any]],
    capacity_blocks: int,
    *,
    block_bytes: int = 1,
    progress: bool = False,
) -> ReplayResult:
    """Replay `requests` through a scheduler holding `capacity_blocks` blocks.

    `policy` is a library policy name, a scheduler class or factory called with
    ``capacity_bytes``, or a fresh scheduler instance (its capacity must match).
    """
    if isinstance(capacity_blocks, bool) or not isinstance(capacity_blocks, int) or capacity_blocks <= 0:
        raise ValueError(f"capacity_blocks must be a positive int, got {capacity_blocks!r}")
    ordered = sort_by_arrival(requests)
    id_lists = [r.hash_ids for r in ordered]
    capacity_bytes = capacity_blocks * block_bytes
    sim, name = _build(policy, capacity_bytes, id_lists)

    fast = getattr(sim, "replay_requests", None)
    run = fast if callable(fast) else (lambda lists, b: generic_replay_requests(sim, lists, b))
    chunks = range(0, len(id_lists), _CHUNK_REQUESTS)
    bar = _progress_bar(len(id_lists), name, progress)
    start = time.perf_counter()
    hits = 0
    with gc_paused():  # the same for every scheduler, so timings compare like with like
        for i in chunks:
            chunk = id_lists[i:i + _CHUNK_REQUESTS]
            hits += sum(run(chunk, block_bytes))
            if bar is not None:
                bar.update(len(chunk))
    wall = time.perf_counter() - start
    if bar is not None:
        bar.close()

    refs = sum(len(ids) for ids in id_lists)
    # Library policies count every touch that found its block cached; the bound's block hits
    # cap any prefix-hit rate, and block minus prefix hits are cached blocks behind a miss.
    block_hits = sim.hits if isinstance(sim, Policy) else None
    return ReplayResult(
        policy=name,
        capacity_blocks=capacity_blocks,
        requests=len(ordered),
        block_refs=refs,
        prefix_hits=hits,
        prefix_hit_rate=hits / refs if refs else 0.0,
        wall_seconds=wall,
        block_hits=block_hits,
        block_hit_rate=(block_hits / refs if refs else 0.0) if block_hits is not None else None,
    )


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
