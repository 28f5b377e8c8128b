"""The scheduler event log: `add:`, `reuse:`, `evict:` (and `skip:` for bypassed blocks).

The chapter's scheduler logs plain strings such as ``"evict:b"``. Library policies log
millions of events during a trace replay, so `EventLog` stores ``(op, key)`` pairs and only
formats the chapter's strings when someone reads them. `iter_events` reads either kind, so
the engine can follow a learner's list-of-strings log and a library policy alike.
"""
from __future__ import annotations

from typing import Hashable, Iterator, List, Sequence, Tuple, Union, overload

ADD = "add"
REUSE = "reuse"
EVICT = "evict"
SKIP = "skip"  # a missed block the policy chose not to cache (Belady's bypass)
OPS = (ADD, REUSE, EVICT, SKIP)

Event = Tuple[str, Hashable]


class EventLog(Sequence[str]):
    """Append-only log that reads like the chapter's ``List[str]`` log.

    Events are stored flat, ``[op0, key0, op1, key1, ...]``, so a hot loop records one with a
    single C-level ``list.extend((op, key))`` and can record an eviction and the add it makes
    room for in one call: ``extend((EVICT, old, ADD, new))``.
    """

    __slots__ = ("_flat",)

    def __init__(self) -> None:
        self._flat: List[Hashable] = []

    def emit(self, op: str, key: Hashable) -> None:
        self._flat.extend((op, key))

    @property
    def append_event(self):
        """The raw ``list.extend`` of the flat store: pass ``(op, key)`` or ``(op, key, op, key)``."""
        return self._flat.extend

    def events(self, start: int = 0) -> Iterator[Event]:
        flat = self._flat
        return zip(flat[2 * start::2], flat[2 * start + 1::2])

    def __len__(self) -> int:
        return len(self._flat) // 2

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> List[str]: ...
    def __getitem__(self, i: Union[int, slice]):
        if isinstance(i, slice):
            return [f"{self._flat[2 * j]}:{self._flat[2 * j + 1]}" for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError("event index out of range")
        i %= n
        return f"{self._flat[2 * i]}:{self._flat[2 * i + 1]}"

    def __iter__(self) -> Iterator[str]:
        return (f"{op}:{key}" for op, key in self.events())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EventLog):
            return self._flat == other._flat
        if isinstance(other, (list, tuple)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        head = ", ".join(repr(s) for s in self[:6])
        more = f", ... ({len(self)} events)" if len(self) > 6 else ""
        return f"EventLog([{head}{more}])"


def iter_events(log: Sequence, start: int = 0) -> Iterator[Event]:
    """Yield ``(op, key)`` for events ``log[start:]``, from an `EventLog` or a list of strings.

    Keys parsed from strings come back as strings (``"evict:42"`` -> ``("evict", "42")``);
    the split is on the first colon, so keys may contain colons themselves.
    """
    if isinstance(log, EventLog):
        yield from log.events(start)
        return
    for i in range(start, len(log)):
        item = log[i]
        op, sep, key = str(item).partition(":")
        if not sep or op not in OPS:
            raise ValueError(f"log entry {i} is {item!r}; expected 'add:KEY', 'reuse:KEY' or 'evict:KEY'")
        yield op, key
