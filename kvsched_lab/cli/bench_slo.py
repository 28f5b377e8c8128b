"""`kvsched bench`'s SLO section: notebook 10's server, every queue order and admission rule, side by side.

The first 3,000 requests of the Mooncake conversation trace (500 with ``--quick``), split into an
interactive tenant (70% of the conversations, TTFT within 2 s) and a batch one (30%, within 30 s),
served by two prefill workers with an 8,000-block LRU cache, each token priced by the FLOPs of
Llama-3-8B on an H100 SXM (kv/tiers/breakeven.py). Per row: SLO attainment per tenant and in all,
goodput, wasted prefill work, the rejected share, the prefix-hit rate, and the seconds the
simulation took (the server is pure Python on block ids: its cost is the replay's, plus a heap).
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Sequence

from kvsched_lab.kv.tiers.breakeven import MOONCAKE_BLOCK_TOKENS, model_costs
from kvsched_lab.sim.serving.server import PrefillCost, serve
from kvsched_lab.sim.serving.tenants import BATCH, INTERACTIVE, Tenant, assign_tenants
from kvsched_lab.sim.traces import Request

CAPACITY_BLOCKS = 8000
WORKERS = 2
ROWS = (  # (load, discipline, admission, protect): notebook 10's sections 2 and 3
    (1.5, "fcfs", "all", False), (1.5, "priority", "all", False), (1.5, "priority-preempt", "all", False),
    (1.5, "edf", "all", False), (2.0, "priority", "all", False), (2.0, "priority", "all", True),
    (2.0, "fcfs", "all", False), (2.0, "fcfs", "fit", False), (2.0, "fcfs", "bypass", False),
    (2.0, "fcfs", "predict", False), (3.0, "fcfs", "all", False), (3.0, "fcfs", "predict", False),
)


def bench_slo(conversation: Sequence[Request], quick: bool = False) -> Dict[str, Any]:
    """The section's rows; `conversation` in arrival order."""
    trace = list(conversation[:500 if quick else 3000])
    work = assign_tenants(trace, [Tenant("chat", INTERACTIVE, 0.7, 2.0), Tenant("docs", BATCH, 0.3, 1.0)])
    cost = PrefillCost(model_costs("Llama-3-8B", "H100 SXM").recompute_s / MOONCAKE_BLOCK_TOKENS,
                       source="Llama-3-8B on H100 SXM, from FLOPs")
    rows: List[Dict[str, Any]] = []
    for load, discipline, admission, protect in ROWS:
        start = time.perf_counter()
        out = serve(work, CAPACITY_BLOCKS, cost, workers=WORKERS, discipline=discipline, admission=admission,
                    protect_queued=protect, load=load)
        rows.append({"load": load, "discipline": discipline, "admission": admission, "protect": protect,
                     "slo_chat": out.met_by_tenant["chat"], "slo_docs": out.met_by_tenant["docs"],
                     "slo_attainment": out.slo_attainment, "goodput_rps": out.goodput_rps,
                     "wasted_share": out.wasted_share, "rejected_share": out.rejected_share,
                     "prefix_hit_rate": out.prefix_hit_rate, "preemptions": out.preemptions,
                     "seconds": time.perf_counter() - start})
    return {"requests": len(trace), "capacity_blocks": CAPACITY_BLOCKS, "workers": WORKERS,
            "per_token_s": cost.per_token_s, "cost_source": cost.source, "rows": rows}


def slo_markdown(section: Dict[str, Any]) -> List[str]:
    s = section
    lines = ["", f"### 7. SLOs: notebook 10's prefill server ({s['requests']:,} conversation requests, {s['workers']} "
             f"workers, {s['capacity_blocks']:,}-block LRU, {s['per_token_s'] * 1e6:.1f} us per token: {s['cost_source']})",
             "", "| load | queue | admission | protect | chat SLO | docs SLO | all SLO | goodput/s | wasted | rejected "
             "| hit rate | preempted | seconds |", "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in s["rows"]:
        lines.append(f"| {r['load']:g}x | {r['discipline']} | {r['admission']} | {'yes' if r['protect'] else 'no'} | "
                     f"{r['slo_chat']:.1%} | {r['slo_docs']:.1%} | {r['slo_attainment']:.1%} | {r['goodput_rps']:.2f} | "
                     f"{r['wasted_share']:.1%} | {r['rejected_share']:.1%} | {r['prefix_hit_rate']:.1%} | "
                     f"{r['preemptions']:,} | {r['seconds']:.2f} |")
    return lines
