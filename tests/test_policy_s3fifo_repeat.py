"""Repeat-aware S3-FIFO (kvsched_lab/sim/policies/s3fifo_repeat.py): model, fast path, rules (bad input: test_policies)."""
from __future__ import annotations

import random

from hypothesis import given, settings, strategies as st

from kvsched_lab import check_invariants
from kvsched_lab.sim.policies.s3fifo_repeat import GHOST_FACTOR, REPEAT_BONUS, SMALL_SHARE, RepeatS3FIFOPolicy
from policy_helpers import replay_by_touch

FAST = settings(max_examples=200, deadline=None)
# requests of (key, size) blocks; depth and last follow from the position in the request
requests = st.lists(st.lists(st.tuples(st.integers(0, 9), st.integers(1, 3)), min_size=1, max_size=6), max_size=30)


def model(reqs, cap):
    """The module docstring's rules by brute force: lists scanned linearly, M's minimum by `min`."""
    small_target, ghost_target = int(cap * SMALL_SHARE), GHOST_FACTOR * cap
    size, small, flagged, ghost, main, log = {}, [], set(), [], [], []
    seq = 0  # small: [key, request, depth]; ghost: [key, bytes]; main: (rank, -depth, seq, key)

    def remember(key, b):
        nonlocal ghost
        if key in [g[0] for g in ghost]:
            ghost = [g for g in ghost if g[0] != key] + [g for g in ghost if g[0] == key]
            return
        ghost.append([key, b])
        while sum(g[1] for g in ghost) > ghost_target:
            ghost.pop(0)

    for r, ids in enumerate(reqs, 1):
        repeat = all(k in size or k in [g[0] for g in ghost] for k, _ in ids[:-1])
        rank = r if repeat else r - REPEAT_BONUS
        for depth, (k, b) in enumerate(ids, 1):
            if k in size:
                log.append(f"reuse:{k}")
                s = next((e for e in small if e[0] == k), None)
                if s:
                    flagged.add(k)
                    s[1:] = [r, depth]
                else:
                    main = [e for e in main if e[3] != k]
                    seq += 1
                    main.append((rank, -depth, seq, k))
                continue
            if depth == len(ids) > 1:
                remember(k, b)
                log.append(f"skip:{k}")
                continue
            to_main = k in [g[0] for g in ghost]
            ghost = [g for g in ghost if g[0] != k]
            while sum(size.values()) + b > cap:
                if small and (sum(size[e[0]] for e in small) >= small_target or not main):
                    old, old_r, old_depth = small.pop(0)
                    if old in flagged:
                        flagged.discard(old)
                        seq += 1
                        main.append((old_r, -old_depth, seq, old))
                        continue
                else:
                    e = min(main)
                    main.remove(e)
                    old = e[3]
                remember(old, size.pop(old))
                log.append(f"evict:{old}")
            size[k] = b
            if to_main:
                seq += 1
                main.append((rank, -depth, seq, k))
            else:
                small.append([k, r, depth])
            log.append(f"add:{k}")
    return log, size


def touch_requests(policy, reqs):
    for ids in reqs:
        policy.begin_request([k for k, _ in ids])
        for depth, (k, b) in enumerate(ids, 1):
            policy.touch(k, b, depth=depth, last=depth == len(ids) > 1)
            check_invariants(policy)
            assert policy.num_records <= 2 * len(policy.main) + 64


@FAST
@given(requests, st.integers(3, 40))
def test_follows_its_model(reqs, cap):
    reqs = [[(k, min(b, cap)) for k, b in ids] for ids in reqs]
    policy = RepeatS3FIFOPolicy(cap)
    touch_requests(policy, reqs)
    log, size = model(reqs, cap)
    assert list(policy.log) == log
    assert dict(policy.entries) == size


def test_follows_its_model_over_many_requests():
    # Long enough for real ranks (requests beyond REPEAT_BONUS), heap compaction and G's trimming.
    rng = random.Random(11)
    reqs = [[(k, 1) for k in rng.sample(range(300), rng.randint(1, 6))] for _ in range(2 * REPEAT_BONUS)]
    reqs += [reqs[i] for i in range(0, 200, 3)]  # exact repeats
    policy = RepeatS3FIFOPolicy(60)
    touch_requests(policy, reqs)
    log, size = model(reqs, 60)
    assert list(policy.log) == log and dict(policy.entries) == size
    assert policy.request == len(reqs) and len(policy.ghost) > 0 and policy.main


def state(p):
    return (list(p.log.events()), dict(p.entries), p.snapshot(), p.current_bytes, p.time, p.hits,
            list(p.small.items()), sorted(p.small_hit), p.small_bytes, list(p.ghost.items()), p.ghost_bytes,
            p.main, p.seq, p.request, p.repeat)


def test_fast_replay_equals_touch_loop_on_a_long_run():
    rng = random.Random(7)
    lists = [[rng.randrange(60) for _ in range(rng.randint(1, 8))] for _ in range(2000)]
    lists += lists[:300]  # repeats
    fast, slow = RepeatS3FIFOPolicy(20), RepeatS3FIFOPolicy(20)
    assert fast.replay_requests(lists, 1) == replay_by_touch(slow, lists, 1)
    assert state(fast) == state(slow)
    assert len(fast.ghost) > 0 and fast.num_records <= 2 * len(fast.main) + 64


def test_fast_replay_equals_touch_loop_when_victims_differ_in_size():
    # Blocks cached by hand with other sizes: the loop's usual case (a victim of the new block's
    # size makes room, the bytes unchanged) must not be taken for them, one victim may not do.
    rng = random.Random(5)
    lists = [[rng.randrange(80) for _ in range(rng.randint(1, 8))] for _ in range(600)]
    fast, slow = RepeatS3FIFOPolicy(40), RepeatS3FIFOPolicy(40)
    for p in (fast, slow):
        for i, size in enumerate([1, 3, 5, 2, 4, 1, 3] * 4):
            p.touch(1000 + i, size, depth=i % 5 + 1)
    assert fast.replay_requests(lists, 2) == replay_by_touch(slow, lists, 2)
    assert state(fast) == state(slow)
    assert ("evict", 1001) in list(fast.log.events()) and fast.current_bytes == slow.current_bytes <= 40
    assert fast.replay_requests(lists, 3) == replay_by_touch(slow, lists, 3)  # the usual case, another size
    assert state(fast) == state(slow)


def test_a_repeat_is_a_prompt_whose_blocks_but_the_last_are_known():
    p = RepeatS3FIFOPolicy(100)
    p.replay_requests([[1, 2, 3, 4]], 1)  # 4, the last block, is bypassed but remembered
    assert p.repeat is False and p.rank() == 1 - REPEAT_BONUS
    for ids, repeat in (([1, 2, 3, 4], True), ([1, 2, 3, 9], True), ([1, 2, 9, 4], False), ([1, 2, 4, 5], True),
                        ([7], True)):
        p.begin_request(ids)
        assert p.repeat is repeat, ids
    assert p.rank() == p.request


def test_a_repeat_outranks_a_newer_one_off_prompt():
    # Two prompts reach M (G sends them back); then the first is re-sent word for word and the
    # second is extended: M's next victims are the second's blocks, deepest first.
    p = RepeatS3FIFOPolicy(400)
    p.replay_requests([[1, 2, 3, 0], [5, 6, 7, 0]], 1)
    p.replay_requests([list(range(100, 500))], 1)  # flushes both through S into G
    p.replay_requests([[1, 2, 3, 0], [5, 6, 7, 0]], 1)  # back from G: into M
    assert {1, 2, 3, 5, 6, 7} <= set(p.main)
    p.replay_requests([[1, 2, 3, 0], [5, 6, 7, 8, 0]], 1)  # a repeat, then a one-off
    assert p.main[1] > p.main[5]  # touched first, the repeat still ranks higher: the bonus
    victims = [p._pop_main() for _ in range(3)]
    assert victims == [7, 6, 5]  # the one-off goes first, deepest block first


def test_the_last_block_is_bypassed_and_heads_outlive_tails():
    p = RepeatS3FIFOPolicy(40)
    p.replay_requests([list(range(10))], 1)
    assert 9 not in p.entries and ("skip", 9) in list(p.log.events()) and 9 in p.ghost
    p.replay_requests([[100]], 1)  # a one-block request is cached
    assert 100 in p.entries
