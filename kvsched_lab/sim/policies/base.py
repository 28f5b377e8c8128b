"""`Policy`: the base class of every library eviction policy, and of yours in the challenge (notebook 07).

A policy is a byte-budgeted cache of KV blocks. `Policy.touch` does the bookkeeping every
policy shares (input checks, the clock, ``entries``, ``current_bytes``, the event log, the
hit counter) and asks the subclass only *which* key to evict, through five small hooks:

========================  =================================================================
hook                      called ...
========================  =================================================================
``on_hit(key)``           when ``key`` is cached and touched again
``on_miss(key, size)``    on a miss, before any eviction; return False to leave ``key``
                          uncached (a bypass, logged as ``skip``); the default admits
``victim() -> key``       while the new entry does not fit: name a cached key to evict
``on_evict(key, size)``   after ``key`` left ``entries``: forget it in your own structures
``on_insert(key, size)``  after a new ``key`` entered ``entries``
``begin_request(ids)``    before a request's first touch, with all its block ids (a server
                          knows the whole prompt at arrival); replays and the engine call it
========================  =================================================================

Only `victim` is required; ``help(Policy)`` shows a worked example (MRU).
Keep each hook O(1) or O(log n): replays touch hundreds of thousands of blocks.
`replay_requests` (the replay protocol of `kvsched_lab.sim.replay`) works for every subclass;
library policies override its inner `_replay` with a faster loop giving identical results.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from itertools import takewhile
from typing import Any, Callable, Hashable, Iterable, Iterator, List, Optional, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP, EventLog
from kvsched_lab.sim.scheduler import require_positive_int


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a replay's hot loop.

    A replay appends hundreds of thousands of ``(op, key)`` tuples to the log, all of them kept
    alive; each allocation burst would trigger a collection that rescans them for nothing,
    which costs more than the replay itself. The collector's previous state is restored.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# Each library policy keeps its per-key logic inline in its own `_replay` loop: a call per touch
# would cost 10-20%, and on CPython 3.11 a plain loop also beats chains of C-level iterators
# (map, zip, takewhile) over a request's prefix hits, whose runs are short.

def prefix_hits(contains: Callable[[Hashable], bool], ids: Sequence[Hashable]) -> int:
    """How many leading ids of a request are cached at its arrival (`kvsched_lab.sim.replay`, item 2)."""
    return len(list(takewhile(contains, ids)))


def hashable_lead(ids: Sequence[Hashable]) -> int:
    """How many leading ids hash: the touches a request made before an unhashable id stopped it."""
    n = 0
    for key in ids:
        try:
            hash(key)
        except TypeError:
            break
        n += 1
    return n


def generic_replay_requests(sim: Any, id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
    """Section 3 for any object with ``touch`` and ``entries``: returns prefix hits per request.

    The protocol step by step, one ``touch`` per block: the learner's scheduler and the reference
    replay through it (`kvsched_lab.sim.replay`); a `Policy` replays through `touch_in_request`."""
    contains, touch = sim.entries.__contains__, sim.touch
    hits = []
    for ids in id_lists:
        hits.append(prefix_hits(contains, ids))
        for key in ids:
            touch(key, bytes_)
    return hits


class Policy:
    """Byte-budgeted KV-block cache; subclasses choose victims through the hooks.

    Hooks (only `victim` is required): ``on_hit(key)``, ``on_miss(key, size)`` (return False
    to bypass), ``victim() -> key``, ``on_evict(key, size)``, ``on_insert(key, size)``,
    ``begin_request(ids)``. ``self.time`` is the touch clock (1 on the first touch), already
    advanced when a hook runs. Worked example, MRU (evict the most recently used block)::

        from collections import OrderedDict
        from kvsched_lab.sim.policies import Policy

        class MRU(Policy):
            def __init__(self, capacity_bytes, **kwargs):
                super().__init__(capacity_bytes, **kwargs)
                self.order = OrderedDict()              # cached keys, oldest touch first

            def on_hit(self, key):
                self.order.move_to_end(key)

            def on_insert(self, key, size):
                self.order[key] = None

            def victim(self):
                return next(reversed(self.order))       # the newest touch

            def on_evict(self, key, size):
                del self.order[key]

        MRU(capacity_bytes=2).schedule([("a", 1), ("b", 1), ("c", 1)])
        # ['add:a', 'add:b', 'evict:b', 'add:c']

    Attributes: ``capacity_bytes``; ``current_bytes`` (sum of live sizes); ``time`` (touches
    so far); ``hits`` (touches that found their key cached); ``entries`` (key -> size in
    bytes, live keys only); ``log`` (an `EventLog` of ``add``/``reuse``/``evict``/``skip``).
    ``future`` is accepted by every policy so they can be built alike; only Belady reads it.
    """

    name = "base"  # registry name, overridden by each library policy
    needs_future = False  # offline policies (Belady) must be given every key to be touched

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        self.capacity_bytes = require_positive_int("capacity_bytes", capacity_bytes)
        self.current_bytes = 0
        self.time = 0
        self.hits = 0
        self.entries: Any = {}
        self.log = EventLog()

    # -- hooks --------------------------------------------------------------------------
    def on_hit(self, key: Hashable) -> None:
        """`key` is cached and was touched again."""

    def on_miss(self, key: Hashable, size: int) -> bool:
        """`key` is not cached; return False to bypass it (it is then logged as ``skip``)."""
        return True

    def victim(self) -> Hashable:
        """Name the cached key to evict next (called only while the new entry does not fit)."""
        raise NotImplementedError(f"{type(self).__name__} must implement victim()")

    def on_evict(self, key: Hashable, size: int) -> None:
        """`key` (of `size` bytes) has just left ``entries``."""

    def on_insert(self, key: Hashable, size: int) -> None:
        """`key` (of `size` bytes) has just entered ``entries``."""

    def begin_request(self, hash_ids: Sequence[Hashable]) -> None:
        """A request with these block ids (head first) arrives; its touches come next."""

    # -- the shared machinery -----------------------------------------------------------
    def validate(self, prefix: Hashable, bytes_: int) -> None:
        """Raise before any state changes if ``touch(prefix, bytes_)`` is not a valid call."""
        hash(prefix)  # TypeError for an unhashable prefix
        self._check_size(bytes_)

    def _check_size(self, bytes_: int) -> None:
        require_positive_int("bytes_", bytes_)
        if bytes_ > self.capacity_bytes:
            raise ValueError(
                f"single cache entry exceeds capacity: {bytes_} bytes > capacity_bytes={self.capacity_bytes}"
            )

    def touch(self, prefix: Hashable, bytes_: int) -> None:
        """Use the block `prefix` of `bytes_` bytes: a hit refreshes it, a miss caches it."""
        self.validate(prefix, bytes_)
        self.time += 1
        entries = self.entries
        if prefix in entries:
            self.hits += 1
            self.on_hit(prefix)
            self.log.emit(REUSE, prefix)
            return
        if not self.on_miss(prefix, bytes_):
            self.log.emit(SKIP, prefix)
            return
        while self.current_bytes + bytes_ > self.capacity_bytes:
            key = self.victim()
            size = entries.pop(key)
            self.current_bytes -= size
            self.on_evict(key, size)
            self.log.emit(EVICT, key)
        entries[prefix] = bytes_
        self.current_bytes += bytes_
        self.on_insert(prefix, bytes_)
        self.log.emit(ADD, prefix)

    def schedule(self, requests: Iterable[Tuple[Hashable, int]]) -> List[str]:
        """Touch each ``(prefix, bytes_)`` in order; return the whole log as the chapter's strings."""
        for prefix, bytes_ in requests:
            self.touch(prefix, bytes_)
        return list(self.log)

    def touch_in_request(self, prefix: Hashable, bytes_: int, depth: int, last: bool) -> None:
        """Touch the `depth`-th block (1 = first) of a request; `last` marks its final block.

        Replays and the engine touch blocks through this, so a policy that reads a request's
        structure (GDSF prices depth; s3fifo-prefix groups a request and skips its last block)
        can override it; by default the structure is ignored.
        """
        self.touch(prefix, bytes_)

    def replay_requests(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        """Replay requests (the protocol of `kvsched_lab.sim.replay`); return each request's prefix hits.

        A request's prefix hits are the leading run of its ids cached at arrival, before it
        touches anything; then each id is touched head to tail, `bytes_` bytes each. The
        ids must be hashable: a bad one raises mid-replay, after the requests before it.
        """
        self._check_size(bytes_)
        with gc_paused():
            return self._replay(hash_id_lists, bytes_)

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        # `begin_request`, then one `touch_in_request` per block; library policies override this
        # with an inlined loop that must give the same hits, entries and log (tests check).
        contains, touch = self.entries.__contains__, self.touch_in_request
        out = []
        for ids in hash_id_lists:
            out.append(prefix_hits(contains, ids))
            self.begin_request(ids)
            for depth, key in enumerate(ids, 1):
                touch(key, bytes_, depth, depth == len(ids))
        return out

    def snapshot(self) -> List[Tuple[Any, ...]]:
        """Live entries as ``(key, bytes)``, in insertion order; policies refine the order."""
        return list(self.entries.items())

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(capacity_bytes={self.capacity_bytes}, "
            f"entries={len(self.entries)}, current_bytes={self.current_bytes}, time={self.time})"
        )


class PromptAwarePolicy(Policy):
    """A policy told where each block sits in its prompt: ``touch(key, bytes_, depth, last)``.

    ``depth`` is the block's 1-based place in its prompt and ``last`` marks the prompt's final
    block; both are checked before anything changes, then `_start_block` records them for the
    hooks. Replays and the engine pass them through `touch_in_request`; there a one-block
    prompt's block is not "last" (a lone block is usually a shared head, worth keeping).
    """

    def touch(self, prefix: Hashable, bytes_: int, depth: int = 1, last: bool = False) -> None:
        """Touch `prefix`, the `depth`-th block of its prompt; ``last`` marks the prompt's final block."""
        require_positive_int("depth", depth)
        if not isinstance(last, bool):
            raise TypeError(f"last must be a bool, got {last!r}")
        self.validate(prefix, bytes_)
        self._start_block(depth, last)
        super().touch(prefix, bytes_)

    def _start_block(self, depth: int, last: bool) -> None:
        """Record the position of the block about to be touched (subclasses)."""

    def touch_in_request(self, prefix: Hashable, bytes_: int, depth: int, last: bool) -> None:
        self.touch(prefix, bytes_, depth=depth, last=last and depth > 1)
