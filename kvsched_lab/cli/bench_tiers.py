"""`kvsched bench`'s tier section: copy time per block for each move next to recompute time, and the break-even.

Measured in one run on the bench's device (kv/tiers/measure.py): moving one block of the
course's tiny model device -> host, host -> disk and back, and recomputing the same block's
tokens. Then, for real models (kv/tiers/breakeven.py), the break-even link speed above which
moving a block beats recomputing it, from their KV bytes and FLOPs per token and the cited
peak figures of GPUs and links, with the prefill efficiency the table assumes.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from kvsched_lab.kv.tiers.breakeven import (
    CONTEXT_TOKENS, GPUS, LINKS, MOONCAKE_BLOCK_TOKENS, PREFILL_EFFICIENCY, breakeven_table,
)
from kvsched_lab.kv.tiers.measure import measure_tier_costs

MEASURED_MOVES = ("device_to_host_s", "host_to_device_s", "host_to_disk_s", "disk_to_host_s")


def bench_tiers(quick: bool = False, device: Optional[str] = None) -> Dict[str, Any]:
    """The section: measured per-block seconds for the tiny model, and the real models' break-even."""
    measured = measure_tier_costs(num_blocks=8 if quick else 128, repeats=1 if quick else 5, device=device)
    per_block = measured["per_block_s"]
    recompute = per_block["recompute_s"]
    tiny = {move: {"seconds": per_block[move], "recompute_over_move": recompute / per_block[move],
                   "moving_wins": per_block[move] < recompute} for move in MEASURED_MOVES}
    return {
        "device": measured["device"], "dtype": measured["dtype"], "host_pinned": measured["host_pinned"],
        "block_bytes": measured["block_bytes"], "tokens_per_block": measured["tokens_per_block"],
        "num_blocks": measured["num_blocks"], "repeats": measured["repeats"],
        "recompute_s": recompute, "recompute_last_block_s": measured["recompute_last_block_s"],
        "round_trip_exact": measured["round_trip_exact"], "tiny_moves": tiny,
        "breakeven": {gpu: breakeven_table(gpu) for gpu in GPUS},
        "assumptions": {"prefill_efficiency": PREFILL_EFFICIENCY, "context_tokens": CONTEXT_TOKENS,
                        "block_tokens": MOONCAKE_BLOCK_TOKENS, "links_bytes_per_s": dict(LINKS),
                        "gpus_flops": dict(GPUS)},
    }


def tiers_markdown(section: Dict[str, Any]) -> List[str]:
    """The section's tables, as markdown lines."""
    s = section
    lines = ["", f"### 6. KV tiers: moving a block against recomputing it ({s['device']}, {s['dtype']}, host memory "
             f"{'pinned' if s['host_pinned'] else 'pageable'}; tiny model, {s['tokens_per_block']}-token blocks of "
             f"{s['block_bytes']:,} B, {s['num_blocks']} blocks, median of {s['repeats']})", "",
             f"Recompute: {s['recompute_s'] * 1e6:.1f} us per block (its share of a {s['num_blocks']}-block prefill); "
             f"the last block alone after the rest is cached: {s['recompute_last_block_s'] * 1e6:.1f} us. "
             f"Round trip bit for bit: {'yes' if s['round_trip_exact'] else '**no**'}.", "",
             "| move | us per block | recompute / move | faster |", "|---|---:|---:|---|"]
    for move, row in s["tiny_moves"].items():
        lines.append(f"| {move[:-2].replace('_', ' ')} | {row['seconds'] * 1e6:.1f} | {row['recompute_over_move']:.1f} | "
                     f"{'moving' if row['moving_wins'] else 'recomputing'} |")
    a = s["assumptions"]
    links = list(a["links_bytes_per_s"])
    for gpu, rows in s["breakeven"].items():
        lines += ["", f"Break-even on an {gpu} ({a['gpus_flops'][gpu] / 1e12:g} TFLOP/s peak dense BF16, "
                  f"{a['prefill_efficiency']:.0%} of it in prefill, tokens attending to {a['context_tokens']:,} keys): "
                  "moving wins above the break-even bandwidth; each link column is recompute time / move time.", "",
                  "| model | KV bytes / token | GFLOPs / token | break-even GB/s | "
                  + " | ".join(f"{link} ({a['links_bytes_per_s'][link] / 1e9:g} GB/s)" for link in links) + " |",
                  "|---|---:|---:|---:|" + "---:|" * len(links)]
        for r in rows:
            lines.append(f"| {r['model']} | {r['kv_bytes_per_token']:,} | {r['flops_per_token'] / 1e9:.1f} | "
                         f"{r['breakeven_bytes_per_s'] / 1e9:.2f} | "
                         + " | ".join(f"{r['recompute_over_move'][link]:.1f}" for link in links) + " |")
    return lines
