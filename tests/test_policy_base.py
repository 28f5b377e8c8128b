"""The base class every policy (and a learner's, in notebook 07) builds on: its hooks, checks, replay.

Library policies override `_replay` with their own loops, so the base class's loop, its
checks and `generic_replay_requests` (the learner's scheduler replays through it) are pinned
here, with a policy that records every hook call.
"""
from __future__ import annotations

import pytest

from kvsched_lab.sim.policies import LRUPolicy, Policy
from kvsched_lab.sim.policies.base import PromptAwarePolicy, generic_replay_requests
from policy_helpers import MostRecent


class Recorder(PromptAwarePolicy):
    """FIFO that writes down each hook call and each block's position as `_start_block` got it."""

    def __init__(self, capacity_bytes, **kwargs):
        super().__init__(capacity_bytes, **kwargs)
        self.calls = []
        self.order = []

    def begin_request(self, hash_ids):
        self.calls.append(("begin", list(hash_ids)))

    def _start_block(self, depth, last):
        self.calls.append(("block", depth, last))

    def on_hit(self, key):
        self.calls.append(("hit", key))

    def on_insert(self, key, size):
        self.order.append(key)

    def victim(self):
        return self.order[0]

    def on_evict(self, key, size):
        self.order.remove(key)


def test_a_new_policy_starts_empty_and_counts_from_the_first_touch():
    p = MostRecent(10)
    assert (p.capacity_bytes, p.current_bytes, p.time, p.hits, p.entries, list(p.log)) == (10, 0, 0, 0, {}, [])
    p.touch("a", 3)
    p.touch("a", 3)
    assert (p.current_bytes, p.time, p.hits, p.entries, list(p.log)) == (3, 2, 1, {"a": 3}, ["add:a", "reuse:a"])
    assert repr(p) == "MostRecent(capacity_bytes=10, entries=1, current_bytes=3, time=2)"
    assert p.snapshot() == [("a", 3)]
    for bad, kind, message in ((0, ValueError, "capacity_bytes must be > 0, got 0"),
                               ("8", TypeError, "capacity_bytes must be an int, got str '8'")):
        with pytest.raises(kind) as err:
            MostRecent(bad)
        assert str(err.value) == message


def test_a_policy_without_a_victim_says_which_hook_is_missing():
    class NoVictim(Policy):
        pass

    p = NoVictim(4)
    p.touch("a", 4)
    with pytest.raises(NotImplementedError) as err:
        p.touch("b", 1)
    assert str(err.value) == "NoVictim must implement victim()"


def test_an_entry_may_fill_the_cache_exactly_but_not_more():
    p = MostRecent(8)
    p.touch("a", 8)
    assert p.current_bytes == 8 and p.entries == {"a": 8}
    for bad, kind, message in ((9, ValueError, "single cache entry exceeds capacity: 9 bytes > capacity_bytes=8"),
                               (0, ValueError, "bytes_ must be > 0, got 0"),
                               (2.0, TypeError, "bytes_ must be an int, got float 2.0")):
        with pytest.raises(kind) as err:
            p.touch("b", bad)
        assert str(err.value) == message
        with pytest.raises(kind) as err:
            p.replay_requests([["b"]], bad)
        assert str(err.value) == message
    assert (p.entries, p.time, list(p.log)) == ({"a": 8}, 1, ["add:a"])  # nothing changed


def test_the_base_replay_announces_each_request_and_each_blocks_place():
    p = Recorder(3)
    hits = p.replay_requests([["a", "b"], ["a", "b", "c"], ["z"]], 1)
    assert hits == [0, 2, 0]
    assert p.calls == [("begin", ["a", "b"]), ("block", 1, False), ("block", 2, True),
                       ("begin", ["a", "b", "c"]), ("block", 1, False), ("hit", "a"),
                       ("block", 2, False), ("hit", "b"), ("block", 3, True),
                       ("begin", ["z"]), ("block", 1, False)]  # a one-block prompt's block is not "last"
    assert list(p.log) == ["add:a", "add:b", "reuse:a", "reuse:b", "add:c", "evict:a", "add:z"]
    assert p.time == 6 and p.hits == 2


def test_a_plain_policy_replays_through_touch_in_request():
    """A `Policy` (not prompt-aware) that reads positions overrides `touch_in_request`."""
    seen = []

    class Positions(MostRecent):
        def touch_in_request(self, prefix, bytes_, depth, last):
            seen.append((prefix, depth, last))
            super().touch_in_request(prefix, bytes_, depth, last)

    assert Positions(10).replay_requests([["a", "b", "c"], ["d"]], 2) == [0, 0]
    assert seen == [("a", 1, False), ("b", 2, False), ("c", 3, True), ("d", 1, True)]


def test_prompt_aware_touch_checks_its_position_before_anything_changes():
    p = Recorder(4)
    p.touch("a", 1, depth=2, last=True)
    assert p.calls == [("block", 2, True)]
    for kwargs, kind, message in (({"depth": 0}, ValueError, "depth must be > 0, got 0"),
                                  ({"depth": 1.0}, TypeError, "depth must be an int, got float 1.0"),
                                  ({"last": 1}, TypeError, "last must be a bool, got 1"),
                                  ({"last": None}, TypeError, "last must be a bool, got None")):
        with pytest.raises(kind) as err:
            p.touch("b", 1, **kwargs)
        assert str(err.value) == message
    with pytest.raises(ValueError):
        p.touch("b", 5)  # too big: refused before `_start_block` hears of it
    with pytest.raises(TypeError):
        p.touch(["unhashable"], 1)
    assert p.calls == [("block", 2, True)] and p.entries == {"a": 1} and p.time == 1
    p.touch("b", 1)  # the defaults: the first block, not the last
    assert p.calls[-1] == ("block", 1, False) and p.entries == {"a": 1, "b": 1}


def test_generic_replay_counts_leading_hits_then_touches_every_block():
    """The protocol for a learner's scheduler: only `touch` and `entries` are used."""

    class Touches:
        def __init__(self):
            self.entries = {}
            self.touched = []

        def touch(self, key, bytes_):
            self.touched.append((key, bytes_))
            self.entries[key] = bytes_

    sim = Touches()
    hits = generic_replay_requests(sim, [["a", "b"], ["a", "x", "b"], ["a", "b", "x", "y"]], 7)
    assert hits == [0, 1, 3]
    assert sim.touched == [(k, 7) for k in ["a", "b", "a", "x", "b", "a", "b", "x", "y"]]
    lru = LRUPolicy(3)
    assert generic_replay_requests(lru, [["a", "b"], ["a", "b", "c", "d"], ["a"]], 1) == [0, 2, 0]
    again = LRUPolicy(3)
    assert again.replay_requests([["a", "b"], ["a", "b", "c", "d"], ["a"]], 1) == [0, 2, 0]
    assert list(again.log) == list(lru.log)
