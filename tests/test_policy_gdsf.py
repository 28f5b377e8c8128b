"""GDSF (kvsched_lab/sim/policies/gdsf.py): its cost scale, its H values, its heap records and rebuilds.

tests/test_policies.py checks GDSF's log against a model and its fast replay against the touch
loop. This file pins what those leave open: the prefill cost scale `D` for any model shape (the
module computes Llama-3-8B's at import), the H, frequency and cost of each block by hand, the
snapshot's order, the checks on `cost_scale` and `depth`, and the heap's record count (one per
block plus the records of H-lowering hits, rebuilt to one per block once stale ones outnumber
live ones by more than 64; the bench reports records per live block) in both the touch loop
and the fast replay, with evictions still right after a rebuild.
"""
from __future__ import annotations

import math
import random

import pytest

from kvsched_lab.sim.policies.base import gc_paused
from kvsched_lab.sim.policies.gdsf import GDSFPolicy, prefill_cost_scale
from kvsched_lab.sim.traces import load_trace, resolve_trace, sort_by_arrival
from policy_helpers import replay_by_touch

BLOCK_TOKENS = 512  # Mooncake's block size, which the module's cost formula assumes
SLACK = 64  # records a heap may hold beyond twice its live blocks before it is rebuilt


def cost(depth, scale):
    """The module docstring's formula, written out again: 1 + (d - 1 + (B + 1) / (2B)) / D."""
    return 1 + (depth - 1 + (BLOCK_TOKENS + 1) / (2 * BLOCK_TOKENS)) / scale


def model(touches, capacity, scale):
    """Brute-force GDSF on ``(key, size, depth)`` touches: a dict scanned for the lowest
    (H, last touch). Returns the log and, per cached key, ``[H, freq, cost, last, size]``."""
    state, log, floor = {}, [], 0.0
    for t, (key, size, depth) in enumerate(touches, 1):
        c = cost(depth, scale)
        if key in state:
            s = state[key]
            s[1] += 1
            s[0], s[2], s[3] = floor + s[1] * c / s[4], c, t
            log.append(f"reuse:{key}")
            continue
        while sum(s[4] for s in state.values()) + size > capacity:
            old = min(state, key=lambda k: (state[k][0], state[k][3]))
            floor = state.pop(old)[0]
            log.append(f"evict:{old}")
        state[key] = [floor + c / size, 1, c, t, size]
        log.append(f"add:{key}")
    return log, state


def record_counts(touches, scale):
    """Heap records after each touch of a workload that evicts nothing: one record per insert and
    per hit that lowers H (a raise or a tie keeps the block's record: it is re-pushed lazily);
    then, once stale records outnumber live ones by more than SLACK, one record per block."""
    h, count, out = {}, 0, []
    for key, size, depth in touches:
        if key not in h:
            h[key] = (1, 0.0 + cost(depth, scale) / size)
            count += 1
        else:
            freq, old = h[key]
            new = 0.0 + (freq + 1) * cost(depth, scale) / size
            h[key] = (freq + 1, new)
            count += new < old
        if count - len(h) > len(h) + SLACK:
            count = len(h)
        out.append(count)
    return out


# -- the cost scale ------------------------------------------------------------------------
@pytest.mark.parametrize("shape, expected", [
    # Llama-3-8B (the module docstring): P = 6.98e9 weights per token, D = 52.0 exactly.
    (dict(num_layers=32, hidden=4096, num_heads=32, num_kv_heads=8, head_dim=128, ffn_hidden=14336,
          block_tokens=512), 52.0),
    # A toy shape where every dimension differs (q_dim 8 != hidden 6, kv_dim 4): D = 4.05.
    (dict(num_layers=3, hidden=6, num_heads=2, num_kv_heads=1, head_dim=4, ffn_hidden=10, block_tokens=5), 4.05),
])
def test_cost_scale_is_the_depth_where_attention_flops_equal_linear_flops(shape, expected):
    """D is where the attention of a block to the D blocks before it costs what its linear layers
    cost; counted here matrix by matrix, FLOP by FLOP, not from the module's formula."""
    L, h, B = shape["num_layers"], shape["hidden"], shape["block_tokens"]
    q_dim, kv_dim = shape["num_heads"] * shape["head_dim"], shape["num_kv_heads"] * shape["head_dim"]
    weights = L * (h * q_dim + h * kv_dim + h * kv_dim + q_dim * h + 3 * h * shape["ffn_hidden"])  # q k v o, MLP
    linear_flops = 2 * weights * B  # 2 FLOPs per weight per token
    # One earlier block: each of the B queries meets B more keys, QK^T and AV at 2 FLOPs each per head dim.
    attention_flops_per_earlier_block = L * B * B * 2 * 2 * q_dim
    assert math.isclose(linear_flops / attention_flops_per_earlier_block, expected, rel_tol=1e-12)
    assert math.isclose(prefill_cost_scale(**shape), expected, rel_tol=1e-12)


# -- the checks on the arguments --------------------------------------------------------------
@pytest.mark.parametrize("scale", [0, 0.0, -1.5, float("nan")])
def test_gdsf_rejects_a_cost_scale_that_is_not_positive(scale):
    """A zero or negative D would divide by zero or reward shallow blocks; the error says which."""
    with pytest.raises(ValueError) as info:
        GDSFPolicy(4, cost_scale=scale)
    assert str(info.value) == f"cost_scale must be > 0, got {scale!r}"


def test_gdsf_names_depth_when_a_depth_is_bad():
    """A bad depth is reported under its own name, as every other argument check does."""
    policy = GDSFPolicy(4)
    with pytest.raises(ValueError) as info:
        policy.touch("a", 1, depth=0)
    assert str(info.value) == "depth must be > 0, got 0"
    with pytest.raises(TypeError) as info:
        policy.touch("a", 1, depth=1.5)
    assert str(info.value) == "depth must be an int, got float 1.5"


# -- H, frequency and cost by hand, and the snapshot's order -------------------------------
def test_gdsf_prices_each_block_by_its_depth_and_ages_with_the_floor():
    """With D = 1/1024 the costs are whole numbers (cost(d) = 1024 d - 510: 514, 1538, 2562),
    so every H below is worked out by hand. The snapshot lists the last to be evicted first:
    highest H, and on a tie the most recent touch (the tied block touched earlier goes first)."""
    scale = 1 / 1024
    assert [cost(d, scale) for d in (1, 2, 3)] == [514.0, 1538.0, 2562.0]
    policy = GDSFPolicy(5, cost_scale=scale)
    policy.touch("b", 2, depth=1)  # t1: H = 0 + 514 / 2 = 257
    policy.touch("a", 1, depth=2)  # t2: H = 1538
    policy.touch("p", 1)           # t3: a plain touch is depth 1: H = 514
    policy.touch("q", 1)           # t4: H = 514
    policy.touch("q", 1)           # t5: freq 2: H = 2 * 514 = 1028
    policy.touch("p", 1)           # t6: freq 2: H = 1028, tied with q but touched later
    # (key, bytes, H, freq, cost); neither key order nor touch order nor insertion order.
    assert policy.snapshot() == [("a", 1, 1538.0, 1, 1538.0), ("p", 1, 1028.0, 2, 514.0),
                                 ("q", 1, 1028.0, 2, 514.0), ("b", 2, 257.0, 1, 514.0)]
    policy.touch("e", 2)  # full (5 bytes): b has the lowest H, goes, and the floor rises to 257
    assert policy.snapshot()[-1] == ("e", 2, 257.0 + 514 / 2, 1, 514.0)
    policy.touch("f", 1)  # e (H 514) is now the lowest: floor 514, H(f) = 514 + 514
    assert list(policy.log)[-5:] == ["reuse:p", "evict:b", "add:e", "evict:e", "add:f"]
    assert policy.snapshot() == [("a", 1, 1538.0, 1, 1538.0), ("f", 1, 1028.0, 1, 514.0),
                                 ("p", 1, 1028.0, 2, 514.0), ("q", 1, 1028.0, 2, 514.0)]
    policy.touch("g", 2)  # 4 of 5 bytes used: one must go, q (of the three tied at 1028, the least recent)
    assert list(policy.log)[-2:] == ["evict:q", "add:g"]


# -- heap records: a hit pushes one only when it lowers H -----------------------------------
def test_a_hit_that_leaves_h_unchanged_pushes_no_record():
    """At D = 1 - (B + 1) / (2B) a depth-2 block costs exactly twice a depth-1 block, so a second
    touch at depth 1 gives H = 2 cost(1) / 1 = cost(2) / 1: unchanged, and the block keeps its
    record. A hit that really lowers H (depth 3, then 1) pushes one. Touch loop and fast replay."""
    scale = 1 - (BLOCK_TOKENS + 1) / (2 * BLOCK_TOKENS)
    assert 2 * cost(1, scale) == cost(2, scale)  # exact in floating point too
    policy = GDSFPolicy(8, cost_scale=scale)
    policy.touch("k", 1, depth=2)
    policy.touch("k", 1, depth=1)
    assert policy.num_records == 1
    policy.touch("j", 1, depth=3)
    policy.touch("j", 1, depth=1)  # H: cost(3) = 6.01 down to 2 cost(1) = 4.01
    assert policy.num_records == 3
    fast = GDSFPolicy(8, cost_scale=scale)
    fast.replay_requests([["x", "k"], ["k"]], 1)  # k at depth 2, then at depth 1
    assert fast.num_records == 2
    fast.replay_requests([["x", "y", "j"], ["j"]], 1)
    assert fast.num_records == 5


def shallow_after_deep(static, rounds):
    """Touches that lower one block's H again and again: at D = 0.05 a depth-1 block costs 11 and a
    depth-2 block 31, so k alternates a raise (depth 2) and a lowering (depth 1, one more record)."""
    touches = [(key, 1, 1) for key in static] + [("k", 1, 2)]
    for _ in range(rounds):
        touches += [("k", 1, 1), ("k", 1, 2)]
    return touches


def test_the_touch_loops_heap_is_rebuilt_once_stale_records_outnumber_live_ones():
    """Three live blocks: the count climbs by one per lowering hit up to 2 * 3 + 64 = 70 records,
    and the push that would make 71 rebuilds the heap to 3."""
    touches = shallow_after_deep(["a", "b"], 80)
    expected = record_counts(touches, 0.05)
    assert max(expected) == 2 * 3 + SLACK and 3 in expected[10:]  # the workload reaches a rebuild
    policy, counts = GDSFPolicy(8, cost_scale=0.05), []
    for key, size, depth in touches:
        policy.touch(key, size, depth=depth)
        counts.append(policy.num_records)
    assert counts == expected
    assert list(policy.log) == model(touches, 8, 0.05)[0]


def test_the_fast_replays_heap_is_rebuilt_once_stale_records_outnumber_live_ones():
    """The same rule in the fast replay: requests [a, k] (k at depth 2) and [k] (depth 1) alternate,
    two live blocks, so the heap grows to 2 * 2 + 64 = 68 records and is rebuilt to 2."""
    requests = [["a", "k"]] + [["k"], ["a", "k"]] * 80
    touches = [(key, 1, depth) for ids in requests for depth, key in enumerate(ids, 1)]
    per_touch = record_counts(touches, 0.05)
    ends = [sum(len(ids) for ids in requests[:i + 1]) - 1 for i in range(len(requests))]
    expected = [per_touch[e] for e in ends]  # the count after each request's last block
    assert max(expected) == 2 * 2 + SLACK and 2 in expected[10:]
    fast, counts = GDSFPolicy(8, cost_scale=0.05), []
    for ids in requests:
        fast.replay_requests([ids], 1)
        counts.append(fast.num_records)
    assert counts == expected


def rebuild_then_evict(seed):
    """Requests that force a rebuild, then evict blocks whose record a hit left behind.

    Phase 1 (nothing evicted): p0..p3 enter and p0 is hit once (H rises: its record falls
    behind); then k alternates depth 2 and depth 1 (at D = 0.05 each depth-1 hit lowers H: one
    record more) until the heap is rebuilt; then p0 is hit again (behind again), while p1..p3
    keep the records the rebuild gave them. Phase 2: random requests over more blocks than fit."""
    rng = random.Random(seed)
    phase1 = [["p0", "p1", "p2", "p3"], ["p0"]] + [["x", "k"], ["k"]] * 75 + [["p0"]]
    pool = ["p0", "p1", "p2", "p3", "x", "k"] + list(range(12))
    phase2 = [rng.sample(pool, rng.randint(1, 5)) for _ in range(150)]
    return phase1, phase2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_evictions_after_a_rebuild_follow_the_model(seed):
    """A rebuild must leave each block's current (H, last touch) in the heap and its bookkeeping in
    step, or a later eviction takes the wrong block (or none). Both loops against the model; the
    fast replay also ends with exactly the touch loop's heap records."""
    phase1, phase2 = rebuild_then_evict(seed)
    requests = phase1 + phase2
    touches = [(key, 1, depth) for ids in requests for depth, key in enumerate(ids, 1)]
    expected, _ = model(touches, 6, 0.05)
    assert sum(e.startswith("evict:") for e in expected) > 100
    assert not any(e.startswith("evict:") for e in model(touches[:sum(map(len, phase1))], 6, 0.05)[0])
    slow, fast = GDSFPolicy(6, cost_scale=0.05), GDSFPolicy(6, cost_scale=0.05)
    counts = []
    for ids in phase1:  # touch by touch, to see the rebuild
        replay_by_touch(slow, [ids], 1)
        counts.append(slow.num_records)
    assert any(b < a - 1 for a, b in zip(counts, counts[1:]))  # the count fell: a rebuild
    replay_by_touch(slow, phase2, 1)
    fast.replay_requests(requests, 1)
    assert list(slow.log) == expected
    assert list(fast.log) == expected
    assert fast.num_records == slow.num_records
    assert sorted(fast.heap) == sorted(slow.heap)


def test_fast_replay_keeps_the_touch_loops_records_on_random_requests():
    """Every eviction that makes room swaps the victim's record for the new block's: the fast
    replay must not leave the victim's record behind as garbage (the bench counts records)."""
    rng = random.Random(7)
    for cap in (3, 5, 9):
        requests = [[rng.randrange(20) for _ in range(rng.randint(1, 6))] for _ in range(300)]
        slow, fast = GDSFPolicy(cap, cost_scale=0.05), GDSFPolicy(cap, cost_scale=0.05)
        hits = replay_by_touch(slow, requests, 1)
        assert fast.replay_requests(requests, 1) == hits
        assert list(fast.log) == list(slow.log) == model(
            [(k, 1, d) for ids in requests for d, k in enumerate(ids, 1)], cap, 0.05)[0]
        assert fast.num_records == slow.num_records
        assert sorted(fast.heap) == sorted(slow.heap)


def test_a_rebuild_made_by_an_h_lowering_hit_keeps_that_blocks_new_h():
    """The hit that triggers a rebuild must be in the rebuilt heap with the H it just got (it
    was rebuilt with its old H, then given the new one, so it was evicted too late). At D = 0.05
    b (depth 10, H 191) and k (depth 40, H 791) enter, then p is pumped (depth 1 and 2 in turn,
    each depth-1 touch lowering its H: one record more) to 70 records; k's hit at depth 1 lowers
    its H to 22 and its push makes 71: the rebuild. n (depth 30) then fills the cache and x
    forces an eviction: k, the lowest H, must go, not b. (The fast replay runs the same code in
    the same order; tests/test_policies.py holds it to the touch loop.)"""
    touches = [("b", 1, 10), ("k", 1, 40), ("p", 1, 2)] + [("p", 1, 1), ("p", 1, 2)] * 67
    touches += [("k", 1, 1), ("n", 1, 30), ("x", 1, 30)]
    expected, _ = model(touches, 4, 0.05)
    assert expected[-2:] == ["evict:k", "add:x"]
    policy = GDSFPolicy(4, cost_scale=0.05)
    counts = []
    for key, size, depth in touches:
        policy.touch(key, size, depth=depth)
        counts.append(policy.num_records)
    assert counts[-4] == 2 * 3 + SLACK and counts[-3] == 3  # k's hit rebuilt the heap
    assert list(policy.log) == expected


def test_a_replay_stopped_by_a_bad_id_leaves_the_records_naming_the_right_keys():
    """The fast replay notes a request's keys before touching them (records find their key by
    touch time); a request that stops at an unhashable id must not leave keys noted for touches
    never made, or every later record names the wrong block. Later evictions follow the loop."""
    rng = random.Random(4)
    before = [[rng.randrange(12) for _ in range(rng.randint(1, 4))] for _ in range(30)]
    after = [[rng.randrange(12) for _ in range(rng.randint(1, 4))] for _ in range(60)]
    fast, slow = GDSFPolicy(5, cost_scale=0.5), GDSFPolicy(5, cost_scale=0.5)
    for policy in (fast, slow):
        replay = policy.replay_requests if policy is fast else (lambda lists, b: replay_by_touch(slow, lists, b))
        with pytest.raises(TypeError):
            replay(before + [[1, 2, ["unhashable"], 3]], 1)
        assert policy.time == sum(map(len, before)) + 2
        replay(after, 1)
    assert list(fast.log) == list(slow.log) and fast.snapshot() == slow.snapshot()
    assert sum(e.startswith("evict:") for e in fast.log) > 20


def test_the_inlined_loop_sets_every_field_as_the_hooks_on_a_whole_trace():
    """The replay loop (one block size, in `replay`'s chunks of 500 requests) against the hooks one
    touch at a time on the whole synthetic trace at 2,005 blocks: hits per request, log, entries,
    meta, floor, the clock, the touched list and the heap, record for record."""
    lists = [r.hash_ids for r in sort_by_arrival(load_trace(resolve_trace("synthetic")))]
    fast, hooks = GDSFPolicy(2005), GDSFPolicy(2005)
    with gc_paused():
        fast_hits = [n for i in range(0, len(lists), 500) for n in fast.replay_requests(lists[i:i + 500], 1)]
        assert fast_hits == replay_by_touch(hooks, lists, 1)
    for policy in (fast, hooks):
        policy.fields = (list(policy.log.events()), policy.entries, policy.meta, policy.floor, policy.time,
                         policy.hits, policy.current_bytes, policy.touched, sorted(policy.heap))
    assert fast.fields == hooks.fields
