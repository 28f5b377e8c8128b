"""CACHEUS's fast replay loop (cacheus_replay.py) against its hook path, the whole state compared.

The zoo-wide test (tests/test_policies.py) compares logs, entries and snapshots; here the
learner's state is compared as well (weights, learning rate, draws, SR's target, the history and
both ghosts with their order), on workloads where every rule fires: ghost hits, SR's growth,
learning-rate updates, and blocks of two bytes skipped when R's target is one byte. At 5 blocks
of one byte the last placed block at count 1 is often evicted while the newest, not yet placed
(cacheus_replay.py's `pending`), keeps count 1 in use.
"""
import random

import pytest

from kvsched_lab import check_invariants
from kvsched_lab.sim.policies import make_policy
from policy_helpers import replay_by_touch


def state(p):
    return (list(p.log.events()), dict(p.entries), p.snapshot(), p.current_bytes, p.time, p.hits,
            list(p.r_list.items()), list(p.sr_list.items()), list(p.history.items()),
            list(p.ghost_lru.items()), list(p.ghost_lfu.items()),
            {f: list(keys) for f, keys in p.by_freq.items()}, dict(p.freq),
            p.r_bytes, p.sr_bytes, p.history_bytes, p.ghost_lru_bytes, p.ghost_lfu_bytes,
            p.sr_target, p.r_target, p.demoted, p.new_in_history, p.min_freq, p.max_freq,
            p.w_lru, p.w_lfu, p.lr, p.lr_previous, p.hit_rate_previous, p.unlearn, p.interval_hits, p.rand_state)


def hot_cold_requests(seed, capacity, n):
    """Requests of 1-5 blocks, half from a hot set half the cache, half from three caches' worth."""
    rng = random.Random(seed)
    return [[rng.randrange(capacity // 2) if rng.random() < 0.5 else rng.randrange(3 * capacity)
             for _ in range(rng.randint(1, 5))] for _ in range(n)]


@pytest.mark.parametrize("blocks, bytes_", [(20, 1), (37, 1), (64, 2), (5, 2), (5, 1), (1, 1), (3, 2)])
def test_fast_replay_equals_the_hook_path_in_every_field(blocks, bytes_):
    capacity = blocks * bytes_
    lists = hot_cold_requests(blocks, max(blocks, 4), 1500)
    fast, slow = make_policy("cacheus", capacity), make_policy("cacheus", capacity)
    half = len(lists) // 2  # two calls: the state carries from one replay into the next
    assert fast.replay_requests(lists[:half], bytes_) + fast.replay_requests(lists[half:], bytes_) \
        == replay_by_touch(slow, lists, bytes_)
    assert state(fast) == state(slow)
    check_invariants(fast)
    if blocks >= 20:  # the adaptive parts ran: ghost hits moved the weights, SR grew, lr moved
        assert fast.w_lru != 0.5 and fast.sr_target > capacity // 2 and fast.lr_previous != 0


def test_skipped_blocks_still_count_toward_the_learning_rates_interval():
    """At 3 blocks of 2 bytes R's target shrinks to 1 byte, so blocks back from H are skipped; the
    learning rate is still updated every `capacity` accesses, skips included."""
    lists = hot_cold_requests(1, 4, 3000)
    fast, slow = make_policy("cacheus", 6), make_policy("cacheus", 6)
    fast.replay_requests(lists, 2)
    replay_by_touch(slow, lists, 2)
    assert any(op == "skip" for op, _ in fast.log.events()) and any(op == "add" for op, _ in fast.log.events())
    assert state(fast) == state(slow)
