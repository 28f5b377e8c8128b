"""The GPU check runs on the CPU too (its summary, its failure) and the script refuses a machine without CUDA."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kvsched_lab.cli import gpu_check
from kvsched_lab.kv.model import TinyDecoder, TinyDecoderConfig
from kvsched_lab.cli.gpu_check import GpuCheckSettings, run_gpu_check, summary_lines

ROOT = Path(__file__).resolve().parents[1]
SMALL = GpuCheckSettings(device="cpu", replay_requests=6, replay_capacity_blocks=500, kv_tokens=64, kv_dim=64,
                         kv_layers=1, kv_repeats=1, tier_blocks=4)


@pytest.fixture(scope="module")
def report():
    return run_gpu_check(SMALL)


def test_cpu_report_measures_logits_replay_pool_and_prefill(report):
    assert report["ok"] and report["logits"]["dtype"] == "float32"
    assert 0 <= report["logits"]["max_diff_vs_recompute"] <= gpu_check.LOGIT_BOUNDS[torch.float32]
    rp = report["replay"]
    assert rp["requests"] == 6 and rp["requests_checked"] >= 1 and rp["device"] == "cpu"
    block_bytes = TinyDecoder(TinyDecoderConfig(), device="cpu").kv_bytes_per_token * 16  # fp32, 16 tokens
    assert rp["pool_bytes"] == rp["pool_blocks"] * block_bytes > 0
    assert set(report["prefill"]["hits"]) == {"50%", "90%"}
    lines = summary_lines(report)
    assert [line.split()[0] for line in lines] == ["device", "logits", "replay", "pool", "prefill", "tiers", "round"]
    assert f"{rp['pool_bytes']:,} B" in lines[3] and "ok" in lines[1]
    tiers = report["tiers"]  # the tier measurements: positive per-block times, an exact round trip
    assert all(v > 0 for v in tiers["per_block_s"].values()) and tiers["round_trip_exact"]
    assert tiers["round_trip"]["ok"] and not tiers["host_pinned"] and lines[-1].endswith("ok")


def test_a_logit_difference_over_the_bound_fails_the_check(monkeypatch):
    monkeypatch.setitem(gpu_check.LOGIT_BOUNDS, torch.float32, 0.0)
    monkeypatch.setitem(gpu_check.LOGIT_BOUNDS, torch.float16, 0.0)
    logits = gpu_check.measure_logits("cpu")
    assert logits["max_diff_vs_recompute"] > 0 and not logits["ok"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_script_refuses_clearly_without_cuda(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable, GPU_CHECK_OUT=str(tmp_path))
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-check.sh")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "sees no CUDA GPU" in proc.stdout, proc.stdout + proc.stderr
    assert gpu_check.main(["--require-cuda"]) == 2
