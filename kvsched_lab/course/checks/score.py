"""The check of TODO ``score`` (notebook 02): `_score(self, hits, size, last_used)`, term by term.

It probes one term at a time (hits, recency, size) so a failure names the term that is off,
then compares fixed cases worked out by hand and properties over seeded random cases.
"""
from __future__ import annotations

import math
import random
from typing import Callable, List, Tuple

from kvsched_lab.i18n import _
from kvsched_lab.course.checks.common import TOL, _close, _fmt, _run, _Wrong


class _ScoreSelf:
    """All `_score` may read: the clock and the capacity."""

    def __init__(self, capacity_bytes: int, time: int):
        self.capacity_bytes = capacity_bytes
        self.time = time


def _score(fn: Callable, capacity: int, time: int, hits: int, size: int, last_used: int) -> float:
    value = _run(fn, _ScoreSelf(capacity, time), hits, size, last_used)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Wrong(_("_score must return a number, it returned {value_type} {value!r}",
                       value_type=type(value).__name__, value=value))
    if not math.isfinite(value):
        raise _Wrong(_("_score returned {value} for hits={hits}, size={size}, last_used={last_used}",
                       value=value, hits=hits, size=size, last_used=last_used))
    return float(value)


# (capacity_bytes, time, hits, size, last_used) -> expected score, worked out by hand.
_SCORE_CASES: List[Tuple[Tuple[int, int, int, int, int], float]] = [
    ((128, 5, 1, 40, 5), 1.421875),  # the chapter's 'a' when added
    ((128, 3, 2, 40, 3), 2.421875),  # ... and after its first reuse
    ((128, 7, 1, 48, 7), 1.40625),  # the chapter's 'd'
    ((100, 10, 3, 20, 6), 3.05),  # used 4 steps ago: recency 0.2
    ((1000, 2, 5, 1000, 0), 4.916666666666667),  # full-capacity entry, recency 1/3
    ((64, 3, 0, 16, 9), 0.4375),  # last_used after time: the gap is clamped at 0
]


def grade_score(fn: Callable) -> int:
    s = lambda hits, size, last_used, capacity=100, time=10: _score(fn, capacity, time, hits, size, last_used)  # noqa: E731
    # Term by term first: each message names the term that is off.
    d_hits = s(3, 0, 10) - s(2, 0, 10)
    if d_hits <= TOL:
        raise _Wrong(_("more hits must give a higher score (reuse is the main reason to keep an entry)")
                     if d_hits < -TOL else _("the score ignores hits: one more hit must raise it"))
    if not _close(d_hits, 1.0):
        raise _Wrong(_("each extra hit must add exactly 1.0 to the score (reuse_bonus counts at full weight); yours "
                       "adds {d_hits}",
                       d_hits=_fmt(d_hits)))
    d_recent = s(0, 0, 10) - s(0, 0, 9)  # recency 1.0 vs 0.5
    if d_recent <= TOL:
        raise _Wrong(_("a more recently used entry must score higher (recency is a bonus)")
                     if d_recent < -TOL else _("the score ignores recency: last used now vs 1 step ago must differ"))
    if not _close(d_recent, 0.25):
        raise _Wrong(_("the recency term has the wrong weight: last used now (recency 1.0) vs one step ago (recency "
                       "0.5) should differ by 0.25, yours differ by {d_recent}",
                       d_recent=_fmt(d_recent)))
    d_size = s(0, 50, 10) - s(0, 0, 10)  # size_penalty 0.5 vs 0
    if d_size >= -TOL:
        raise _Wrong(_("a bigger entry must score lower (size is a penalty)")
                     if d_size > TOL else _("the score ignores size: a bigger entry must score lower"))
    if not _close(d_size, -0.125):
        raise _Wrong(_("the size penalty has the wrong weight: growing from 0 to half the capacity should lower the "
                       "score by 0.125, yours lowers it by {d_size}",
                       d_size=_fmt(-d_size)))
    base = s(0, 0, 10)
    if not _close(base, 0.5):
        raise _Wrong(_("with hits=0, size=0 and last_used == time only the recency term is left, so the score "
                       "should be 0.5; yours is {base}",
                       base=_fmt(base)))
    cases = 4
    for (capacity, time, hits, size, last_used), want in _SCORE_CASES:
        got = s(hits, size, last_used, capacity, time)
        if not _close(got, want):
            raise _Wrong(_("_score(hits={hits}, size={size}, last_used={last_used}) with time={time}, "
                           "capacity_bytes={capacity} should be {want!r} (within {TOL}), got {got!r}",
                           hits=hits, size=size, last_used=last_used, time=time, capacity=capacity, want=want,
                           TOL=TOL, got=got))
        cases += 1
    rng = random.Random(41)
    for _case in range(30):
        capacity = rng.randint(1, 4096)
        time = rng.randint(0, 500)
        hits = rng.randint(0, 50)
        size = rng.randint(1, capacity)
        last_used = rng.randint(0, time)
        got = s(hits, size, last_used, capacity, time)
        if not _close(s(hits + 1, size, last_used, capacity, time) - got, 1.0):
            raise _Wrong(_("each extra hit must add exactly 1.0 to the score, at any time and size"))
        shifted = s(hits, size, last_used + 7, capacity, time + 7)
        if not _close(shifted, got):
            raise _Wrong(_("recency must depend only on how long ago the entry was used (time - last_used), not on the "
                           "clock's absolute value"))
        if not _close(s(hits, 2 * size, last_used, 2 * capacity, time), got):
            raise _Wrong(_("the size penalty must depend on size relative to capacity_bytes (twice the size in twice "
                           "the capacity costs the same)"))
        if time > last_used and not s(hits, size, last_used + 1, capacity, time) > got:
            raise _Wrong(_("a more recently used entry must score higher, at every age"))
        cases += 1
    return cases
