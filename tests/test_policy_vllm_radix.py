"""`vllm` and `radix` (kvsched_lab/sim/policies/vllm.py, radix.py): brute-force models, fast paths, rules, bad input.

The models are naive transcriptions of the issue's semantics (lists, linear scans, the whole
tree searched for leaves); the policies must log exactly what they log, request by request, on
random requests and on slices of the Mooncake traces.
"""
from __future__ import annotations

import copy
import json
import random
from functools import lru_cache
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


def model_radix(reqs, cap):
    """The issue's `radix`: one node per block, locks on root paths, oldest unlocked leaf evicted."""
    size, parent, access, serial, log, hits = {}, {}, {}, {}, [], []
    inserted = 0
    for r, ids in enumerate(reqs, 1):
        hits.append(leading_cached(ids, size))
        locked, prev, stopped = set(), None, False
        for k, b in ids:
            if k in size:
                log.append(f"reuse:{k}")
                access[k] = r
                x = k
                while x is not None:  # lock the whole path to the root
                    locked.add(x)
                    x = parent[x]
                prev = k
                continue
            if stopped or sum(size[x] for x in locked) + b > cap:
                stopped = True
                log.append(f"skip:{k}")
                continue
            while sum(size.values()) + b > cap:
                leaves = [x for x in size if x not in locked and all(parent[y] != x for y in size)]
                old = min(leaves, key=lambda x: (access[x], serial[x]))
                del size[old], parent[old]
                log.append(f"evict:{old}")
            size[k], parent[k], access[k], serial[k] = b, prev, r, inserted
            inserted += 1
            locked.add(k)
            prev = k
            log.append(f"add:{k}")
    return log, size, parent, hits


def touch_requests(policy, reqs):
    for ids in reqs:
        policy.begin_request([k for k, _ in ids])
        for depth, (k, b) in enumerate(ids, 1):
            policy.touch_in_request(k, b, depth, depth == len(ids))
            check_invariants(policy)


@FAST
@given(sized_requests, st.integers(1, 12))
def test_both_follow_their_models(reqs, cap):
    reqs = [[(k, min(b, cap)) for k, b in ids] for ids in reqs]
    vllm, radix = VLLMPolicy(cap), RadixPolicy(cap)
    touch_requests(vllm, reqs)
    touch_requests(radix, reqs)
    vllm.end_request()
    log, size, free, _ = model_vllm(reqs, cap)
    assert list(vllm.log) == log and dict(vllm.entries) == size and list(vllm.free) == free
    log, size, parent, _ = model_radix(reqs, cap)
    assert list(radix.log) == log and dict(radix.entries) == size
    assert {k: n[0] for k, n in radix.node.items()} == parent
    assert radix.num_records <= 2 * len(radix.node) + 64 + max((len(ids) for ids in reqs), default=0)
    radix.end_request()  # every unlocked leaf waits in the heap, with its current record
    assert candidates(radix) == unlocked_leaves(radix)


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


@pytest.mark.parametrize("cap", [3, 10, 40])
def test_both_follow_their_models_on_long_chained_runs(cap):
    # Long enough for the radix heap's compaction; chained like real traces, so paths are real paths.
    reqs = [[(k, 1) for k in ids] for ids in chained(random.Random(cap), 600)]
    vllm, radix = VLLMPolicy(cap), RadixPolicy(cap)
    touch_requests(vllm, reqs)
    touch_requests(radix, reqs)
    assert list(vllm.log) == model_vllm(reqs, cap)[0]
    assert list(radix.log) == model_radix(reqs, cap)[0]


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
    reqs = [[(k, 1) for k in ids] for ids in lists]
    for policy, model in ((VLLMPolicy(cap), model_vllm), (RadixPolicy(cap), model_radix)):
        hits = policy.replay_requests(lists, 1)
        log, _, _, expected_hits = model(reqs, cap)
        assert list(policy.log) == log and hits == expected_hits
        assert any(e.startswith("evict:") for e in log) and sum(hits) > 0  # long enough to evict and to hit


def candidates(p):
    """The radix heap's live records, as (access, serial, key)."""
    return sorted((r, k) for r, k in set(p.heap) if p._is_candidate(r, k))


def unlocked_leaves(p):
    return sorted(((n[2] << 40) | n[3], k) for k, n in p.node.items() if not n[1] and k not in p.locked)


def state(p):
    extra = (list(p.free.items()), dict(p.pinned), p.pinned_bytes) if isinstance(p, VLLMPolicy) else (
        copy.deepcopy(p.node), dict(p.locked), p.locked_bytes, p.request, p.num_inserted, p._prev, p._stopped,
        candidates(p))
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


def test_radix_evicts_the_oldest_unlocked_leaf_and_parents_become_leaves():
    p = RadixPolicy(5)
    p.replay_requests([[1, 2, 3], [1, 4], [5]], 1)  # tree: 1 -> {2 -> 3, 4}; 5 under the root
    assert p.node[3][0] == 2 and p.node[4][0] == 1 and p.node[5][0] is None
    p.replay_requests([[6, 7]], 1)  # oldest leaf is 3 (request 1), then its parent 2 (request 1)
    assert list(p.log)[-4:] == ["evict:3", "add:6", "evict:2", "add:7"]
    p.replay_requests([[8]], 1)  # leaves now: 4 (request 2, its parent 1 refreshed too), 5 (request 3)
    assert list(p.log)[-2:] == ["evict:4", "add:8"]


def test_radix_skips_the_rest_of_a_request_when_every_block_is_locked():
    p = RadixPolicy(3)
    p.replay_requests([[1, 2, 3, 4, 5]], 1)
    assert list(p.log) == ["add:1", "add:2", "add:3", "skip:4", "skip:5"]
    p.replay_requests([[1, 9]], 1)  # request 1 ended: 3 is the oldest unlocked leaf
    assert list(p.log)[-3:] == ["reuse:1", "evict:3", "add:9"]


@pytest.mark.parametrize("name", ["vllm", "radix"])
def test_a_bad_request_is_rejected_without_changing_state(name):
    policy = make_policy(name, 10)
    policy.replay_requests([["a", "b", "c"]], 1)
    before = copy.deepcopy(vars(policy))
    for bad in (["a", ["unhashable"], "y"], ["a", {}]):
        with pytest.raises(TypeError):
            policy.begin_request(bad)
        assert vars(policy) == before
    with pytest.raises(TypeError):
        policy.replay_requests([["a", "b"], ["a", ["x"]]], 1)  # the bad request, not its predecessor, is refused
    assert list(policy.log)[-2:] == ["reuse:a", "reuse:b"]


def test_radix_refuses_none_as_a_key():
    p = RadixPolicy(4)
    before = copy.deepcopy(vars(p))
    for call in (lambda: p.touch(None, 1), lambda: p.begin_request([1, None])):
        with pytest.raises(TypeError, match="root"):
            call()
        assert vars(p) == before


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
