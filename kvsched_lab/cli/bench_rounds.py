"""`kvsched bench`'s speed verdicts from interleaved rounds: per-round ratios, their band, the call.

Two quiet runs of the same code measured one policy's ratio 1.6x apart, so a single median
ratio near its target is called a pass or a miss by luck. The speed section therefore runs
rounds (reference, every policy, libCacheSim's caches, reference, ...), takes one ratio per
round against the reference runs on either side of it, and calls a target only when the band
the rounds agree on lies wholly above it (ok) or wholly below it (miss); a band that straddles
the target is reported as within noise, with the band printed so a reader sees how close it is.
"""
from __future__ import annotations

import math
from typing import List, Sequence, Tuple

# How a verdict reads in the markdown, after the target.
VERDICT_MARKS = {"ok": " ok", "miss": " **MISS**", "near": " within noise"}


def spread(ratios: Sequence[float]) -> Tuple[float, float]:
    """The band a ratio's rounds agree on: the lowest and highest once a fifth of the rounds at each
    end is dropped (the middle three of five), all of them with fewer than five rounds."""
    ordered = sorted(ratios)
    trim = len(ordered) // 5
    return ordered[trim], ordered[-1 - trim]


def speed_verdict(ratios: Sequence[float], target: float) -> str:
    """``"ok"`` when the whole band (`spread`) of per-round ratios is at or above `target`, ``"miss"``
    when it is all below, ``"near"`` when the target lies inside it: the rounds disagree, so the run
    cannot call it either way (a ratio near its target is not a pass or a miss by luck)."""
    low, high = spread(ratios)
    return "ok" if low >= target else "miss" if high < target else "near"


def round_ratios(reference_s: Sequence[float], seconds: Sequence[float]) -> List[float]:
    """Round i's speed ratio: the reference's CPU seconds over the policy's, the reference taken as
    the geometric mean of its runs just before and just after the round (``len(seconds) + 1`` runs),
    so that load drifting during a round hits both sides alike."""
    return [math.sqrt(reference_s[i] * reference_s[i + 1]) / s for i, s in enumerate(seconds)]
