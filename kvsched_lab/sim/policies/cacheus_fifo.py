"""A first-in-first-out map whose keys may also leave from the middle: CACHEUS's history H, its two
ghosts and SR-LRU's list SR (cacheus.py), which nearly every miss adds to and takes from.

An `OrderedDict` would do, but it keeps a linked node per key: each insertion allocates one, and
each removal looks the key up twice (the dict, then the node). Here a plain dict holds the keys and
values and a deque their arrival order. A key that leaves from the middle (a block back from H, a
ghost hit, a hit in SR) leaves its copy in the deque, counted in `stale`; the oldest end drops such
copies when it reaches them. A key's live copy is always its newest, so its stale copies are met
first. When stale copies outnumber the live keys the deque is rebuilt in place, so it stays under
twice their number plus `SLACK`: removal stays O(1) amortised, and so does the oldest end.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Deque, Dict, Hashable, List, Tuple

SLACK = 64  # stale copies always tolerated, so a small map is not rebuilt on every removal


class LazyFifo:
    """``items`` (key -> value), ``order`` (keys oldest first, stale copies included) and ``stale``
    (key -> its stale copies in ``order``). Hot loops may add and trim through the three directly;
    ``order`` is never replaced."""

    __slots__ = ("items", "order", "stale")

    def __init__(self) -> None:
        self.items: Dict[Hashable, Any] = {}
        self.order: Deque[Hashable] = deque()
        self.stale: Dict[Hashable, int] = {}

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self.items

    def add(self, key: Hashable, value: Any) -> None:
        """`key` (absent) becomes the newest."""
        self.items[key] = value
        self.order.append(key)

    def remove(self, key: Hashable) -> Any:
        """Take `key` (present) out wherever it is; its value."""
        value = self.items.pop(key)
        order, stale = self.order, self.stale
        if order[0] == key and key not in stale:  # the oldest (a victim): nothing left behind
            order.popleft()
            return value
        stale[key] = stale.get(key, 0) + 1
        if len(order) > 2 * len(self.items) + SLACK:
            self.compact()
        return value

    def compact(self) -> None:
        """Drop every stale copy from the order, in place (hot loops hold its bound methods)."""
        live = self._live_keys()
        self.order.clear()
        self.order.extend(live)
        self.stale.clear()

    def skip_stale(self, key: Hashable) -> Hashable:
        """`key` was just taken from the oldest end and has stale copies: drop them and every stale
        copy after it; the first live key, taken from the order too (the map must not be empty)."""
        stale, popleft = self.stale, self.order.popleft
        while key in stale:
            left = stale.pop(key) - 1
            if left:
                stale[key] = left
            key = popleft()
        return key

    def oldest(self) -> Hashable:
        """The oldest key, left in place (the map must not be empty)."""
        order = self.order
        if order[0] in self.stale:
            order.appendleft(self.skip_stale(order.popleft()))
        return order[0]

    def pop_oldest(self) -> Tuple[Hashable, Any]:
        """Take out the oldest key (the map must not be empty); ``(key, value)``."""
        key = self.order.popleft()
        if key in self.stale:
            key = self.skip_stale(key)
        return key, self.items.pop(key)

    def _live_keys(self) -> List[Hashable]:
        seen = dict(self.stale)
        live = []
        for key in self.order:
            if seen.get(key):
                seen[key] -= 1
            else:
                live.append(key)
        return live

    def ordered_items(self) -> List[Tuple[Hashable, Any]]:
        """``(key, value)``, oldest first."""
        items = self.items
        return [(key, items[key]) for key in self._live_keys()]
