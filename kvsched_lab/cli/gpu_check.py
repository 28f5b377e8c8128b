"""The real-KV path measured on one device, in one summary: ``python -m kvsched_lab.cli.gpu_check``.

`scripts/gpu-check.sh` runs it on a CUDA machine (after the CUDA tests); it runs on the CPU too,
which is how it is tested. Three measurements:

* logits: the tiny model's prefill with a cached prefix read from the block pool against a full
  recompute on the same device, and against an fp32 CPU reference: the largest absolute logit
  difference, next to the bound the tests allow (fp16 on the GPU, fp32 on the CPU);
* a real-KV replay of a Mooncake trace slice (LRU): hit rates, the largest logit difference of
  its sampled checks, and the pool's bytes on the device;
* `kvsched bench`'s real-KV section: prefill time with 50% / 90% of the prompt cached over full
  prefill time, against the FLOP ratio;
* KV tiers (kvsched_lab/kv/tiers/): copy time per block device <-> host (pinned on CUDA) <-> disk
  next to the recompute time, and the tiered engine's round trip (a prompt served back from the
  host and from the disk: identical blocks and logits, within the fp16 bound of a recompute).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import torch

from kvsched_lab.cli.bench_kv import bench_real_kv
from kvsched_lab.kv.model import TinyDecoder, TinyDecoderConfig
from kvsched_lab.kv.real_kv import real_kv_replay
from kvsched_lab.kv.tiers.measure import measure_tier_costs
from kvsched_lab.kv.tiers.roundtrip import round_trip_check
from kvsched_lab.sim.traces import load_named_trace, sort_by_arrival

# The largest cached-vs-recomputed logit difference the tests accept (tests/test_model.py).
LOGIT_BOUNDS = {torch.float16: 2e-2, torch.float32: 1e-4}


@dataclass(frozen=True)
class GpuCheckSettings:
    device: Optional[str] = None  # cpu, cuda, cuda:1; default: the GPU if there is one
    trace: str = "conversation"  # named trace of the replay (shipped with the package)
    replay_requests: int = 400  # requests of the real-KV replay
    replay_capacity_blocks: int = 2000  # its cache capacity, in blocks of 16 tokens
    kv_tokens: int = 2048  # prefill-ratio prompt, tokens
    kv_dim: int = 512  # prefill-ratio model width
    kv_layers: int = 4  # prefill-ratio model depth
    kv_repeats: int = 5  # prefill-ratio runs per case (median)
    tier_blocks: int = 128  # blocks copied per move when timing the tiers


def measure_logits(device: Optional[str]) -> Dict[str, Any]:
    """Prefill with cached prefixes vs a full recompute (same device) and vs fp32 on the CPU."""
    cfg = TinyDecoderConfig(vocab_size=128, dim=48, num_layers=2, num_heads=6, num_kv_heads=2, head_dim=8,
                            ffn_hidden=96, seed=2)
    model = TinyDecoder(cfg, device=device)
    ids = torch.randint(0, cfg.vocab_size, (200,), generator=torch.Generator().manual_seed(0)).tolist()
    pool = model.make_pool(60, 16)
    table = list(range(13))  # 13 blocks of 16 tokens hold the 200-token prompt
    model.prefill(ids, table, 0, pool)
    full = model.forward(ids).float()
    reference = TinyDecoder(cfg, device="cpu", dtype=torch.float32).forward(ids)
    vs_full = vs_fp32 = 0.0
    for num_cached in (37, 100, 199):
        new = model.prefill(ids, table, num_cached, pool).float()
        vs_full = max(vs_full, (new - full[num_cached:]).abs().max().item())
        vs_fp32 = max(vs_fp32, (new.cpu() - reference[num_cached:]).abs().max().item())
    bound = LOGIT_BOUNDS.get(model.dtype, LOGIT_BOUNDS[torch.float16])
    return {"device": str(model.device), "dtype": str(model.dtype).replace("torch.", ""),
            "max_diff_vs_recompute": vs_full, "max_diff_vs_fp32_cpu": vs_fp32, "bound": bound,
            "ok": vs_full <= bound and vs_fp32 <= LOGIT_BOUNDS[torch.float16]}


def measure_replay(settings: GpuCheckSettings) -> Dict[str, Any]:
    requests = sort_by_arrival(load_named_trace(f"mooncake:{settings.trace}"))[: settings.replay_requests]
    out = real_kv_replay(requests, "lru", capacity_blocks=settings.replay_capacity_blocks,
                         device=settings.device, check_every=20)
    model = TinyDecoder(TinyDecoderConfig(), device=settings.device)  # the replay's model: its block bytes
    block_bytes = model.kv_bytes_per_token * 16
    out["trace"] = settings.trace
    out["pool_bytes"] = out["pool_blocks"] * block_bytes
    bound = LOGIT_BOUNDS.get(model.dtype, LOGIT_BOUNDS[torch.float16])
    out["logit_bound"] = bound
    out["ok"] = out["max_abs_logit_diff"] <= bound and out["requests_checked"] > 0
    return out


def run_gpu_check(settings: GpuCheckSettings) -> Dict[str, Any]:
    report: Dict[str, Any] = {"torch": torch.__version__, "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        report["gpu"] = torch.cuda.get_device_name(0)
    report["logits"] = measure_logits(settings.device)
    report["replay"] = measure_replay(settings)
    kv = bench_real_kv(settings.kv_tokens, settings.kv_dim, settings.kv_layers, settings.kv_repeats, settings.device)
    report["prefill"] = kv
    costs = measure_tier_costs(num_blocks=settings.tier_blocks, repeats=settings.kv_repeats, device=settings.device)
    report["tiers"] = {"per_block_s": costs["per_block_s"], "round_trip_exact": costs["round_trip_exact"],
                       "host_pinned": costs["host_pinned"], "block_bytes": costs["block_bytes"],
                       "round_trip": round_trip_check(settings.device)}
    if torch.cuda.is_available() and str(report["logits"]["device"]).startswith("cuda"):
        report["cuda_max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
    report["ok"] = bool(report["logits"]["ok"] and report["replay"]["ok"] and report["tiers"]["round_trip"]["ok"]
                        and report["tiers"]["round_trip_exact"])
    return report


def summary_lines(report: Dict[str, Any]) -> List[str]:
    lg, rp, kv, tiers = report["logits"], report["replay"], report["prefill"], report["tiers"]
    per_block, trip = tiers["per_block_s"], tiers["round_trip"]
    ratios = ", ".join(f"{share} cached {row['time_ratio']:.2f} (FLOPs {row['flop_ratio_dense']:.2f})"
                       for share, row in kv["hits"].items())
    return [
        f"device      {lg['device']} {lg['dtype']}" + (f" ({report['gpu']})" if report.get("gpu") else "")
        + f", torch {report['torch']}",
        f"logits      max |cached - recompute| {lg['max_diff_vs_recompute']:.2e}, vs fp32 CPU "
        f"{lg['max_diff_vs_fp32_cpu']:.2e} (bound {lg['bound']:.0e}): {'ok' if lg['ok'] else 'FAILED'}",
        f"replay      {rp['requests']} requests of the {rp['trace']} trace, LRU at "
        f"{rp['capacity_blocks']} blocks: prefix hits {rp['prefix_hit_rate']:.1%}, token hits "
        f"{rp['token_hit_rate']:.1%}, max logit diff {rp['max_abs_logit_diff']:.2e} over "
        f"{rp['requests_checked']} checked requests, {rp['wall_seconds']:.1f} s: {'ok' if rp['ok'] else 'FAILED'}",
        f"pool        {rp['pool_blocks']} blocks x {rp['pool_bytes'] // max(rp['pool_blocks'], 1):,} B = "
        f"{rp['pool_bytes']:,} B ({rp['pool_bytes'] / 2**20:.1f} MiB)"
        + (f"; CUDA peak allocated {report['cuda_max_memory_allocated_bytes'] / 2**20:.1f} MiB"
           if "cuda_max_memory_allocated_bytes" in report else ""),
        f"prefill     time with a cached prefix / full prefill ({kv['config']['tokens']} tokens, width "
        f"{kv['config']['dim']}, {kv['config']['layers']} layers, full {kv['full_prefill_seconds'] * 1e3:.2f} ms): "
        + ratios,
        f"tiers       us per {tiers['block_bytes']:,}-B block: device->host {per_block['device_to_host_s'] * 1e6:.1f}, "
        f"host->device {per_block['host_to_device_s'] * 1e6:.1f}, host->disk {per_block['host_to_disk_s'] * 1e6:.1f}, "
        f"disk->host {per_block['disk_to_host_s'] * 1e6:.1f}, recompute {per_block['recompute_s'] * 1e6:.1f} "
        f"(host {'pinned' if tiers['host_pinned'] else 'pageable'})",
        f"round trip  served back from host and disk: blocks equal {trip['blocks_equal']}, logits identical "
        f"{trip['logits_identical']}, max |cached - recompute| {max(trip['max_diff_vs_recompute'].values()):.2e} "
        f"(bound {trip['bound']:.0e}): {'ok' if trip['ok'] else 'FAILED'}",
    ]


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kvsched_lab.cli.gpu_check", description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: the GPU if there is one)")
    p.add_argument("--require-cuda", action="store_true", help="fail at once when no CUDA GPU is visible")
    p.add_argument("--replay-requests", type=int, default=GpuCheckSettings.replay_requests)
    p.add_argument("--kv-tokens", type=int, default=GpuCheckSettings.kv_tokens)
    p.add_argument("--kv-repeats", type=int, default=GpuCheckSettings.kv_repeats)
    p.add_argument("--json", default=None, help="also write the whole report to this file")
    args = p.parse_args(argv)
    if args.require_cuda and not torch.cuda.is_available():
        print(f"gpu_check: no CUDA GPU visible to torch {torch.__version__}", file=sys.stderr)
        return 2
    settings = GpuCheckSettings(device=args.device, replay_requests=args.replay_requests,
                                kv_tokens=args.kv_tokens, kv_repeats=args.kv_repeats)
    report = run_gpu_check(settings)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    print("\n".join(summary_lines(report)))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
