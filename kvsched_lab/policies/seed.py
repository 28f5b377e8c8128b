"""The seed chapter's scheduler as a library policy: score ``hits + 0.5 - 0.25 * size/capacity``.

This is chapter 41's `KVCacheSchedulerSim` with its TODOs answered (see REFERENCE.md section 1):
entries are `SeedEntry` objects, a min-heap ``queue`` of ``(priority, last_used, key)`` records
with lazy deletion, and the same decisions, so its log is identical to the reference's on any
sequence. A record is valid while its ``last_used`` equals the entry's: ``last_used`` is the touch
clock, unique per push, so it serves as the record's version and the priority never needs
recomputing to spot a stale record.

Plain `seed` never drops stale records until they are popped, so its heap grows with the number
of touches; `seed-compact` (seed_compact.py) bounds it.
"""
from __future__ import annotations

from dataclasses import dataclass
from heapq import heapify, heappop, heappush, heapreplace
from typing import ClassVar, Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.events import ADD, EVICT, REUSE
from kvsched_lab.policies.base import Policy


@dataclass(slots=True)
class SeedEntry:
    """One cached block: the chapter's `CacheEntry` without the redundant key."""

    priority: float
    last_used: int
    hits: int
    bytes: int


class SeedPolicy(Policy):
    """The chapter's score with the chapter's lazy min-heap; logs exactly like the reference."""

    name = "seed"
    compact_heap: ClassVar[bool] = False  # seed-compact sets it

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.entries: Dict[Hashable, SeedEntry] = {}
        self.queue: List[Tuple[float, int, Hashable]] = []

    def _score(self, entry: SeedEntry) -> float:
        # The chapter scores only at touch time, when recency is 1.0; same float operations
        # in the same order as the chapter's `_score`, so priorities match it bit for bit.
        return entry.hits + 0.5 - 0.25 * (entry.bytes / self.capacity_bytes)

    def touch(self, prefix: Hashable, bytes_: int) -> None:
        self.validate(prefix, bytes_)
        self.time += 1
        entry = self.entries.get(prefix)
        if entry is not None:
            self.hits += 1
            entry.hits += 1
            entry.last_used = self.time
            entry.priority = self._score(entry)
            heappush(self.queue, (entry.priority, self.time, prefix))
            self.log.emit(REUSE, prefix)
        else:
            while self.current_bytes + bytes_ > self.capacity_bytes:
                key = self.victim()
                self.current_bytes -= self.entries.pop(key).bytes
                self.log.emit(EVICT, key)
            entry = SeedEntry(0.0, self.time, 1, bytes_)
            entry.priority = self._score(entry)
            self.entries[prefix] = entry
            self.current_bytes += bytes_
            heappush(self.queue, (entry.priority, self.time, prefix))
            self.log.emit(ADD, prefix)
        if self.compact_heap:
            self._compact_if_needed()

    def victim(self) -> Hashable:
        """Pop records until a valid one: the live entry with the lowest (priority, last_used)."""
        while True:
            _, last_used, key = heappop(self.queue)
            entry = self.entries.get(key)
            if entry is not None and entry.last_used == last_used:
                return key

    def _compact_if_needed(self) -> None:
        # Each live entry has exactly one valid record, so len(queue) - len(entries) records are
        # stale. Rebuild once they outnumber the live ones (plus slack, so tiny caches do not
        # rebuild on every touch): O(live) work after >= live + 64 pushes or pops, O(1) amortized.
        if len(self.queue) > 2 * len(self.entries) + 64:
            self.queue = [(e.priority, e.last_used, k) for k, e in self.entries.items()]
            heapify(self.queue)

    def snapshot(self) -> List[Tuple[Hashable, int, float, int]]:
        """The chapter's snapshot: ``(key, bytes, round(priority, 4), hits)``, highest priority
        first, ties older ``last_used`` first (unique, so keys are never compared)."""
        ordered = sorted(self.entries.items(), key=lambda kv: (-kv[1].priority, kv[1].last_used))
        return [(k, e.bytes, round(e.priority, 4), e.hits) for k, e in ordered]

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        entries, queue = self.entries, self.queue
        emit = self.log.append_event
        add, evict, reuse = ADD, EVICT, REUSE  # locals: faster than globals in the loop
        cap, cur, hits, time = self.capacity_bytes, self.current_bytes, self.hits, self.time
        compact = self.compact_heap
        push, pop, replace = heappush, heappop, heapreplace
        new_priority = 1 + 0.5 - 0.25 * (bytes_ / cap)  # a new entry's score, as in `_score`
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                n = 0
                for key in ids:
                    if key not in entries:
                        break
                    n += 1
                out.append(n)
                for key in ids:
                    time += 1
                    entry = entries.get(key)
                    if entry is not None:
                        hits += 1
                        entry.hits += 1
                        entry.last_used = time
                        entry.priority = p = entry.hits + 0.5 - 0.25 * (entry.bytes / cap)
                        push(queue, (p, time, key))
                        emit((reuse, key))
                    else:
                        record = (new_priority, time, key)
                        while cur + bytes_ > cap:
                            _, last_used, old = queue[0]
                            entry = entries.get(old)
                            if entry is not None and entry.last_used == last_used:
                                del entries[old]
                                cur -= entry.bytes
                                emit((evict, old))
                                if cur + bytes_ <= cap:  # last victim: one sift swaps its record for the new
                                    replace(queue, record)
                                    record = None
                                    break
                            pop(queue)
                        if record is not None:
                            push(queue, record)
                        entries[key] = SeedEntry(new_priority, time, 1, bytes_)
                        cur += bytes_
                        emit((add, key))
                    if compact and len(queue) > 2 * len(entries) + 64:
                        self._compact_if_needed()
                        queue = self.queue
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time = cur, hits, time
        return out
