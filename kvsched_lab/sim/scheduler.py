"""The chapter's scheduler, minus the five TODOs: the given parts every learner shares.

`CacheEntry` and `SchedulerSkeleton` hold what the chapter gives (state, `schedule`). The five
methods the chapter leaves a TODO in raise `NotImplementedError` here; a learner writes them in
the notebooks, `build_scheduler` puts them together, and the grader swaps one of them at a time
into the reference. Method names and signatures are the chapter's, so the three stay compatible.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, Hashable, List, Mapping, Tuple

# TODO name -> the chapter's method that holds it.
TODO_METHODS: Dict[str, str] = {
    "score": "_score",
    "heap": "_refresh_queue",
    "stale": "_evict_until_fit",
    "entry": "touch",
    "snapshot": "snapshot",
}
# Optional TODOs beyond the chapter (notebook 05): each has a public check and hints, but it is not
# one of the five graded TODOs and no grader total counts it. TODO name -> the function it defines.
OPTIONAL_TODO_METHODS: Dict[str, str] = {
    "aging": "_aged_score",  # GDSF's inflation value L (kvsched_lab/course/aging.py)
}
ALL_TODO_METHODS: Dict[str, str] = {**TODO_METHODS, **OPTIONAL_TODO_METHODS}


@dataclass(order=True)
class CacheEntry:
    priority: float  # retention value; the lowest is evicted first
    last_used: int  # scheduler time of the latest touch (tie-break: older goes first)
    prefix: Hashable = field(compare=False)  # the cached prefix's key
    hits: int = field(default=0, compare=False)  # touches so far, the first one included
    bytes: int = field(default=0, compare=False)  # KV bytes this entry holds


def require_positive_int(name: str, value: object) -> int:
    """`value` if it is an int > 0; else TypeError/ValueError naming `name`."""
    # bool is an int subclass; True bytes would silently mean 1 byte.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


class SchedulerSkeleton:
    """State and driver of the chapter's `KVCacheSchedulerSim`; the five TODO methods are abstract.

    State: ``capacity_bytes``; ``current_bytes`` (sum of live entries' bytes); ``time`` (+1 per
    touch); ``entries`` (prefix -> CacheEntry, the live cache); ``queue`` (a min-heap of
    ``(priority, last_used, prefix)`` records, possibly stale); ``log`` (``add:``/``reuse:``/
    ``evict:`` strings, in order).
    """

    def __init__(self, capacity_bytes: int = 1024):
        self.capacity_bytes = require_positive_int("capacity_bytes", capacity_bytes)
        self.current_bytes = 0
        self.time = 0
        self.entries: Dict[Hashable, CacheEntry] = {}
        self.queue: List[Tuple[float, int, Hashable]] = []
        self.log: List[str] = []

    def schedule(self, requests: List[Tuple[Hashable, int]]) -> List[str]:
        """Touch each ``(prefix, bytes)`` in order; return a copy of the whole log."""
        for prefix, bytes_ in requests:
            self.touch(prefix, bytes_)
        return list(self.log)

    def _check_touch(self, prefix: Hashable, bytes_: int) -> None:
        """Reject a bad `touch` before it changes anything (the reference calls this first)."""
        hash(prefix)  # TypeError for an unhashable prefix
        require_positive_int("bytes_", bytes_)
        if bytes_ > self.capacity_bytes:
            raise ValueError(
                f"single cache entry exceeds capacity: {bytes_} bytes > capacity_bytes={self.capacity_bytes}"
            )

    def _score(self, hits: int, size: int, last_used: int) -> float:
        """TODO score: retention priority from reuse, recency and size (higher = keep)."""
        raise NotImplementedError("TODO score is not written yet: see lab.hint('score')")

    def _refresh_queue(self, prefix: Hashable) -> None:
        """TODO heap: re-score ``entries[prefix]`` and push its new heap record."""
        raise NotImplementedError("TODO heap is not written yet: see lab.hint('heap')")

    def _evict_until_fit(self, needed: int) -> None:
        """TODO stale: evict lowest-priority live entries until ``needed`` bytes fit."""
        raise NotImplementedError("TODO stale is not written yet: see lab.hint('stale')")

    def touch(self, prefix: Hashable, bytes_: int) -> None:
        """TODO entry: one access: a hit re-scores the entry, a miss evicts to fit and adds it."""
        raise NotImplementedError("TODO entry is not written yet: see lab.hint('entry')")

    def snapshot(self) -> List[Tuple[Hashable, int, float, int]]:
        """TODO snapshot: live entries as ``(prefix, bytes, round(priority, 4), hits)``, best first."""
        raise NotImplementedError("TODO snapshot is not written yet: see lab.hint('snapshot')")


def build_scheduler(methods: Mapping[str, Callable], base: type = SchedulerSkeleton,
                    name: str = "KVCacheSchedulerSim") -> type:
    """A scheduler class: `base` with some TODO methods replaced.

    `methods` maps TODO names (``"score"``, ...) to plain functions taking ``self`` first.
    Unknown names raise ValueError, so a typo cannot silently leave a stub in place.
    """
    unknown = set(methods) - set(TODO_METHODS)
    if unknown:
        raise ValueError(f"unknown TODO name(s) {sorted(unknown)}; expected some of {list(TODO_METHODS)}")
    body = {TODO_METHODS[todo]: fn for todo, fn in methods.items()}
    return type(name, (base,), body)
