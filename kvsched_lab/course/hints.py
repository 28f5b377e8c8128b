"""Tiered hints for the five TODOs, and `reveal` of the reference when it ships.

Level 1 nudges, level 2 is concrete, level 3 is nearly there; none is the answer's code line.
"""
from __future__ import annotations

from typing import Dict, Tuple

from kvsched_lab.course.checks import NOTEBOOK_OF, TODO_NAMES

HINTS: Dict[str, Tuple[str, str, str]] = {
    "score": (
        "The three ingredients are already computed for you: reuse_bonus, recency and size_penalty. "
        "Step 3 of notebook 02 gives the weight of each.",
        "Reuse counts at full weight, recency at half weight, and size is subtracted at a quarter "
        "weight. Two of the terms raise the score, one lowers it.",
        "One arithmetic expression assigned to `score`: the reuse bonus, plus one half times the recency, "
        "minus one quarter times the size penalty. Check: hits=1, size=0, just touched gives 1.5.",
    ),
    "heap": (
        "The heap is `heapq`'s min-heap: the record that compares smallest is popped first, and "
        "eviction wants the entry with the LOWEST priority.",
        "A record is a tuple compared field by field: priority first, then last_used as the "
        "tie-break (older leaves first), then the key so the evictor can find the entry.",
        "Build `queue_item` as a 3-tuple from the entry's current priority (not negated), its "
        "last_used, and `prefix`; the given `heapq.heappush` line then adds it.",
    ),
    "stale": (
        "Every hit pushed a new record and left the old one in the heap. A popped record may describe "
        "an entry as it was some touches ago.",
        "The live entry (`entry`) knows its current priority and last_used. The popped record's "
        "`priority` and `last_used` were copied at push time. When are they out of date?",
        "The record is stale when its (priority, last_used) pair differs from the entry's current "
        "pair. Compare BOTH fields: one `!=` between two 2-tuples does it.",
    ),
    "entry": (
        "A miss creates the cache entry for `prefix`. Look at the `CacheEntry` dataclass: which "
        "fields does it need, and what do they mean for an entry that was just added?",
        "This access is its first use: one hit, used at the current clock value (already advanced "
        "by the given `self.time += 1`), holding `bytes_` bytes. The priority is computed right after "
        "by `_refresh_queue`, so any placeholder number works.",
        "Assign `entry = CacheEntry(...)` with keyword arguments: priority a 0.0 placeholder, "
        "last_used the current time, the prefix, hits 1, and bytes the requested size.",
    ),
    "snapshot": (
        "`sorted(...)` with a `key` function orders the live entries (`self.entries.values()`); the "
        "given return line turns them into rows.",
        "Highest priority first; among equal priorities the older `last_used` first; if those tie "
        "too, by prefix. Sort by the full priority, not the rounded one.",
        "Use a key function returning a tuple whose first element is the priority negated (so the "
        "highest comes first), then last_used, then prefix; assign the result to `ordered_entries`.",
    ),
}


def hint(name: str, level: int = 1) -> None:
    """Print hint `level` (1 nudge, 2 concrete, 3 nearly there) for TODO `name`."""
    if name not in HINTS:
        raise ValueError(f"unknown TODO {name!r}; the five are {', '.join(TODO_NAMES)}")
    tiers = HINTS[name]
    shown = min(max(int(level), 1), len(tiers))
    print(f"💡 {name}, hint {shown}/{len(tiers)}: {tiers[shown - 1]}")
    if shown < len(tiers):
        print(f"   still stuck? lab.hint({name!r}, level={shown + 1})")
    else:
        print(f"   after that: lab.reveal({name!r}) shows the reference, where your instructor ships it")


def reveal(name: str) -> None:
    """Print the reference method for TODO `name`, when the instructor's `solutions` is installed."""
    if name not in HINTS:
        raise ValueError(f"unknown TODO {name!r}; the five are {', '.join(TODO_NAMES)}")
    from kvsched_lab.todos import reference_sources

    try:
        source = reference_sources()[name]
    except ImportError:
        print(f"🔒 {name}: the reference solution is withheld in this release (no `solutions` package). "
              f"Use lab.hint({name!r}, level=3), or ask your instructor.")
        return
    print(f"🔓 {name}: the reference method (its TODO lives in notebook {NOTEBOOK_OF[name]}):\n")
    print(source)
