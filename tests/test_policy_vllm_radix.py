"""`vllm` and `radix` (kvsched_lab/sim/policies/vllm.py, radix.py): brute-force models, fast paths, rules, bad input.

The models are naive transcriptions (lists, linear scans, the whole tree searched for leaves):
`model_vllm` of vLLM's block pool under the replay protocol, `model_sglang` of SGLang 0.5.23's
RadixCache (match_prefix, evict, insert, lock refs, its clock reads). The policies must log
exactly what they log, request by request, on random requests and on slices of the Mooncake
traces; the hand-traced cases pin down the rules where the two engines differ.
"""
from __future__ import annotations

import ast
import copy
import heapq
import json
import random
import re
from functools import lru_cache
from itertools import takewhile
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from kvsched_lab import check_invariants
from kvsched_lab.sim.policies import make_policy
from kvsched_lab.sim.policies.radix import RadixPolicy
from kvsched_lab.sim.policies.vllm import VLLMPolicy
from policy_helpers import replay_by_touch

FAST = settings(max_examples=200, deadline=None)
TRACES = Path("/work/shared/traces")
# requests of (key, size) blocks; keys repeat across and within requests (unchained input)
sized_requests = st.lists(st.lists(st.tuples(st.integers(1, 9), st.integers(1, 3)), min_size=1, max_size=6),
                          max_size=30)


def leading_cached(ids, size):
    """`kvsched_lab.sim.replay` item 2: the request's leading run of cached ids."""
    n = 0
    while n < len(ids) and ids[n][0] in size:
        n += 1
    return n


def model_vllm(reqs, cap):
    """The issue's `vllm`: a free queue (front evicted first) and the request's pinned blocks."""
    size, free, log, hits = {}, [], [], []
    for ids in reqs:
        hits.append(leading_cached(ids, size))
        pinned = []
        for k, b in ids:
            if k in size:
                log.append(f"reuse:{k}")
                if k in free:
                    free.remove(k)
                    pinned.append(k)
                continue
            if sum(size[p] for p in pinned) + b > cap:  # everything evictable is gone: not cached
                log.append(f"skip:{k}")
                continue
            while sum(size.values()) + b > cap:
                old = free.pop(0)
                del size[old]
                log.append(f"evict:{old}")
            size[k] = b
            pinned.append(k)
            log.append(f"add:{k}")
        free += pinned[::-1]  # the request ends: tail block first to the back
    return log, size, free, hits


def model_sglang(reqs, cap):
    """SGLang 0.5.23's RadixCache (match_prefix, evict, insert, lock refs), written naively for
    unit-size chained requests: dict nodes, every leaf found by walking the whole tree, the clock
    read exactly where SGLang reads time.monotonic() (the insert's new node included)."""
    clock = iter(range(1, 10 ** 9))
    root = {"blocks": [], "children": {}, "parent": None, "time": 0, "lock": 1}
    log, hits, cached = [], [], 0

    def all_nodes():
        out, stack = [], [root]
        while stack:
            n = stack.pop()
            out.append(n)
            stack += n["children"].values()
        return out[1:]

    for ids in reqs:
        present = {k for n in all_nodes() for k in n["blocks"]}
        hits.append(sum(1 for _ in takewhile(present.__contains__, ids)))
        t, node, i = next(clock), root, 0  # match_prefix
        while i < len(ids) and ids[i] in node["children"]:
            child = node["children"][ids[i]]
            child["time"] = t
            j = 0
            while j < len(child["blocks"]) and i + j < len(ids) and child["blocks"][j] == ids[i + j]:
                j += 1
            i += j
            if j < len(child["blocks"]):  # _split_node
                head = {"blocks": child["blocks"][:j], "children": {child["blocks"][j]: child},
                        "parent": node, "time": next(clock), "lock": child["lock"]}
                child["blocks"], child["parent"] = child["blocks"][j:], head
                node["children"][head["blocks"][0]] = head
                node = head
                break
            node = child
        log += [f"reuse:{k}" for k in ids[:i]]
        x = node
        while x is not root:  # inc_lock_ref (dec_lock_ref at the end walks the same path)
            x["lock"] += 1
            x = x["parent"]
        new = ids[i:]
        shortfall = len(new) - (cap - cached)
        if shortfall > 0:  # evict(shortfall): a heap of the unlocked leaves, built now
            heap = [(n["time"], id(n), n) for n in all_nodes() if not n["children"] and n["lock"] == 0]
            heapq.heapify(heap)
            freed = 0
            while freed < shortfall and heap:
                _, _, leaf = heapq.heappop(heap)
                log += [f"evict:{k}" for k in reversed(leaf["blocks"])]
                freed += len(leaf["blocks"])
                parent = leaf["parent"]
                del parent["children"][leaf["blocks"][0]]
                if not parent["children"] and parent["lock"] == 0:
                    heapq.heappush(heap, (parent["time"], id(parent), parent))
            cached -= freed
        fit = min(len(new), cap - cached)
        log += [f"add:{k}" for k in new[:fit]] + [f"skip:{k}" for k in new[fit:]]
        t = next(clock)  # insert: the path gets a new time, then the new node is made
        y = node
        while y is not root:
            y["time"] = t
            y = y["parent"]
        if fit:
            node["children"][new[0]] = {"blocks": new[:fit], "children": {}, "parent": node, "time": next(clock),
                                        "lock": 0}
            cached += fit
        x = node
        while x is not root:  # dec_lock_ref
            x["lock"] -= 1
            x = x["parent"]
    tree = sorted((tuple(n["blocks"]), tuple(n["parent"]["blocks"])) for n in all_nodes())
    return log, tree, hits


def touch_requests(policy, reqs):
    for ids in reqs:
        policy.begin_request([k for k, _ in ids])
        for depth, (k, b) in enumerate(ids, 1):
            policy.touch_in_request(k, b, depth, depth == len(ids))
            check_invariants(policy)


@FAST
@given(sized_requests, st.integers(1, 12))
def test_vllm_follows_its_model_and_radix_keeps_its_invariants(reqs, cap):
    reqs = [[(k, min(b, cap)) for k, b in ids] for ids in reqs]
    vllm, radix = VLLMPolicy(cap), RadixPolicy(cap)
    touch_requests(vllm, reqs)
    touch_requests(radix, reqs)  # unchained, mixed sizes: the course's extension of SGLang's rules
    vllm.end_request()
    log, size, free, _ = model_vllm(reqs, cap)
    assert list(vllm.log) == log and dict(vllm.entries) == size and list(vllm.free) == free
    radix.end_request()
    assert radix.evictable == unlocked_leaves(radix) and radix.locked_bytes == 0
    assert {k for n in radix.nodes() for k in n.blocks} == set(radix.entries)
    assert all(n.num_bytes == sum(radix.entries[k] for k in n.blocks) for n in radix.nodes())


def chained(rng, num_requests, num_roots=6, depth=8):
    """Chained ids like Mooncake's: a request walks down a random tree of prefixes."""
    reqs, children = [], {}
    for _ in range(num_requests):
        ids, at = [], None
        for _ in range(rng.randint(1, depth)):
            options = children.setdefault(at, [])
            if not options or rng.random() < 0.3 or (at is None and len(options) < num_roots):
                options.append(len(children) + sum(map(len, children.values())) + 1000 * len(reqs))
            at = rng.choice(options)
            ids.append(at)
        reqs.append(ids)
    return reqs


def radix_tree(p):
    """The policy's tree as the model returns it: (blocks, parent's blocks) of every node."""
    return sorted((tuple(n.blocks), tuple(n.parent.blocks)) for n in p.nodes())


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10 ** 6), st.integers(1, 60), st.integers(1, 14))
def test_radix_follows_sglang_on_random_chained_requests(seed, num_requests, cap):
    lists = chained(random.Random(seed), num_requests, depth=10)
    policy = RadixPolicy(cap)
    hits = policy.replay_requests(lists, 1)
    log, tree, expected_hits = model_sglang(lists, cap)
    assert list(policy.log) == log and hits == expected_hits
    policy.end_request()
    assert radix_tree(policy) == tree


@pytest.mark.parametrize("cap", [3, 10, 40])
def test_both_follow_their_models_on_long_chained_runs(cap):
    lists = chained(random.Random(cap), 300)
    reqs = [[(k, 1) for k in ids] for ids in lists]
    vllm, radix = VLLMPolicy(cap), RadixPolicy(cap)
    touch_requests(vllm, reqs)
    touch_requests(radix, reqs)
    assert list(vllm.log) == model_vllm(reqs, cap)[0]
    assert list(radix.log) == model_sglang(lists, cap)[0]
    # The persistent leaf heap (lazy deletion) stays within its rebuild bound, and every
    # evictable leaf has its current record in it.
    assert len(radix.leaf_heap) <= 2 * len(radix.evictable) + 64
    current = {(a, s) for a, s, _ in radix.leaf_heap}
    assert all((n.access, n.serial) in current for n in radix.evictable)


@lru_cache(maxsize=None)
def trace_slice(name, n):
    rows = [json.loads(line) for line in (TRACES / f"mooncake_{name}_trace.jsonl").read_text().splitlines()[:4 * n]
            if line.strip()]
    rows.sort(key=lambda r: r["timestamp"])
    return [r["hash_ids"] for r in rows][:n]


@pytest.mark.skipif(not (TRACES / "mooncake_synthetic_trace.jsonl").exists(), reason="Mooncake traces not present")
@pytest.mark.parametrize("name, cap", [("conversation", 300), ("synthetic", 120)])
def test_both_follow_their_models_on_trace_slices(name, cap):
    lists = trace_slice(name, 120)
    vllm, radix = VLLMPolicy(cap), RadixPolicy(cap)
    log, _, _, expected = model_vllm([[(k, 1) for k in ids] for ids in lists], cap)
    assert vllm.replay_requests(lists, 1) == expected and list(vllm.log) == log
    log, _, expected = model_sglang(lists, cap)
    assert radix.replay_requests(lists, 1) == expected and list(radix.log) == log
    assert any(e.startswith("evict:") for e in log) and sum(expected) > 0  # long enough to evict and to hit


def unlocked_leaves(p):
    return {n for n in p.nodes() if not n.children and n.lock_ref == 0}


def radix_state(p):
    prev_node, prev_index = p._prev
    return (p.snapshot(), sorted(tuple(n.blocks) for n in p.evictable), p.locked_bytes, p.clock, p.num_nodes,
            p._ids, p._depth, p._matched, [tuple(n.blocks) for n in p._locks], tuple(prev_node.blocks), prev_index,
            None if p._run is None else tuple(p._run.blocks), p._stopped, sorted(map(repr, p.where.items())))


def state(p):
    extra = (list(p.free.items()), dict(p.pinned), p.pinned_bytes) if isinstance(p, VLLMPolicy) else radix_state(p)
    return (list(p.log.events()), dict(p.entries), p.snapshot(), p.current_bytes, p.time, p.hits, extra)


@pytest.mark.parametrize("name", ["vllm", "radix"])
@FAST
@given(lists=st.lists(st.lists(st.integers(0, 15), min_size=1, max_size=6), max_size=25), cap=st.integers(1, 12),
       bytes_=st.integers(1, 2))
def test_fast_replay_equals_touch_loop_with_its_inner_state(name, lists, cap, bytes_):
    cap *= bytes_
    fast, slow = make_policy(name, cap), make_policy(name, cap)
    assert fast.replay_requests(lists, bytes_) == replay_by_touch(slow, lists, bytes_)
    assert state(fast) == state(slow)


def test_a_plain_touch_is_a_one_block_request_so_touches_alone_give_lru():
    seq = [("a", 1), ("b", 1), ("a", 1), ("c", 1), ("d", 1), ("b", 1)]
    lru = make_policy("lru", 3)
    lru.schedule(seq)
    for name in ("vllm", "radix"):
        policy = make_policy(name, 3)
        assert policy.schedule(seq) == list(lru.log), name


def test_vllm_frees_a_finished_request_tail_first():
    p = VLLMPolicy(10)
    p.replay_requests([[1, 2, 3], [4, 5]], 1)
    assert list(p.free) == [3, 2, 1] and list(p.pinned) == [4, 5]
    p.end_request()
    assert list(p.free) == [3, 2, 1, 5, 4]
    p.replay_requests([[1, 2, 6]], 1)  # a hit leaves the queue and is pinned
    assert list(p.free) == [3, 5, 4] and list(p.pinned) == [1, 2, 6]


def test_vllm_never_evicts_a_pinned_block_and_skips_when_all_are_pinned():
    p = VLLMPolicy(3)
    p.replay_requests([[1, 2], [3, 4, 5, 6]], 1)
    # The first request's blocks were freed tail first (2, then 1) and went in that order; then
    # all three cached blocks were pinned by the request in progress, so 6 was not cached.
    assert list(p.log)[2:] == ["add:3", "evict:2", "add:4", "evict:1", "add:5", "skip:6"]
    assert set(p.entries) == set(p.pinned) == {3, 4, 5} and not p.free


def test_radix_splits_a_node_where_a_request_branches():
    """Traced by hand: [1, 2, 3, 4] is one node; [1, 2, 5] matches two of its blocks, so the node
    is cut into (1, 2) and its child (3, 4), and (5) hangs under (1, 2) next to (3, 4)."""
    p = RadixPolicy(10)
    assert p.replay_requests([[1, 2, 3, 4]], 1) == [0]
    assert [n.blocks for n in p.nodes()] == [[1, 2, 3, 4]]
    assert p.replay_requests([[1, 2, 5]], 1) == [2]
    p.end_request()
    assert [(n.blocks, n.parent.blocks) for n in p.nodes()] == [([1, 2], []), ([3, 4], [1, 2]), ([5], [1, 2])]
    assert list(p.log)[4:] == ["reuse:1", "reuse:2", "add:5"]


def test_radix_evicts_a_whole_leaf_for_a_one_block_shortfall():
    """Cache of 4 blocks holding the node (1, 2, 3): [7, 8] needs 2 blocks and 1 is free, so SGLang's
    evict(1) takes the oldest unlocked leaf, all three of its blocks. vLLM frees only what it needs,
    the tail block 3, and keeps the prefix (1, 2)."""
    radix, vllm = RadixPolicy(4), VLLMPolicy(4)
    for p in (radix, vllm):
        p.replay_requests([[1, 2, 3], [7, 8]], 1)
    assert list(radix.log)[3:] == ["evict:3", "evict:2", "evict:1", "add:7", "add:8"]
    assert list(vllm.log)[3:] == ["add:7", "evict:3", "add:8"]
    assert set(radix.entries) == {7, 8} and set(vllm.entries) == {1, 2, 7, 8}


def test_radix_parents_become_leaves_within_one_eviction():
    """(1) -> {(2, 3), (4)} and (5): evicting 4 blocks takes the oldest leaf (2, 3), then (4), whose
    parent (1) is now a childless unlocked node older than (5): it goes before (5)."""
    p = RadixPolicy(5)
    p.replay_requests([[1, 2, 3], [1, 4], [5]], 1)
    assert [n.blocks for n in p.nodes()] == [[1], [2, 3], [4], [5]]
    p.replay_requests([[6, 7, 8, 9]], 1)  # 0 free, 4 needed: evict(4) frees 2 + 1 + 1 blocks
    assert list(p.log)[-8:] == ["evict:3", "evict:2", "evict:4", "evict:1", "add:6", "add:7", "add:8", "add:9"]


def test_radix_split_gives_the_unread_tail_the_match_time():
    """Traced by hand, cache of 6: [1, 2, 3, 4] (clock 1 match, 2 finish), [5] (3, 4), [1, 2, 6]
    (match at 5: node (1, 2, 3, 4) gets 5, then is split; the head (1, 2) gets 6, the tail (3, 4)
    keeps 5; the finish at 7 refreshes (1, 2) and the new (6)). The tail, never read by the third
    request, now looks newer than (5): [8] evicts (5). vLLM evicts 4, the front of its queue."""
    radix, vllm = RadixPolicy(6), VLLMPolicy(6)
    for p in (radix, vllm):
        p.replay_requests([[1, 2, 3, 4], [5], [1, 2, 6]], 1)
    radix.end_request()
    assert [(n.blocks, n.access) for n in radix.nodes()] == [([1, 2], 7), ([3, 4], 5), ([6], 7), ([5], 4)]
    for p in (radix, vllm):
        p.replay_requests([[8]], 1)
    assert list(radix.log)[-2:] == ["evict:5", "add:8"]
    assert list(vllm.log)[-2:] == ["evict:4", "add:8"]


def test_radix_locks_the_matched_path_while_the_request_runs():
    p = RadixPolicy(10)
    p.replay_requests([[1, 2, 3], [1, 2, 4]], 1)  # the second request is still running
    locked = {tuple(n.blocks): n.lock_ref for n in p.nodes()}
    assert locked == {(1, 2): 2, (3,): 0, (4,): 1}  # (1, 2): its own lock and its child (4)'s
    assert p.locked_bytes == 3 and p.evictable == {p.where[3]}
    p.end_request()
    assert all(n.lock_ref == 0 for n in p.nodes()) and p.locked_bytes == 0
    assert p.evictable == {p.where[3], p.where[4]}


def test_radix_skips_the_rest_of_a_prompt_longer_than_the_cache():
    p = RadixPolicy(3)
    p.replay_requests([[1, 2, 3, 4, 5]], 1)
    assert list(p.log) == ["add:1", "add:2", "add:3", "skip:4", "skip:5"]
    p.replay_requests([[1, 9]], 1)  # (1, 2, 3) is split at 1; the tail (2, 3) is the only unlocked leaf
    assert list(p.log)[-4:] == ["reuse:1", "evict:3", "evict:2", "add:9"]


def test_radix_touch_in_request_must_follow_the_announced_request():
    p = RadixPolicy(4)
    with pytest.raises(ValueError, match="begin_request"):
        p.touch_in_request(1, 1, 1, True)  # no request announced
    p.begin_request([1, 2])
    before = radix_state(p)
    for key, depth in ((2, 1), (1, 2), (3, 1)):
        with pytest.raises(ValueError, match="begin_request"):
            p.touch_in_request(key, 1, depth, False)
        assert radix_state(p) == before
    p.touch_in_request(1, 1, 1, False)
    p.touch_in_request(2, 1, 2, True)
    assert list(p.log) == ["add:1", "add:2"]


@pytest.mark.parametrize("name", ["vllm", "radix"])
def test_a_bad_request_is_rejected_without_changing_state(name):
    policy = make_policy(name, 10)
    policy.replay_requests([["a", "b", "c"]], 1)
    before = state(policy)
    for bad in (["a", ["unhashable"], "y"], ["a", {}]):
        with pytest.raises(TypeError):
            policy.begin_request(bad)
        assert state(policy) == before
    with pytest.raises(TypeError):
        policy.replay_requests([["a", "b"], ["a", ["x"]]], 1)  # the bad request, not its predecessor, is refused
    assert list(policy.log)[-2:] == ["reuse:a", "reuse:b"]


@pytest.mark.parametrize("name", ["vllm", "radix"])
def test_the_engine_with_real_kv_blocks_follows_both(name):
    # Chained ids like a trace's: the engine's block keys then hit exactly where the ids do.
    from types import SimpleNamespace

    from kvsched_lab.kv.model import TinyDecoderConfig
    from kvsched_lab.kv.real_kv import real_kv_replay

    lists = chained(random.Random(4), 40, depth=5)
    requests = [SimpleNamespace(hash_ids=ids) for ids in lists]
    cfg = TinyDecoderConfig(vocab_size=64, dim=32, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16,
                            ffn_hidden=32, max_positions=64)
    out = real_kv_replay(requests, name, capacity_blocks=8, tokens_per_block=4, device="cpu", model_config=cfg,
                         check_every=5)
    expected = make_policy(name, 8).replay_requests(lists, 1)
    assert out["protocol_hit_blocks"] == sum(expected) > 0 and out["max_abs_logit_diff"] <= 1e-4


def test_vllm_snapshot_lists_pinned_blocks_then_the_free_queue_from_its_back():
    """Traced by hand: request [a, b] ends, so its blocks join the free queue tail first (b, then
    a: b is the next victim); request [c] pins c. The snapshot puts the last to be evicted first."""
    p = make_policy("vllm", 10)
    assert (p.pinned_bytes, p.pinned, list(p.free)) == (0, {}, [])
    p.begin_request(["a", "b"])
    p.touch_in_request("a", 1, 1, False)
    p.touch_in_request("b", 1, 2, True)
    p.begin_request(["c"])
    p.touch_in_request("c", 2, 1, True)
    assert list(p.free) == ["b", "a"] and p.pinned_bytes == 2
    assert p.snapshot() == [("c", 2, "pinned"), ("a", 1, "free"), ("b", 1, "free")]
    with pytest.raises(TypeError):
        p.touch(["unhashable"], 1)  # refused before the request in progress is ended
    assert p.snapshot() == [("c", 2, "pinned"), ("a", 1, "free"), ("b", 1, "free")] and p.pinned_bytes == 2


def test_each_of_sglangs_two_rules_can_be_switched_off():
    # The whole-leaf case: only the tail block 3 goes, as in vLLM.
    p = RadixPolicy(4, whole_leaves=False)
    p.replay_requests([[1, 2, 3], [7, 8]], 1)
    assert list(p.log)[3:] == ["evict:3", "add:7", "add:8"] and [n.blocks for n in p.nodes()] == [[1, 2], [7, 8]]
    # The split case: without the refresh the unread tail (3, 4) keeps its time, older than (5).
    p = RadixPolicy(6, refresh_split_tail=False)
    p.replay_requests([[1, 2, 3, 4], [5], [1, 2, 6], [8]], 1)
    assert list(p.log)[-3:] == ["evict:4", "evict:3", "add:8"]
    p = RadixPolicy(6, whole_leaves=False, refresh_split_tail=False)
    p.replay_requests([[1, 2, 3, 4], [5], [1, 2, 6], [8]], 1)
    assert list(p.log)[-2:] == ["evict:4", "add:8"]  # vLLM's choice


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 10 ** 6), st.integers(1, 60), st.integers(1, 14))
def test_without_both_rules_the_tree_decides_as_vllm_on_chained_ids(seed, num_requests, cap):
    lists = chained(random.Random(seed), num_requests, depth=10)
    vllm, radix = VLLMPolicy(cap), RadixPolicy(cap, whole_leaves=False, refresh_split_tail=False)
    assert radix.replay_requests(lists, 1) == vllm.replay_requests(lists, 1)
    evictions = [[k for op, k in p.log.events() if op == "evict"] for p in (vllm, radix)]
    assert evictions[0] == evictions[1] and set(radix.entries) == set(vllm.entries)


def test_notebook_06_words_radix_vllm_and_lru_as_the_replays_rank_them():
    """Notebook 06's text on the conversation trace's curves (cell nb06-15) says what the replays give.

    Each claim it makes is checked against the capacities of its sweep (read from cell nb06-11), at the rank table's
    rounding (0.1 point): the radix curve coincides with vllm's only if the text says so.
    """
    from kvsched_lab.notebook_files import cell_source, read_notebook
    from kvsched_lab.sim.replay import replay
    from kvsched_lab.sim.traces import load_trace, resolve_trace, sort_by_arrival

    try:
        requests = sort_by_arrival(load_trace(resolve_trace("conversation")))
    except FileNotFoundError:
        pytest.skip("the Mooncake conversation trace is not in this install")
    nb = read_notebook(Path(__file__).resolve().parents[1] / "notebooks" / "06_capstone.ipynb")
    text = next(cell_source(c) for c in nb["cells"] if c.get("id") == "nb06-15")
    sweep = next(cell_source(c) for c in nb["cells"] if c.get("id") == "nb06-11")
    capacities = ast.literal_eval(re.search(r"^CAPACITIES = (\[[\d, ]+\])", sweep, re.M).group(1))  # the sweep's own
    assert capacities[-2:] == [8000, 16000], capacities  # "from 8,000 blocks on" below reads the last two
    points = {name: [round(100 * replay(requests, name, cap).prefix_hit_rate, 1) for cap in capacities]
              for name in ("lru", "vllm", "radix")}
    gap = {name: [round(a - b, 1) for a, b in zip(points[name], points["lru"])] for name in ("vllm", "radix")}
    assert ("`radix` exactly the `vllm`" in text) == (points["radix"] == points["vllm"]), points
    assert "`vllm` stays within a tenth of a point of `lru` at every size" in text
    assert max(map(abs, gap["vllm"])) <= 0.1, gap
    assert "`radix` within half a point, a little below it from 8,000 blocks on" in text
    assert max(map(abs, gap["radix"])) <= 0.5 and all(g < 0 for g in gap["radix"][-2:]), gap


@pytest.mark.parametrize("refresh", [True, False])
def test_the_leaf_heap_files_a_leaf_again_only_when_its_time_changed(refresh):
    """A split's unread tail is filed again only when the match gave it a new time: with
    ``refresh_split_tail=False`` its record is still current, and a second one would be a duplicate."""
    radix = RadixPolicy(10, refresh_split_tail=refresh)
    for ids in chained(random.Random(0), 200):
        radix.replay_requests([ids], 1)
        records = [(a, s) for a, s, n in radix.leaf_heap if n in radix.evictable and n.access == a]
        assert len(records) == len(set(records)) == len(radix.evictable)


# -- a prompt's partial last block: a pool slot while the request runs, never cached -------------------
def model_vllm_tails(reqs, tails, cap):
    """`model_vllm` for unit blocks, plus vLLM's partial last block: after the request's full
    blocks it takes a block from the free queue's front (evicting what is cached there) and
    gives it back, empty, when the request ends (`BlockPool.free_blocks`: prepend_n)."""
    size, free, log = {}, [], []
    for ids, tail in zip(reqs, tails):
        pinned = []
        for k in ids:
            if k in size:
                log.append(f"reuse:{k}")
                if k in free:
                    free.remove(k)
                    pinned.append(k)
            elif len(pinned) + 1 > cap:
                log.append(f"skip:{k}")
            else:
                while len(size) + 1 > cap:
                    old = free.pop(0)
                    del size[old]
                    log.append(f"evict:{old}")
                size[k] = 1
                pinned.append(k)
                log.append(f"add:{k}")
        if tail and len(pinned) + 1 <= cap:
            while len(size) + 1 > cap:
                old = free.pop(0)
                del size[old]
                log.append(f"evict:{old}")
        free += pinned[::-1]
    return log, size


def test_vllm_partial_last_block_takes_a_slot_and_costs_a_hit_by_hand():
    p = VLLMPolicy(3)
    # [1, 2] and a partial block: 3 blocks in use, the pool is full, nothing cached is lost.
    assert p.replay_requests([[1, 2]], 1, uncached_tails=[True]) == [0]
    assert (p.pinned_bytes, p.uncached_bytes, p.current_bytes) == (2, 1, 2)
    # [3] and a partial block: 3 takes the empty slot; the partial block evicts 2 (freed tail first).
    # [1, 2] then hits only 1. Without the slot nothing is evicted and it hits both.
    assert p.replay_requests([[3], [1, 2]], 1, uncached_tails=[True, False]) == [0, 1]
    assert list(p.log)[:4] == ["add:1", "add:2", "add:3", "evict:2"]
    plain = VLLMPolicy(3)
    assert plain.replay_requests([[1, 2], [3], [1, 2]], 1) == [0, 0, 2]
    p.end_request()
    assert p.uncached_bytes == 0
    with pytest.raises(ValueError, match="flags"):
        p.replay_requests([[1]], 1, uncached_tails=[])


def test_vllm_hold_uncached_comes_after_the_full_blocks():
    p = VLLMPolicy(2)
    p.begin_request([1, 2])
    p.touch_in_request(1, 1, 1, False)
    p.touch_in_request(2, 1, 2, True)
    assert not p.hold_uncached(1)  # every cached block is pinned: no room (the replay's simplification)
    p.begin_request([3])
    p.touch_in_request(3, 1, 1, True)
    assert p.hold_uncached(1) and list(p.log)[-3:] == ["evict:2", "add:3", "evict:1"]
    before = (list(p.log), dict(p.entries))
    with pytest.raises(ValueError, match="partial last block"):
        p.touch_in_request(4, 1, 2, True)
    assert (list(p.log), dict(p.entries)) == before


@FAST
@given(lists=st.lists(st.lists(st.integers(0, 15), min_size=1, max_size=6, unique=True), max_size=25),
       cap=st.integers(1, 12), data=st.data())
def test_vllm_partial_blocks_follow_the_model_and_the_fast_path(lists, cap, data):
    tails = data.draw(st.lists(st.booleans(), min_size=len(lists), max_size=len(lists)))
    fast, slow = VLLMPolicy(cap), VLLMPolicy(cap)
    hits = fast.replay_requests(lists, 1, uncached_tails=tails)
    slow_hits = []
    for ids, tail in zip(lists, tails):
        slow_hits.append(sum(1 for _ in takewhile(slow.entries.__contains__, ids)))
        slow.begin_request(ids)
        for depth, key in enumerate(ids, 1):
            slow.touch_in_request(key, 1, depth, depth == len(ids))
        if tail:
            slow.hold_uncached(1)
        check_invariants(slow)
        assert slow.current_bytes + slow.uncached_bytes <= cap
    assert hits == slow_hits and state(fast) == state(slow) and fast.uncached_bytes == slow.uncached_bytes
    log, size = model_vllm_tails(lists, tails, cap)
    assert list(fast.log) == log and dict(fast.entries) == size


def test_a_request_of_n_tokens_holds_ceil_n_over_block_size_blocks_as_in_vllm():
    """vLLM gives a request cdiv(num_tokens, block_size) blocks (allocate_new_blocks); so does `vllm`."""
    from kvsched_lab.sim.traces import load_trace, resolve_trace
    reqs = load_trace(resolve_trace("conversation"))[:300]
    p = VLLMPolicy(10 ** 6)
    for r in reqs:
        full = list(r.hash_ids[:r.input_length // 512])
        p.replay_requests([full], 1, uncached_tails=[r.input_length % 512 != 0])
        assert p.pinned_bytes + p.uncached_bytes == -(-r.input_length // 512)
