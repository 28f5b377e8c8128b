"""The policy zoo: each policy against a brute-force model of its own rules, plus the API contract.

Models are deliberately naive (lists, linear scans) transcriptions of each policy's rules; the
library must log exactly what they log. `seed`/`seed-compact` are checked against the chapter's
reference itself, Belady against an exhaustive optimum on tiny traces.
"""
import copy
import json
import random
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from kvsched_lab import check_invariants
from kvsched_lab.sim.policies import POLICIES, make_policy
from kvsched_lab.sim.policies.belady import next_uses
from kvsched_lab.sim.policies.gdsf import LLAMA3_8B_COST_SCALE as GDSF_SCALE, GDSFPolicy, block_cost
from policy_helpers import MostRecent, replay_by_touch
from solutions import KVCacheSchedulerSim

TRACES = Path("/work/shared/traces")
CONVERSATION = TRACES / "mooncake_conversation_trace.jsonl"

keys = st.integers(0, 7)
touches = st.lists(st.tuples(keys, st.integers(1, 4)), max_size=60)
unit_touches = st.lists(keys, max_size=60)
capacities = st.integers(4, 12)
request_lists = st.lists(st.lists(st.integers(0, 15), min_size=1, max_size=6), max_size=25)
FAST = settings(max_examples=150, deadline=None)


def build(name, capacity, seq=()):
    return make_policy(name, capacity, future=[k for k, _ in seq])


def run_checked(policy, seq):
    for key, size in seq:
        policy.touch(key, size)
        check_invariants(policy)
    return list(policy.log)


# -- brute-force models: each returns the log of its policy's rules on `seq` ------------------
def model_queue(seq, cap, on_hit_move):
    order, size, log = [], {}, []  # order: eviction order, first out first
    for k, b in seq:
        if k in size:
            if on_hit_move:
                order.remove(k)
                order.append(k)
            log.append(f"reuse:{k}")
            continue
        while sum(size.values()) + b > cap:
            old = order.pop(0)
            del size[old]
            log.append(f"evict:{old}")
        order.append(k)
        size[k] = b
        log.append(f"add:{k}")
    return log


def model_min_key(seq, cap, rank, on_evict=lambda state, k: None):
    """Evict the live key with the smallest rank(state, key); state[k] = [hits, last, size, depth]."""
    state, log, glob = {}, [], {"floor": 0.0}
    for t, (k, b, depth) in enumerate(seq, 1):
        if k in state:
            state[k][0] += 1
            state[k][1] = t
            state[k][3] = depth
            state[k][4] = rank(glob, state[k])
            log.append(f"reuse:{k}")
            continue
        while sum(s[2] for s in state.values()) + b > cap:
            old = min(state, key=lambda x: (state[x][4], state[x][1]))
            glob["floor"] = state[old][4]
            del state[old]
            log.append(f"evict:{old}")
        state[k] = [1, t, b, depth, 0.0]
        state[k][4] = rank(glob, state[k])
        log.append(f"add:{k}")
    return log


def model_s3fifo(seq, cap):
    """S3-FIFO as the module docstring states it; G: key -> bytes evicted from S before it entered."""
    small_target = cap // 10
    S, M, G, freq, size, log = [], [], {}, {}, {}, []
    evicted_from_s = 0  # bytes

    def used(q):
        return sum(size[k] for k in q)

    for k, b in seq:
        if k in freq:
            freq[k] = min(freq[k] + 1, 3)
            log.append(f"reuse:{k}")
            continue
        to_main = k in G and evicted_from_s - G.pop(k) <= cap - small_target
        while sum(used(q) for q in (S, M)) + b > cap:
            if S and (used(S) >= small_target or not M):
                old = S.pop(0)
                if freq[old] >= 1:
                    freq[old] = 0
                    M.append(old)
                    continue
                G[old] = evicted_from_s
                evicted_from_s += size[old]
            else:
                old = M.pop(0)
                if freq[old] > 0:
                    freq[old] -= 1
                    M.append(old)
                    continue
            del freq[old], size[old]
            log.append(f"evict:{old}")
        freq[k], size[k] = 0, b
        (M if to_main else S).append(k)
        log.append(f"add:{k}")
    return log


def model_arc(seq, c):
    """ARC, Figure 4 of Megiddo & Modha (FAST'03), unit sizes, lists LRU first."""
    T1, T2, B1, B2, log = [], [], [], [], []
    p = 0.0

    def replace(in_b2):
        if T1 and ((in_b2 and len(T1) == p) or len(T1) > p):
            old = T1.pop(0)
            B1.append(old)
        else:
            old = T2.pop(0)
            B2.append(old)
        log.append(f"evict:{old}")

    for x in seq:
        if x in T1 or x in T2:
            (T1 if x in T1 else T2).remove(x)
            T2.append(x)
            log.append(f"reuse:{x}")
            continue
        if x in B1:
            p = min(c, p + max(len(B2) / len(B1), 1))
            B1.remove(x)
            if len(T1) + len(T2) == c:
                replace(False)
            T2.append(x)
        elif x in B2:
            p = max(0.0, p - max(len(B1) / len(B2), 1))
            B2.remove(x)
            if len(T1) + len(T2) == c:
                replace(True)
            T2.append(x)
        else:
            if len(T1) + len(B1) == c:
                if len(T1) < c:
                    B1.pop(0)
                    replace(False)
                else:
                    log.append(f"evict:{T1.pop(0)}")
            elif len(T1) + len(T2) + len(B1) + len(B2) >= c:
                if len(T1) + len(T2) + len(B1) + len(B2) == 2 * c:
                    B2.pop(0)
                if len(T1) + len(T2) == c:
                    replace(False)
            T1.append(x)
        log.append(f"add:{x}")
    return log


def model_belady(seq, cap):
    future = [k for k, _ in seq]

    def next_use(t, k):
        # Never again counts as len(future) + the key's last touch: farther than any real use,
        # and among never-again keys the one touched last is evicted first (the policy's tie-break).
        last = max(j for j in range(t + 1) if future[j] == k)
        return next((j for j in range(t + 1, len(future)) if future[j] == k), len(future) + last)

    size, log = {}, []
    for t, (k, b) in enumerate(seq):
        if k in size:
            log.append(f"reuse:{k}")
            continue
        if sum(size.values()) + b > cap:
            if next_use(t, k) >= max(next_use(t, x) for x in size):
                log.append(f"skip:{k}")
                continue
            while sum(size.values()) + b > cap:
                old = max(size, key=lambda x: next_use(t, x))
                del size[old]
                log.append(f"evict:{old}")
        size[k] = b
        log.append(f"add:{k}")
    return log


# -- each policy == its model ----------------------------------------------------------------
@FAST
@given(touches, capacities)
def test_fifo_and_lru_follow_their_models(seq, cap):
    assert run_checked(build("fifo", cap), seq) == model_queue(seq, cap, on_hit_move=False)
    assert run_checked(build("lru", cap), seq) == model_queue(seq, cap, on_hit_move=True)


@FAST
@given(touches, capacities)
def test_lfu_follows_its_model(seq, cap):
    expected = model_min_key([(k, b, 1) for k, b in seq], cap, rank=lambda g, s: s[0])
    assert run_checked(build("lfu", cap), seq) == expected


@FAST
@given(st.lists(st.tuples(keys, st.integers(1, 4), st.integers(1, 5)), max_size=60), capacities,
       st.sampled_from([0.05, 1.0, GDSF_SCALE]))
def test_gdsf_follows_its_model(seq, cap, scale):
    # A small scale prices depth steeply, so shallower re-touches lower H (the eager-push path).
    expected = model_min_key(seq, cap, rank=lambda g, s: g["floor"] + s[0] * block_cost(s[3], scale) / s[2])
    policy = GDSFPolicy(cap, cost_scale=scale)
    for k, b, depth in seq:
        policy.touch(k, b, depth=depth)
        check_invariants(policy)
        assert len(policy.heap) <= 2 * len(policy.entries) + 64
    assert list(policy.log) == expected


def test_gdsf_cost_is_llama3_8b_prefill_flops():
    # Llama-3-8B, 512-token blocks: D = 6.98e9 weights / (2 * 32 layers * 4096 * 512) = 52.0.
    assert abs(GDSF_SCALE - 52.0) < 0.05
    assert abs(block_cost(1) - (1 + 0.501 / 52.0)) < 1e-4
    assert abs(block_cost(53) / block_cost(1) - 2.0) < 0.02  # depth 53 saves twice a first block


@pytest.mark.parametrize("scale", [0.05, GDSF_SCALE])
@FAST
@given(lists=request_lists, cap=st.integers(1, 12), bytes_=st.integers(1, 2))
def test_gdsf_fast_replay_equals_touch_loop_at_any_cost_scale(scale, lists, cap, bytes_):
    cap *= bytes_
    fast, slow = GDSFPolicy(cap, cost_scale=scale), GDSFPolicy(cap, cost_scale=scale)
    assert fast.replay_requests(lists, bytes_) == replay_by_touch(slow, lists, bytes_)
    assert state(fast) == state(slow)


@FAST
@given(touches, st.integers(4, 40))
def test_s3fifo_follows_its_model(seq, cap):
    assert run_checked(build("s3fifo", cap), seq) == model_s3fifo(seq, cap)


def test_s3fifo_ghost_clean_up_keeps_what_g_remembers():
    # Enough distinct keys for G's bulk clean-up to run many times in both paths, and a reuse
    # pattern (keys coming back after about a cache's worth of others) that makes ghost hits.
    rng = random.Random(3)
    lists = [[rng.randrange(i, i + 150) for _ in range(rng.randint(1, 6))] for i in range(0, 3000, 5)]
    fast, slow = make_policy("s3fifo", 30), make_policy("s3fifo", 30)
    assert fast.replay_requests(lists, 1) == replay_by_touch(slow, lists, 1)
    assert state(fast) == state(slow)
    assert (fast.main_bytes, fast.ghost_clock) == (slow.main_bytes, slow.ghost_clock)
    assert fast.ghost_limit > 64 and slow.ghost_limit > 64  # clean-ups happened
    every_key = range(3200)
    remembered = [k for k in every_key if fast.is_ghost(k)]
    assert remembered == [k for k in every_key if slow.is_ghost(k)] and remembered
    assert len(remembered) <= fast.ghost_target  # unit sizes: G spans at most its bytes
    for policy in (fast, slow):  # G's dict stays within its clean-up bound of what it remembers
        assert len(policy.ghost) <= 4 * policy.ghost_target + 64 + 6
    probe, ghost_hits = make_policy("s3fifo", 30), 0
    for i, key in enumerate(k for ids in lists for k in ids):
        ghost_hits += key not in probe.entries and probe.is_ghost(key)
        probe.touch(key, 1)
        if i % 7 == 0:  # a clean-up keeps exactly the keys G remembers, in order
            remembered = [k for k in probe.ghost if probe.is_ghost(k)]
            probe._forget_expired()
            assert list(probe.ghost) == remembered
    assert ghost_hits > 50 and list(probe.log) == list(fast.log)
    assert list(fast.log) == model_s3fifo([(k, 1) for ids in lists for k in ids], 30)


@FAST
@given(unit_touches, st.integers(1, 6))
def test_arc_is_the_papers_algorithm_with_unit_sizes(seq, cap):
    assert run_checked(build("arc", cap), [(k, 1) for k in seq]) == model_arc(seq, cap)


@FAST
@given(touches, capacities)
def test_arc_keeps_invariants_with_variable_sizes(seq, cap):
    policy = build("arc", cap)
    run_checked(policy, seq)
    assert set(policy.t1) | set(policy.t2) == set(policy.entries)
    assert not (set(policy.b1) | set(policy.b2)) & set(policy.entries)
    assert 0 <= policy.p <= cap


@FAST
@given(touches, capacities)
def test_belady_follows_its_model(seq, cap):
    assert run_checked(build("belady", cap, seq), seq) == model_belady(seq, cap)


@FAST
@given(touches, capacities)
def test_seed_policies_log_exactly_like_the_reference(seq, cap):
    ref = KVCacheSchedulerSim(cap)
    expected = ref.schedule(seq)
    for name in ("seed", "seed-compact"):
        policy = build(name, cap)
        assert run_checked(policy, seq) == expected
        assert policy.snapshot() == ref.snapshot()
        if name == "seed":  # the bucket queue holds exactly the chapter heap's records, stale ones included
            assert policy.queue == sorted(ref.queue) and policy.num_records == len(ref.queue)


def test_seed_on_the_chapters_requests():
    policy = make_policy("seed", 128)
    log = policy.schedule([("a", 40), ("b", 48), ("a", 40), ("c", 56), ("d", 48), ("a", 40)])
    assert log == ["add:a", "add:b", "reuse:a", "evict:b", "add:c", "evict:c", "add:d", "reuse:a"]
    assert policy.snapshot() == [("a", 40, 3.4219, 3), ("d", 48, 1.4062, 1)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 3)), min_size=200, max_size=400), capacities)
def test_compact_heaps_stay_bounded_at_every_step(seq, cap):
    policies = [build(name, cap, seq) for name in ("seed-compact", "lfu", "gdsf", "belady")]
    for key, size in seq:
        for policy in policies:
            policy.touch(key, size)
            assert policy.num_records <= 2 * len(policy.entries) + 64
    for policy in policies[:2]:  # bucketed: exactly one record per entry
        assert policy.num_records == len(policy.entries)


def test_plain_seed_heap_grows_with_touches():
    policy = make_policy("seed", 10)
    policy.schedule([("a", 1)] * 500)
    assert len(policy.queue) == policy.num_records == 500


# -- the fast replay loop == the generic loop over touch ------------------------------------
def state(policy):
    return (list(policy.log.events()), dict(policy.entries), policy.snapshot(),
            policy.current_bytes, policy.time, policy.hits)


@pytest.mark.parametrize("name", sorted(POLICIES))
@FAST
@given(lists=request_lists, cap=st.integers(1, 12), bytes_=st.integers(1, 2), warmup=touches)
def test_fast_replay_equals_touch_loop(name, lists, cap, bytes_, warmup):
    cap *= bytes_
    warmup = [(k + 100, min(b, cap)) for k, b in warmup]  # other sizes first: mixed-size state
    future = [k for k, _ in warmup] + [k for ids in lists for k in ids]
    fast, slow = make_policy(name, cap, future=future), make_policy(name, cap, future=future)
    for policy in (fast, slow):
        policy.schedule(warmup)
    assert fast.replay_requests(lists, bytes_) == replay_by_touch(slow, lists, bytes_)
    assert state(fast) == state(slow)
    check_invariants(fast)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_fast_replay_equals_touch_loop_on_a_long_run(name):
    # Long enough for heap compaction and ghost-list trimming inside the fast loops.
    rng = random.Random(7)
    lists = [[rng.randrange(60) for _ in range(rng.randint(1, 8))] for _ in range(400)]
    future = [k for ids in lists for k in ids]
    fast, slow = make_policy(name, 20, future=future), make_policy(name, 20, future=future)
    assert fast.replay_requests(lists, 1) == replay_by_touch(slow, lists, 1)
    assert state(fast) == state(slow)


def test_base_class_replay_works_for_a_learner_subclass():
    mru = MostRecent(2)
    assert mru.schedule([("a", 1), ("b", 1), ("c", 1)]) == ["add:a", "add:b", "evict:b", "add:c"]
    assert mru.replay_requests([["a", "c"], ["d"]], 1) == [2, 0]
    assert list(mru.log)[-2:] == ["evict:c", "add:d"]
    check_invariants(mru)


# -- Belady is the bound -------------------------------------------------------------------
@lru_cache(maxsize=None)
def best_hits(future, t, cache, cap):
    """The most block hits any policy (with bypass) can get on future[t:], unit sizes."""
    if t == len(future):
        return 0
    k = future[t]
    if k in cache:
        return 1 + best_hits(future, t + 1, cache, cap)
    options = [cache]  # bypass
    if len(cache) < cap:
        options.append(cache | {k})
    else:
        options += [(cache - {old}) | {k} for old in cache]
    return max(best_hits(future, t + 1, c, cap) for c in options)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=11), st.integers(1, 3))
def test_belady_is_optimal_on_tiny_traces(seq, cap):
    policy = make_policy("belady", cap, future=seq)
    policy.schedule([(k, 1) for k in seq])
    assert policy.hits == best_hits(tuple(seq), 0, frozenset(), cap)


@settings(max_examples=60, deadline=None)
@given(request_lists, st.integers(1, 12))
def test_belady_bounds_every_policy(lists, cap):
    future = [k for ids in lists for k in ids]
    belady = make_policy("belady", cap, future=future)
    belady.replay_requests(lists, 1)
    for name in POLICIES:
        policy = make_policy(name, cap, future=future)
        prefix_hits = sum(policy.replay_requests(lists, 1))
        assert prefix_hits <= policy.hits <= belady.hits, name


def test_next_uses():
    assert next_uses(["a", "b", "a", "c"]) == [2, 5, 6, 7]


# -- the API contract: bad input is rejected and changes nothing ----------------------------
BAD_TOUCHES = [([1], 1, TypeError), ("k", True, TypeError), ("k", 1.0, TypeError),
               ("k", 0, ValueError), ("k", -3, ValueError), ("k", 11, ValueError)]


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_bad_touches_are_rejected_without_changing_state(name):
    seq = [("a", 3), ("b", 4), ("a", 3), ("c", 5)]
    policy = make_policy(name, 10, future=[k for k, _ in seq] + ["k"])
    policy.schedule(seq)
    before = state(policy)
    for prefix, bytes_, error in BAD_TOUCHES:
        with pytest.raises(error):
            policy.touch(prefix, bytes_)
        assert state(policy) == before
    for bytes_, error in ((True, TypeError), (0, ValueError), (11, ValueError)):
        with pytest.raises(error):
            policy.replay_requests([["k"]], bytes_)
        assert state(policy) == before
    policy.touch("k", 1)  # still usable


@pytest.mark.parametrize("name", ["s3fifo-prefix", "s3fifo-repeat"])
def test_bad_request_positions_are_rejected_without_changing_state(name):
    policy = make_policy(name, 10)
    policy.schedule([("a", 3), ("b", 4), ("a", 3), ("c", 5)])
    before = copy.deepcopy(vars(policy))
    for kw, error in (({"depth": 0}, ValueError), ({"depth": True}, TypeError), ({"depth": 1.0}, TypeError),
                      ({"last": 1}, TypeError)):
        with pytest.raises(error):
            policy.touch("k", 1, **kw)
        assert vars(policy) == before
    policy.touch("k", 1, depth=2, last=True)  # still usable: a last block is bypassed
    assert list(policy.log)[-1] == "skip:k"


def test_a_bad_request_is_rejected_without_changing_state():
    policy = make_policy("s3fifo-repeat", 10)
    policy.replay_requests([["a", "b", "c"]], 1)
    before = copy.deepcopy(vars(policy))
    with pytest.raises(TypeError):
        policy.begin_request(["a", ["unhashable"], "y"])  # "a" is known: the check reaches the list
    assert vars(policy) == before


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("capacity, error", [(0, ValueError), (-1, ValueError), (True, TypeError), (8.0, TypeError)])
def test_bad_capacity_is_rejected(name, capacity, error):
    with pytest.raises(error):
        make_policy(name, capacity, future=[])


def test_belady_rejects_touches_off_its_future_without_changing_state():
    with pytest.raises(ValueError, match="future"):
        make_policy("belady", 4)
    policy = make_policy("belady", 4, future=["a", "b"])
    policy.touch("a", 1)
    before = state(policy)
    with pytest.raises(ValueError, match="future"):
        policy.touch("c", 1)
    with pytest.raises(ValueError, match="future"):
        policy.replay_requests([["b", "a"]], 1)
    assert state(policy) == before
    policy.touch("b", 1)
    with pytest.raises(ValueError, match="exhausted"):
        policy.touch("a", 1)


def test_gdsf_rejects_a_bad_depth_without_changing_state():
    policy = GDSFPolicy(4)
    policy.touch("a", 1, depth=2)
    before = state(policy)
    for depth, error in ((0, ValueError), (True, TypeError)):
        with pytest.raises(error):
            policy.touch("b", 1, depth=depth)
        assert state(policy) == before


def test_make_policy_names_the_valid_policies_on_a_typo():
    with pytest.raises(ValueError) as info:
        make_policy("lur", 8)
    for name in POLICIES:
        assert name in str(info.value)
    assert set(POLICIES) == {"fifo", "lru", "lfu", "seed", "seed-compact", "gdsf", "sieve", "s3fifo", "s3fifo-prefix",
                             "s3fifo-repeat", "arc", "arc-prefix", "lecar", "lecar-prefix", "cacheus", "wtinylfu", "vllm", "radix",
                             "belady"}


# -- the real trace ------------------------------------------------------------------------
@lru_cache(maxsize=1)
def conversation_requests():
    rows = [json.loads(line) for line in CONVERSATION.read_text().splitlines() if line.strip()]
    rows.sort(key=lambda r: r["timestamp"])  # stable: ties keep file order
    return [r["hash_ids"] for r in rows]


needs_trace = pytest.mark.skipif(not CONVERSATION.exists(), reason="Mooncake conversation trace not present")


@needs_trace
@pytest.mark.parametrize("blocks, expected", [(1000, 4.4), (8000, 17.8)])
def test_lru_matches_the_reference_anchors(blocks, expected):
    lists = conversation_requests()
    hits = make_policy("lru", blocks).replay_requests(lists, 1)
    assert round(100 * sum(hits) / sum(map(len, lists)), 1) == expected


@needs_trace
def test_seed_matches_the_reference_on_the_real_trace():
    lists = conversation_requests()[:1500]
    ref = KVCacheSchedulerSim(500)
    for ids in lists:
        for key in ids:
            ref.touch(key, 1)
    for name in ("seed", "seed-compact"):
        policy = make_policy(name, 500)
        policy.replay_requests(lists, 1)
        assert list(policy.log) == ref.log


def test_help_policy_shows_a_worked_mru_example_that_runs_as_printed():
    import pydoc
    import textwrap

    from kvsched_lab.sim.policies import Policy

    text = pydoc.render_doc(Policy, renderer=pydoc.plaintext)
    assert "class MRU(Policy)" in text and "def victim(self)" in text
    doc = Policy.__doc__
    start = doc.rindex("\n", 0, doc.index("from collections import OrderedDict")) + 1
    block = textwrap.dedent(doc[start:doc.index("    Attributes:")])
    code, _, printed = block.rpartition("# ")
    namespace = {}
    exec(compile(code.replace("MRU(capacity_bytes=2).schedule", "got = MRU(capacity_bytes=2).schedule"),
                 "<Policy docstring>", "exec"), namespace)
    assert namespace["got"] == eval(printed.strip()) == ["add:a", "add:b", "evict:b", "add:c"]
