"""Scripted stand-ins for the four methods around the one TODO being graded.

The hidden grading swaps ONE learner method into `FakeScheduler` and runs the hidden cases; the
grader swaps the reference's method into the same class and runs the same cases in its own
process, then compares the two. So a mistake in one TODO costs no points in another, and the
sandbox that runs learner code never holds a reference method: these stand-ins are a consistent
scheduler that is deliberately NOT the chapter's, so none of them answers its own TODO:

* `_score` weighs recency 0.75 and size 0.5 (the chapter's weights differ);
* `_refresh_queue` pushes every record twice (the chapter pushes one);
* `_evict_until_fit` picks the lowest entry by a scan and leaves the heap alone (the chapter pops
  the heap and skips stale records);
* `touch` starts a new entry with two hits (the chapter's start with one);
* `snapshot` lists entries in key order with exact priorities (the chapter's is ordered by
  priority and rounded).

The heap record's layout ``(priority, last_used, prefix)`` is the chapter's given code (the
stale TODO's stub unpacks it), so the stand-ins use it too. This file runs on both sides of the
grading boundary and holds nothing secret.
"""
from __future__ import annotations

import heapq
from typing import Hashable, List, Tuple

from kvsched_lab.sim.scheduler import CacheEntry, SchedulerSkeleton


class FakeScheduler(SchedulerSkeleton):
    """A consistent scheduler unlike the chapter's answer in every TODO (see the module docstring)."""

    def _score(self, hits: int, size: int, last_used: int) -> float:
        age = max(self.time - last_used, 0)  # clamped as the chapter's: a probe may pass a future last_used
        return float(hits) + 0.75 / (1.0 + age) - 0.5 * size / max(self.capacity_bytes, 1)

    def _refresh_queue(self, prefix: Hashable) -> None:
        entry = self.entries[prefix]
        entry.priority = self._score(entry.hits, entry.bytes, entry.last_used)
        record = (entry.priority, entry.last_used, prefix)
        for _ in range(2):  # a duplicate is one more stale-looking record a lazy heap must cope with
            heapq.heappush(self.queue, record)

    def _evict_until_fit(self, needed: int) -> None:
        while self.current_bytes + needed > self.capacity_bytes and self.entries:
            key = min(self.entries, key=lambda k: (self.entries[k].priority, self.entries[k].last_used, repr(k)))
            self.current_bytes -= self.entries.pop(key).bytes
            self.log.append(f"evict:{key}")

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
        self.entries[prefix] = CacheEntry(priority=0.0, last_used=self.time, prefix=prefix, hits=2, bytes=bytes_)
        self.current_bytes += bytes_
        self._refresh_queue(prefix)
        self.log.append(f"add:{prefix}")

    def snapshot(self) -> List[Tuple[Hashable, int, float, int]]:
        return [(e.prefix, e.bytes, e.priority, e.hits) for _, e in sorted(self.entries.items(), key=lambda kv: repr(kv[0]))]
