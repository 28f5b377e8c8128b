"""The check of TODO ``snapshot`` (notebook 05): `snapshot(self)`, the live entries in eviction order.

Fixed cases with priority ties and rounding, then seeded random entries whose expected order is
data (`_SNAP_ORDERS`, worked out once by the rule: higher priority, then older, then smaller
prefix): a function here computing that order would answer the TODO for anyone importing it.
`_snapshot_message` says which part of the order is off.
"""
from __future__ import annotations

import random
from typing import Any, Callable, Dict, Hashable, List, Tuple

from kvsched_lab.i18n import N_, _
from kvsched_lab.sim.scheduler import CacheEntry
from kvsched_lab.course.checks.common import _run, _state, _Wrong


class _SnapSelf:
    def __init__(self, entries: List[CacheEntry], capacity_bytes: int = 128):
        self.capacity_bytes = capacity_bytes
        self.entries: Dict[Hashable, CacheEntry] = {e.prefix: e for e in entries}
        self.current_bytes = sum(e.bytes for e in entries)
        self.time = max([e.last_used for e in entries] + [0])
        self.queue: List[tuple] = []
        self.log: List[str] = []


# (what, entries in insertion order as (priority, last_used, prefix, hits, bytes), expected rows)
_SNAP_CASES: Tuple[Tuple[str, tuple, list], ...] = (
    (N_("the chapter's final state"),
     ((1.40625, 5, "d", 1, 48), (3.421875, 6, "a", 3, 40)),
     [("a", 40, 3.4219, 3), ("d", 48, 1.4062, 1)]),
    (N_("entries with equal priority"),
     ((1.5, 4, "x", 2, 10), (1.5, 2, "y", 2, 20), (2.0, 1, "w", 3, 30), (1.5, 7, "z", 2, 40), (0.75, 3, "v", 1, 50)),
     [("w", 30, 2.0, 3), ("y", 20, 1.5, 2), ("x", 10, 1.5, 2), ("z", 40, 1.5, 2), ("v", 50, 0.75, 1)]),
    (N_("three entries with one priority and one last_used"),
     ((1.5, 3, "m", 1, 8), (1.5, 3, "b", 1, 8), (1.5, 3, "k", 1, 8), (2.5, 9, "q", 2, 8)),
     [("q", 8, 2.5, 2), ("b", 8, 1.5, 1), ("k", 8, 1.5, 1), ("m", 8, 1.5, 1)]),
    (N_("priorities that only differ after rounding"),
     ((1.00001, 1, "e1", 1, 4), (1.00004, 2, "e2", 1, 4), (-0.12345, 3, "neg", 0, 4)),
     [("e2", 4, 1.0, 1), ("e1", 4, 1.0, 1), ("neg", 4, -0.1235, 0)]),
    (N_("an empty cache"), (), []),
)


def _snapshot_message(what: str, got: Any, want: list, entries: Dict[Hashable, CacheEntry]) -> str:
    if not isinstance(got, list):
        return _("{what}: snapshot must return a list, got {got_type}",
                 what=what, got_type=type(got).__name__)
    if len(got) != len(want) or not all(isinstance(r, tuple) and len(r) == 4 for r in got):
        return _("{what}: snapshot must return one (prefix, bytes, round(priority, 4), hits) tuple per live "
                 "entry",
                 what=what)
    keys = [r[0] for r in got]
    if sorted(map(repr, keys)) != sorted(repr(r[0]) for r in want):
        return _("{what}: snapshot must list every live entry exactly once", what=what)
    if set(got) != set(want):
        return _("{what}: each row must be (prefix, bytes, round(priority, 4), hits)", what=what)
    es = [entries[k] for k in keys]
    for a, b in zip(es, es[1:]):
        if a.priority < b.priority:
            if [e.prefix for e in es] == [r[0] for r in reversed(want)] and len(set(e.priority for e in es)) > 1:
                return _("{what}: entries came out lowest priority first; the highest must come first",
                         what=what)
            if round(a.priority, 4) == round(b.priority, 4):
                return (_("{what}: entries must be ordered by their full priority; rounding is for display only",
                          what=what))
            return _("{what}: entries are not ordered by priority, highest first", what=what)
        if a.priority == b.priority and a.last_used > b.last_used:
            return _("{what}: two entries with equal priority came out newest first; the older goes first",
                     what=what)
        if a.priority == b.priority and a.last_used == b.last_used and a.prefix > b.prefix:
            return _("{what}: entries tied on priority and last_used must come in prefix order", what=what)
    return _("{what}: rows are not in the expected order", what=what)


def grade_snapshot(fn: Callable) -> int:
    cases = 0
    for label, rows, want in _SNAP_CASES:
        what = _(label)
        sim = _SnapSelf([CacheEntry(p, lu, key, hits, size) for p, lu, key, hits, size in rows])
        before = _state(sim.entries)
        got = _run(fn, sim)
        if _state(sim.entries) != before:
            raise _Wrong(_("{what}: snapshot must not change self.entries", what=what))
        if got != want:
            raise _Wrong(_snapshot_message(what, got, want, sim.entries))
        cases += 1
    # Property: random priorities with many ties, compared with a hand-checked ordering rule.
    rng = random.Random(5)
    for _case in range(20):
        entries = []
        for i, key in enumerate(rng.sample("abcdefghijklmnop", rng.randint(1, 10))):
            entries.append(CacheEntry(rng.choice([0.5, 1.25, 2.0, rng.uniform(-1, 5)]), rng.randint(1, 4),
                                      key, rng.randint(0, 9), rng.randint(1, 64)))
        sim = _SnapSelf(entries)
        got = _run(fn, sim)
        by_key = {e.prefix: e for e in entries}
        want = [(e.prefix, e.bytes, round(e.priority, 4), e.hits) for e in (by_key[k] for k in _SNAP_ORDERS[_case])]
        if got != want:
            raise _Wrong(_snapshot_message(_("random entries with ties"), got, want, sim.entries))
        cases += 1
    return cases


# The expected prefix order of each of the 20 seeded random cases above (seed 5).
_SNAP_ORDERS = ("ophalfikgm", "cohfjl", "gf", "pck", "p", "foancgd", "fhikmpoe", "fbgokjl", "clnhfkdegj", "bkpoi",
                "pdelbko", "pcekfila", "jlge", "ab", "fnhpb", "ek", "ejfhbc", "i", "ifkl", "dehc")
