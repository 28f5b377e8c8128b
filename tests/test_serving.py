"""Tenants, tenant-aware caches and the prefill server (kvsched_lab/sim/serving/, notebook 10).

The anchors: with one tenant the tenant replay is the course's replay, hit for hit, and with one
worker, first come first served and admit-all the server's cache sees the same protocol. Then
each policy and each rule on hand-made cases small enough to check by hand.
"""
from __future__ import annotations

import pytest

from kvsched_lab.sim.policies import POLICIES
from kvsched_lab.sim.replay import replay
from kvsched_lab.sim.serving.server import ADMISSIONS, DISCIPLINES, AdmissionInfo, PrefillCost, ProtectedLRU, serve
from kvsched_lab.sim.serving.tenant_cache import (FairShareLRU, PriorityLRU, QuotaLRU, jain_index, tenant_replay,
                                                  weighted_chapter)
from kvsched_lab.sim.serving.tenants import (BATCH, INTERACTIVE, ServiceClass, Tenant, Workload, assign_tenants,
                                             conversation_key, flood, shared_heads, single_tenant,
                                             with_noisy_neighbour)
from kvsched_lab.sim.traces import Request, load_trace, resolve_trace, sort_by_arrival, synthetic_trace

COST = PrefillCost(per_token_s=1e-3)  # 0.512 s per uncached 512-token block


@pytest.fixture(scope="module")
def conversation():
    return sort_by_arrival(load_trace(resolve_trace("conversation")))[:2000]


def req(t_ms, ids):
    return Request(t_ms, 512 * len(ids), 1, tuple(ids))


# -- the anchors: one tenant, no deadlines, admit-all = today's replay --------------------------------
@pytest.mark.parametrize("capacity", [300, 2000])
def test_one_tenant_replays_exactly_like_the_replay(conversation, capacity):
    plain = replay(conversation, "lru", capacity)
    ours = tenant_replay(single_tenant(conversation), "lru", capacity)
    assert ours.prefix_hits == {"all": plain.prefix_hits}
    assert ours.block_refs == {"all": plain.block_refs}
    direct = POLICIES["lru"](capacity).replay_requests([r.hash_ids for r in conversation], 1)
    assert ours.per_request_hits == direct


def test_one_worker_fcfs_admit_all_serves_the_replay_protocol(conversation):
    plain = replay(conversation, "lru", 2000)
    out = serve(single_tenant(conversation), 2000, COST, workers=1, discipline="fcfs", admission="all")
    assert (out.prefix_hits, out.block_refs) == (plain.prefix_hits, plain.block_refs)
    assert out.rejected == 0 and out.preemptions == 0


# -- tenants ----------------------------------------------------------------------------------------
def test_tenants_are_deterministic_keep_a_conversation_together_and_follow_the_shares():
    trace = synthetic_trace(3000, seed=3)
    tenants = [Tenant("a", INTERACTIVE, 0.7), Tenant("b", BATCH, 0.3)]
    first = assign_tenants(trace, tenants, seed=5)
    again = assign_tenants(list(reversed(trace)), tenants, seed=5)  # file order does not matter
    assert dict(zip(first.requests, first.tenant_of)) == dict(zip(again.requests, again.tenant_of))
    assert 0.6 < first.counts()["a"] / len(trace) < 0.8
    heads = shared_heads(first.requests)
    by_key = {}
    for r, t in zip(first.requests, first.tenant_of):
        assert by_key.setdefault(conversation_key(r.hash_ids, heads), t) == t
    assert assign_tenants(trace, tenants, seed=6).tenant_of != first.tenant_of


def test_the_conversation_trace_has_one_shared_head_and_many_conversations(conversation):
    heads = shared_heads(conversation)
    assert heads == {0}  # every request starts with block 0
    assert len({conversation_key(r.hash_ids, heads) for r in conversation}) > 500


def test_bad_tenants_and_classes_are_refused():
    with pytest.raises(ValueError, match="sum to 1"):
        assign_tenants(synthetic_trace(10), [Tenant("a", BATCH, 0.5)])
    with pytest.raises(ValueError, match="unique"):
        assign_tenants(synthetic_trace(10), [Tenant("a", BATCH, 0.5), Tenant("a", BATCH, 0.5)])
    with pytest.raises(ValueError, match="ttft_deadline_s"):
        ServiceClass("x", 0, 0)
    with pytest.raises(ValueError, match="not defined"):
        Workload([req(0, [1])], ["ghost"], {})


def test_the_flood_is_unique_negative_never_hits_and_stays_in_its_window():
    ids = [i for r in flood(0, 10_000, 2.0, 5) for i in r.hash_ids]
    assert len(ids) == len(set(ids)) == 21 * 5 and max(ids) < 0
    base = single_tenant([req(t, [1, 2]) for t in range(0, 9001, 1000)])
    noisy = with_noisy_neighbour(base, Tenant("n", BATCH, 0.0), 1.0, 3, active=(0.5, 1.0))
    times = [r.timestamp for r, t in zip(noisy.requests, noisy.tenant_of) if t == "n"]
    assert times[0] >= 4500 and times == sorted(times)
    assert tenant_replay(noisy, "lru", 50).prefix_hits["n"] == 0


# -- tenant-aware caches ----------------------------------------------------------------------------
A, B = Tenant("a", INTERACTIVE, 0.5, weight=2.0), Tenant("b", BATCH, 0.5, weight=1.0)


def two_tenants(pairs):
    """A workload from (tenant, ids) pairs, one millisecond apart."""
    return Workload([req(i, ids) for i, (_, ids) in enumerate(pairs)], [t for t, _ in pairs], {"a": A, "b": B})


def test_quotas_keep_each_tenant_within_its_own_blocks():
    work = two_tenants([("a", [1, 2]), ("b", [10, 11, 12, 13]), ("a", [1, 2])])
    res = tenant_replay(work, lambda cap: QuotaLRU(cap, {"a": 2, "b": 2}), 4)
    assert res.prefix_hits == {"a": 2, "b": 0}  # b's four blocks could not push a's two out
    zero = tenant_replay(work, lambda cap: QuotaLRU(cap, {"a": 4, "b": 0}), 4)
    assert zero.prefix_hits["a"] == 2
    with pytest.raises(ValueError, match="sum to at most"):
        QuotaLRU(4, {"a": 3, "b": 2})


def test_sglang_priority_evicts_the_lowest_priority_first_and_a_block_keeps_its_highest():
    # b's block 5 is later touched by a: it keeps a's (higher) rank, as SGLang's max() does.
    work = two_tenants([("a", [1]), ("b", [5]), ("a", [5]), ("b", [6]), ("b", [7]), ("a", [1]), ("a", [5])])
    res = tenant_replay(work, PriorityLRU, 2)
    assert res.per_request_hits == [0, 0, 1, 0, 0, 0, 1]
    sim = PriorityLRU(2)
    tenant_replay(two_tenants([("b", [1]), ("a", [2]), ("b", [3])]), sim, 2)
    assert [k for op, k in sim.log.events() if op == "evict"] == [1]  # the batch block, though a's is older


def test_the_fair_share_takes_from_the_tenant_over_its_weighted_share():
    # a (weight 2) holds 2 blocks, b (weight 1) holds 1: counters 1 and 1; b's next miss takes from
    # the tenant named first among the largest counters; then b at 2 blocks (counter 2) pays itself.
    sim = FairShareLRU(3)
    tenant_replay(two_tenants([("a", [1, 2]), ("b", [10]), ("b", [11]), ("b", [12])]), sim, 3)
    evicted = [k for op, k in sim.log.events() if op == "evict"]
    assert evicted == [1, 10]
    assert sim.used == {"a": 1, "b": 2}


def test_the_chapter_weighted_by_tenant_is_the_chapter_at_weight_one():
    seed = POLICIES.get("seed")
    if seed is None:
        pytest.skip("the chapter's seed policy is withheld in this edition")
    trace = synthetic_trace(400, seed=2)
    plain = seed(300)
    plain.replay_requests([r.hash_ids for r in sort_by_arrival(trace)], 1)
    one = Workload(sort_by_arrival(trace), ["a"] * len(trace), {"a": Tenant("a", BATCH, 1.0, weight=1.0)})
    weighted = weighted_chapter(seed)(300)
    tenant_replay(one, weighted, 300)
    assert list(weighted.log) == list(plain.log)
    heavy = weighted_chapter(seed)(2)  # a's new block (weight 2) outranks b's reused one (weight 1)
    tenant_replay(two_tenants([("b", [1]), ("b", [1]), ("a", [2]), ("b", [3])]), heavy, 2)
    assert set(heavy.entries) == {2, 3}


def test_jain_index():
    assert jain_index([1, 1, 1]) == 1.0
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    assert jain_index([0, 0]) == 1.0
    with pytest.raises(ValueError):
        jain_index([])


# -- the server -------------------------------------------------------------------------------------
def served(pairs, **kw):
    """`serve` on (arrival ms, tenant, ids) triples; a: interactive (2 s), b: batch (30 s)."""
    work = Workload([req(t, ids) for t, _, ids in pairs], [n for _, n, _ in pairs], {"a": A, "b": B})
    return serve(work, kw.pop("capacity", 100), COST, **kw)


def test_priority_serves_the_urgent_first_and_fcfs_does_not():
    # A batch request of 2 blocks (1.024 s) occupies the worker; then a 4-block batch request and
    # a 1-block interactive one wait. FCFS serves the batch one first: the interactive TTFT misses 2 s.
    pairs = [(0, "b", [1, 2]), (10, "b", [4, 5, 6, 7]), (20, "a", [9])]
    fcfs = served(pairs, discipline="fcfs")
    prio = served(pairs, discipline="priority")
    assert fcfs.ttft_s[2] > 2.0 >= prio.ttft_s[2]
    assert fcfs.met_by_tenant["a"] == 0.0 and prio.met_by_tenant["a"] == 1.0
    edf = served(pairs, discipline="edf")
    assert edf.ttft_s == prio.ttft_s


def test_sglang_preemption_throws_away_the_running_prefill_and_counts_it_wasted():
    pairs = [(0, "b", [1, 2, 3, 4, 5]), (100, "a", [9])]
    out = served(pairs, discipline="priority-preempt")
    assert out.preemptions == 1
    assert out.ttft_s[1] == pytest.approx(0.512)  # the interactive one starts on arrival
    assert out.wasted_prefill_s == pytest.approx(0.1)  # the batch prefill's first 0.1 s
    assert served(pairs, discipline="priority").preemptions == 0  # vLLM's waiting request never preempts


def test_admission_rules():
    pairs = [(0, "b", list(range(1, 9))), (1, "b", list(range(11, 19))), (2, "a", [30])]
    fit = served(pairs, admission="fit", capacity=10)  # the second 8-block prompt does not fit in 2 free blocks
    assert fit.ttft_s[1] is None and fit.rejected == 1
    bypass = served(pairs, admission="bypass", capacity=10)
    assert bypass.rejected == 0
    predict = served(pairs, admission="predict", capacity=100)
    # the interactive request would wait ~8.2 s behind two 4.1 s prefills: refused at arrival
    assert predict.ttft_s[2] is None and predict.ttft_s[:2] != [None, None]
    mine = served(pairs, admission=lambda info: info.blocks < 5)
    assert [t is None for t in mine.ttft_s] == [True, True, False]
    seen = []
    served(pairs[:1], admission=lambda info: seen.append(info) or True, capacity=20)
    assert seen == [AdmissionInfo(8, 20, 0.0, pytest.approx(4.096), 30.0)]


def test_bypass_leaves_the_cache_alone():
    pairs = [(0, "b", [1, 2]), (5000, "b", list(range(10, 21))), (10_000, "b", [1, 2])]  # 11 blocks > 10
    cached = served(pairs, capacity=10, admission="all")
    bypassed = served(pairs, capacity=10, admission="bypass")
    assert cached.prefix_hits == 0 and bypassed.prefix_hits == 2  # the big prompt flushed 1, 2 only when cached


def test_protected_lru_evicts_blocks_no_waiting_request_holds_first():
    sim = ProtectedLRU(3)
    sim.replay_requests([[1], [2], [3]], 1)
    sim.hold([1, 9])
    sim.touch(4, 1)  # 1 is the oldest but held: 2 goes
    assert set(sim.entries) == {1, 3, 4}
    sim.release([1, 9])
    sim.touch(5, 1)
    assert 1 in sim.entries and 3 not in sim.entries  # released: it rejoined as recent


def test_bad_server_arguments_fail_before_any_work():
    work = single_tenant([req(0, [1])])
    for kwargs, message in (({"discipline": "sjf"}, "discipline"), ({"admission": "maybe"}, "admission"),
                            ({"workers": 0}, "workers"), ({"load": 0}, "load"),
                            ({"protect_queued": True, "policy": "fifo"}, "protect_queued")):
        with pytest.raises(ValueError, match=message):
            serve(work, 10, COST, **kwargs)
    with pytest.raises(ValueError, match="per_token_s"):
        PrefillCost(-1.0)
    assert set(DISCIPLINES) == {"fcfs", "priority", "priority-preempt", "edf"}
    assert set(ADMISSIONS) == {"all", "fit", "bypass", "predict"}


# -- the command line -------------------------------------------------------------------------------
def run_cli(capsys, *argv):
    from kvsched_lab.cli.main import main

    assert main(["replay", "--capacity-blocks", "500", "--max-requests", "400", "--quiet", "--json", *argv]) == 0
    import json

    return json.loads(capsys.readouterr().out)


def test_the_cli_with_one_tenant_no_deadlines_and_admit_all_equals_todays_replay(capsys):
    plain = run_cli(capsys)
    one = run_cli(capsys, "--tenants", "all=interactive:1")
    assert (one["prefix_hits"], one["block_refs"]) == (plain["prefix_hits"], plain["block_refs"])
    served = run_cli(capsys, "--deadlines", "--workers", "1", "--admission", "all")
    assert (served["prefix_hits"], served["block_refs"]) == (plain["prefix_hits"], plain["block_refs"])
    assert served["rejected"] == 0


def test_the_cli_reports_tenants_and_slos(capsys):
    out = run_cli(capsys, "--tenants", "chat=interactive:0.7:2,docs=batch:0.3", "--noisy-rate", "1",
                  "--tenant-policy", "priority")
    assert set(out["tenant_hit_rate"]) == {"chat", "docs", "flood"} and out["tenant_hit_rate"]["flood"] == 0
    slo = run_cli(capsys, "--deadlines", "--tenants", "chat=interactive:0.7,docs=batch:0.3", "--admission",
                  "predict", "--load", "3", "--discipline", "edf")
    assert slo["rejected"] > 0 and 0 <= slo["slo_attainment"] <= 1 and set(slo["met_by_tenant"]) == {"chat", "docs"}


def test_the_cli_says_what_predict_is_and_what_of_mooncake_it_leaves_out(capsys):
    from kvsched_lab.cli.main import main
    from kvsched_lab.sim.serving.server import ADMISSION_RULES, ADMISSIONS

    assert set(ADMISSION_RULES) == set(ADMISSIONS)
    out = run_cli(capsys, "--deadlines", "--admission", "predict")
    rule = out["admission_rule"]
    for part in ("predicted TTFT", "Algorithm 1", "section 4.1", "decoding load", "6.2-6.4", "not modelled"):
        assert part in rule
    with pytest.raises(SystemExit):
        main(["replay", "--help"])
    assert "Algorithm 1" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("argv, message", [
    (["--tenants", "chat=gold:1"], "name=class:share"),
    (["--tenants", "chat=batch:x"], "must be numbers"),
    (["--tenants", "a=batch:0.5"], "sum to 1"),
    (["--deadlines", "--concurrent"], "block ids"),
    (["--deadlines", "--tenant-policy", "quota"], "drop --tenant-policy"),
])
def test_the_cli_refuses_bad_serving_options_before_reading_the_trace(argv, message, monkeypatch, capsys):
    from kvsched_lab.cli import replay as cli_replay
    from kvsched_lab.cli.main import main

    monkeypatch.setattr(cli_replay, "load_requests", lambda args: pytest.fail("read the trace first"))
    assert main(["replay", "--capacity-blocks", "500", "--quiet", *argv]) != 0
    assert message in capsys.readouterr().err

