"""`check_invariants`: what must hold for any scheduler after every call, stated as asserts.

Used by the test suite after every random operation, and by the learners' checks.
"""
from __future__ import annotations

from typing import Any

from kvsched_lab.sim.events import ADD, EVICT, iter_events


def entry_bytes(entry: Any) -> int:
    """Size of one entry: the chapter's `CacheEntry.bytes`, or a plain int for library policies."""
    return entry if isinstance(entry, int) else entry.bytes


def check_invariants(sim: Any) -> None:
    """Raise AssertionError naming the first broken invariant of `sim`.

    Holds for the chapter's scheduler and for every library policy:
    1. ``current_bytes == sum of live entry sizes <= capacity_bytes``.
    2. Replaying the log's ``add``/``evict`` events gives exactly the live keys.
    3. If the scheduler keeps a chapter-style heap (``queue`` of ``(priority, last_used, key)``),
       every live entry has a record equal to its current ``(priority, last_used)``, so it can
       still be found for eviction.
    """
    total = sum(entry_bytes(e) for e in sim.entries.values())
    assert sim.current_bytes == total, (
        f"current_bytes is {sim.current_bytes} but the live entries add up to {total} bytes"
    )
    assert total <= sim.capacity_bytes, (
        f"live entries use {total} bytes, over capacity_bytes={sim.capacity_bytes}"
    )

    live = set()
    for op, key in iter_events(sim.log):
        if op == ADD:
            live.add(str(key))
        elif op == EVICT:
            live.discard(str(key))
    keys = {str(k) for k in sim.entries}
    assert live == keys, (
        "the log disagrees with entries: "
        f"logged but not live {sorted(live - keys)[:5]}, live but not logged {sorted(keys - live)[:5]}"
    )

    queue = getattr(sim, "queue", None)
    if queue is not None and sim.entries and hasattr(next(iter(sim.entries.values())), "priority"):
        records = {(rec[2], rec[0], rec[1]) for rec in queue}
        for key, e in sim.entries.items():
            assert (key, e.priority, e.last_used) in records, (
                f"live entry {key!r} has no heap record with its current priority {e.priority!r} "
                f"and last_used {e.last_used}; it could never be evicted"
            )
