"""ARC's snapshot, and the byte-sized rules that unit sizes never reach, worked out by hand.

tests/test_policies.py checks ARC against the paper's Figure 4 with unit sizes. With unit sizes
one ghost trimmed per miss always keeps ``|T1| + |T2| + |B1| + |B2| <= 2c``, and T1 can fill the
cache only when T2 is empty, so two rules of the byte version never matter there: B2 trimmed
until the new block's bytes fit the 2c budget (several ghosts for one block), and a discard
("T1 alone fills the cache") evicting from T1 even while T2 holds something. Each scenario is
traced by hand from the module docstring, and run both through ``touch`` (the hooks) and through
``replay_requests`` (the inlined loop), which must agree with it.
"""
import random

import pytest

from kvsched_lab.sim.policies import make_policy
from kvsched_lab.sim.policies.base import gc_paused
from kvsched_lab.sim.traces import load_trace, resolve_trace, sort_by_arrival
from policy_helpers import replay_by_touch


def finish(policy, keys, bytes_, path):
    """Touch `keys` of `bytes_` each, one touch at a time or as one-block requests of a replay."""
    if path == "touch":
        for key in keys:
            policy.touch(key, bytes_)
    else:
        policy.replay_requests([[key] for key in keys], bytes_)


def test_arc_snapshot_is_t2_newest_first_then_t1_newest_first():
    """The snapshot names each block's list, T2 (seen twice) before T1 (seen once), newest first."""
    arc = make_policy("arc", 10)
    arc.schedule([("a", 1), ("b", 2), ("c", 1), ("a", 1), ("b", 2), ("d", 3)])
    # Hits moved a then b to T2 (b the newer); c and d are in T1, d the newer.
    assert arc.snapshot() == [("b", "t2", 2), ("a", "t2", 1), ("d", "t1", 3), ("c", "t1", 1)]


@pytest.mark.parametrize("path", ["touch", "replay"])
def test_arc_trims_b2_by_bytes_until_a_bigger_block_fits_the_2c_budget(path):
    """A 2-byte miss with the ghosts at 2c must drop two 1-byte ghosts from B2, not one."""
    c = 4
    arc = make_policy("arc", c)
    # a..d each missed then hit: T2 = [a, b, c, d], the cache full. Then e..h the same way: each
    # miss finds T1 empty, so REPLACE sends T2's LRU to B2 and the hit moves the new key to T2.
    arc.schedule([(k, 1) for k in "aabbccddeeffgghh"])
    assert (list(arc.t2), list(arc.b2), list(arc.t1), list(arc.b1)) == (list("efgh"), list("abcd"), [], [])
    # z (2 bytes) is new and L1 is empty: case IV.B. 8 ghost+cache bytes + 2 > 2c = 8, so B2's
    # LRU ghosts go until 2 bytes fit: a (7 + 2 > 8 still), then b (6 + 2 = 8). REPLACE then
    # makes room: T1 is empty, so T2's LRU e and f go to B2.
    finish(arc, ["z"], 2, path)
    assert list(arc.b2) == list("cdef")
    assert arc.snapshot() == [("h", "t2", 1), ("g", "t2", 1), ("z", "t1", 2)]
    # b is no ghost any more: it comes back (2 bytes) as a new key, into T1, not as a B2 hit
    # into T2. IV.B again: 8 + 2 > 8 drops c and d from B2; z (T1 is over p = 0) goes to B1.
    finish(arc, ["b"], 2, path)
    assert arc.snapshot() == [("h", "t2", 1), ("g", "t2", 1), ("b", "t1", 2)]
    assert list(arc.log)[-2:] == ["evict:z", "add:b"]
    assert (list(arc.b1), list(arc.b2)) == (["z"], ["e", "f"])


@pytest.mark.parametrize("path", ["touch", "replay"])
def test_arc_discards_from_t1_when_t1_alone_fills_the_cache_even_with_t2_non_empty(path):
    """When T1 plus the new block exceed c with B1 empty, T1's LRU goes unremembered, T2 untouched."""
    arc = make_policy("arc", 5)
    arc.schedule([("d", 3), ("d", 3), ("b", 1), ("a", 3)])
    # d hit -> T2; b -> T1; a (3 bytes) needs 2 more: T1's b (1 > p = 0) to B1, then T2's d to B2.
    assert (list(arc.t1), list(arc.t2), list(arc.b1), list(arc.b2)) == (["a"], [], ["b"], ["d"])
    arc.touch("b", 1)  # a B1 hit: p += max(|B2| / |B1|, 1) * 1 = max(3 / 1, 1) = 3; b to T2, it fits
    assert arc.p == 3 and list(arc.t2) == ["b"] and not arc.b1
    # e (3 bytes) is new: |T1| + |B1| + 3 = 6 > 5 (IV.A), B1 is empty and |T1| + 3 > 5, so T1
    # alone fills the cache: a is evicted without a ghost, although |T1| = 3 is not over p = 3
    # and T2 holds b. Freeing a's 3 bytes is enough: b stays.
    finish(arc, ["e"], 3, path)
    assert list(arc.log)[-2:] == ["evict:a", "add:e"]
    assert arc.snapshot() == [("b", "t2", 1), ("e", "t1", 3)]
    assert (dict(arc.b1), dict(arc.b2)) == ({}, {"d": 3})


def _total(arc):
    return sum(sum(d.values()) for d in (arc.t1, arc.t2, arc.b1, arc.b2))


def test_arc_keeps_cache_and_ghosts_within_2c_for_one_block_size_only():
    """The docstring's bounds: ``|T1| + |B1| <= c`` always; ``<= 2c`` for everything with one block
    size, while mixed sizes can pass it (case IV.A trims only B1), as the docstring says."""
    rng = random.Random(7)
    for bytes_ in (1, 3):
        arc = make_policy("arc", 12)
        for _ in range(3000):
            arc.touch(rng.randrange(40), bytes_)
            assert sum(arc.t1.values()) + sum(arc.b1.values()) <= 12
            assert _total(arc) <= 24
    arc = make_policy("arc", 4)
    arc.schedule([("x", 4), ("x", 4), ("y", 2), ("z", 2), ("z", 2), ("w", 3)])
    assert _total(arc) == 9 > 8 and sum(arc.t1.values()) + sum(arc.b1.values()) <= 4


def arc_fields(arc):
    """Every field of ARC's state: the lists in order with their bytes, the counters, p, the size counts."""
    return (list(arc.t1.items()), list(arc.t2.items()), list(arc.b1.items()), list(arc.b2.items()),
            (arc.t1_bytes, arc.t2_bytes, arc.b1_bytes, arc.b2_bytes), arc.p, arc.sizes,
            dict(arc.entries), arc.current_bytes, arc.time, arc.hits, list(arc.log.events()))


def size_counts(arc):
    """The size counts recomputed from the lists: size -> keys of that size in T1, T2, B1 and B2."""
    counts = {}
    for part in (arc.t1, arc.t2, arc.b1, arc.b2):
        for size in part.values():
            counts[size] = counts.get(size, 0) + 1
    return counts


def test_the_inlined_loop_sets_every_field_as_the_hooks_on_a_whole_trace():
    """Plain ARC through `replay_requests` (the inlined loop, in chunks as `replay` calls it) and
    through the hooks one touch at a time: every field equal, on the whole synthetic trace at a
    capacity that is not round, where all four cases and both REPLACE branches occur."""
    lists = [r.hash_ids for r in sort_by_arrival(load_trace(resolve_trace("synthetic")))]
    fast, hooks = make_policy("arc", 2005), make_policy("arc", 2005)
    with gc_paused():
        fast_hits = [n for i in range(0, len(lists), 500) for n in fast.replay_requests(lists[i:i + 500], 1)]
        assert fast_hits == replay_by_touch(hooks, lists, 1)
    assert arc_fields(fast) == arc_fields(hooks)
    assert fast.sizes == size_counts(fast) == {1: len(fast.t1) + len(fast.t2) + len(fast.b1) + len(fast.b2)}


def test_the_size_counts_follow_every_list_so_mixed_sizes_take_the_hooks():
    """The replay loop serves one block size and reads the size counts, not every value, to know it has
    one; the counts must follow every hook (ghost hits, both trims, the discard). A replay while a
    block of another size is still in a list takes the hooks, and gives what the hooks give."""
    rng = random.Random(3)
    for _ in range(200):
        arc, model = make_policy("arc", 12), make_policy("arc", 12)
        for _ in range(rng.randint(0, 40)):
            key, size = rng.randrange(30), rng.choice((1, 2, 3, 4))
            arc.touch(key, size)
            model.touch(key, size)
            assert arc.sizes == size_counts(arc)
        lists = [[rng.randrange(30) for _ in range(rng.randint(1, 5))] for _ in range(30)]
        bytes_ = rng.choice((1, 2))
        assert arc.replay_requests(lists, bytes_) == replay_by_touch(model, lists, bytes_)
        assert arc_fields(arc) == arc_fields(model) and arc.sizes == size_counts(arc)
