"""The seed chapter's scheduler as a library policy: score ``hits + 0.5 - 0.25 * size/capacity``.

This is chapter 41's `KVCacheSchedulerSim` with its TODOs answered (notebooks 02-05 build it TODO by TODO):
entries are `SeedEntry` objects, every touch pushes a ``(priority, last_used, key)`` record, stale
records stay until popped (lazy deletion), and the lowest record is popped first, so its log is
identical to the reference's on any sequence. A record is valid while its ``last_used`` equals the
entry's: ``last_used`` is the touch clock, unique per push, so it serves as the record's version
and the priority never needs recomputing to spot a stale record.

The records live in a bucket queue (`BucketQueue`, buckets.py), not one binary heap: a FIFO of
``(last_used, key)`` per distinct priority, and a small heap ``levels`` of the priorities that have
records. Every record is pushed at the current time, so each FIFO is already sorted by
``last_used`` and pops in exactly the order the chapter's heap would; a push or pop costs O(1)
plus O(log #priorities) when a priority appears (a handful: with equal sizes, the priority is the
hit count). Same records, same order, about twice as fast as ``heapq`` on ~10^5 tuples. ``queue``
lists the records as the chapter's heap would hold them.

Plain `seed` never drops stale records until they are popped, so its record count grows with the
number of touches; `seed-compact` (seed_compact.py) makes the same decisions with one per entry.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Any, Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE
from kvsched_lab.sim.policies.base import Policy, prefix_hits
from kvsched_lab.sim.policies.buckets import BucketQueue


@dataclass(slots=True)
class SeedEntry:
    """One cached block: the chapter's `CacheEntry` without the redundant key."""

    priority: float
    last_used: int
    hits: int
    bytes: int


class SeedPolicy(Policy):
    """The chapter's score with the chapter's lazy records; logs exactly like the reference.

    `touch` and `snapshot` are shared with `seed-compact` (seed_compact.py), which changes only
    how records are kept: `_unrecord`, `_record`, `victim`, ``queue`` and ``num_records``.
    """

    name = "seed"
    record_bucket: Any = deque  # records ``(last_used, key)`` per priority, oldest first

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.entries: Dict[Hashable, SeedEntry] = {}
        self.records = BucketQueue(self.record_bucket)  # level: priority
        self._num_records = 0  # records pushed and not yet popped, stale ones included

    @property
    def num_records(self) -> int:
        return self._num_records

    @property
    def queue(self) -> List[Tuple[float, int, Hashable]]:
        """The records as the chapter's ``queue`` holds them, ``(priority, last_used, key)``, in pop order."""
        return [(p, t, k) for p, bucket in self.records.in_order() for t, k in bucket]

    def _score(self, entry: SeedEntry) -> float:
        # The chapter scores only at touch time, when recency is 1.0; same float operations
        # in the same order as the chapter's `_score`, so priorities match it bit for bit.
        return entry.hits + 0.5 - 0.25 * (entry.bytes / self.capacity_bytes)

    def _unrecord(self, key: Hashable, entry: SeedEntry) -> None:
        """`entry` is about to be re-scored: its record goes stale where it is (lazy deletion)."""

    def _record(self, key: Hashable, entry: SeedEntry) -> None:
        """Push the record of `entry`, just scored at the current time."""
        self.records.bucket(entry.priority).append((self.time, key))
        self._num_records += 1

    def touch(self, prefix: Hashable, bytes_: int) -> None:
        self.validate(prefix, bytes_)
        self.time += 1
        entry = self.entries.get(prefix)
        if entry is not None:
            self.hits += 1
            self._unrecord(prefix, entry)
            entry.hits += 1
            entry.last_used = self.time
            entry.priority = self._score(entry)
            self._record(prefix, entry)
            self.log.emit(REUSE, prefix)
            return
        while self.current_bytes + bytes_ > self.capacity_bytes:
            key = self.victim()
            self.current_bytes -= self.entries.pop(key).bytes
            self.log.emit(EVICT, key)
        entry = SeedEntry(0.0, self.time, 1, bytes_)
        entry.priority = self._score(entry)
        self.entries[prefix] = entry
        self.current_bytes += bytes_
        self._record(prefix, entry)
        self.log.emit(ADD, prefix)

    def victim(self) -> Hashable:
        """Pop records until a valid one: the live entry with the lowest (priority, last_used)."""
        while True:
            last_used, key = self.records.lowest().popleft()
            self._num_records -= 1
            entry = self.entries.get(key)
            if entry is not None and entry.last_used == last_used:
                return key

    def snapshot(self) -> List[Tuple[Hashable, int, float, int]]:
        """The chapter's snapshot: ``(key, bytes, round(priority, 4), hits)``, highest priority
        first, ties older ``last_used`` first (unique, so keys are never compared)."""
        ordered = sorted(self.entries.items(), key=lambda kv: (-kv[1].priority, kv[1].last_used))
        return [(k, e.bytes, round(e.priority, 4), e.hits) for k, e in ordered]

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        entries = self.entries
        buckets, levels = self.records.buckets, self.records.levels  # its `bucket` and `lowest`, inlined
        contains, get_bucket = entries.__contains__, buckets.get
        emit = self.log.append_event
        add, evict, reuse = ADD, EVICT, REUSE  # locals: faster than globals in the loop
        cap, cur, hits, time, records = self.capacity_bytes, self.current_bytes, self.hits, self.time, self._num_records
        new_priority = 1 + 0.5 - 0.25 * (bytes_ / cap)  # a new entry's score, as in `_score`
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                out.append(prefix_hits(contains, ids))
                for key in ids:
                    time += 1
                    entry = entries.get(key)
                    if entry is not None:
                        hits += 1
                        entry.hits += 1
                        entry.last_used = time
                        entry.priority = p = entry.hits + 0.5 - 0.25 * (entry.bytes / cap)
                        emit((reuse, key))
                    else:
                        while cur + bytes_ > cap:
                            bucket = buckets[levels[0]]
                            if not bucket:
                                del buckets[heappop(levels)]
                                continue
                            last_used, old = bucket.popleft()
                            records -= 1
                            entry = entries.get(old)
                            if entry is not None and entry.last_used == last_used:
                                del entries[old]
                                cur -= entry.bytes
                                emit((evict, old))
                        p = new_priority
                        entries[key] = SeedEntry(p, time, 1, bytes_)
                        cur += bytes_
                        emit((add, key))
                    bucket = get_bucket(p)
                    if bucket is None:
                        buckets[p] = bucket = deque()
                        heappush(levels, p)
                    bucket.append((time, key))
                    records += 1
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time, self._num_records = cur, hits, time, records
        return out
