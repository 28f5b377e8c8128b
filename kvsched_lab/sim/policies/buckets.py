"""`BucketQueue`: keys filed under a level, the oldest key of the lowest level first out.

The O(1) LFU layout of Shah, Mitra & Matani ("An O(1) algorithm for implementing the LFU cache
eviction scheme", 2010): ``buckets`` maps each level to its keys, oldest filing first, and the
min-heap ``levels`` holds the levels that have a bucket. Filing appends to a bucket (O(1), plus
O(log #levels) when a level appears); the next out is the first key of the lowest non-empty
bucket. A bucket that empties stays until it reaches the top of ``levels`` (`lowest` drops it
then), so ``levels`` always holds exactly the keys of ``buckets``.

`lfu` files keys by hit count and `seed-compact` by the chapter's priority, in `OrderedDict`
buckets (a hit unfiles a key from the middle of its bucket); `seed` files its lazy records
``(last_used, key)`` in deques. Their replay loops inline `file` and `lowest` on ``buckets`` and
``levels``: a method call per touch would cost them 10-20%.
"""
from __future__ import annotations

from collections import OrderedDict
from heapq import heappop, heappush
from typing import Any, Callable, Dict, Hashable, Iterator, List, Tuple


class BucketQueue:
    """``buckets[level]``: that level's keys (or records), oldest first; ``levels``: a min-heap of the levels."""

    __slots__ = ("buckets", "levels", "_new_bucket")

    def __init__(self, new_bucket: Callable[[], Any] = OrderedDict) -> None:
        self.buckets: Dict[Any, Any] = {}
        self.levels: List[Any] = []
        self._new_bucket = new_bucket

    def bucket(self, level: Any) -> Any:
        """The bucket of `level`, made (and its level pushed) on first use."""
        bucket = self.buckets.get(level)
        if bucket is None:
            self.buckets[level] = bucket = self._new_bucket()
            heappush(self.levels, level)
        return bucket

    def lowest(self) -> Any:
        """The lowest non-empty bucket (there must be one); empty buckets met on top are dropped."""
        levels, buckets = self.levels, self.buckets
        while not buckets[levels[0]]:
            del buckets[heappop(levels)]
        return buckets[levels[0]]

    # -- keys in OrderedDict buckets (lfu, seed-compact) --------------------------------
    def file(self, key: Hashable, level: Any) -> None:
        """File `key` as the newest of `level`."""
        self.bucket(level)[key] = None

    def unfile(self, key: Hashable, level: Any) -> None:
        del self.buckets[level][key]

    def pop(self) -> Hashable:
        """Remove and return the oldest key of the lowest level."""
        return self.lowest().popitem(last=False)[0]

    def __len__(self) -> int:
        return sum(map(len, self.buckets.values()))

    def in_order(self) -> Iterator[Tuple[Any, Any]]:
        """``(level, bucket)`` from the lowest level up: with each bucket oldest first, pop order."""
        return ((level, self.buckets[level]) for level in sorted(self.buckets))
