"""`kvsched bench` as markdown: one table per section of the JSON report."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from kvsched_lab.cli import bench_libcachesim
from kvsched_lab.cli.bench_load import load_markdown
from kvsched_lab.cli.bench_rounds import VERDICT_MARKS


def _pct(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def speed_markdown(sp: Dict[str, Any]) -> List[str]:
    """Section 1: each scheduler's median run, its ratio to the reference over the rounds with their
    band, the target's call (`bench_rounds`), and libCacheSim's column where it is installed."""
    lines = [f"### 1. Replay speed: conversation trace, {sp['capacity_blocks']} blocks, {sp['touches']:,} touches, "
             f"{sp['repeats']} interleaved rounds", "",
             "| policy | seconds | touches/s | x reference [band] | target | prefix hits |" + bench_libcachesim.markdown_header(sp),
             "|---|---:|---:|---:|---:|---:|" + bench_libcachesim.markdown_rule(sp)]
    for name, r in sp["policies"].items():
        lcs_cell = bench_libcachesim.markdown_cell(sp, r)  # "" without libCacheSim
        if r["vs_reference"] is None:  # no reference to compare with
            lines.append(f"| {name} | {r['seconds']:.3f} | {r['touches_per_s']:,.0f} | n/a | n/a | "
                         f"{_pct(r['prefix_hit_rate'])} |{lcs_cell}")
            continue
        if name == "reference":
            ratio, target = "1.00x", ""
        else:
            low, high = r["spread"]
            ratio, target = f"{r['vs_reference']:.2f}x [{low:.2f}-{high:.2f}]", f">= {r['target']:g}x{VERDICT_MARKS[r['verdict']]}"
        lines.append(f"| {name} | {r['seconds']:.3f} | {r['touches_per_s']:,.0f} | {ratio} | {target} | "
                     f"{_pct(r['prefix_hit_rate'])} |{lcs_cell}")
    if sp.get("reference_runs"):
        lines += ["", f"Each round replays every policy between two runs of the reference ({sp['reference_runs']} runs in all); "
                      "a ratio is the median over rounds of the reference's CPU seconds (the geometric mean of the runs "
                      "on either side) over the policy's, and [band] the range of the rounds' ratios, the lowest and "
                      "highest fifth of them left out. A target is called ok or **MISS** only when the whole band is "
                      "above or below it, and within noise when the band straddles it; seconds are each scheduler's median run."]
    lines += bench_libcachesim.markdown_note(sp)
    return lines


def to_markdown(report: Dict[str, Any]) -> str:
    m = report["machine"]
    lines = [f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, torch {m.get('torch')} "
             f"({m.get('torch_threads')} threads), device {m.get('device')}."
             + (" QUICK MODE: small slices, not the real numbers." if report["quick"] else "")]
    if report.get("load"):
        lines.append(load_markdown(report["load"]))
    lines.append("")
    lines += speed_markdown(report["speed"])
    lines += ["", "### 2. Heap records per live entry, end of that replay", "",
              "| scheduler | records | live | records / live | target |", "|---|---:|---:|---:|---:|"]
    for name, r in report["heap"]["policies"].items():
        target = f"<= {r['target']:g}" + (" ok" if r["records_per_live"] <= r["target"] else " **MISS**") if r["target"] else ""
        lines.append(f"| {name} | {r['records']:,} | {r['live']:,} | {r['records_per_live']:.2f} | {target} |")
    kv = report["real_kv"]
    c = kv["config"]
    lines += ["", f"### 3. Real KV blocks: prefill with a cached prefix / full prefill ({kv['device']}, {kv['dtype']}, "
              f"{c['tokens']} tokens, dim {c['dim']}, {c['layers']} layers, {c['heads']} heads / {c['kv_heads']} KV heads; "
              f"full prefill {kv['full_prefill_seconds'] * 1e3:.1f} ms, median of {kv['repeats']})", "",
              "| prefix hits | time ratio | FLOP ratio, dense (target) | time / FLOP | FLOP ratio, causal only | within 1.3x |",
              "|---|---:|---:|---:|---:|---|"]
    for share, r in kv["hits"].items():
        lines.append(f"| {share} | {r['time_ratio']:.3f} | {r['flop_ratio_dense']:.3f} | {r['time_over_flop']:.2f} | "
                     f"{r['flop_ratio_causal']:.3f} | {'yes' if r['ok'] else '**no**'} |")
    for trace, t in report["policies"].items():
        caps = t["capacities"]
        lines += ["", f"### 4. Prefix-hit rate and share of the LRU-to-Belady gap closed: {t['source']}"
                  f" ({t['requests']:,} requests)", "",
                  "| policy | " + " | ".join(f"{cap // 1000 if cap >= 1000 else cap}{'k' if cap >= 1000 else ''} blocks"
                                               for cap in caps) + " |",
                  "|---|" + "---:|" * len(caps)]
        for name, row in t["policies"].items():
            cells = []
            for cap in caps:
                r = row[str(cap)]
                gap = "" if name in ("lru", "belady", "belady (block hits)") else f" ({_pct(r['gap_closed'])})"
                cells.append(f"{_pct(r['prefix_hit_rate'])}{gap}")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
        lines.append("Best online policy: " + ", ".join(f"{cap}: {n}" for cap, n in t["best_online"].items()))
    sw = report["sweep"]
    lines += ["", f"### 5. Sweep: {sw['policies']} policies x {len(sw['capacities'])} capacities on the conversation trace: "
              f"{sw['seconds']:.1f} CPU s (target <= {sw['target_s']:g} s{'' if sw['ok'] else ', **MISS**'}; "
              f"{sw['wall_seconds']:.1f} s wall). CPU s per policy, slowest first: "
              + ", ".join(f"{name} {s:.1f}" for name, s in sw["policy_seconds"].items())]
    if report.get("tiers"):  # section 6 (cli/bench_tiers.py)
        from kvsched_lab.cli.bench_tiers import tiers_markdown

        lines += tiers_markdown(report["tiers"])
    if report.get("slo"):  # section 7 (cli/bench_slo.py)
        from kvsched_lab.cli.bench_slo import slo_markdown

        lines += slo_markdown(report["slo"])
    if report.get("grading"):
        g = report["grading"]
        lines += ["", f"### Grading: {g['submissions_per_second_per_core']:g} submissions per second per core "
                      f"({g['submissions']:g} submissions on {g['jobs']:g} {'' if g.get('sandboxed') else 'un'}sandboxed workers in {g['seconds_batch']:g} s; "
                      f"coordinator {g.get('coordinator_cpu_s_per_submission', 0):g} s of CPU per submission; "
                      f"1,000 on one 16-core machine, extrapolated as 1000 / min(rate x 16, 1 / coordinator CPU): "
                      f"about {g['minutes_for_1000_on_16_cores']:g} min)",
                  "", ", ".join(f"{k} {v:g}" for k, v in g.items())]
    if report.get("notebooks"):
        nb = report["notebooks"]
        lines += ["", f"### Notebooks: Run All, both editions ({'TODOs filled' if nb['filled'] else 'stubs'}, a fresh kernel "
                      f"each; target <= {nb['target_s']:g} s each, {nb['series_target_s']:g} s in all)", "",
                  "| notebook | seconds | slowest code cell |", "|---|---:|---|"]
        errors, slowest = nb.get("errors", {}), nb.get("slowest_cell", {})
        for name, sec in nb["seconds"].items():
            miss = " **MISS**" if sec > nb["target_s"] else ""
            cell = slowest.get(name)
            where = f"#{cell['code_cell']}: {cell['seconds']:.1f} s" if cell and cell["code_cell"] > 0 else ""
            lines.append(f"| {name} | {sec:.1f}{miss}{f' **{errors[name]}**' if name in errors else ''} | {where} |")
        lines.append(f"| all | {nb['total_seconds']:.1f}{'' if nb['ok'] else ' **MISS**'} | |")
    return "\n".join(lines)
