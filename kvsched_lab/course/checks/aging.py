"""The check of the optional TODO ``aging`` (notebook 05, beyond the chapter): `_aged_score`.

It probes how the score moves with the inflation value L, hits and size, then runs the aging
scheduler (`kvsched_lab.course.aging`) on fixed touches and compares the victims, so any
formula with the same decisions passes. The base score in scope (``self.chapter_score``) is a
stand-in here (`_aging_base`), never the chapter's: a library function computing the chapter's
score would answer TODO score for anyone importing it.
"""
from __future__ import annotations

import math
import random
from typing import Any, Callable, List, Tuple

from kvsched_lab.i18n import N_, _
from kvsched_lab.course.checks.common import MAX_OPCODES, TOL, _budget, _close, _fmt, _NotDone, _OutOfTime, _run, _Wrong


class _AgingSelf:
    """All `_aged_score` may read: the clock, the capacity, ``inflation`` and ``chapter_score``."""

    def __init__(self, capacity_bytes: int, time: int, inflation: float):
        self.capacity_bytes = capacity_bytes
        self.time = time
        self.inflation = inflation

    def chapter_score(self, hits: int, size: int, last_used: int) -> float:
        return _aging_base(self, hits, size, last_used)


def _aging_base(sim: Any, hits: int, size: int, last_used: int) -> float:
    """The check's stand-in for the base score: more hits higher, bigger lower, like the chapter's, but
    not it. Aging is graded by how L is combined with whatever base score is in scope."""
    return 2.0 * hits - size / max(sim.capacity_bytes, 1)


def _aged(fn: Callable, inflation: float, hits: int, size: int, capacity: int = 100, time: int = 10) -> float:
    value = _run(fn, _AgingSelf(capacity, time, inflation), hits, size, time)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _Wrong(_("_aged_score must return a finite number, it returned {value!r}", value=value))
    return float(value)


# (what, capacity in bytes, touches as "key:bytes" words, the keys the aging scheduler evicts, in order).
# Each was worked out once with GDSF's rule over the stand-in base score (`_aging_base`); a different
# formula with the same decisions passes.
_AGING_CASES: Tuple[Tuple[str, int, str, str], ...] = (
    (N_("a prefix hit 6 times, then never again, while 20 new prefixes are each used twice (4 one-byte slots)"), 4,
     " ".join(["hot:1"] * 6 + [f"x{i // 2}:1" for i in range(40)]),
     "x0 x1 x2 x3 x4 x5 x6 x7 x8 hot x9 x10 x11 x12 x13 x14 x15"),
    (N_("entries of different sizes (100 bytes)"), 100,
     "doc:40 doc:40 sys:10 sys:10 sys:10 big:60 a:20 b:30 a:20 c:20 d:30 big:60 e:10 f:40 doc:40",
     "doc big sys b c d a big"),
    (N_("300 seeded touches of 12 prefixes of 10-40 bytes (100 bytes)"), 100, "", ""),  # built by _aging_random_case
)
_AGING_RANDOM_VICTIMS = (
    "k1 k7 k10 k11 k4 k6 k8 k9 k6 k5 k4 k1 k8 k10 k5 k7 k1 k8 k9 k4 k5 k9 k2 k7 k4 k2 k7 k5 k1 k8 k2 k5 k7 k4 "
    "k2 k7 k8 k10 k5 k3 k1 k6 k2 k5 k1 k3 k5 k10 k4 k2 k7 k9 k6 k1 k5 k6 k10 k5 k2 k1 k2 k6 k1 k9 k3 k6 k7 "
    "k1 k3 k1 k3 k6 k10 k8 k4 k1 k3 k10 k1 k3 k5 k1 k4 k1 k3 k8 k1 k10 k3 k2 k7 k5 k4 k3 k10 k2 k8 k1 k7 k3 "
    "k4 k1 k11 k1 k11 k7 k2 k8 k9 k8 k9 k1 k11 k10 k9 k1 k4 k5 k1 k4 k5 k3 k6 k2 k1 k9 k11 k1 k4 k2 k6 k1")


def _aging_random_case() -> List[Tuple[str, int]]:
    rng = random.Random(9)
    keys = [f"k{i}" for i in range(12)]
    size = {k: rng.choice([10, 20, 30, 40]) for k in keys}
    return [(k, size[k]) for k in rng.choices(keys, weights=[1 / (i + 1) for i in range(12)], k=300)]


def grade_aging(fn: Callable) -> int:
    from kvsched_lab.course.aging import evictions

    # Probes first, on one score at a time: each message names the part that is off.
    base = _aged(fn, 0.0, 2, 20)
    d_inflation = _aged(fn, 5.0, 2, 20) - base
    if abs(d_inflation) <= TOL:
        raise _Wrong(_("the score ignores self.inflation (L): with L = 5 it must be higher than with L = 0, "
                       "otherwise a prefix that was hot long ago is never evicted"))
    if d_inflation < 0:
        raise _Wrong(_("a higher inflation value must raise the score, not lower it: new priorities start from L"))
    if not _close(d_inflation, 5.0):
        raise _Wrong(_("your score scales self.inflation up: raising it by 5 raises your score by {rise}, more than L "
                       "itself rose", rise=_fmt(d_inflation)) if d_inflation > 5.0 else
                     _("your score scales self.inflation down: raising it by 5 raises your score by only {rise}, less "
                       "than L itself rose", rise=_fmt(d_inflation)))
    if not _aged(fn, 3.0, 3, 20) > _aged(fn, 3.0, 2, 20):
        raise _Wrong(_("at the same L, more hits must still give a higher score (keep the chapter's score in it)"))
    if not _aged(fn, 3.0, 2, 60) < _aged(fn, 3.0, 2, 20):
        raise _Wrong(_("at the same L, a bigger entry must still score lower (keep the chapter's size penalty)"))
    cases = 5
    # Then the decisions the score leads to, in the aging scheduler (L rises at every eviction).
    for label, capacity, words, want in _AGING_CASES:
        what = _(label)
        touches = ([(k, int(n)) for k, n in (w.split(":") for w in words.split())] if words
                   else _aging_random_case())
        expected = (want or _AGING_RANDOM_VICTIMS).split()
        try:
            with _budget(max_opcodes=20 * MAX_OPCODES):
                got = evictions(fn, _aging_base, capacity, touches)
        except NotImplementedError as e:
            raise _NotDone() from e
        except _OutOfTime:
            raise _Wrong(_("did not finish (an endless loop?) within the step budget")) from None
        except Exception as e:
            raise _Wrong(_("{what}: it raised {e_type}: {e}", what=what, e_type=type(e).__name__, e=e)) from None
        if got != expected:
            if "hot" in expected and "hot" not in got:
                raise _Wrong(_("{what}: 'hot' was never evicted; with aging, a prefix whose hits are old must "
                               "eventually lose to prefixes that are being reused now", what=what))
            k = next((i for i, (g, e) in enumerate(zip(got, expected)) if g != e), min(len(got), len(expected)))
            nothing = repr(_("nothing more"))  # quoted, like the keys beside it
            shown = repr(got[k]) if k < len(got) else nothing
            wanted = repr(expected[k]) if k < len(expected) else nothing
            raise _Wrong(_("{what}: eviction #{number} took {shown}; the aging scheduler takes {wanted} there",
                           what=what, number=k + 1, shown=shown, wanted=wanted))
        cases += 1
    return cases
