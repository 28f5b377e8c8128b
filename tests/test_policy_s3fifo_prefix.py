"""Prefix-aware S3-FIFO (kvsched_lab/sim/policies/s3fifo_prefix.py): model, fast path (bad input: test_policies)."""
from __future__ import annotations

import random

from hypothesis import given, settings, strategies as st

from kvsched_lab import check_invariants
from kvsched_lab.sim.policies.s3fifo_prefix import GHOST_FACTOR, SMALL_SHARE, PrefixS3FIFOPolicy
from policy_helpers import replay_by_touch

FAST = settings(max_examples=200, deadline=None)
# requests of (key, size) blocks; depth and last follow from the position in the request
requests = st.lists(st.lists(st.tuples(st.integers(0, 9), st.integers(1, 3)), min_size=1, max_size=6), max_size=25)
request_lists = st.lists(st.lists(st.integers(0, 15), min_size=1, max_size=6), max_size=25)


def model(reqs, cap):
    """Brute force: lists and dicts, scanned linearly."""
    small_target, ghost_target = int(cap * SMALL_SHARE), GHOST_FACTOR * cap
    size, small, flagged, ghost, main, log = {}, [], set(), [], [], []  # main: [(req, key)] eviction order
    for r, ids in enumerate(reqs):
        for i, (k, b) in enumerate(ids):
            last = i == len(ids) - 1 and len(ids) > 1
            if k in size:
                log.append(f"reuse:{k}")
                if k in small:
                    flagged.add(k)
                else:
                    main.remove(next(e for e in main if e[1] == k))
                    main.append((r, k))
                continue
            if last:
                log.append(f"skip:{k}")
                continue
            g = next((e for e in ghost if e[0] == k), None)
            if g:
                ghost.remove(g)
            while sum(size.values()) + b > cap:
                if small and (sum(size[x] for x in small) >= small_target or not main):
                    old = small.pop(0)
                    if old in flagged:
                        flagged.discard(old)
                        main.append((r, old))
                        continue
                    ghost.append((old, size[old]))
                    while sum(s for _, s in ghost) > ghost_target:
                        ghost.pop(0)
                else:  # oldest request's group, its last-inserted key first
                    r0 = min(e[0] for e in main)
                    e = [e for e in main if e[0] == r0][-1]
                    main.remove(e)
                    old = e[1]
                del size[old]
                log.append(f"evict:{old}")
            size[k] = b
            (main.append((r, k)) if g else small.append(k))
            log.append(f"add:{k}")
    return log, size


@FAST
@given(requests, st.integers(3, 40))
def test_follows_its_model(reqs, cap):
    reqs = [[(k, min(b, cap)) for k, b in ids] for ids in reqs]
    policy = PrefixS3FIFOPolicy(cap)
    for ids in reqs:
        for depth, (k, b) in enumerate(ids, 1):
            policy.touch(k, b, depth=depth, last=depth == len(ids) and len(ids) > 1)
            check_invariants(policy)
    log, size = model(reqs, cap)
    assert list(policy.log) == log
    assert dict(policy.entries) == size
    assert sorted(map(str, (e[0] for e in policy.snapshot()))) == sorted(map(str, size))


def state(p):
    return (list(p.log.events()), dict(p.entries), p.snapshot(), p.current_bytes, p.time, p.hits,
            p.small_bytes, p.ghost_bytes, list(p.ghost.items()), sorted(p.small_hit), p.request)


@FAST
@given(lists=request_lists, cap=st.integers(1, 12), bytes_=st.integers(1, 2),
       warmup=st.lists(st.tuples(st.integers(100, 107), st.integers(1, 4)), max_size=40))
def test_fast_replay_equals_touch_loop(lists, cap, bytes_, warmup):
    cap *= bytes_
    fast, slow = PrefixS3FIFOPolicy(cap), PrefixS3FIFOPolicy(cap)
    for p in (fast, slow):
        p.schedule([(k, min(b, cap)) for k, b in warmup])
    assert fast.replay_requests(lists, bytes_) == replay_by_touch(slow, lists, bytes_)
    assert state(fast) == state(slow)
    check_invariants(fast)


def test_fast_replay_equals_touch_loop_on_a_long_run():
    rng = random.Random(7)
    lists = [[rng.randrange(60) for _ in range(rng.randint(1, 8))] for _ in range(2000)]
    fast, slow = PrefixS3FIFOPolicy(20), PrefixS3FIFOPolicy(20)
    assert fast.replay_requests(lists, 1) == replay_by_touch(slow, lists, 1)
    assert state(fast) == state(slow)
    assert len(fast.ghost) > 0


def test_the_last_block_is_bypassed_and_heads_outlive_tails():
    p = PrefixS3FIFOPolicy(40)
    p.replay_requests([list(range(10))], 1)
    assert 9 not in p.entries and ("skip", 9) in list(p.log.events())
    p.replay_requests([[100]], 1)  # a one-block request is cached
    assert 100 in p.entries
