"""`seed-compact`: the seed chapter's policy with a bounded heap.

Same decisions and log as `seed` (seed.py), but the lazy heap is rebuilt from the live entries
whenever stale records outnumber live ones, so after every touch
``len(queue) <= 2 * len(entries) + 64``. This is how CPython's asyncio bounds its cancelled
timers (re-heapify when over half of 100+ are cancelled) and Go's runtime its deleted timers;
records are validated by a version (the touch clock), never by recomputing a priority.
"""
from __future__ import annotations

from typing import ClassVar

from kvsched_lab.policies.seed import SeedPolicy


class SeedCompactPolicy(SeedPolicy):
    """`SeedPolicy` whose heap holds at most ``2 * live + 64`` records after every touch."""

    name = "seed-compact"
    compact_heap: ClassVar[bool] = True
