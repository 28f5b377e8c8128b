"""Reference KVCacheSchedulerSim: the seed chapter's scheduler, TODOs 1-5 answered.

State and `schedule` are the chapter's given code, kept in `kvsched_lab.sim.scheduler`.

Behaviour is the chapter's exactly (same log, same snapshot, same heap records); the only
additions are input checks that reject bad calls before any state changes. Each TODO stays
inside the method the chapter puts it in, so a grader can swap one learner method in.
"""
from __future__ import annotations

import heapq
from typing import Hashable, List, Tuple

from kvsched_lab.sim.scheduler import CacheEntry, SchedulerSkeleton


class KVCacheSchedulerSim(SchedulerSkeleton):
    """Minimal KV cache scheduler: score entries, keep a lazy min-heap, evict to fit."""

    def _score(self, hits: int, size: int, last_used: int) -> float:
        recency = 1.0 / (1.0 + max(self.time - last_used, 0))
        reuse_bonus = float(hits)
        size_penalty = size / max(self.capacity_bytes, 1)
        # TODO 1 (score): reuse counts most, recency half as much, size is a quarter-weight penalty.
        score = reuse_bonus + 0.5 * recency - 0.25 * size_penalty
        return score

    def _refresh_queue(self, prefix: Hashable) -> None:
        entry = self.entries[prefix]
        entry.priority = self._score(entry.hits, entry.bytes, entry.last_used)
        # TODO 2 (heap): a min-heap pops the lowest priority first, so no negation.
        queue_item = (entry.priority, entry.last_used, prefix)
        heapq.heappush(self.queue, queue_item)

    def _evict_until_fit(self, needed: int) -> None:
        while self.current_bytes + needed > self.capacity_bytes and self.entries:
            while self.queue:
                priority, last_used, prefix = heapq.heappop(self.queue)
                entry = self.entries.get(prefix)
                if entry is None:
                    continue
                # TODO 3 (stale): a record is stale once the entry was re-scored after it.
                is_stale = (priority, last_used) != (entry.priority, entry.last_used)
                if is_stale:
                    continue
                break
            else:
                entry = min(self.entries.values(), key=lambda e: (e.priority, e.last_used))
                prefix = entry.prefix

            self.current_bytes -= entry.bytes
            self.entries.pop(prefix, None)
            self.log.append(f"evict:{prefix}")

    def touch(self, prefix: Hashable, bytes_: int) -> None:
        self._check_touch(prefix, bytes_)

        self.time += 1
        if prefix in self.entries:
            entry = self.entries[prefix]
            entry.hits += 1
            entry.last_used = self.time
            self._refresh_queue(prefix)
            self.log.append(f"reuse:{prefix}")
            return

        self._evict_until_fit(bytes_)
        # TODO 4 (entry): a new entry starts with one hit at the current time; priority comes next.
        entry = CacheEntry(priority=0.0, last_used=self.time, prefix=prefix, hits=1, bytes=bytes_)
        self.entries[prefix] = entry
        self.current_bytes += bytes_
        self._refresh_queue(prefix)
        self.log.append(f"add:{prefix}")

    def snapshot(self) -> List[Tuple[Hashable, int, float, int]]:
        # TODO 5 (snapshot): highest priority first; ties by older last_used, then prefix.
        ordered_entries = sorted(self.entries.values(), key=lambda e: (-e.priority, e.last_used, e.prefix))
        return [(e.prefix, e.bytes, round(e.priority, 4), e.hits) for e in ordered_entries]
