"""Belady's MIN with bypass (kvsched_lab/sim/policies/belady.py): its messages, snapshot, input and records.

tests/test_policies.py checks Belady's log against a model, its hits against an exhaustive
optimum and its fast replay against the touch loop. This file pins the rest: each error says
what went wrong in full, the snapshot lists next uses by hand (None for never), a replay takes
its requests from any iterable, and the heap's record count (one record per cached block and
one per hit, rebuilt to one per block once stale ones outnumber live ones by more than 64; the
bench reports records per live block) in both the touch loop and the fast replay.
"""
from __future__ import annotations

import pytest

from kvsched_lab.sim.policies.belady import BeladyPolicy
from policy_helpers import replay_by_touch

SLACK = 64  # records a heap may hold beyond twice its live blocks before it is rebuilt


# -- each error in full ------------------------------------------------------------------------
def test_belady_without_a_future_says_what_it_needs():
    """Built like the other policies but without `future=`, Belady says what to pass."""
    with pytest.raises(ValueError) as info:
        BeladyPolicy(4)
    assert str(info.value) == "belady needs future= (every key that will be touched, in order)"


def test_a_touch_off_the_future_names_its_number_and_the_key_expected():
    """The error counts touches from 1 and quotes the key the future holds there, or says the
    future is used up."""
    policy = BeladyPolicy(4, future=["a", "b"])
    policy.touch("a", 1)
    with pytest.raises(ValueError) as info:
        policy.touch("c", 1)
    assert str(info.value) == "touch #2 is 'c', but the future says 'b'"
    policy.touch("b", 1)
    with pytest.raises(ValueError) as info:
        policy.touch("a", 1)
    assert str(info.value) == "touch #3 is 'a', but the future says 'nothing (future exhausted)'"


def test_a_replay_off_the_future_says_so():
    """A replay checks all its ids against the future before touching anything."""
    policy = BeladyPolicy(4, future=["a", "b", "c"])
    with pytest.raises(ValueError) as info:
        policy.replay_requests([["a", "c"]], 1)
    assert str(info.value) == "the requests' ids are not the next keys of the future this policy was given"
    assert policy.time == 0 and not policy.entries


# -- the snapshot, by hand ---------------------------------------------------------------------
def test_belady_snapshot_is_soonest_next_use_first_and_none_for_never():
    """future = a z m b z m b (positions 0..6). Next uses are 0-based positions; a, touched only
    at position 0, is never used again: None, and the first to go."""
    future = ["a", "z", "m", "b", "z", "m", "b"]
    policy = BeladyPolicy(6, future=future)
    policy.schedule([("a", 2), ("z", 1), ("m", 3)])
    # z next at 4, m at 5, a never: soonest first, not in key or insertion order.
    assert policy.snapshot() == [("z", 1, 4), ("m", 3, 5), ("a", 2, None)]
    policy.touch("b", 1)  # full; b's next use (6) is sooner than a's (never): a goes, b stays
    assert list(policy.log)[-2:] == ["evict:a", "add:b"]
    assert policy.snapshot() == [("z", 1, 4), ("m", 3, 5), ("b", 1, 6)]
    policy.schedule([("z", 1), ("m", 3), ("b", 1)])
    # None is used again: each counts as len(future) + its last position (11, 12, 13), so the
    # block touched last is the farthest, the first to go, and listed last.
    assert policy.snapshot() == [("z", 1, None), ("m", 3, None), ("b", 1, None)]
    fast = BeladyPolicy(6, future=future)
    fast.replay_requests([["a"], ["z", "m"], ["b"]], 1)  # 1-byte blocks: all four fit
    assert fast.snapshot() == [("z", 1, 4), ("m", 1, 5), ("b", 1, 6), ("a", 1, None)]


# -- a replay's requests may come from any iterable --------------------------------------------
@pytest.mark.parametrize("kind", [list, tuple, iter, lambda lists: (ids for ids in lists)])
def test_belady_replays_requests_from_any_iterable(kind):
    """The fast replay reads its requests twice (to check them against the future, then to play
    them); a generator or a tuple must give what the touch loop gives."""
    lists = [["a", "b"], ["c", "a"], ["b", "c", "d"], ["a", "d"], ["b"]]
    future = [k for ids in lists for k in ids]
    slow, fast = BeladyPolicy(2, future=future), BeladyPolicy(2, future=future)
    expected = replay_by_touch(slow, lists, 1)
    assert fast.replay_requests(kind(lists), 1) == expected
    assert list(fast.log) == list(slow.log) and fast.time == len(future)


# -- heap records: one per cached block and per hit, rebuilt past twice the live ones + 64 ----
def record_counts(future, capacity):
    """Records after each touch of a workload that evicts and bypasses nothing: every touch pushes
    one (an insert, or a hit's new next use: the old record goes stale); once stale records
    outnumber live ones by more than SLACK the heap is rebuilt to one record per block."""
    live, count, out = set(), 0, []
    for key in future:
        live.add(key)
        count += 1
        if count - len(live) > len(live) + SLACK:
            count = len(live)
        out.append(count)
    assert len(live) <= capacity  # nothing evicted
    return out


def test_the_touch_loops_heap_is_rebuilt_once_stale_records_outnumber_live_ones():
    """Two blocks touched in turn: the count climbs to 2 * 2 + 64 = 68, and the next push rebuilds."""
    future = ["a", "b"] * 80
    expected = record_counts(future, 2)
    assert max(expected) == 2 * 2 + SLACK and expected.count(2) >= 3  # rebuilt at least twice
    policy, counts = BeladyPolicy(2, future=future), []
    for key in future:
        policy.touch(key, 1)
        counts.append(policy.num_records)
    assert counts == expected
    assert policy.hits == len(future) - 2


def test_the_fast_replays_heap_is_rebuilt_once_stale_records_outnumber_live_ones():
    """The same rule in the fast replay, one one-block request at a time."""
    future = ["a", "b"] * 80
    expected = record_counts(future, 2)
    policy, counts = BeladyPolicy(2, future=future), []
    for i, key in enumerate(future):
        assert policy.replay_requests([[key]], 1) == [int(i >= 2)]  # a and b miss once, then stay
        counts.append(policy.num_records)
    assert counts == expected
