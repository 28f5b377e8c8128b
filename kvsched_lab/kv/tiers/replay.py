"""`tier_replay`: a Mooncake trace through device, host and disk tiers; hits per tier, blocks moved, time saved.

The trace-level twin of the tiered engine (engine.py): the same `TierHierarchy` decides, but no
tensor exists, so it runs a whole trace in seconds. Bytes moved are counted in a real model's
block size (default Llama-3-8B, 512-token Mooncake blocks) and the modeled time to first token
saved uses `TierCosts` (default: breakeven.model_costs for that model on an H100 over PCIe 4.0).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional, Sequence, Union

from kvsched_lab.kv.tiers.costs import TierCosts, modeled_ttft_saved_s
from kvsched_lab.kv.tiers.hierarchy import TierHierarchy
from kvsched_lab.kv.tiers.placement import PlacementRule, make_rule
from kvsched_lab.kv.tiers.replay_cache import cached_tier_replay, tier_key
from kvsched_lab.sim.events import EventLog
from kvsched_lab.sim.traces import sort_by_arrival

PolicySpec = Union[str, Callable[[int], Any]]  # a library policy name, or a factory called with capacity_bytes


def build_policy(spec: PolicySpec, capacity_blocks: int) -> Any:
    """A fresh scheduler of `capacity_blocks` blocks (size 1 each) from a name or a factory."""
    if isinstance(capacity_blocks, bool) or not isinstance(capacity_blocks, int) or capacity_blocks <= 0:
        raise ValueError(f"a tier's capacity must be a positive number of blocks, got {capacity_blocks!r}")
    if isinstance(spec, str):
        from kvsched_lab.sim.policies import POLICIES, make_policy

        if getattr(POLICIES.get(spec), "needs_future", False):
            raise ValueError(f"{spec!r} needs the future; a tier hierarchy runs online policies only")
        return make_policy(spec, capacity_blocks)
    if callable(spec):
        return spec(capacity_blocks)
    raise TypeError(f"a tier policy is a policy name or a factory of capacity_bytes, got {spec!r}")


def build_hierarchy(policy: PolicySpec, capacity_blocks: int, host_blocks: int = 0, disk_blocks: int = 0, *,
                    rule: Union[str, PlacementRule] = "demote", lower_policy: PolicySpec = "lru",
                    min_hits: int = 2, costs: Optional[TierCosts] = None, record_steps: bool = True) -> TierHierarchy:
    """Device tier run by `policy`; host and disk tiers (when their sizes are > 0) by `lower_policy`."""
    for name, n in (("host_blocks", host_blocks), ("disk_blocks", disk_blocks)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"{name} must be an int >= 0, got {n!r}")
    if disk_blocks and not host_blocks:
        raise ValueError("a disk tier needs a host tier above it (blocks reach the disk through host memory)")
    rule = make_rule(rule, min_hits) if isinstance(rule, str) else rule
    policies = [build_policy(policy, capacity_blocks)]
    policies += [build_policy(lower_policy, n) for n in (host_blocks, disk_blocks) if n]
    return TierHierarchy(policies, rule, costs=costs, record_steps=record_steps)


def tier_replay(requests: Sequence[Any], policy: PolicySpec = "lru", capacity_blocks: int = 2000,
                host_blocks: int = 0, disk_blocks: int = 0, *, rule: Union[str, PlacementRule] = "demote",
                lower_policy: PolicySpec = "lru", min_hits: int = 2, costs: Optional[TierCosts] = None,
                block_bytes: Optional[int] = None) -> Dict[str, Any]:
    """Replay `requests` (objects with ``.hash_ids`` and ``.timestamp``) through the tiers; the report.

    Returned keys: the hierarchy's report (hierarchy.TierHierarchy.report), ``capacity_blocks``,
    ``host_blocks``, ``disk_blocks``, ``write_policy``, ``block_bytes``, ``costs`` (seconds per
    block), ``modeled_ttft_saved_s`` (per tier and total), ``wall_seconds``, ``from_cache``.

    With ``KVSCHED_REPLAY_CACHE`` set, a replay of library policies and a named rule is computed once
    per key and read back after (replay_cache.py); ``from_cache`` then says so, and ``wall_seconds``
    is the computing run's.
    """
    if costs is None:
        from kvsched_lab.kv.tiers.breakeven import model_costs

        costs = model_costs()
    block_bytes = costs.block_bytes if block_bytes is None else block_bytes
    args = {"policy": policy, "capacity_blocks": capacity_blocks, "host_blocks": host_blocks,
            "disk_blocks": disk_blocks, "rule": rule, "lower_policy": lower_policy, "min_hits": min_hits,
            "block_bytes": block_bytes}
    ordered = sort_by_arrival(requests)
    key = tier_key(ordered, args, costs)
    if key is None:
        return _tier_replay(ordered, args, costs)
    return cached_tier_replay(key, ordered, args, costs, lambda: _tier_replay(ordered, args, costs))


def _tier_replay(ordered: Sequence[Any], args: Dict[str, Any], costs: TierCosts) -> Dict[str, Any]:
    """`tier_replay` of requests already in arrival order, computed."""
    capacity_blocks, host_blocks, disk_blocks, block_bytes = (
        args[n] for n in ("capacity_blocks", "host_blocks", "disk_blocks", "block_bytes"))
    hierarchy = build_hierarchy(args["policy"], capacity_blocks, host_blocks, disk_blocks, rule=args["rule"],
                                lower_policy=args["lower_policy"], min_hits=args["min_hits"], costs=costs,
                                record_steps=False)
    # A chapter-style log of strings ("evict:42") names keys as strings: then every tier gets string keys.
    as_text = not all(isinstance(p.log, EventLog) for p in hierarchy.policies)
    started = time.perf_counter()
    for request in ordered:
        hierarchy.serve([str(k) for k in request.hash_ids] if as_text else request.hash_ids)
    report = hierarchy.report(block_bytes)
    return {
        "capacity_blocks": capacity_blocks, "host_blocks": host_blocks, "disk_blocks": disk_blocks,
        "write_policy": hierarchy.rule.name, **report, "block_bytes": block_bytes,
        "costs": {"recompute_s": costs.recompute_s, "device_to_host_s": costs.device_to_host_s,
                  "host_to_device_s": costs.host_to_device_s, "host_to_disk_s": costs.host_to_disk_s,
                  "disk_to_host_s": costs.disk_to_host_s},
        "modeled_ttft_saved_s": modeled_ttft_saved_s(report["prefix_hits_by_tier"], costs),
        "wall_seconds": time.perf_counter() - started, "from_cache": False,
    }
