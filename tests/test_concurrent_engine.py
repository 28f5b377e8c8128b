"""The concurrent engine (kvsched_lab/kv/): ref-counted blocks, decode, pinning, preemption, and exact outputs."""
from __future__ import annotations

import copy
import json
import random
import re
from types import SimpleNamespace

import pytest

from kvsched_lab.i18n.width import display_width
from kvsched_lab.kv.block_manager import RefCountedBlockManager
from kvsched_lab.kv.concurrent import ConcurrentConfig, ConcurrentEngine, run_concurrent
from kvsched_lab.kv.model import TinyDecoder, TinyDecoderConfig

BS = 4
CFG = TinyDecoderConfig(vocab_size=64, dim=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8,
                        ffn_hidden=64, max_positions=256)
MODEL = TinyDecoder(CFG, device="cpu")


def engine(num_blocks, max_running=4, max_output_tokens=12):
    return ConcurrentEngine(MODEL, ConcurrentConfig(num_blocks, BS, max_running, max_output_tokens))


def shared_prefix_requests(seed, n=10):
    """Prompts that share prefixes (a few system prompts, then per-request text), as a trace would."""
    rng = random.Random(seed)
    heads = [[rng.randrange(64) for _ in range(rng.choice([4, 8, 12]))] for _ in range(3)]
    return [(rng.choice(heads) + [rng.randrange(64) for _ in range(rng.randint(1, 9))], rng.randint(2, 12))
            for _ in range(n)]


def run_checked(eng, requests):
    for prompt, out in requests:
        eng.submit(prompt, out)
    while eng.waiting or eng.running:
        eng.step()
        eng.check_consistency()  # pins == running requests' block tables, after every step
        assert eng.blocks.num_used_blocks <= eng.config.num_blocks
    return eng.report()


# -- the block manager ---------------------------------------------------------------------------
def test_block_manager_evicts_only_free_blocks_and_frees_tail_first():
    m = RefCountedBlockManager(MODEL.make_pool(4, BS))
    a = [m.allocate() for _ in range(3)]  # blocks 0, 1, 2 pinned, 3 free
    for key, block in zip("xyz", a):
        m.cache(key, block)
    m.release(a)  # tail first: the free queue is 3 (never used), then 2, 1, 0
    assert list(m.free) == [3, 2, 1, 0] and m.cached_prefix(["x", "y", "z"]) == [0, 1, 2]
    m.pin(0)  # "x" is read again: pinned, out of the free queue
    assert [m.allocate() for _ in range(3)] == [3, 2, 1] and m.num_evictions == 2  # "z", then "y" evicted
    assert m.allocate() is None and m.cached_prefix(["x", "y"]) == [0]  # 0 is pinned: never taken
    with pytest.raises(ValueError, match="no request holds it"):
        m.release([3, 3])  # the second release of 3 would find it free: refused before anything changes
    m.check([[0], [2], [1], [3]])


def test_block_manager_puts_freed_blocks_without_a_key_at_the_front():
    """vLLM's free_blocks, traced by hand: a request holding 0 (cached "a"), 1 (cached "b") and
    2 (a partial block, no key) ends. Tail first, 2 goes to the front (nobody can hit it: reuse it
    first), 1 then 0 to the back, behind the never-used 3."""
    m = RefCountedBlockManager(MODEL.make_pool(4, BS))
    table = [m.allocate() for _ in range(3)]
    m.cache("a", table[0])
    m.cache("b", table[1])
    m.release(table)
    assert list(m.free) == [2, 3, 1, 0]
    assert m.allocate() == 2 and m.num_evictions == 0  # the keyless block: no eviction
    table = [2, m.allocate()]  # then 3: a request holding two keyless blocks
    m.release(table)  # tail first: 3, then 2, both to the front in that order
    assert list(m.free) == [3, 2, 1, 0] and m.cached_prefix(["a", "b"]) == [0, 1]


def test_block_manager_caches_duplicate_full_blocks_as_vllm_does():
    m = RefCountedBlockManager(MODEL.make_pool(4, BS))
    first, second = m.allocate(), m.allocate()
    m.cache("k", first)
    m.cache("k", second)  # the same prefix block computed twice: both cached
    assert m.cached == {"k": {first: None, second: None}} and m.cached_prefix(["k"]) == [first]
    m.release([first])
    m.release([second])
    m.check([])
    assert [m.allocate() for _ in range(3)] == [2, 3, first] and m.cached_prefix(["k"]) == [second]
    assert m.num_evictions == 1 and m.key_of == {second: "k"}


# -- running -------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tight_pool_preempts_yet_every_output_equals_a_full_recompute(seed):
    reqs = shared_prefix_requests(seed)
    eng = engine(num_blocks=14)
    report = run_checked(eng, reqs)
    assert report.requests_finished == len(reqs) and report.preemptions > 0
    assert report.peak_blocks_in_use == 14 and max(report.blocks_in_use) <= 14
    assert len(report.blocks_in_use) == report.steps == len(report.running)
    result = eng.check_outputs()
    assert result["checked"] == len(reqs) and result["preempted_checked"] == report.requests_preempted > 0
    assert result["match"] and result["max_abs_logit_diff"] <= result["tolerance"]
    # ... and the same tokens as an uninterrupted run, with room for everything.
    roomy = engine(num_blocks=200, max_running=len(reqs))
    assert run_checked(roomy, reqs).preemptions == 0
    assert [r.generated for r in roomy.requests] == [r.generated for r in eng.requests]


def test_the_check_fails_when_a_pinned_block_is_overwritten():
    # The output check must be able to fail: corrupt a running request's K/V mid-decode.
    eng = engine(num_blocks=40)
    eng.submit(list(range(10)), 8)
    eng.step()
    eng.step()
    eng.blocks.pool.kv[:, :, eng.running[0].block_table[0]] += 1.0
    eng.run()
    result = eng.check_outputs()
    assert result["max_abs_logit_diff"] > result["tolerance"] and not result["match"]


def test_the_most_recently_admitted_request_is_preempted_and_recomputed():
    # Two 7-token prompts in 5 blocks of 4 tokens: each holds 2 blocks after prefill. At step 3
    # both need a third block (position 8) and one is free: the first takes it, and the second,
    # admitted last, is preempted (not the first, which asked first).
    eng = engine(num_blocks=5, max_running=2, max_output_tokens=12)
    first, second = eng.submit([1] * 7, 12), eng.submit([2] * 7, 6)
    eng.step()  # both admitted and prefilled: 7 tokens each, 1 sampled each
    assert eng.running == [first, second] and eng.blocks.num_used_blocks == 4
    eng.step()  # both decode position 7, in their second block
    eng.step()  # first takes the free block for position 8; second needs one too: preempted
    assert eng.preempted_requests == [1] and eng.running == [first] and list(eng.waiting) == [second]
    assert second.num_computed_tokens == 8 and list(eng.blocks.free) == [3, 2]  # its blocks, deepest first
    # First needs blocks at positions 12 and 16: it evicts second's two cached blocks (deepest
    # first), so when first finishes, second recomputes all 8 tokens it had computed; taking 3
    # blocks then, it evicts first's two cached deepest ones (8-11 and 12-15; 16-17 is partial).
    report = eng.run()
    assert report.requests_finished == 2 and report.preempted_requests == [1] and report.evictions == 4
    assert report.tokens_recomputed == 8
    assert eng.check_outputs()["match"]


def test_a_repeated_prompt_reuses_cached_blocks():
    eng = engine(num_blocks=30, max_running=1)
    prompt = list(range(13))  # 3 full blocks and one token
    report = run_checked(eng, [(prompt, 3), (prompt, 3)])
    assert report.prefill_tokens_cached == 12 and report.prefill_tokens_queried == 26
    assert eng.requests[0].generated == eng.requests[1].generated


@pytest.mark.parametrize("prompt, out, error", [
    ([], 3, ValueError), ([1, 64], 3, ValueError), ([1, -1], 3, ValueError), ([1, 2], 0, ValueError),
    ([1, 2], True, ValueError), ([1, 2], 2.0, ValueError), (list(range(60)) * 2, 12, ValueError),
    ([1, 2.0], 3, TypeError), (["a"], 3, TypeError),
])
def test_bad_requests_are_rejected_without_changing_state(prompt, out, error):
    eng = engine(num_blocks=20)
    eng.submit([1, 2, 3], 2)
    before = (copy.deepcopy(eng.requests), list(eng.waiting))
    with pytest.raises(error):
        eng.submit(prompt, out)
    assert (eng.requests, list(eng.waiting)) == before
    assert eng.run().requests_finished == 1


@pytest.mark.parametrize("field", ["num_blocks", "tokens_per_block", "max_running", "max_output_tokens",
                                   "max_num_batched_tokens"])
def test_bad_config_is_rejected(field):
    good = dict(num_blocks=8, tokens_per_block=4, max_running=2, max_output_tokens=4, max_num_batched_tokens=None)
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match=field):
            ConcurrentConfig(**{**good, field: bad})


# -- chunked prefill ------------------------------------------------------------------------------
def test_a_long_prompt_is_prefilled_over_several_steps_under_the_token_budget():
    """Budget 8 tokens a step, a prompt of 30 and another of 5, traced by hand. Step 1: 8 tokens of
    the long prompt (its admission takes the whole budget). Steps 2-3: 8 more each. Step 4: its last
    6 tokens (it samples its first token), then the short prompt is admitted with the 2 tokens left.
    Step 5: the long one decodes (1), the short one prefills its last 3 and samples."""
    eng = ConcurrentEngine(MODEL, ConcurrentConfig(num_blocks=20, tokens_per_block=BS, max_running=4,
                                                   max_output_tokens=3, max_num_batched_tokens=8))
    long_, short = eng.submit(list(range(1, 31)), 3), eng.submit([40, 41, 42, 43, 44], 3)
    computed = []
    for _ in range(5):
        eng.step()
        eng.check_consistency()
        computed.append((long_.num_computed_tokens, len(long_.generated), short.num_computed_tokens,
                         len(short.generated)))
    assert computed == [(8, 0, 0, 0), (16, 0, 0, 0), (24, 0, 0, 0), (30, 1, 2, 0), (31, 2, 5, 1)]
    report = eng.run()
    assert report.partial_prefills == 4  # three chunks of the long prompt, one of the short
    result = eng.check_outputs()
    assert result["checked"] == 2 and result["match"] and result["max_abs_logit_diff"] <= result["tolerance"]


def test_chunked_prefill_with_preemption_still_equals_a_full_recompute():
    reqs = shared_prefix_requests(3, n=6)
    eng = ConcurrentEngine(MODEL, ConcurrentConfig(num_blocks=12, tokens_per_block=BS, max_running=4,
                                                   max_output_tokens=8, max_num_batched_tokens=5))
    report = run_checked(eng, reqs)
    assert report.requests_finished == len(reqs) and report.partial_prefills > 0 and report.preemptions > 0
    result = eng.check_outputs()
    assert result["checked"] == len(reqs) and result["match"] and result["max_abs_logit_diff"] <= result["tolerance"]


def test_run_concurrent_on_trace_requests_reports_every_figure(monkeypatch):
    rng = random.Random(5)
    trace = [SimpleNamespace(hash_ids=[1, 2] + [rng.randrange(100, 200) for _ in range(rng.randint(0, 3))],
                             output_length=rng.randint(1, 40)) for _ in range(8)]
    report = run_concurrent(trace, ConcurrentConfig(num_blocks=16, tokens_per_block=BS, max_running=4,
                                                    max_output_tokens=10), model=MODEL, check="all")
    s = report.summary()
    assert s["requests_finished"] == 8 and s["outputs_checked"] == 8 and s["outputs_match"] is True
    assert s["prefix_hit_rate"] > 0  # every prompt starts with blocks 1, 2
    assert s["tokens_generated"] == sum(min(r.output_length, 10) for r in trace)
    assert {"preemptions", "tokens_recomputed", "peak_blocks_in_use"} <= set(s)
    # The printed summary names every figure once, in the learner's language, values in one column.
    def value_columns(lines):
        return {display_width(line) - display_width(line.split()[-1]) for line in lines}

    from kvsched_lab.kv.concurrent_report import SUMMARY_LABELS
    assert set(s) <= set(SUMMARY_LABELS), "a new figure of the report needs its label"
    lines = report.summary_text().splitlines()
    assert len(lines) == len(s) and lines[1].startswith("requests finished") and lines[1].endswith(" 8")
    monkeypatch.setenv("KVSCHED_LANG", "zh")
    zh = report.summary_text().splitlines()
    assert len(zh) == len(s) and all(re.search(r"[\u4e00-\u9fff]", line) for line in zh)
    assert len(value_columns(lines)) == 1 and len(value_columns(zh)) == 1
    # the rows a notebook shows as a table (notebook 08): the same figures, labels in Chinese
    rows = report.summary_rows()
    assert rows[1][0] == "完成的请求数" and [v for _label, v in rows] == [line.split()[-1] for line in zh]
    with pytest.raises(ValueError, match="check"):
        run_concurrent(trace, ConcurrentConfig(num_blocks=16), model=MODEL, check="some")


def test_a_trace_with_one_request_too_long_for_the_pool_queues_nothing():
    eng = engine(num_blocks=4)
    trace = [SimpleNamespace(hash_ids=[1, 2], output_length=3), SimpleNamespace(hash_ids=[1, 2, 3, 4], output_length=3)]
    with pytest.raises(ValueError, match="trace request 1: .* needs 5 blocks; the pool has 4"):
        eng.submit_trace(trace)
    assert not eng.requests and not eng.waiting
    eng.submit_trace(trace[:1])
    assert eng.run().requests_finished == 1


def test_cli_concurrent_mode(capsys):
    from kvsched_lab.cli.main import main

    args = ["replay", "--trace", "synthetic", "--policy", "vllm", "--concurrent", "--capacity-blocks", "600",
            "--max-num-batched-tokens", "64",
            "--tokens-per-block", "4", "--max-requests", "3", "--max-output-tokens", "3", "--device", "cpu",
            "--json", "--quiet"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["requests_finished"] == 3 and out["outputs_match"] is True and out["tokens_generated"] <= 9
    assert out["partial_prefills"] > 0  # synthetic prompts are hundreds of tokens: chunked under 64 a step
    assert main(args[:4] + ["lru"] + args[5:]) == 2 and "use --policy vllm" in capsys.readouterr().err
