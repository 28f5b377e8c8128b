"""The check of TODO ``score`` (notebook 02): `_score(self, hits, size, last_used)`, term by term.

It probes one term at a time (hits, recency, size) so a failure names the term that is off,
then compares fixed cases worked out by hand and properties over seeded random cases.
"""
from __future__ import annotations

import math
import random
from typing import Callable, List, Tuple

from kvsched_lab.i18n import N_, _
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


# (what the case is, as the failure message names it; (capacity_bytes, time, hits, size, last_used))
# -> expected score, worked out by hand. The message names the case, never the expected score.
_SCORE_CASES: List[Tuple[str, Tuple[int, int, int, int, int], float]] = [
    (N_("the chapter's entry 'a' when added"), (128, 5, 1, 40, 5), 1.421875),
    (N_("the chapter's entry 'a' after its first reuse"), (128, 3, 2, 40, 3), 2.421875),
    (N_("the chapter's entry 'd'"), (128, 7, 1, 48, 7), 1.40625),
    (N_("an entry last used 4 steps ago"), (100, 10, 3, 20, 6), 3.05),  # recency 0.2
    (N_("an entry as big as the whole cache, last used 2 steps ago"), (1000, 2, 5, 1000, 0), 4.916666666666667),
    (N_("an entry whose last_used is after the clock (the gap counts as 0, not as negative)"), (64, 3, 0, 16, 9),
     0.4375),
]


def grade_score(fn: Callable) -> int:
    s = lambda hits, size, last_used, capacity=100, time=10: _score(fn, capacity, time, hits, size, last_used)  # noqa: E731
    # Term by term first: each message names the term that is off and in which direction, with the
    # learner's own number, never the weight that would complete the line (lab.hint tier 4 comes close).
    d_hits = s(3, 0, 10) - s(2, 0, 10)
    if d_hits <= TOL:
        raise _Wrong(_("more hits must give a higher score (reuse is the main reason to keep an entry)")
                     if d_hits < -TOL else _("the score ignores hits: one more hit must raise it"))
    if not _close(d_hits, 1.0):
        raise _Wrong(_("the reuse term weighs too little: one more hit, all else equal, raises your score by only "
                       "{d_hits}", d_hits=_fmt(d_hits)) if d_hits < 1.0 else
                     _("the reuse term weighs too much: one more hit, all else equal, raises your score by {d_hits}",
                       d_hits=_fmt(d_hits)))
    d_recent = s(0, 0, 10) - s(0, 0, 9)  # recency 1.0 vs 0.5
    if d_recent <= TOL:
        raise _Wrong(_("a more recently used entry must score higher (recency is a bonus)")
                     if d_recent < -TOL else _("the score ignores recency: last used now vs 1 step ago must differ"))
    if not _close(d_recent, 0.25):
        raise _Wrong(_("the recency term weighs too little: an entry used just now outscores one used a step "
                       "earlier by only {d_recent}", d_recent=_fmt(d_recent)) if d_recent < 0.25 else
                     _("the recency term weighs too much: an entry used just now outscores one used a step earlier "
                       "by {d_recent}", d_recent=_fmt(d_recent)))
    d_size = s(0, 50, 10) - s(0, 0, 10)  # size_penalty 0.5 vs 0
    if d_size >= -TOL:
        raise _Wrong(_("a bigger entry must score lower (size is a penalty)")
                     if d_size > TOL else _("the score ignores size: a bigger entry must score lower"))
    if not _close(d_size, -0.125):
        raise _Wrong(_("the size penalty weighs too little: growing an entry from nothing to half the capacity "
                       "lowers your score by only {d_size}", d_size=_fmt(-d_size)) if -d_size < 0.125 else
                     _("the size penalty weighs too much: growing an entry from nothing to half the capacity lowers "
                       "your score by {d_size} (is size measured against capacity_bytes?)", d_size=_fmt(-d_size)))
    base = s(0, 0, 10)
    if not _close(base, 0.5):
        raise _Wrong(_("your score has a constant that belongs to no term: each term moves it as it should, yet an "
                       "entry with hits=0 and size=0, used just now, scores {base}, more than its weighted recency "
                       "alone", base=_fmt(base)) if base > 0.5 else
                     _("your score has a constant that belongs to no term: each term moves it as it should, yet an "
                       "entry with hits=0 and size=0, used just now, scores {base}, less than its weighted recency "
                       "alone", base=_fmt(base)))
    cases = 4
    for label, (capacity, time, hits, size, last_used), want in _SCORE_CASES:
        got = s(hits, size, last_used, capacity, time)
        if not _close(got, want):
            wrong = (N_("{what}: _score(hits={hits}, size={size}, last_used={last_used}) with time={time}, "
                        "capacity_bytes={capacity} returned {got!r}, more than the chapter's score") if got > want else
                     N_("{what}: _score(hits={hits}, size={size}, last_used={last_used}) with time={time}, "
                        "capacity_bytes={capacity} returned {got!r}, less than the chapter's score"))
            raise _Wrong(_(wrong, what=_(label), hits=hits, size=size, last_used=last_used, time=time,
                           capacity=capacity, got=got))
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
            raise _Wrong(_("one more hit must raise the score by the same amount at every time and size"))
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
