"""`kvsched replay` with tenants, deadlines and admission (notebook 10; ``kvsched_lab.sim.serving``).

``--tenants chat=interactive:0.7:2,docs=batch:0.3`` splits the trace into tenants (name=class:share[:weight],
classes ``interactive`` and ``batch``) and replays it through ``--tenant-policy``, reporting each tenant's
prefix-hit rate; ``--noisy-rate`` adds a noisy neighbour. ``--deadlines`` runs the prefill server instead:
``--workers``, ``--discipline``, ``--admission``, ``--protect``, ``--load`` and a cost per token from FLOPs
(``--prefill-model``, ``--prefill-gpu``) or given (``--per-token-us``). One tenant, no deadlines: exactly the plain replay.
"""
from __future__ import annotations

import argparse
from typing import Any, Dict, List

CLASSES = ("interactive", "batch")
TENANT_POLICIES = ("lru", "quota", "priority", "fair-share")


def add_serving_arguments(rp: argparse.ArgumentParser) -> None:
    from kvsched_lab.sim.serving.server import ADMISSION_RULES, ADMISSIONS, DISCIPLINES

    g = rp.add_argument_group("tenants, deadlines and admission (notebook 10)")
    g.add_argument("--tenants", default=None,
                   help="tenants as name=class:share[:weight], comma-separated, shares summing to 1; classes: "
                        "interactive (priority 0, TTFT within 2 s), batch (priority 1, within 30 s)")
    g.add_argument("--tenant-seed", type=int, default=0, help="seed of the hash that assigns conversations to tenants")
    g.add_argument("--tenant-policy", choices=TENANT_POLICIES, default="lru",
                   help="cache of the tenant replay: one shared LRU, quotas by weight, SGLang's priority "
                        "eviction, or a weighted fair share")
    g.add_argument("--noisy-rate", type=float, default=None,
                   help="add a noisy neighbour (batch tenant 'flood'): unique prompts per second")
    g.add_argument("--noisy-blocks", type=int, default=40, help="blocks of each noisy prompt")
    g.add_argument("--deadlines", action="store_true",
                   help="serve the trace through the prefill server: TTFT deadlines, SLO attainment, goodput")
    g.add_argument("--workers", type=int, default=2, help="with --deadlines: prefill workers")
    g.add_argument("--discipline", choices=DISCIPLINES, default="fcfs", help="with --deadlines: queue order")
    g.add_argument("--admission", choices=ADMISSIONS, default="all",
                   help="with --deadlines: admission rule; " + "; ".join(f"{k}: {v}" for k, v in ADMISSION_RULES.items()))
    g.add_argument("--protect", action="store_true",
                   help="with --deadlines: the cache evicts blocks no waiting request holds first")
    g.add_argument("--load", type=float, default=1.0, help="with --deadlines: arrival rate, x the trace's")
    g.add_argument("--prefill-model", default="Llama-3-8B", help="with --deadlines: model whose FLOPs price a token")
    g.add_argument("--prefill-gpu", default="H100 SXM", help="with --deadlines: GPU whose peak FLOP/s price a token")
    g.add_argument("--per-token-us", type=float, default=None,
                   help="with --deadlines: microseconds per prompt token, instead of --prefill-model and --prefill-gpu")


def wants_serving(args: argparse.Namespace) -> bool:
    return bool(args.tenants or args.deadlines or args.noisy_rate)


def parse_tenants(spec: str) -> List[Any]:
    """``name=class:share[:weight],...`` -> `Tenant` list; a ValueError names the part that is wrong."""
    from kvsched_lab.sim.serving.tenants import BATCH, INTERACTIVE, Tenant

    classes = {"interactive": INTERACTIVE, "batch": BATCH}
    tenants = []
    for part in spec.split(","):
        name, eq, rest = part.strip().partition("=")
        fields = rest.split(":")
        if not eq or not name or len(fields) not in (2, 3) or fields[0] not in classes:
            raise ValueError(f"--tenants: {part.strip()!r} is not name=class:share[:weight] with a class of "
                             f"{', '.join(CLASSES)}")
        try:
            numbers = [float(f) for f in fields[1:]]
        except ValueError:
            raise ValueError(f"--tenants: {part.strip()!r}: share and weight must be numbers") from None
        tenants.append(Tenant(name, classes[fields[0]], numbers[0], *(numbers[1:])))
    if abs(sum(t.share for t in tenants) - 1.0) > 1e-9:
        raise ValueError(f"--tenants: the shares must sum to 1, got {sum(t.share for t in tenants):g}")
    return tenants


def check_serving_args(args: argparse.Namespace) -> None:
    """Refuse impossible combinations before the trace is read."""
    if args.concurrent or args.real_kv:
        raise ValueError("--tenants / --deadlines run on block ids: drop --concurrent and --real-kv")
    if args.metric != "blocks":
        raise ValueError("--tenants / --deadlines count hits in blocks: drop --metric")
    if args.tenants:
        parse_tenants(args.tenants)
    if args.noisy_rate is not None and (args.noisy_rate <= 0 or args.noisy_blocks <= 0):
        raise ValueError("--noisy-rate and --noisy-blocks must be > 0")
    if args.deadlines and args.tenant_policy != "lru":
        raise ValueError("--deadlines serves through an LRU cache (--protect for the protecting one): "
                         "drop --tenant-policy")


def run_serving(args: argparse.Namespace, requests: List[Any]) -> Dict[str, Any]:
    from kvsched_lab.sim.serving.tenants import BATCH, Tenant, assign_tenants, single_tenant, with_noisy_neighbour

    work = assign_tenants(requests, parse_tenants(args.tenants), seed=args.tenant_seed) if args.tenants \
        else single_tenant(requests)
    if args.noisy_rate:
        work = with_noisy_neighbour(work, Tenant("flood", BATCH, 0.0), args.noisy_rate, args.noisy_blocks)
    out: Dict[str, Any] = {"trace": args.trace, "capacity_blocks": args.capacity_blocks, "requests": len(work.requests),
                           "tenants": work.counts()}
    if args.deadlines:
        out.update(_serve(args, work))
    else:
        out.update(_tenant_replay(args, work))
    return out


def _tenant_replay(args: argparse.Namespace, work: Any) -> Dict[str, Any]:
    from kvsched_lab.sim.serving.tenant_cache import FairShareLRU, PriorityLRU, QuotaLRU, jain_index, tenant_replay

    cap = args.capacity_blocks
    weights = {name: t.weight for name, t in work.tenants.items()}
    quotas = {name: int(cap * w / sum(weights.values())) for name, w in weights.items()}
    build = {"lru": args.policy, "quota": lambda c: QuotaLRU(c, quotas), "priority": PriorityLRU,
             "fair-share": FairShareLRU}[args.tenant_policy]
    res = tenant_replay(work, build, cap, name=args.tenant_policy if args.tenant_policy != "lru" else args.policy)
    rates = res.hit_rate
    return {"policy": res.policy, "block_refs": sum(res.block_refs.values()), "prefix_hits": sum(res.prefix_hits.values()),
            "prefix_hit_rate": res.overall_hit_rate, "tenant_block_refs": res.block_refs,
            "tenant_prefix_hits": res.prefix_hits, "tenant_hit_rate": rates,
            "jain_index_of_hit_rates": jain_index(list(rates.values()))}


def _serve(args: argparse.Namespace, work: Any) -> Dict[str, Any]:
    from kvsched_lab.sim.serving.server import ADMISSION_RULES, PrefillCost, serve

    if args.per_token_us is not None:
        cost = PrefillCost(args.per_token_us * 1e-6, source=f"{args.per_token_us} us per token (given)")
    else:
        from kvsched_lab.kv.tiers.breakeven import MOONCAKE_BLOCK_TOKENS, model_costs

        per_token = model_costs(args.prefill_model, args.prefill_gpu).recompute_s / MOONCAKE_BLOCK_TOKENS
        cost = PrefillCost(per_token, source=f"{args.prefill_model} on {args.prefill_gpu}, from FLOPs")
    res = serve(work, args.capacity_blocks, cost, workers=args.workers, discipline=args.discipline,
                admission=args.admission, protect_queued=args.protect, load=args.load, policy=args.policy)
    return {"policy": "protected-lru" if args.protect else args.policy, "discipline": args.discipline,
            "admission": args.admission, "admission_rule": ADMISSION_RULES[args.admission],
            "workers": args.workers, "load": args.load,
            "per_token_s": cost.per_token_s, "cost_source": cost.source, **res.summary()}
