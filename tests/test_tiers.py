"""KV tiers (kvsched_lab/kv/tiers/): the LRU invariant, each placement rule, real blocks that round-trip exactly."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from kvsched_lab.cli.main import main
from kvsched_lab.kv.tiers import (
    ChooseOnEvict, Demote, SelectiveWriteThrough, TierCosts, TierHierarchy, WriteThrough, build_hierarchy,
    tier_replay,
)
from kvsched_lab.kv.tiers.breakeven import LINKS, breakeven_bandwidth, breakeven_table, model_costs
from kvsched_lab.kv.tiers.hierarchy import ADOPT, COPY, FREE
from kvsched_lab.kv.model import TinyDecoder
from kvsched_lab.kv.tiers.measure import measure_tier_costs
from kvsched_lab.kv.tiers.real_replay import tiered_real_kv_replay
from kvsched_lab.kv.tiers.roundtrip import round_trip_check
from kvsched_lab.sim.policies import make_policy
from kvsched_lab.sim.replay import replay
from kvsched_lab.sim.traces import load_named_trace, sort_by_arrival, synthetic_trace

TRACE = synthetic_trace(600, seed=3)
COSTS = TierCosts(recompute_s=1.0, device_to_host_s=0.1, host_to_device_s=0.1, host_to_disk_s=0.3,
                  disk_to_host_s=0.3, block_bytes=10)


def requests(*id_lists):
    return [SimpleNamespace(timestamp=i, hash_ids=tuple(ids)) for i, ids in enumerate(id_lists)]


# -- the invariant ------------------------------------------------------------------------------
@pytest.mark.parametrize("sizes", [(40, 80, 0), (100, 60, 0), (30, 50, 120)])
def test_exclusive_lru_tiers_hit_exactly_like_one_lru_of_the_summed_capacity(sizes):
    device, host, disk = sizes
    tiered = tier_replay(TRACE, "lru", device, host, disk, rule="demote", costs=COSTS)
    single = replay(TRACE, "lru", device + host + disk)
    assert tiered["prefix_hits"] == single.prefix_hits > 0
    assert sum(tiered["prefix_hits_by_tier"].values()) == single.prefix_hits
    assert tiered["prefix_hits_by_tier"]["host"] > 0  # the host tier really served hits
    # and inclusive write-through is not that: a block on the device also takes room on the host
    inclusive = tier_replay(TRACE, "lru", device, host, disk, rule="write_through", costs=COSTS)
    assert inclusive["prefix_hits"] < single.prefix_hits


def test_demotion_and_promotion_step_by_step():
    h = build_hierarchy("lru", 2, 2, rule="demote", costs=COSTS)
    h.serve([1, 2])
    tiers, steps = h.serve([3])  # the device is full: 1 (least recent) moves to the host
    assert tiers == [] and steps == [(COPY, 1, 0, 1), (FREE, 1, 0, None), (ADOPT, 3, None, None)]
    tiers, steps = h.serve([1])  # a host hit: up to the device, out of the host; 2 goes down
    assert tiers == [1]
    assert steps[0] == (FREE, 1, 1, None) and steps[-1] == (ADOPT, 1, 1, None)
    assert (COPY, 2, 0, 1) in steps
    assert set(h.policies[0].entries) == {3, 1} and set(h.policies[1].entries) == {2}
    report = h.report(block_bytes=10)
    assert report["blocks_moved"] == {"device_to_host": 2, "host_to_device": 1}
    assert report["bytes_moved"] == {"device_to_host": 20, "host_to_device": 10}
    assert report["prefix_hits_by_tier"] == {"device": 0, "host": 1}


def test_write_through_copies_at_compute_and_write_back_only_at_eviction():
    wt = build_hierarchy("lru", 2, 4, rule="write_through")
    _, steps = wt.serve([1, 2])
    assert [s.op for s in steps] == [ADOPT, COPY, ADOPT, COPY]  # each block goes down as it is computed
    _, steps = wt.serve([3])  # evicting 1 moves nothing: the host has its copy
    assert (FREE, 1, 0, None) in steps and not any(s.op == COPY and s.key == 1 for s in steps)
    tiers, steps = wt.serve([1])  # inclusive: the host keeps its copy after bringing it up
    assert tiers == [1] and 1 in wt.policies[1].entries

    wb = build_hierarchy("lru", 2, 4, rule="write_back")
    _, steps = wb.serve([1, 2])
    assert [s.op for s in steps] == [ADOPT, ADOPT]
    _, steps = wb.serve([3])
    assert steps[0] == (COPY, 1, 0, 1)
    wb.serve([1])
    _, steps = wb.serve([4, 5])  # 1 is evicted again but still has its host copy: no second write
    assert not any(s.op == COPY and s.key == 1 for s in steps)


def test_selective_write_through_copies_only_blocks_hit_k_times():
    h = build_hierarchy("lru", 3, 4, rule=SelectiveWriteThrough(min_hits=2))
    _, steps = h.serve([1, 2])
    assert not any(s.op == COPY for s in steps)
    _, steps = h.serve([1, 3])  # 1 now touched twice: copied down; 3 not
    assert [(s.key, s.src, s.dst) for s in steps if s.op == COPY] == [(1, 0, 1)]
    h.serve([4, 5, 6])  # the device evicts 2 and 3 (dropped: never selected) and 1 (it has a copy)
    assert h.report(1)["drops"]["device"] == 2
    assert h.prefix_tiers([1, 2]) == [1]
    assert WriteThrough().copy_down(h.info(4)) and not h.rule.copy_down(h.info(4))  # write_through: k = 1
    with pytest.raises(ValueError, match="min_hits"):
        SelectiveWriteThrough(0)


def test_a_function_chooses_per_evicted_block():
    def keep_reused(block):
        return "disk" if block.hits >= 2 else "drop"

    h = build_hierarchy("lru", 2, 2, 4, rule=ChooseOnEvict(keep_reused))
    h.serve([1]); h.serve([1]); h.serve([2, 3])  # 1 (hit twice) is evicted: straight to the disk
    assert h.tier_of(1) == 2 and h.report(1)["blocks_moved"] == {"device_to_disk": 1}
    h.serve([4, 5])  # 2 and 3, used once, are dropped
    assert h.tier_of(2) is None and h.report(1)["drops"]["device"] == 2
    bad = build_hierarchy("lru", 1, 1, rule=ChooseOnEvict(lambda b: "disk"))
    bad.serve([1])
    with pytest.raises(ValueError, match="no disk tier"):
        bad.serve([2])
    with pytest.raises(ValueError, match="return 'host', 'disk' or 'drop'"):
        build_hierarchy("lru", 1, 1, rule=ChooseOnEvict(lambda b: 1)).serve([1, 2])


@pytest.mark.parametrize("device_policy", ["s3fifo", "gdsf", "vllm", "chapter"])
def test_any_course_policy_decides_on_the_device(device_policy):
    from solutions import KVCacheSchedulerSim

    spec = KVCacheSchedulerSim if device_policy == "chapter" else device_policy
    out = tier_replay(TRACE[:300], spec, 60, 120, rule="write_back", costs=COSTS)
    assert out["prefix_hits_by_tier"]["host"] > 0
    assert sum(out["blocks_held"].values()) <= 180


def test_exclusive_tiers_refuse_a_lower_policy_that_cannot_give_a_block_back():
    with pytest.raises(ValueError, match="cannot give a block back"):
        build_hierarchy("lru", 4, 4, rule="demote", lower_policy="s3fifo")
    build_hierarchy("lru", 4, 4, rule="write_back", lower_policy="s3fifo")  # inclusive: any policy
    with pytest.raises(ValueError, match="needs a host tier"):
        build_hierarchy("lru", 4, 0, 8)
    with pytest.raises(ValueError, match="unknown write policy"):
        build_hierarchy("lru", 4, 4, rule="write_sideways")
    h = build_hierarchy("lru", 2, 2)
    h.serve([1])
    with pytest.raises(TypeError):
        h.serve([2, [3]])  # an unhashable key: refused before anything changes
    assert list(h.policies[0].entries) == [1] and h.stats.requests == 1
    with pytest.raises(ValueError, match="fresh"):
        used = make_policy("lru", 4)
        used.touch(1, 1)
        TierHierarchy([used], Demote())


def test_modeled_time_saved_counts_each_tier_at_its_cost():
    out = tier_replay(requests([1, 2], [1, 2], [3, 4, 5], [1, 2]), "lru", 2, 4, rule="demote", costs=COSTS)
    hits = out["prefix_hits_by_tier"]
    assert hits == {"device": 2, "host": 2}
    saved = out["modeled_ttft_saved_s"]
    assert saved["device"] == pytest.approx(2 * 1.0) and saved["host"] == pytest.approx(2 * (1.0 - 0.1))
    assert saved["total"] == pytest.approx(3.8)


# -- costs and the break-even -------------------------------------------------------------------
def test_break_even_moving_wins_for_big_models_over_pcie():
    rows = {r["model"]: r for r in breakeven_table()}
    assert rows["Llama-3-8B"]["kv_bytes_per_token"] == 131072
    for name in ("Llama-3-8B", "Llama-3-70B", "Qwen2.5-7B"):
        assert rows[name]["breakeven_bytes_per_s"] < LINKS["PCIe 4.0 x16"]
        assert rows[name]["recompute_over_move"]["PCIe 4.0 x16"] > 1
    # 70B spends more FLOPs per KV byte than 8B: its break-even link is slower
    assert breakeven_bandwidth("Llama-3-70B", 989e12) < breakeven_bandwidth("Llama-3-8B", 989e12)
    costs = model_costs("Llama-3-8B")
    assert costs.block_bytes == 512 * 131072 and costs.recompute_s > costs.host_to_device_s > 0
    with pytest.raises(ValueError, match="unknown link"):
        model_costs(host_link="carrier pigeon")


def test_break_even_counted_for_a_causal_prefill_rises_but_keeps_the_notebooks_conclusions():
    # Notebook 09 states the table's generous count for recompute (4,096 keys for every token, the
    # lm_head on every token) and shows the other count: attention at the causal mean, 2,048 keys,
    # and no lm_head per token. Fewer FLOPs per token: the break-even link is faster.
    generous = {r["model"]: r for r in breakeven_table()}
    causal = {r["model"]: r for r in breakeven_table(context_tokens=2048, lm_head_every_token=False)}
    rise = {m: causal[m]["breakeven_bytes_per_s"] / generous[m]["breakeven_bytes_per_s"] - 1 for m in generous}
    assert 0.04 < min(rise.values()) and max(rise.values()) < 0.55, rise  # 5 % (Llama-3-70B) to 50 % (Qwen2.5-0.5B)
    assert max(rise, key=rise.get) == "Qwen2.5-0.5B"  # the lm_head weighs most in the smallest model
    for name, row in causal.items():  # moving still wins over PCIe and a local NVMe disk, for all four
        assert row["recompute_over_move"]["NVMe SSD (PCIe 4.0)"] > 1, name
        assert row["breakeven_bytes_per_s"] == pytest.approx(
            row["kv_bytes_per_token"] / (row["flops_per_token"] / (989e12 * 0.5)))
    assert causal["Llama-3-8B"]["recompute_over_move"]["10 GbE"] < 1 < causal["Llama-3-70B"]["recompute_over_move"]["10 GbE"]


def test_measured_costs_are_positive_and_the_round_trip_is_exact():
    m = measure_tier_costs(num_blocks=4, tokens_per_block=8, repeats=1, device="cpu")
    assert m["round_trip_exact"] and m["block_bytes"] == 512 * 8
    assert all(v > 0 for v in m["per_block_s"].values())
    assert m["costs"].move_s(0, 2) == pytest.approx(m["costs"].device_to_host_s + m["costs"].host_to_disk_s)


def _batched_copy_roundtrip(device):
    from kvsched_lab.kv.tiers.stores import HostBlockPool, copy_blocks_batched
    pool = TinyDecoder(device=device).make_pool(6, 4)
    pool.kv.copy_(torch.randn(pool.kv.shape, generator=torch.Generator().manual_seed(0)).to(pool.kv))
    host = HostBlockPool(pool, 5)
    src, dst = [4, 0, 2], [1, 3, 0]  # any blocks, in any order
    shape = (pool.num_layers, 2, 3, 4, pool.num_kv_heads, pool.head_dim)
    dev_staging = torch.empty(shape, dtype=pool.dtype, device=pool.device)
    host_staging = torch.empty(shape, dtype=pool.dtype, pin_memory=host.pinned)
    copy_blocks_batched(pool.kv, torch.tensor(src, device=pool.device), host.kv, torch.tensor(dst),
                        dev_staging, host_staging)
    for s, d in zip(src, dst):
        assert torch.equal(host.kv[:, :, d], pool.kv[:, :, s].cpu()), (s, d)
    assert not host.kv[:, :, [2, 4]].any()  # blocks nobody copied stay untouched
    back = torch.tensor([5, 1, 3], device=pool.device)  # and up again into other device blocks
    copy_blocks_batched(host.kv, torch.tensor(dst), pool.kv, back, host_staging, dev_staging)
    if pool.device.type == "cuda":
        torch.cuda.synchronize()
    for s, b in zip(src, back.tolist()):
        assert torch.equal(pool.kv[:, :, b], pool.kv[:, :, s]), (s, b)
    return host


def test_batched_copy_moves_the_named_blocks_in_one_transfer_cpu():
    assert not _batched_copy_roundtrip("cpu").pinned
    m = measure_tier_costs(num_blocks=4, tokens_per_block=8, repeats=1, device="cpu")
    assert m["per_block_s"]["device_to_host_batched_s"] > 0 and m["per_block_s"]["host_to_device_batched_s"] > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_batched_copy_on_cuda_through_pinned_staging():
    assert _batched_copy_roundtrip("cuda").pinned


# -- real blocks --------------------------------------------------------------------------------
def test_round_trip_through_host_and_disk_gives_identical_logits_cpu():
    out = round_trip_check(device="cpu")
    assert out["hit_tiers"] == {"device": [0] * 5, "host": [1] * 5, "disk": [2] * 5}
    assert out["blocks_equal"] and out["logits_identical"] and out["ok"], out
    assert max(out["max_diff_vs_recompute"].values()) <= 1e-4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_round_trip_on_cuda_within_the_fp16_bound_with_pinned_host_memory():
    out = round_trip_check(device="cuda")
    assert out["dtype"] == "float16" and out["ok"], out


# Short prompts of the Mooncake synthetic trace: blocks come back from the host and from the disk.
SHORT = [r for r in sort_by_arrival(load_named_trace("mooncake:synthetic")) if 0 < len(r.hash_ids) <= 6][:40]


@pytest.mark.parametrize("rule, disk", [("demote", 24), ("write_through", 0), ("write_back", 0),
                                        ("write_through_selective", 24)])
def test_real_blocks_follow_the_hierarchy_for_every_rule(rule, disk, tmp_path):
    out = tiered_real_kv_replay(SHORT, "lru", 8, 12, disk, rule=rule, tokens_per_block=4, device="cpu",
                                check_every=5, disk_folder=tmp_path)
    assert out["copies_match_hierarchy"] and out["logits_ok"], out
    assert out["prefix_hits"] > out["prefix_hits_by_tier"]["device"] and out["real_copies"]["device_to_host"] > 0
    trace_level = tier_replay(SHORT, "lru", 8, 12, disk, rule=rule, costs=COSTS)
    assert trace_level["prefix_hits_by_tier"] == out["prefix_hits_by_tier"]  # same decisions, ids or tokens


# -- the command line ---------------------------------------------------------------------------
def test_kvsched_replay_with_tiers_json(capsys):
    argv = ["replay", "--trace", "synthetic", "--policy", "lru", "--capacity-blocks", "100", "--host-blocks", "300",
            "--disk-blocks", "300", "--max-requests", "300", "--json", "--quiet"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["prefix_hits_by_tier"]) == {"device", "host", "disk"}
    assert out["bytes_moved"]["device_to_host"] == out["blocks_moved"]["device_to_host"] * 512 * 131072
    assert out["modeled_ttft_saved_s"]["total"] > 0 and out["write_policy"] == "demote"
    assert main(argv[:-6] + ["--write-policy", "write_through_selective", "--max-requests", "50", "--json",
                             "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["write_policy"] == "write_through_selective"


def test_kvsched_replay_real_kv_tiers_and_bad_options(capsys):
    assert main(["replay", "--trace", "synthetic", "--capacity-blocks", "40", "--host-blocks", "80", "--real-kv",
                 "--max-requests", "12", "--tokens-per-block", "4", "--device", "cpu", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["copies_match_hierarchy"] and out["logits_ok"]
    for bad, message in ((["--disk-blocks", "5"], "needs --host-blocks"), (["--host-blocks=-1"], ">= 0"),
                         (["--write-policy", "write_back"], "give --host-blocks")):
        assert main(["replay", "--trace", "synthetic", "--capacity-blocks", "10", *bad]) == 2
        assert message in capsys.readouterr().err


def test_a_prefix_from_any_tier_gives_the_same_last_block_logits():
    from kvsched_lab.kv.tiers.measure import prefix_ttft

    out = prefix_ttft(num_blocks=4, tokens_per_block=8, repeats=1, device="cpu")
    assert set(out["seconds"]) == {"recompute", "device", "host", "disk"} and all(v > 0 for v in out["seconds"].values())
    assert out["logits_identical"] and out["max_diff_vs_recompute"] <= 1e-4
