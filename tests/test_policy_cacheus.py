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
from kvsched_lab.sim.policies.cacheus_fifo import SLACK
from policy_helpers import replay_by_touch


def state(p):
    return (list(p.log.events()), dict(p.entries), p.snapshot(), p.current_bytes, p.time, p.hits,
            list(p.r_list.items()), p.sr_list.ordered_items(), p.history.ordered_items(),
            p.ghost_lru.ordered_items(), p.ghost_lfu.ordered_items(), p.block_size,
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


def test_replays_after_a_rebuilt_order_stay_the_hook_paths():
    """SR, H and the ghosts keep their order in a deque whose stale copies (a block hit in SR, back
    from H, a ghost hit) are dropped at its oldest end (cacheus_fifo.py). Cycling hits over blocks
    that bounce between R and SR, with nothing evicted, piles stale copies up until the deque is
    rebuilt; the misses after it must still go where the hook path sends them."""
    capacity = 60
    warm = [[k] for k in range(50)]
    cycling = [[k % 50] for k in range(3000)]  # hits only: R's overflow demoted back to SR each time
    cold = hot_cold_requests(3, capacity, 1500)
    fast, slow = make_policy("cacheus", capacity), make_policy("cacheus", capacity)
    lists = warm + cycling + cold
    assert fast.replay_requests(warm + cycling, 1) + fast.replay_requests(cold, 1) == replay_by_touch(slow, lists, 1)
    assert state(fast) == state(slow)
    order = fast.sr_list.order  # bounded, so it was rebuilt: 3,000 hits left a stale copy each
    assert len(order) <= 2 * len(fast.sr_list) + SLACK < 3000


def test_a_replay_in_another_size_goes_touch_by_touch():
    """The fast loop counts blocks, so it runs only while every touch had the replay's size
    (`block_size`); a replay of 2-byte blocks after 1-byte ones goes through the hooks."""
    first = hot_cold_requests(4, 20, 300)
    second = [[k + 1000 for k in ids] for ids in hot_cold_requests(5, 20, 12)]  # new blocks: cached at 2 bytes
    fast, slow = make_policy("cacheus", 40), make_policy("cacheus", 40)
    assert fast.replay_requests(first, 1) + fast.replay_requests(second, 2) \
        == replay_by_touch(slow, first, 1) + replay_by_touch(slow, second, 2)
    assert state(fast) == state(slow) and fast.block_size == 0
    remembered = [size for _, (size, _, _) in fast.history.ordered_items()] + list(fast.entries.values())
    assert set(remembered) == {1, 2}  # the 1-byte blocks still count in H's bytes


@pytest.mark.parametrize("w_lru", [0.995, 0.9999])
def test_draws_owed_while_w_lru_is_over_099_leave_the_generator_where_the_hook_path_does(w_lru):
    """Above 0.99 every draw picks SR-LRU, so the fast loop only counts them and takes them in one
    step when a ghost hit brings the weight down, at a learning-rate update, and at the end."""
    lists = hot_cold_requests(6, 20, 1500)
    fast, slow = make_policy("cacheus", 20), make_policy("cacheus", 20)
    for p in (fast, slow):
        p.w_lru, p.w_lfu = w_lru, 1 - w_lru
    head = 30  # the first replay ends a few evictions in, with draws still owed
    assert fast.replay_requests(lists[:head], 1) == replay_by_touch(slow, lists[:head], 1)
    assert state(fast) == state(slow) and fast.w_lru > 0.99
    assert fast.replay_requests(lists[head:], 1) == replay_by_touch(slow, lists[head:], 1)
    assert state(fast) == state(slow)



@pytest.mark.parametrize("lead", ["uncached", "cached"])
def test_an_unhashable_id_leaves_what_the_hook_path_leaves(lead):
    """A bad id raises where the loop meets it, the requests and touches before it replayed and its
    own touch not counted (`touch` refuses it before the clock moves): after a miss on the request's
    leading id, or in its prefix hits when that id is cached."""
    fast, slow = make_policy("cacheus", 20), make_policy("cacheus", 20)
    before = hot_cold_requests(2, 20, 100)
    first = before[-1][-1] if lead == "cached" else -7
    bad = before + [[first, ["unhashable"], 2]]
    with pytest.raises(TypeError):
        fast.replay_requests(bad, 1)
    with pytest.raises(TypeError):
        replay_by_touch(slow, bad, 1)
    assert state(fast) == state(slow) and fast.time > 0
