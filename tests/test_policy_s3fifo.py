"""S3-FIFO's snapshot and its documented bookkeeping (``freq``, the ghost clocks), worked out by hand.

tests/test_policies.py checks S3-FIFO's log against a brute-force model; a log cannot show the
snapshot's queue names and frequencies, nor how ``freq`` and G hold their state. These follow
the module docstring: ``freq`` holds only keys whose frequency is not 0, and G maps each key to
the bytes evicted from S before it entered G. Each scenario runs through ``touch`` (the hooks)
and through ``replay_requests`` (the inlined loop), which must end in the same state.
"""
import dataclasses
import random

import pytest

from kvsched_lab.sim.policies import make_policy
from kvsched_lab.sim.policies.s3fifo import COURSE_RULES, LIBCACHESIM_RULES, S3FIFOPolicy, S3FIFORules
from policy_helpers import replay_by_touch


def run(policy, keys, path):
    """Touch each key (1 byte), one touch at a time or as one-block requests of a replay."""
    if path == "touch":
        policy.schedule([(key, 1) for key in keys])
    else:
        policy.replay_requests([[key] for key in keys], 1)


def test_s3fifo_snapshot_names_each_queue_and_its_frequencies():
    """Snapshot rows are (key, "main"|"small", bytes, freq), M newest first then S newest first."""
    s3 = make_policy("s3fifo", 4)  # S's share: 4 // 10 = 0 bytes, so S is always evicted first
    s3.schedule([(k, 1) for k in "abcdab"])  # a and b hit once while in S
    s3.touch("e", 1)  # S's oldest a and b were hit: both move to M (freq 0); then c goes to G
    s3.schedule([("b", 1), ("e", 1)])  # one hit each: b in M, e in S
    assert s3.snapshot() == [("b", "main", 1, 1), ("a", "main", 1, 0), ("e", "small", 1, 1), ("d", "small", 1, 0)]
    s3.schedule([("b", 1), ("b", 1), ("b", 1)])  # frequencies are capped at 3 (two bits)
    assert s3.snapshot()[0] == ("b", "main", 1, 3)


@pytest.mark.parametrize("path", ["touch", "replay"])
def test_s3fifo_keeps_only_non_zero_frequencies_and_ghost_clocks_in_bytes(path):
    """A CLOCK pass from 1 leaves the key out of ``freq``; G's clocks count bytes evicted from S."""
    s3 = make_policy("s3fifo", 4)  # S's share is 0 bytes; G remembers 4 - 0 = 4 bytes
    # a, b, c, d fill S; a and b hit. e: a, b move to M (freq 0), c -> G at clock 0. a hits (in M).
    # f: d -> G at 1. c: a ghost (2 - 0 <= 4), e -> G at 2, c enters M. d: a ghost (3 - 1 <= 4),
    # f -> G at 3, d enters M. S is now empty and M = [a (freq 1), b, c, d].
    # g: M's oldest a has freq 1: reinserted at M's head with freq 0; b (freq 0) is evicted.
    run(s3, "abcdabeafcdg", path)
    assert list(s3.log)[-2:] == ["evict:b", "add:g"]
    assert s3.snapshot() == [("a", "main", 1, 0), ("d", "main", 1, 0), ("c", "main", 1, 0), ("g", "small", 1, 0)]
    assert s3.freq == {}  # a's spent frequency is dropped, not kept as a 0
    assert s3.ghost == {"e": 2, "f": 3} and s3.ghost_clock == 4  # c and d left G when they came back


# -- the four rules on which libCacheSim's S3FIFO differs (s3fifo.py), each traced by hand ---------
# Each case runs a rule both ways from the course's rules, with every other rule as the course's;
# tests/test_crosscheck_libcachesim.py shows that all four together make libCacheSim's decisions.
def with_rule(capacity, **rule):
    return S3FIFOPolicy(capacity, rules=dataclasses.replace(COURSE_RULES, **rule))


def fill(policy, keys):
    policy.schedule([(key, 1) for key in keys])


@pytest.mark.parametrize("promote_hits, victim", [(1, "b"), (2, "a")])
def test_promote_hits_is_how_many_hits_in_s_earn_a_move_to_m(promote_hits, victim):
    """10 blocks: S's share is 1. a..j fill S (the course lets S grow until the first eviction);
    a is hit once. k must evict from S: with 1 hit a moves to M and b, never hit, is evicted;
    needing 2 hits, a itself is evicted."""
    s3 = with_rule(10, promote_hits=promote_hits)
    fill(s3, "abcdefghij" "a" "k")
    assert list(s3.log)[-2:] == [f"evict:{victim}", "add:k"]
    assert ("a", "main", 1, 0) in s3.snapshot() if promote_hits == 1 else "a" not in s3.entries


@pytest.mark.parametrize("warmup_to_main", [False, True])
def test_warmup_to_main_sends_new_blocks_to_m_once_s_is_full_before_the_first_eviction(warmup_to_main):
    """10 blocks, S's share 1: with the rule b..j go to M, since S already holds a; without it
    they all wait in S. After the first eviction the rule is off: new blocks enter S again."""
    s3 = with_rule(10, warmup_to_main=warmup_to_main)
    fill(s3, "abcdefghij")
    assert [queue for _, queue, _, _ in s3.snapshot()] == (["main"] * 9 + ["small"] if warmup_to_main else ["small"] * 10)
    fill(s3, "k")  # the first eviction: from S (it holds its share), a, never hit
    assert list(s3.log)[-2:] == ["evict:a", "add:k"] and ("k", "small", 1, 0) in s3.snapshot()


@pytest.mark.parametrize("drain_small, y_queue", [(False, "small"), (True, "main")])
def test_drain_small_keeps_popping_s_until_a_block_leaves(drain_small, y_queue):
    """20 blocks, S's share 2. With the warm-up rule, x and y fill S and the other 18 fill M; x and
    y are hit. n needs room: S is at its share, so x (hit) moves to M. The course re-checks the
    share (S now holds 1 < 2) and evicts M's oldest, m0, with y still in S; draining S moves y to
    M too (hit), finds S empty, and then evicts m0. Same victim, y in another queue."""
    s3 = with_rule(20, warmup_to_main=True, drain_small=drain_small)
    main_keys = [f"m{i}" for i in range(18)]
    s3.schedule([("x", 1), ("y", 1)] + [(k, 1) for k in main_keys] + [("x", 1), ("y", 1), ("n", 1)])
    assert list(s3.log)[-2:] == ["evict:m0", "add:n"]
    queue_of = {key: queue for key, queue, _, _ in s3.snapshot()}
    assert (queue_of["x"], queue_of["y"], queue_of["n"]) == ("main", y_queue, "small")


@pytest.mark.parametrize("ghost_fifo", [False, True])
def test_ghost_fifo_lets_a_returning_block_free_its_room_in_g(ghost_fifo):
    """10 blocks: S's share 1, G spans 9 blocks. a..j fill S; n1..n9 evict a..i into G. b comes
    back (a ghost: it goes to M), evicting j into G. Ten blocks have now entered G after a's
    arrival, counting a: the clock forgets a. The FIFO holds only nine, since b left, so a is
    still remembered, and when a returns it goes straight to M."""
    s3 = with_rule(10, ghost_fifo=ghost_fifo)
    fill(s3, "abcdefghij")
    fill(s3, [f"n{i}" for i in range(1, 10)])
    fill(s3, "b")
    assert list(s3.log)[-2:] == ["evict:j", "add:b"] and ("b", "main", 1, 0) in s3.snapshot()
    assert s3.is_ghost("a") is ghost_fifo and s3.is_ghost("c")
    if ghost_fifo:
        assert list(s3.ghost.items()) == [(k, 1) for k in "acdefghij"] and s3.ghost_bytes == 9
    fill(s3, "a")
    assert dict((k, q) for k, q, _, _ in s3.snapshot())["a"] == ("main" if ghost_fifo else "small")


def test_rules_other_than_the_courses_replay_through_the_hooks_with_the_same_result():
    """The inlined replay implements the course's rules only; any other rules take the hooks."""
    rng = random.Random(1)
    lists = [[rng.randrange(40) for _ in range(rng.randint(1, 5))] for _ in range(300)]
    fast, slow = S3FIFOPolicy(20, rules=LIBCACHESIM_RULES), S3FIFOPolicy(20, rules=LIBCACHESIM_RULES)
    assert fast.replay_requests(lists, 1) == replay_by_touch(slow, lists, 1)
    assert list(fast.log) == list(slow.log) and fast.snapshot() == slow.snapshot()


def test_bad_rules_are_rejected():
    with pytest.raises(ValueError, match="promote_hits must be 1, 2 or 3"):
        S3FIFORules(promote_hits=4)
    with pytest.raises(TypeError, match="rules must be an S3FIFORules"):
        S3FIFOPolicy(10, rules={"promote_hits": 2})


# -- the inlined loop against the hooks, on every field it writes ------------------------------------
def full_state(policy, lists):
    """Every field the loop writes; G by what it remembers of the keys in `lists` (its clean-ups
    may run at other times)."""
    known = sorted({k for ids in lists for k in ids if not isinstance(k, list)}, key=str)
    return (list(policy.log.events()), list(policy.entries.items()), policy.snapshot(), policy.current_bytes,
            policy.time, policy.hits, policy.main_bytes, policy.ghost_clock, policy.has_evicted, dict(policy.freq),
            [k for k in known if policy.is_ghost(k)])


def replay_both(capacity, lists, chunk, warmup=()):
    """The same requests through the loop and the hooks, `chunk` requests a call, as `replay` splits them."""
    fast, hooks = S3FIFOPolicy(capacity), S3FIFOPolicy(capacity)
    for policy in (fast, hooks):
        policy.schedule(warmup)
    for start in range(0, len(lists), chunk):
        part = lists[start:start + chunk]
        assert fast.replay_requests(part, 1) == replay_by_touch(hooks, part, 1)
    return fast, hooks


@pytest.mark.parametrize("bad", [[5, ["x"]], [5, 6, ["x"], 1000], [1000, ["x"]], [1000, 1001, ["x"], 1002],
                                 [5, 1000, 1001, 1002, ["x"]], [["x"], 1000, 1001], [1000, 1001, 1002, 1003, ["x"]]])
def test_an_unhashable_id_stops_the_loop_where_it_stops_the_hooks(bad):
    """The hooks' replay counts the prefix hits first, so an unhashable id among them (5 and 6 are
    cached) touches nothing; later, the ids before it are touched and the clock counts them."""
    lists = [[k] for k in range(1, 30)] + [[5], [6]]
    fast, hooks = replay_both(10, lists, 60)
    with pytest.raises(TypeError):
        fast.replay_requests([bad], 1)
    with pytest.raises(TypeError):
        replay_by_touch(hooks, [bad], 1)
    assert full_state(fast, lists + [bad]) == full_state(hooks, lists + [bad])
