"""The replay protocol of `kvsched_lab.sim.replay`, on traces small enough to check by hand."""
import json
from pathlib import Path

import pytest

from kvsched_lab.cli.main import main
from kvsched_lab.sim.replay import replay
from kvsched_lab.sim.traces import Request, save_trace, sort_by_arrival
from solutions import KVCacheSchedulerSim

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"

# Arrival order after the stable sort: r1 (t=0), r3 (t=3), r2 (t=5), r4 (t=5, after r2).
HAND_TRACE = [
    Request(0, 1536, 1, (1, 2, 3)),   # r1
    Request(5, 1536, 1, (1, 2, 4)),   # r2
    Request(3, 1024, 1, (1, 5)),      # r3
    Request(5, 1536, 1, (1, 2, 3)),   # r4
]


def test_reference_scheduler_by_hand():
    # Capacity 3 blocks, the chapter's score (lowest hits, then oldest, goes first):
    # r1 adds 1,2,3 -> 0 hits. r3: 1 cached, 5 not -> 1 hit; touching 5 evicts 2.
    # r2: 1 cached, 2 not -> 1 hit; 2 evicts 3, 4 evicts 5. r4: 1,2 cached, 3 not -> 2 hits.
    res = replay(HAND_TRACE, KVCacheSchedulerSim, 3)
    assert (res.requests, res.block_refs, res.prefix_hits) == (4, 11, 4)
    assert res.prefix_hit_rate == pytest.approx(4 / 11)


def test_hits_count_only_the_leading_run():
    # Block 9 is cached but follows a miss, so it is not a prefix hit.
    trace = [Request(0, 1024, 1, (8, 9)), Request(1, 1024, 1, (7, 9))]
    res = replay(trace, KVCacheSchedulerSim, 10)
    assert res.prefix_hits == 0


def test_hits_are_measured_before_the_request_touches_anything():
    # Capacity 1: the request's own touches evict its first block, but hits were counted first.
    trace = [Request(0, 512, 1, (1,)), Request(1, 1024, 1, (1, 2))]
    assert replay(trace, KVCacheSchedulerSim, 1).prefix_hits == 1


def test_replay_rejects_bad_capacity_and_used_scheduler():
    with pytest.raises(ValueError, match="capacity_blocks"):
        replay(HAND_TRACE, KVCacheSchedulerSim, 0)
    used = KVCacheSchedulerSim(3)
    used.touch(1, 1)
    with pytest.raises(ValueError, match="fresh"):
        replay(HAND_TRACE, used, 3)
    with pytest.raises(ValueError, match="capacity_bytes"):
        replay(HAND_TRACE, KVCacheSchedulerSim(5), 3)


def test_cli_replay_json_by_hand(tmp_path, capsys):
    # LRU, capacity 3: r1 0 hits; r3 1 (5 evicts 2); r2 1 (2 evicts 3, 4 evicts 5); r4 2.
    path = tmp_path / "hand.jsonl"
    save_trace(HAND_TRACE, path)
    assert main(["replay", "--trace", str(path), "--policy", "lru", "--capacity-blocks", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == "lru" and out["capacity_blocks"] == 3
    assert (out["requests"], out["block_refs"], out["prefix_hits"]) == (4, 11, 4)
    assert out["prefix_hit_rate"] == pytest.approx(4 / 11)


def test_cli_reports_bad_trace_line(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 0}\n')
    assert main(["replay", "--trace", str(path), "--capacity-blocks", "3"]) == 2
    assert "bad.jsonl:1" in capsys.readouterr().err


@pytest.mark.skipif(not SHARED.is_dir(), reason="real Mooncake traces not available")
def test_cli_lru_matches_sanity_anchor_at_8k(capsys):
    trace = str(SHARED / "mooncake_conversation_trace.jsonl")
    assert main(["replay", "--trace", trace, "--policy", "lru", "--capacity-blocks", "8000",
                 "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["block_refs"] == 288500
    assert round(out["prefix_hit_rate"] * 100, 1) == 17.8


def test_library_policies_report_block_hits_and_the_bound_holds():
    from kvsched_lab.sim.traces import synthetic_trace

    trace = synthetic_trace(400, seed=5)
    bound = replay(trace, "belady", 300)
    for name in ("fifo", "lru", "s3fifo", "arc"):
        res = replay(trace, name, 300)
        assert res.prefix_hits <= res.block_hits <= bound.block_hits
    assert bound.block_hit_rate >= bound.prefix_hit_rate > 0
    assert replay(trace, KVCacheSchedulerSim, 300).block_hits is None  # the chapter's class does not count them


def test_cli_real_kv_replay_computes_only_the_misses(tmp_path, capsys):
    path = tmp_path / "hand.jsonl"
    save_trace(HAND_TRACE, path)
    assert main(["replay", "--trace", str(path), "--policy", "lru", "--capacity-blocks", "3", "--real-kv",
                 "--tokens-per-block", "4", "--device", "cpu", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    # Same hits as the trace-only replay (4 blocks of 4 tokens), computed tokens are the rest.
    assert out["protocol_hit_blocks"] == 4 and out["prefill_tokens_total"] == 11 * 4
    assert out["hit_tokens"] == 16 and out["prefill_tokens_computed"] == 44 - 16
    assert out["max_abs_logit_diff"] <= 1e-4 and out["device"] == "cpu"
    # LRU, 3 blocks, by hand: cached at arrival + fresh blocks = r1 0+3, r3 3+1, r2 3+2, r4 3+1.
    assert out["blocks_in_use_max"] == 5 and out["pool_blocks"] == 3 + 3


def test_replay_result_names_the_scheduler_and_counts_block_hits():
    # A library policy by name counts block hits too; a class, a factory or an instance do not.
    res = replay(HAND_TRACE, "lru", 3)
    assert (res.policy, res.capacity_blocks, res.prefix_hits, res.block_refs) == ("lru", 3, 4, 11)
    # LRU by hand, every touch: r1 none; r3 block 1; r2 block 1; r4 blocks 1, 2 (3 was evicted).
    assert res.block_hits == 4 and res.block_hit_rate == pytest.approx(4 / 11)
    # Block 9 is cached but follows a miss: a block hit, not a prefix hit.
    behind = replay([Request(0, 1024, 1, (8, 9)), Request(1, 1024, 1, (7, 9))], "lru", 10)
    assert (behind.prefix_hits, behind.block_hits, behind.block_hit_rate) == (0, 1, 0.25)
    row = res.to_dict()
    assert row["policy"] == "lru" and row["block_hits"] == 4 and set(row) == {
        "policy", "capacity_blocks", "requests", "block_refs", "prefix_hits", "prefix_hit_rate", "wall_seconds",
        "block_hits", "block_hit_rate", "metric", "prompt_tokens", "prefix_hit_tokens", "hits_per_request", "from_cache"}
    assert row["hits_per_request"] is None  # kept only when asked
    assert replay(HAND_TRACE, KVCacheSchedulerSim, 3).policy == "KVCacheSchedulerSim"

    def factory(capacity_bytes):
        return KVCacheSchedulerSim(capacity_bytes)

    by_factory = replay(HAND_TRACE, factory, 3)
    assert by_factory.policy == "factory" and by_factory.prefix_hits == 4
    by_instance = replay(HAND_TRACE, KVCacheSchedulerSim(3 * 7), 3, block_bytes=7)
    assert by_instance.policy == "KVCacheSchedulerSim" and by_instance.prefix_hits == 4
    assert by_instance.block_hits is None and by_instance.block_hit_rate is None


def test_per_request_hits_are_each_requests_leading_run_in_arrival_order():
    # By hand, LRU of 3 blocks in arrival order r1, r3, r2, r4: 0; 1 (block 1); 1 (block 1);
    # 2 (blocks 1, 2: r2 touched 1, 2, 4 last, so 3 was the least recent when 4 came).
    res = replay(HAND_TRACE, "lru", 3, per_request=True)
    assert res.hits_per_request == [0, 1, 1, 2] and sum(res.hits_per_request) == res.prefix_hits
    from kvsched_lab.sim.traces import synthetic_trace

    trace = synthetic_trace(1200, seed=5)  # three chunks: the list runs across them
    ids = [r.hash_ids for r in sort_by_arrival(trace)]
    from kvsched_lab.sim.policies import make_policy
    from kvsched_lab.sim.policies.base import generic_replay_requests

    vllm = replay(trace, "vllm", 150, per_request=True).hits_per_request  # its own request-aware loop
    assert vllm == make_policy("vllm", 150).replay_requests(ids, 1) and len(vllm) == 1200
    chapter = replay(trace, KVCacheSchedulerSim, 150, per_request=True).hits_per_request
    assert chapter == generic_replay_requests(KVCacheSchedulerSim(150), ids, 1) != vllm


def test_empty_trace_and_bad_capacities_in_full():
    res = replay([], "lru", 3)
    assert (res.requests, res.block_refs, res.prefix_hit_rate, res.block_hit_rate) == (0, 0, 0.0, 0.0)
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError) as info:
            replay(HAND_TRACE, "lru", bad)
        assert str(info.value) == f"capacity_blocks must be a positive int, got {bad!r}"
    with pytest.raises(ValueError) as info:
        replay(HAND_TRACE, KVCacheSchedulerSim(5), 3, block_bytes=2)
    assert str(info.value) == ("scheduler has capacity_bytes=5, but the replay asks for 6 "
                               "(capacity_blocks x block_bytes)")
    used = KVCacheSchedulerSim(3)
    used.touch(1, 1)
    with pytest.raises(ValueError) as info:
        replay(HAND_TRACE, used, 3)
    assert str(info.value) == "pass a fresh scheduler: this one already holds entries"


def test_long_replays_carry_state_across_chunks_and_show_progress(capsys):
    from kvsched_lab.sim.traces import synthetic_trace

    trace = synthetic_trace(1200, seed=7)  # more than two chunks of 500 requests
    quiet = replay(trace, KVCacheSchedulerSim, 200)
    assert capsys.readouterr().err == ""
    shown = replay(trace, KVCacheSchedulerSim, 200, progress=True)
    err = capsys.readouterr().err
    assert shown.prefix_hits == quiet.prefix_hits
    assert "replay KVCacheSchedulerSim: " in err and "0/1200" in err  # the bar knows the total
    assert "req/s" in err
    # The same, one request at a time through the chapter's API (`kvsched_lab.sim.replay`).
    sim, hits = KVCacheSchedulerSim(200), 0
    for r in sorted(trace, key=lambda r: r.timestamp):
        run = 0
        while run < len(r.hash_ids) and r.hash_ids[run] in sim.entries:
            run += 1
        hits += run
        for b in r.hash_ids:
            sim.touch(b, 1)
    assert quiet.prefix_hits == hits
    replay(trace[:1000], KVCacheSchedulerSim, 200, progress=True)  # two chunks: a bar
    assert "0/1000" in capsys.readouterr().err
    replay(trace[:999], KVCacheSchedulerSim, 200, progress=True)  # shorter: no bar
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("name", ["gdsf", "s3fifo-prefix"])
def test_policies_replay_through_their_own_request_aware_loop(name):
    """Prompt-aware policies price a block by its place in the request: touching block by block
    (the path for the chapter's schedulers) decides differently, so replay must use theirs."""
    from kvsched_lab.sim.policies import make_policy
    from kvsched_lab.sim.policies.base import generic_replay_requests
    from kvsched_lab.sim.traces import synthetic_trace

    trace = synthetic_trace(600, seed=3)
    ids = [r.hash_ids for r in sort_by_arrival(trace)]
    own = sum(make_policy(name, 300).replay_requests(ids, 1))
    assert replay(trace, name, 300).prefix_hits == own != sum(generic_replay_requests(make_policy(name, 300), ids, 1))


def test_any_factory_or_instance_replays_and_the_time_is_measured():
    import functools
    import time
    from types import SimpleNamespace

    t0 = time.perf_counter()
    res = replay(HAND_TRACE, functools.partial(KVCacheSchedulerSim), 3)  # a factory without a __name__
    assert res.policy == "KVCacheSchedulerSim" and res.prefix_hits == 4
    assert 0 <= res.wall_seconds <= time.perf_counter() - t0
    # An instance without capacity_bytes is taken at its word.
    inner = KVCacheSchedulerSim(3)
    bare = SimpleNamespace(entries=inner.entries, touch=inner.touch)
    assert replay(HAND_TRACE, bare, 3).prefix_hits == 4


# Four-token blocks, traced by hand. Only full blocks are cached (input_length // 4 of them), and
# a hit covers at most input_length - 1 tokens, in whole blocks ((input_length - 1) // 4).
TOKEN_TRACE = [
    Request(0, 10, 1, (1, 2, 3)),     # replays [1, 2] (3 is partial): 0 hits; 10 tokens
    Request(1, 8, 1, (1, 2)),         # [1, 2]: 2 cached, capped at 7 tokens -> 1 block = 4 tokens
    Request(2, 13, 1, (1, 2, 3, 4)),  # [1, 2, 3]: 1, 2 cached (3 never was) -> 8 tokens
    Request(3, 12, 1, (1, 2, 3)),     # [1, 2, 3]: all 3 cached, capped at 11 tokens -> 2 blocks = 8 tokens
]


def test_vllm_token_metric_by_hand():
    blocks = replay(TOKEN_TRACE, "vllm", 100, block_tokens=4)  # the protocol: hits 0 + 2 + 3 + 3 of 12 refs
    assert (blocks.metric, blocks.prefix_hits, blocks.block_refs, blocks.prompt_tokens) == ("blocks", 8, 12, None)
    assert blocks.prefix_hit_rate == pytest.approx(8 / 12)
    tokens = replay(TOKEN_TRACE, "vllm", 100, metric="vllm-tokens", block_tokens=4)
    assert (tokens.prefix_hit_tokens, tokens.prompt_tokens, tokens.block_refs) == (20, 43, 2 + 2 + 3 + 3)
    assert tokens.prefix_hits == 0 + 2 + 2 + 3  # uncapped hit blocks among the full blocks
    assert tokens.prefix_hit_rate == pytest.approx(20 / 43)
    with pytest.raises(ValueError, match="metric"):
        replay(TOKEN_TRACE, "vllm", 100, metric="tokens")
    with pytest.raises(ValueError, match="block_tokens"):
        replay(TOKEN_TRACE, "vllm", 100, metric="vllm-tokens", block_tokens=0)


def test_cli_replay_says_what_its_metric_counts(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    save_trace(HAND_TRACE, path)
    assert main(["replay", "--trace", str(path), "--policy", "vllm", "--capacity-blocks", "3", "--quiet",
                 "--metric", "vllm-tokens"]) == 0
    out = capsys.readouterr().out
    assert "vllm-tokens: prefix_hit_rate = cached prompt tokens / prompt tokens" in out
    assert "prompt_tokens" in out and "prefix_hit_tokens" in out
    assert main(["replay", "--trace", str(path), "--capacity-blocks", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metric"] == "blocks"
    assert main(["replay", "--trace", str(path), "--capacity-blocks", "3", "--concurrent",
                 "--policy", "vllm", "--metric", "vllm-tokens"]) == 2
    assert "--metric" in capsys.readouterr().err


def test_vllm_token_metric_gives_the_partial_last_block_its_slot():
    """In vLLM a prompt's partial last block holds a pool block while the request runs: at 3 blocks,
    request 1 (2 full blocks and 2 tokens) fills the pool, request 2's partial block evicts block 2
    (freed tail first), so request 3 hits 1 block, not 2."""
    trace = [Request(0, 10, 1, (1, 2, 9)), Request(1, 6, 1, (3, 8)), Request(2, 9, 1, (1, 2, 7))]
    res = replay(trace, "vllm", 3, metric="vllm-tokens", block_tokens=4)
    assert (res.prefix_hits, res.prefix_hit_tokens) == (1, 4)
    # radix has no hold_uncached: its partial blocks take no room, and request 3 hits both blocks.
    assert replay(trace, "radix", 3, metric="vllm-tokens", block_tokens=4).prefix_hit_tokens == 8


def test_vllm_token_metric_matches_vllms_own_figure_on_synthetic_8k():
    """vLLM 0.33.0 served the synthetic trace at 8,000 blocks with a 38.82% prefix-cache hit rate
    (issue 30); without the partial block's slot the replay printed 38.83%."""
    from kvsched_lab.sim.traces import load_trace, resolve_trace
    res = replay(load_trace(resolve_trace("synthetic")), "vllm", 8000, metric="vllm-tokens")
    assert f"{res.prefix_hit_rate:.2%}" == "38.82%"
