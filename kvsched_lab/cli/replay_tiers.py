"""`kvsched replay` with host and disk tiers: ``--host-blocks``, ``--disk-blocks``, ``--write-policy``.

    kvsched replay --policy lru --capacity-blocks 2000 --host-blocks 8000 [--disk-blocks N]
                   [--write-policy demote|write_through|write_back|write_through_selective] --json

reports hits per tier, blocks and bytes moved each way and the modeled time to first token
saved (kvsched_lab/kv/tiers/replay.py); with ``--real-kv`` the same runs on real KV blocks of the
tiny model, with the logits checked against a full recompute (kv/tiers/real_replay.py).
"""
from __future__ import annotations

import argparse
from typing import Any, Dict, Sequence

from kvsched_lab.kv.tiers.breakeven import GPUS, LINKS, MODEL_COMPUTE
from kvsched_lab.kv.tiers.placement import WRITE_POLICIES


def add_tier_arguments(parser: argparse.ArgumentParser) -> None:
    """The tier options of `kvsched replay`."""
    parser.add_argument("--host-blocks", type=int, default=0, help="host-memory tier capacity in blocks (0: none)")
    parser.add_argument("--disk-blocks", type=int, default=0, help="disk tier capacity in blocks (needs --host-blocks)")
    parser.add_argument("--write-policy", default=None, choices=sorted(WRITE_POLICIES),
                        help="when blocks go down a tier: demote (exclusive, on eviction; the default with tiers), "
                             "write_through, write_back, write_through_selective (SGLang's names)")
    parser.add_argument("--min-hits", type=int, default=2,
                        help="write_through_selective: copy a block down once this many requests used it")
    parser.add_argument("--lower-policy", default="lru", help="policy of the host and disk tiers")
    parser.add_argument("--model", default="Llama-3-8B", choices=sorted(MODEL_COMPUTE),
                        help="trace replay: the model whose 512-token blocks the bytes and modeled times count")
    parser.add_argument("--gpu", default="H100 SXM", choices=sorted(GPUS), help="trace replay: GPU of the modeled recompute")
    parser.add_argument("--host-link", default="PCIe 4.0 x16", choices=sorted(LINKS),
                        help="trace replay: device-host link of the modeled copies")


def wants_tiers(args: argparse.Namespace) -> bool:
    return bool(args.host_blocks or args.disk_blocks or args.write_policy)


def check_tier_arguments(args: argparse.Namespace) -> None:
    """Fail before any work on sizes that cannot be right."""
    for name in ("host_blocks", "disk_blocks"):
        if getattr(args, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    if args.disk_blocks and not args.host_blocks:
        raise ValueError("--disk-blocks needs --host-blocks: blocks reach the disk through host memory")
    if args.write_policy not in (None, "demote") and not args.host_blocks:
        raise ValueError(f"--write-policy {args.write_policy} writes blocks to the host: give --host-blocks")
    if args.min_hits < 1:
        raise ValueError(f"--min-hits must be >= 1, got {args.min_hits}")
    if args.concurrent:
        raise ValueError("--concurrent has no host or disk tier; drop --host-blocks/--disk-blocks/--write-policy")


def run_tier_replay(args: argparse.Namespace, requests: Sequence[Any]) -> Dict[str, Any]:
    """The report of `kvsched replay` with tiers (trace-level, or on real KV blocks with --real-kv)."""
    check_tier_arguments(args)
    rule = args.write_policy or "demote"
    common = dict(policy=args.policy, capacity_blocks=args.capacity_blocks, host_blocks=args.host_blocks,
                  disk_blocks=args.disk_blocks, rule=rule, lower_policy=args.lower_policy, min_hits=args.min_hits)
    if args.real_kv:
        from kvsched_lab.kv.tiers.real_replay import tiered_real_kv_replay

        out: Dict[str, Any] = tiered_real_kv_replay(requests, tokens_per_block=args.tokens_per_block,
                                                    device=args.device, **common)
    else:
        from kvsched_lab.kv.tiers.breakeven import model_costs
        from kvsched_lab.kv.tiers.replay import tier_replay

        costs = model_costs(args.model, args.gpu, args.host_link)
        out = tier_replay(requests, costs=costs, **common)
        out["cost_model"] = {"model": args.model, "gpu": args.gpu, "host_link": args.host_link,
                             "block_tokens": 512}
    return {"policy": args.policy, "trace": args.trace, **out}

