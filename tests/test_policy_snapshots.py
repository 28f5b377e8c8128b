"""FIFO, LRU and LFU list their entries in the order they will leave: the last to be evicted first.

The model tests (tests/test_policies.py) compare logs; these pin each policy's `snapshot` order
against the eviction order worked out by hand, and check that it is the order evictions follow.
"""
from kvsched_lab.sim.policies import make_policy


def test_fifo_snapshot_is_newest_insertion_first_and_hits_change_nothing():
    fifo = make_policy("fifo", 4)
    fifo.schedule([("a", 1), ("b", 2), ("c", 1), ("a", 1)])  # the hit on a moves nothing
    assert fifo.snapshot() == [("c", 1), ("b", 2), ("a", 1)]
    fifo.touch("d", 1)  # needs 1 byte more: a, the oldest insertion, goes
    assert fifo.snapshot() == [("d", 1), ("c", 1), ("b", 2)]
    assert list(fifo.log)[-2:] == ["evict:a", "add:d"]


def test_lru_snapshot_is_most_recent_touch_first():
    lru = make_policy("lru", 4)
    lru.schedule([("a", 1), ("b", 2), ("c", 1), ("a", 1)])  # the hit on a makes it the newest
    assert lru.snapshot() == [("a", 1), ("c", 1), ("b", 2)]
    lru.touch("d", 2)  # needs 2 bytes more: b (2 bytes), the least recent, is enough
    assert lru.snapshot() == [("d", 2), ("a", 1), ("c", 1)]
    assert list(lru.log)[-2:] == ["evict:b", "add:d"]
    # The fast replay keeps the same order.
    fast = make_policy("lru", 4)
    fast.replay_requests([["a", "b", "c"], ["a", "e"]], 1)
    assert fast.snapshot() == [("e", 1), ("a", 1), ("c", 1), ("b", 1)]
    assert fast.hits == 1 and fast.time == 5 and fast.current_bytes == 4


def test_lfu_snapshot_is_most_hits_first_then_most_recent():
    lfu = make_policy("lfu", 10)
    lfu.schedule([("a", 1), ("b", 2), ("c", 1), ("a", 1), ("b", 2), ("a", 1), ("d", 1)])
    # (key, bytes, hits, last_used): a 3 hits; b 2; c and d 1 each, d touched later, so d leaves after c.
    assert lfu.snapshot() == [("a", 1, 3, 6), ("b", 2, 2, 5), ("d", 1, 1, 7), ("c", 1, 1, 3)]


def test_record_counts_after_a_fast_replay_match_the_records_and_the_touch_loop():
    """The fast replay loops keep their own record counter: it must end where touching ends."""
    from kvsched_lab.sim.traces import synthetic_trace

    ids = [r.hash_ids for r in synthetic_trace(150, seed=4)]
    # Plain seed keeps stale records until popped; seed-compact keeps one per live entry.
    for name, more_than_live in (("seed", True), ("seed-compact", False)):
        fast, slow = make_policy(name, 60), make_policy(name, 60)
        fast.replay_requests(ids, 1)
        for request in ids:
            for key in request:
                slow.touch(key, 1)
        assert fast.num_records == len(fast.queue) == slow.num_records == len(slow.queue), name
        assert (fast.num_records > len(fast.entries)) == more_than_live, name
