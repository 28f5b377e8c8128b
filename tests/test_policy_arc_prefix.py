"""arc-prefix: ARC's decisions with a request's blocks refreshed tail first and prompts' last blocks
bypassed, traced by hand from the module docstring."""
import random

import pytest

from kvsched_lab.sim.policies import make_policy
from kvsched_lab.sim.policies.base import gc_paused
from kvsched_lab.sim.traces import load_trace, resolve_trace, sort_by_arrival
from policy_helpers import replay_by_touch


def test_a_finished_requests_tail_leaves_before_its_head():
    """Capacity 3. Request [a, b, c, x]: a, b, c are cached (x, the last block, is bypassed).
    ARC puts them in T1 head first; when the next request arrives they are refreshed tail
    first, so T1 holds c, b, a (a the newest). Request [d, y]: d misses, T1 is full and over p
    = 0, so T1's oldest goes: c, the tail, where plain ARC evicts a, the head."""
    ours, plain = make_policy("arc-prefix", 3), make_policy("arc", 3)
    lists = [["a", "b", "c", "x"], ["d", "y"]]
    assert ours.replay_requests(lists, 1) == [0, 0]
    plain.replay_requests(lists, 1)
    assert list(ours.log) == ["add:a", "add:b", "add:c", "skip:x", "evict:c", "add:d", "skip:y"]
    assert "evict:a" in list(plain.log) and "add:x" in list(plain.log)
    assert [k for k, _, _ in ours.snapshot()] == ["d", "a", "b"]


def test_the_next_request_finds_the_whole_head_cached():
    """The point of rule 1: after the eviction above, a request re-sending [a, b, c] finds its
    first two blocks cached (2 prefix hits); plain ARC lost a, so it finds none."""
    ours, plain = make_policy("arc-prefix", 3), make_policy("arc", 3)
    lists = [["a", "b", "c", "x"], ["d", "y"], ["a", "b", "c", "z"]]
    assert ours.replay_requests(lists, 1)[-1] == 2
    assert plain.replay_requests(lists, 1)[-1] == 0


def test_a_bypassed_block_leaves_arcs_state_as_it_was():
    """A prompt's last block is skipped before ARC's bookkeeping: no ghost is trimmed, p stays."""
    arc = make_policy("arc-prefix", 2)
    arc.replay_requests([["a", "b"], ["c", "d"], ["e", "f"]], 1)  # a, c, e cached in turn; b, d, f skipped
    before = (dict(arc.t1), dict(arc.b1), arc.p)
    arc.replay_requests([["e", "b"]], 1)  # e hits (to T2), b is the last block: skipped again
    assert list(arc.log)[-1] == "skip:b" and (dict(arc.b1), arc.p) == (before[1], before[2])


@pytest.mark.parametrize("trace, capacity", [("conversation", 8000), ("synthetic", 2005)])
def test_the_inlined_loop_decides_as_the_hooks_on_a_whole_trace(trace, capacity):
    """ARC's replay loop applies both rules inline (arc.py); on every request of a whole Mooncake
    trace it must make the hooks' decision (`begin_request` and `touch_in_request`, one touch at a
    time): the same prefix hits per request, the same log, the same lists in the same order."""
    lists = [r.hash_ids for r in sort_by_arrival(load_trace(resolve_trace(trace)))]
    fast, hooks = make_policy("arc-prefix", capacity), make_policy("arc-prefix", capacity)
    with gc_paused():  # the logs hold millions of objects: a collection would rescan them all
        assert fast.replay_requests(lists, 1) == replay_by_touch(hooks, lists, 1)
    assert fast.log == hooks.log and fast.snapshot() == hooks.snapshot()
    assert (fast.p, fast.finished, list(fast.b1), list(fast.b2)) == (hooks.p, hooks.finished, list(hooks.b1), list(hooks.b2))


@pytest.mark.parametrize("name", ["arc", "arc-prefix"])
@pytest.mark.parametrize("bad", [["a", ["x"], "c"], ["a", "b", ["x"]], [["x"], "a"], ["b", "a", ["x"], "q"]])
def test_an_unhashable_id_stops_the_loop_where_it_stops_the_hooks(name, bad):
    """The loop advances the clock a request at a time; an unhashable id must still leave what the
    hooks leave: the ids before it touched, the clock counting them, nothing after it."""
    fast, hooks = make_policy(name, 3), make_policy(name, 3)
    lists = [["a", "b"], ["a", "c", "d"]]
    fast.replay_requests(lists, 1)
    replay_by_touch(hooks, lists, 1)
    with pytest.raises(TypeError):
        fast.replay_requests([bad], 1)
    with pytest.raises(TypeError):
        replay_by_touch(hooks, [bad], 1)
    assert (fast.time, fast.hits, list(fast.log.events()), fast.snapshot(), getattr(fast, "finished", None)) == (
        hooks.time, hooks.hits, list(hooks.log.events()), hooks.snapshot(), getattr(hooks, "finished", None))


@pytest.mark.parametrize("seed", range(6))
def test_t2s_refresh_reads_only_the_prefix_hits_when_nothing_later_entered_t2(seed):
    """The loop's rule 1 reads only a finished request's prefix hits for T2 unless a later touch
    put a block there (a hit after the first miss, a ghost hit) or the request finished in an
    earlier call. Small caches, repeated ids within a request, ghosts, and the replay split over
    calls exercise each way back to the whole pass; the decisions must be the hooks'."""
    rng = random.Random(seed)
    lists = [[rng.choice("abcdefghijkl") for _ in range(rng.randint(1, 7))] for _ in range(400)]
    fast, hooks = make_policy("arc-prefix", 4), make_policy("arc-prefix", 4)
    for start in range(0, len(lists), 37):  # requests finished in an earlier call are refreshed too
        chunk = lists[start:start + 37]
        assert fast.replay_requests(chunk, 1) == replay_by_touch(hooks, chunk, 1)
    assert list(fast.log.events()) == list(hooks.log.events()) and fast.snapshot() == hooks.snapshot()
    assert (fast.p, fast.finished, list(fast.b1), list(fast.b2)) == (hooks.p, hooks.finished, list(hooks.b1), list(hooks.b2))
