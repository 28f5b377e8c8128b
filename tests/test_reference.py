"""The reference scheduler: the chapter's behaviour exactly, plus input checks that lose nothing."""
import copy
import heapq

import pytest
from hypothesis import given, settings, strategies as st

from kvsched_lab import check_invariants
from solutions import CacheEntry, KVCacheSchedulerSim

SEED_REQUESTS = [("a", 40), ("b", 48), ("a", 40), ("c", 56), ("d", 48), ("a", 40)]


def test_seed_chapter_test_passes():
    # The chapter's own test, asserts kept as written there.
    sim = KVCacheSchedulerSim(capacity_bytes=128)
    log = sim.schedule(SEED_REQUESTS)
    snap = sim.snapshot()
    assert len(log) >= len(SEED_REQUESTS)
    assert any(item.startswith("reuse:a") for item in log)
    assert any(item.startswith("evict:") for item in log)
    assert sim.current_bytes <= sim.capacity_bytes
    assert isinstance(snap, list)
    assert all(len(item) == 4 for item in snap)
    priorities = [item[2] for item in snap]
    assert priorities == sorted(priorities, reverse=True)


def test_seed_requests_give_reference_log_and_snapshot():
    sim = KVCacheSchedulerSim(capacity_bytes=128)
    assert sim.schedule(SEED_REQUESTS) == [
        "add:a", "add:b", "reuse:a", "evict:b", "add:c", "evict:c", "add:d", "reuse:a"]
    assert sim.snapshot() == [("a", 40, 3.4219, 3), ("d", 48, 1.4062, 1)]
    check_invariants(sim)


def test_stored_priority_is_lfu_with_size_tiebreak():
    # The chapter's formula: recency is always 1.0 when a priority is computed.
    sim = KVCacheSchedulerSim(capacity_bytes=100)
    sim.touch("x", 20)
    sim.touch("x", 20)
    assert sim.entries["x"].priority == pytest.approx(2 + 0.5 - 0.25 * 20 / 100)


def test_heap_grows_with_every_touch():
    sim = KVCacheSchedulerSim(capacity_bytes=100)
    for _ in range(50):
        sim.touch("hot", 10)
    assert len(sim.entries) == 1 and len(sim.queue) == 50


def test_entry_exactly_at_capacity_evicts_everything_else():
    sim = KVCacheSchedulerSim(capacity_bytes=100)
    sim.schedule([("a", 30), ("b", 30), ("c", 100)])
    assert list(sim.entries) == ["c"] and sim.current_bytes == 100
    assert sim.log[-3:] == ["evict:a", "evict:b", "add:c"]


def _state(sim):
    return copy.deepcopy((sim.capacity_bytes, sim.current_bytes, sim.time, sim.entries, sim.queue, sim.log))


@pytest.mark.parametrize("prefix, bytes_, error, words", [
    ("p", 0, ValueError, "> 0"),
    ("p", -5, ValueError, "> 0"),
    ("p", 129, ValueError, "exceeds capacity"),
    ("p", 1.5, TypeError, "int"),
    ("p", "8", TypeError, "int"),
    ("p", True, TypeError, "int"),
    (["not", "hashable"], 8, TypeError, "unhashable"),
])
def test_rejected_touch_changes_nothing(prefix, bytes_, error, words):
    sim = KVCacheSchedulerSim(capacity_bytes=128)
    sim.schedule(SEED_REQUESTS)
    before = _state(sim)
    with pytest.raises(error, match=words):
        sim.touch(prefix, bytes_)
    assert _state(sim) == before


@pytest.mark.parametrize("capacity, error", [(0, ValueError), (-1, ValueError), (2.0, TypeError), (None, TypeError)])
def test_bad_capacity_rejected(capacity, error):
    with pytest.raises(error, match="capacity_bytes"):
        KVCacheSchedulerSim(capacity_bytes=capacity)


class BruteForceSeed:
    """The chapter's rules restated without a heap: evict the live entry with the lowest
    (priority, last_used); a touched entry's priority is hits + 0.5 - 0.25 * bytes / capacity."""

    def __init__(self, capacity):
        self.capacity, self.time, self.entries, self.log = capacity, 0, {}, []

    def touch(self, key, size):
        self.time += 1
        if key in self.entries:
            e = self.entries[key]
            e["hits"] += 1
            e["last_used"] = self.time
            e["priority"] = float(e["hits"]) + 0.5 * 1.0 - 0.25 * (e["bytes"] / self.capacity)
            self.log.append(f"reuse:{key}")
            return
        while sum(e["bytes"] for e in self.entries.values()) + size > self.capacity:
            victim = min(self.entries, key=lambda k: (self.entries[k]["priority"], self.entries[k]["last_used"]))
            del self.entries[victim]
            self.log.append(f"evict:{victim}")
        self.entries[key] = {"hits": 1, "last_used": self.time, "bytes": size,
                             "priority": 1.0 + 0.5 - 0.25 * (size / self.capacity)}
        self.log.append(f"add:{key}")


ops = st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(1, 64)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(capacity=st.integers(64, 256), requests=ops)
def test_reference_matches_brute_force_model(capacity, requests):
    sim, model = KVCacheSchedulerSim(capacity), BruteForceSeed(capacity)
    for key, size in requests:
        sim.touch(key, size)
        model.touch(key, size)
        check_invariants(sim)
        assert sim.log == model.log
        assert {k: (e.hits, e.last_used, e.bytes) for k, e in sim.entries.items()} == \
               {k: (e["hits"], e["last_used"], e["bytes"]) for k, e in model.entries.items()}


def test_check_invariants_catches_a_lost_heap_record():
    sim = KVCacheSchedulerSim(capacity_bytes=128)
    sim.schedule([("a", 40), ("b", 40)])
    sim.queue = [rec for rec in sim.queue if rec[2] != "b"]
    heapq.heapify(sim.queue)
    with pytest.raises(AssertionError, match="no heap record"):
        check_invariants(sim)


def test_check_invariants_catches_byte_drift_and_log_mismatch():
    sim = KVCacheSchedulerSim(capacity_bytes=128)
    sim.schedule([("a", 40)])
    sim.current_bytes += 1
    with pytest.raises(AssertionError, match="current_bytes"):
        check_invariants(sim)
    sim.current_bytes -= 1
    sim.entries["ghost"] = CacheEntry(1.0, 1, "ghost", 1, 0)
    with pytest.raises(AssertionError, match="log disagrees"):
        check_invariants(sim)
