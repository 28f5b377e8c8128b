"""W-TinyLFU's fast replay loop (wtinylfu_replay.py) against its hook path, and the sketch's batch hashing.

The zoo-wide test (tests/test_policies.py) replays caches of at most 24 bytes, where W-TinyLFU's
window (1%) is empty and every block is skipped; these caches are large enough for a window, an
SLRU that overflows, admissions both ways and the sketch's halving.
"""
import random

import pytest

from kvsched_lab import check_invariants
from kvsched_lab.sim.policies import make_policy, wtinylfu_replay
from kvsched_lab.sim.policies.sketch import MASK64, CountingBloomFilter
from policy_helpers import replay_by_touch


def state(policy):
    return (list(policy.log.events()), dict(policy.entries), policy.snapshot(), policy.current_bytes,
            policy.time, policy.hits, policy.window_bytes, policy.probation_bytes, policy.protected_bytes,
            policy.main_hits, list(policy.sketch.counters))


def hot_cold_requests(seed, capacity, n):
    """Requests of 1-6 blocks, half from a hot set of a third of the cache, half from a cold tail."""
    rng = random.Random(seed)
    return [[rng.randrange(capacity // 3) if rng.random() < 0.5 else rng.randrange(5 * capacity)
             for _ in range(rng.randint(1, 6))] for _ in range(n)]


@pytest.mark.parametrize("capacity, bytes_", [(100, 1), (137, 1), (250, 2), (501, 1)])
def test_fast_replay_equals_the_hook_path(capacity, bytes_):
    lists = hot_cold_requests(capacity, capacity, 1500)
    fast, slow = make_policy("wtinylfu", capacity * bytes_), make_policy("wtinylfu", capacity * bytes_)
    half = len(lists) // 2  # two calls: the state carries from one replay into the next
    assert fast.replay_requests(lists[:half], bytes_) + fast.replay_requests(lists[half:], bytes_) \
        == replay_by_touch(slow, lists, bytes_)
    assert state(fast) == state(slow)
    check_invariants(fast)
    ops = {op for op, _ in fast.log.events()}
    assert ops == {"add", "reuse", "evict"} and fast.protected and fast.probation and fast.window


@pytest.mark.parametrize("seed, hot, hot_share", [(3, 40, 0.9), (0, 10, 0.6)])
def test_fast_replay_equals_the_hook_path_through_the_sketchs_halving(seed, hot, hot_share):
    """A hot set hit in main often enough that the counters halve (every 32 x main bytes main hits).
    The fast loop keeps floors under counts between comparisons; the second case fails if a floor
    outlives a halving (it is then above the victim's count). The hook path counts the halvings."""
    rng = random.Random(seed)
    lists = [[rng.randrange(hot) if rng.random() < hot_share else rng.randrange(1000)] for _ in range(12000)]
    fast, slow = make_policy("wtinylfu", 100), make_policy("wtinylfu", 100)
    halvings = []
    decay = slow.sketch.decay
    slow.sketch.decay = lambda: (halvings.append(slow.time), decay())
    assert fast.replay_requests(lists, 1) == replay_by_touch(slow, lists, 1)
    assert state(fast) == state(slow)
    assert len(halvings) >= 2


def test_after_mixed_sizes_the_replay_goes_touch_by_touch():
    lists = hot_cold_requests(1, 200, 300)
    fast, slow = make_policy("wtinylfu", 400), make_policy("wtinylfu", 400)
    for policy in (fast, slow):
        policy.schedule([("big", 2), ("small", 1)])
    assert fast.replay_requests(lists, 1) == replay_by_touch(slow, lists, 1)
    assert state(fast) == state(slow)


@pytest.mark.parametrize("lead, capacity", [("uncached", 200), ("cached", 200), ("uncached", 50)])
def test_an_unhashable_id_raises_after_the_requests_before_it(lead, capacity):
    """The sketch learns every id before the loop; a bad one is still refused where the loop meets
    it, the requests before it replayed and counted, its own touch not (as `touch` refuses it): at
    its access (its request's leading id not cached; at 50 blocks, where nothing fits, too), or in
    its request's prefix hits (the leading id cached, so the hits look at it)."""
    policy, slow = make_policy("wtinylfu", capacity), make_policy("wtinylfu", capacity)
    before = hot_cold_requests(2, 200, 100)
    first = before[-1][-1] if lead == "cached" else -7
    with pytest.raises(TypeError):
        policy.replay_requests(before + [[first, ["unhashable"], 2]], 1)
    replay_by_touch(slow, before, 1)
    if lead == "uncached":
        slow.touch(first, 1)
    assert state(policy) == state(slow) and policy.time > 0


def test_batch_positions_are_the_scalar_hashs():
    """`positions` (numpy, all keys at once) gives `slots` (XXH64 one key at a time) for every key,
    edge values, repeats and non-int keys included, and in a batch of ints only (its fast path)
    (tests/test_crosscheck_libcachesim.py checks the scalar hash against libCacheSim's decisions)."""
    rng = random.Random(0)
    ints = [0, 1, 255, 256, 2 ** 32, MASK64, 2 ** 63, 7, 7] + [rng.getrandbits(64) for _ in range(3000)]
    mixed = ints + [True, False, -1, 2 ** 64, "a", (1, 2), 3.5, 3.0] + list(range(1000))
    sketch = CountingBloomFilter(7920)
    for keys in (ints, mixed, [-1, 5], [2 ** 64, 5]):
        rows = sketch.positions(keys)
        assert rows.shape == (sketch.hashes, len(keys))  # a column a key
        for key, row in zip(keys, rows.T.tolist()):
            assert row == list(CountingBloomFilter(7920).slots(key)), key
    assert sketch.positions([["unhashable"]]).shape == (sketch.hashes, 1)  # hashed by its bytes


@pytest.mark.parametrize("per_call", [1, 25])
def test_many_small_replays_and_odd_keys_equal_the_hook_path(monkeypatch, per_call):
    """A few requests a call (every call starts from a full cache whose window and main it must
    hash again, and, with one victim bounded ahead, hashes only three of main's blocks: the others
    it meets have the sketch's positions), with str and tuple keys beside ints, and comparisons the
    bounds leave to the exact counts."""
    monkeypatch.setattr(wtinylfu_replay, "VICTIMS_AHEAD", 1)
    exact_reads = []
    read = wtinylfu_replay._Counts.exact
    monkeypatch.setattr(wtinylfu_replay._Counts, "exact", lambda self, row: exact_reads.append(1) or read(self, row))
    rng = random.Random(5)
    odd = ["a", "b", (1, 2), "c", 2 ** 70, -3]
    lists = [[rng.choice(odd) if rng.random() < 0.05 else k for k in ids] for ids in hot_cold_requests(7, 150, 1200)]
    fast, slow = make_policy("wtinylfu", 150), make_policy("wtinylfu", 150)
    got = [h for i in range(0, len(lists), per_call) for h in fast.replay_requests(lists[i:i + per_call], 1)]
    assert got == replay_by_touch(slow, lists, 1)
    assert state(fast) == state(slow)
    assert exact_reads


def test_the_hook_paths_add_counts_a_repeated_position_twice():
    """`add` counts each of a key's positions, a position the key has twice counted twice (as
    libCacheSim increments all of them), and `estimate` is the smallest; halving floors them.
    A small sketch (20 counters) gives keys repeated positions; one fancy-indexed ``+=`` would not."""
    sketch = CountingBloomFilter(1)
    keys = [k for k in range(40) if len(set(sketch.slots(k))) < sketch.hashes][:3]
    assert keys
    expected = [0] * sketch.num_counters
    for key in keys + keys[:1]:
        sketch.add(key)
        for i in sketch.slots(key):
            expected[i] += 1
    assert sketch.counters.tolist() == expected and max(expected) >= 2
    for key in keys:
        assert sketch.estimate(key) == min(expected[i] for i in sketch.slots(key))
        assert type(sketch.estimate(key)) is int
    sketch.decay()
    assert sketch.counters.tolist() == [c >> 1 for c in expected]


def test_a_policy_copies_and_pickles_and_its_copy_counts_on_its_own():
    """The sketch's counters are read through one view kept beside them; a copy (deepcopy, pickle)
    gets a view of its own counters, so counting in one never moves the other."""
    import copy
    import pickle

    p = make_policy("wtinylfu", 100)
    p.schedule([(k, 1) for k in (1, 2, 1, 3)])
    for twin in (copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert twin.sketch.counters.tolist() == p.sketch.counters.tolist()
        before = p.sketch.counters.tolist()
        twin.touch(99, 1)  # a miss: counted in the sketch
        assert p.sketch.counters.tolist() == before and sum(twin.sketch.counters.tolist()) > sum(before)


@pytest.mark.parametrize("per_call", [7, 400])
def test_window_hits_before_and_after_the_cache_fills(per_call):
    """The fast loop keeps the window as a list of slots and finds a hit block's slot through a
    map brought up to date only at window hits; a moved block leaves its old slot behind, skipped
    when the window's exits reach it. Window hits while the window holds everything (before the
    cache fills), on its newest block (an id twice in a row), twice on one block, and on a full
    cache's small window, over calls that carry the window into the next one."""
    rng = random.Random(11)
    lists, fresh = [], iter(range(10 ** 6, 2 * 10 ** 6))
    for _ in range(900):
        ids = [next(fresh) for _ in range(rng.randint(1, 4))]
        recent = [k for req in lists[-3:] for k in req]
        if recent and rng.random() < 0.5:
            ids.insert(rng.randrange(len(ids) + 1), rng.choice(recent))  # likely still in the window
        if rng.random() < 0.2:
            ids.append(ids[-1])  # the newest block hit at once
        lists.append(ids)
    fast, slow = make_policy("wtinylfu", 300), make_policy("wtinylfu", 300)
    window_sizes = []
    hit = slow._hit
    slow._hit = lambda key: (key in slow.window and window_sizes.append(len(slow.window)), hit(key))
    got = [h for i in range(0, len(lists), per_call) for h in fast.replay_requests(lists[i:i + per_call], 1)]
    assert got == replay_by_touch(slow, lists, 1)
    assert state(fast) == state(slow)
    assert min(window_sizes) <= fast.window_bytes_max < 100 < max(window_sizes)  # both phases
