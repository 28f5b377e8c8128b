"""`tier_replay`'s rules in the replay cache (`kvsched_lab.sim.replay_cache`, ``KVSCHED_REPLAY_CACHE``).

A tier replay is cached only when everything that decides it is plain data the key can hold: the
device and lower tiers' policies are library policies given by name (never a learner's class,
factory or instance), the placement rule is a name (never a `PlacementRule` object), and the
costs are a plain `TierCosts`. No tensor is involved (the real-block replay, real_replay.py, is
never cached).

The key is a SHA-256 of the bytes of every ``kvsched_lab/sim/**.py`` and ``kvsched_lab/kv/tiers/*.py``
(the hierarchy, the rules and every policy), every argument, and each request's fields in order.
A file read back is checked against everything the arguments and requests fix (tier names,
capacities, counts, rates, bytes per block moved, the modeled time saved, recomputed from its
hits) and recomputed when it disagrees.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence

from kvsched_lab.kv.tiers.costs import TierCosts, modeled_ttft_saved_s, move_name
from kvsched_lab.kv.tiers.placement import TIER_NAMES, make_rule
from kvsched_lab.sim import replay_cache

TIERS_FOLDER = Path(__file__).resolve().parent  # kvsched_lab/kv/tiers: its sources are part of the key
COUNTS = ("requests", "block_refs", "prefix_hits", "recomputed_with_copy")


def tier_key(requests: Sequence[Any], args: Dict[str, Any], costs: Any) -> Optional[str]:
    """The cache key of one tier replay, or None when it is not to be cached (see the module docstring)."""
    policies = (args["policy"], args["lower_policy"])
    if (not all(map(replay_cache.is_library_policy, policies)) or type(args["rule"]) is not str
            or replay_cache.cache_folder() is None):
        return None
    price = replay_cache.plain_fields(costs, TierCosts)
    if price is None or any(type(v) not in (int, float, str) for v in args.values()):
        return None  # a bool or a subclass could print like another value: never keyed
    h = hashlib.sha256()
    sources = replay_cache.source_digest() + replay_cache.source_digest(TIERS_FOLDER)
    head = {"format": replay_cache.FORMAT, "kind": "tier_replay", "sources": sources, **args, "costs": price}
    h.update(json.dumps(head, sort_keys=True).encode())
    return h.hexdigest() if replay_cache.hash_requests(h, requests) else None


def cached_tier_replay(key: str, requests: Sequence[Any], args: Dict[str, Any], costs: TierCosts,
                       compute: Callable[[], Dict[str, Any]]) -> Dict[str, Any]:
    """The stored report of `key` if it checks out, else ``compute()`` stored; ``from_cache`` says which."""
    expect = {"requests": len(requests), "block_refs": sum(len(r.hash_ids) for r in requests)}

    def load(raw: bytes) -> Optional[Dict[str, Any]]:
        data = replay_cache.read_result(raw, key)
        return {**data, "from_cache": True} if consistent(data, expect, args, costs) else None

    def dump(report: Dict[str, Any]) -> Dict[str, Any]:
        return {k: v for k, v in report.items() if k != "from_cache"}

    return replay_cache.cached(key, replay_cache.cache_folder(), load, compute, dump)


def _counts(value: Any, names: Sequence[str]) -> bool:
    """True when `value` maps exactly `names` to ints >= 0."""
    return (isinstance(value, dict) and list(value) == list(names)
            and all(type(n) is int and n >= 0 for n in value.values()))


def consistent(data: Any, expect: Dict[str, Any], args: Dict[str, Any], costs: TierCosts) -> bool:
    """True when a report read back agrees with everything the arguments and requests fix."""
    if not isinstance(data, dict) or data.get("requests") != expect["requests"] \
            or data.get("block_refs") != expect["block_refs"]:
        return False
    sizes = [n for n in (args["capacity_blocks"], args["host_blocks"], args["disk_blocks"]) if n]
    tiers = TIER_NAMES[:len(sizes)]
    hits, refs = data.get("prefix_hits_by_tier"), data["block_refs"]
    if (any(type(data.get(n)) is not int for n in COUNTS) or not _counts(hits, tiers)
            or not _counts(data.get("drops"), tiers) or not _counts(data.get("blocks_held"), tiers)
            or any(held > size for held, size in zip(data["blocks_held"].values(), sizes))
            or sum(hits.values()) != data["prefix_hits"] or not 0 <= data["prefix_hits"] <= refs):
        return False
    moved = data.get("blocks_moved")
    moves = {move_name(src, dst) for src in range(len(tiers)) for dst in range(len(tiers)) if src != dst}
    if (not isinstance(moved, dict) or not moves.issuperset(moved)
            or not all(type(n) is int and n > 0 for n in moved.values())):
        return False
    rate = {k: v / refs if refs else 0.0 for k, v in hits.items()}
    fixed = {
        "capacity_blocks": args["capacity_blocks"], "host_blocks": args["host_blocks"],
        "disk_blocks": args["disk_blocks"], "write_policy": make_rule(args["rule"], args["min_hits"]).name,
        "block_bytes": args["block_bytes"], "prefix_hit_rate": data["prefix_hits"] / refs if refs else 0.0,
        "prefix_hit_rate_by_tier": rate, "bytes_moved": {k: n * args["block_bytes"] for k, n in moved.items()},
        "costs": {n: getattr(costs, n) for n in ("recompute_s", "device_to_host_s", "host_to_device_s",
                                                  "host_to_disk_s", "disk_to_host_s")},
        "modeled_ttft_saved_s": modeled_ttft_saved_s(hits, costs),
    }
    keys = set(fixed) | set(COUNTS) | {"prefix_hits_by_tier", "drops", "blocks_held", "blocks_moved", "wall_seconds"}
    wall = data.get("wall_seconds")
    return (set(data) == keys and type(wall) in (int, float) and wall >= 0
            and all(data[k] == v for k, v in fixed.items()))
