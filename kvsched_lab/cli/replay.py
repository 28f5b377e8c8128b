"""`kvsched replay`: one trace through one policy, on block ids, real KV blocks or the concurrent engine;
with ``--host-blocks`` / ``--disk-blocks``, through device, host and disk tiers (replay_tiers.py); with
``--tenants`` / ``--deadlines``, per tenant or through a prefill server with deadlines (replay_serving.py)."""
from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:
    rp = sub.add_parser("replay", help="replay a trace through a policy (the course's replay protocol)")
    rp.add_argument("--trace", default="conversation",
                    help="a JSONL path, 'synthetic' (generated offline), or a Mooncake trace name: "
                         "'conversation' or 'mooncake:synthetic' (found on disk or downloaded)")
    rp.add_argument("--policy", default="lru", help="library policy name (see --help of kvsched bench)")
    rp.add_argument("--capacity-blocks", type=int, required=True, help="cache capacity in blocks")
    rp.add_argument("--json", action="store_true", help="print one JSON object")
    rp.add_argument("--quiet", action="store_true", help="no progress bar")
    rp.add_argument("--seed", type=int, default=0, help="seed of the generated 'synthetic' trace")
    rp.add_argument("--max-requests", type=int, default=None, help="replay only the first N requests")
    rp.add_argument("--metric", choices=["blocks", "vllm-tokens"], default="blocks",
                    help="what prefix_hit_rate counts: 'blocks', leading cached blocks over block references "
                         "(the course's protocol), or 'vllm-tokens', vLLM's own rate: cached prompt tokens over "
                         "prompt tokens, full blocks only, at most input_length - 1 tokens a request")
    rp.add_argument("--real-kv", action="store_true",
                    help="run the replay through the engine: real KV blocks and the tiny model")
    rp.add_argument("--concurrent", action="store_true",
                    help="serve the requests concurrently on real KV blocks (prefill, decode, preemption); "
                         "--capacity-blocks is then the whole pool")
    rp.add_argument("--max-running", type=int, default=8, help="with --concurrent: requests decoding at once")
    rp.add_argument("--max-num-batched-tokens", type=int, default=None,
                    help="with --concurrent: tokens computed per step, all requests together (vLLM's chunked "
                         "prefill budget); default: no limit")
    rp.add_argument("--max-output-tokens", type=int, default=32,
                    help="with --concurrent: cap on each request's output_length from the trace")
    rp.add_argument("--tokens-per-block", type=int, default=16,
                    help="with --real-kv or --concurrent: tokens in one block")
    rp.add_argument("--device", default=None, help="with --real-kv: cpu, cuda, cuda:1 (default: GPU if any)")
    from kvsched_lab.cli.replay_tiers import add_tier_arguments

    add_tier_arguments(rp)  # --host-blocks, --disk-blocks, --write-policy ... (cli/replay_tiers.py)
    from kvsched_lab.cli.replay_serving import add_serving_arguments

    add_serving_arguments(rp)  # --tenants, --deadlines, --admission ... (cli/replay_serving.py)
    rp.set_defaults(func=run)


def load_requests(args: argparse.Namespace):
    from kvsched_lab.sim.traces import load_named_trace, sort_by_arrival

    spec = args.trace if "/" in args.trace or args.trace.endswith(".jsonl") or args.trace == "synthetic" \
        or args.trace.startswith("mooncake:") else f"mooncake:{args.trace}"
    requests = sort_by_arrival(load_named_trace(spec, seed=args.seed))
    if args.max_requests is not None:
        requests = requests[: args.max_requests]
    return requests


def run(args: argparse.Namespace) -> int:
    if args.metric != "blocks" and (args.concurrent or args.real_kv):
        raise ValueError("--metric applies to the plain replay; --concurrent and --real-kv report their own counts")
    from kvsched_lab.cli.replay_serving import check_serving_args, run_serving, wants_serving
    from kvsched_lab.cli.replay_tiers import run_tier_replay, wants_tiers

    serving = wants_serving(args)
    if serving:
        if wants_tiers(args):
            raise ValueError("--tenants / --deadlines replay one tier: drop --host-blocks and --disk-blocks")
        check_serving_args(args)  # before the trace is read
    requests = load_requests(args)
    if serving:  # tenants, deadlines, admission: cli/replay_serving.py
        out = run_serving(args, requests)
    elif wants_tiers(args):  # host and disk tiers: cli/replay_tiers.py
        out = run_tier_replay(args, requests)
    elif args.concurrent:
        from kvsched_lab.kv import ConcurrentConfig, run_concurrent
        from kvsched_lab.kv.model import TinyDecoder

        if args.policy != "vllm":
            raise ValueError("--concurrent runs vLLM's block pool (free-block queue, tail first): use --policy vllm")
        config = ConcurrentConfig(num_blocks=args.capacity_blocks, tokens_per_block=args.tokens_per_block,
                                  max_running=args.max_running, max_output_tokens=args.max_output_tokens,
                                  max_num_batched_tokens=args.max_num_batched_tokens)
        report = run_concurrent(requests, config, model=TinyDecoder(device=args.device))
        out = {"policy": args.policy, "trace": args.trace, **report.summary()}
    elif args.real_kv:
        from kvsched_lab.kv.real_kv import real_kv_replay

        out = real_kv_replay(requests, args.policy, capacity_blocks=args.capacity_blocks,
                             tokens_per_block=args.tokens_per_block, device=args.device,
                             progress=not args.quiet)
        out = {"policy": args.policy, "trace": args.trace, **out}
    else:
        from kvsched_lab.sim.replay import metric_meaning, replay

        result = replay(requests, args.policy, args.capacity_blocks, progress=not args.quiet, metric=args.metric)
        out = {"trace": args.trace, **result.to_dict()}
        if not args.json:
            out["metric"] = f"{args.metric}: {metric_meaning(args.metric)}"
    if args.json:
        print(json.dumps(out))
    else:
        width = max(len(k) for k in out)
        for k, v in out.items():
            if v is None:
                continue
            if isinstance(v, float):
                shown = f"{v:.4%}" if k.endswith(("_rate", "_share", "_attainment")) else f"{v:.3f}"
            elif isinstance(v, dict):  # per tenant
                shown = ", ".join(f"{name} {x:.4%}" if k.endswith("_rate") else f"{name} {x}" for name, x in v.items())
            else:
                shown = v
            print(f"{k:<{width}}  {shown}")
    return 0
