"""The hidden cases, in families: points follow the families, so one wrong edge costs one share.

Families: the chapter's example, random sequences at several capacities, priority ties, entries
exactly at capacity, several evictions for one add, reuse after eviction, tiny and huge
capacities, direct score probes, crafted heap states (`_edge_phase`: records stale only by
``last_used`` or only by priority, a live entry without its record, records of evicted keys,
equal ``(priority, last_used)`` ties) and precision (`_precision_phase`: what rounding hides).
Every plausible wrong answer fails at least one family; the grader scores each TODO by the share
of cases passed per family (verdict.py).

Instructor-only: `kvsched release` leaves this package out of the student bundle.
"""
from __future__ import annotations

import random
from typing import Dict, List

from kvsched_lab.grading.kernel.observe import Case
from kvsched_lab.i18n import N_  # case kinds and families: the feedback shows them in its language

SEED = 20251129  # fixed: the grader and the kernel must see the same cases


def _random_ops(rng: random.Random, n: int, keys: List[str], sizes: List[int]) -> list:
    """A sequence of touches with snapshots and score probes; sizes repeat, so priorities tie."""
    ops: list = []
    size_of: Dict[str, int] = {}
    for step in range(n):
        # A small hot set is reused often, so reuse, stale records and evictions all happen.
        key = rng.choice(keys[: max(2, len(keys) // 3)]) if rng.random() < 0.5 else rng.choice(keys)
        size = size_of.setdefault(key, rng.choice(sizes))
        if rng.random() < 0.15:  # a key re-touched with another size keeps its first size
            size = rng.choice(sizes)
        ops.append(["touch", key, size])
        if step % 9 == 8:
            ops.append(["snapshot"])
        if step % 17 == 16:
            ops.append(["score", rng.randint(1, 5), rng.choice(sizes), rng.randint(0, 3)])
    ops.append(["snapshot"])
    return ops


def _edge_phase(rng: random.Random) -> dict:
    """States only crafted heap records reach; every plausible wrong answer shows here.

    Keys are named so that insertion order, prefix order and ``last_used`` order disagree.
    """
    capacity = rng.choice([64, 96, 120, 128, 200, 256, 400])
    s = capacity // 8
    f, b, a, c, d, e = (f"{tag}{rng.randint(0, 9)}" for tag in ("f", "n", "k", "x", "w", "q"))
    ops = [
        ["touch", f, capacity - 3 * s], ["touch", f, capacity - 3 * s],  # reuse: f's old record goes stale
        ["touch", b, s], ["touch", a, s], ["touch", c, s],  # equal priorities; the cache is exactly full
        ["snapshot"],
        ["stale", a, 0.0, -1000],  # same priority, older last_used: stale only by last_used
        ["stale", c, -0.25, 0],  # same last_used, lower priority: stale only by priority
        ["touch", d, s],  # one eviction, which must skip both records and take b
        ["snapshot"],
        ["retime", a, 3],  # a now scores lowest; then its live record disappears
        ["unqueue", a],
        ["stale", a, 0.0, 1],  # newer last_used, same priority: stale
        ["stale", a, 0.0625, 0],  # higher priority, same last_used: stale
        ["orphan", "gone", -5.0, 0],  # a record of a key that is not cached
        ["touch", e, s],  # must skip all four records above and evict c
        ["retime", e, 2], ["retime", d, 2],  # equal (priority, last_used): ties go by prefix
        ["snapshot"],
        ["touch", b, s],  # reuse after eviction: a fresh entry
        ["score", 2, s, 0], ["score", 4, capacity, 5],
        ["touch", "all", capacity],  # several evictions for one add, exactly at capacity
        ["snapshot"],
        ["evict", capacity],  # empty the cache; a has no record left, so the fallback finds it
        ["snapshot"],
    ]
    return {"capacity": capacity, "ops": ops}


def _precision_phase(rng: random.Random) -> dict:
    """Differences a rounded or approximate answer hides.

    At a capacity of about a million bytes, two entries one byte apart differ in priority by
    ~2.5e-7: equal to 4 decimals, so only a snapshot ordered by the exact priority puts the
    smaller (touched later) one first. Score probes with ``last_used`` ahead of the clock need
    the chapter's ``max(..., 0)`` clamp (an age of -1 divides by zero without it).
    """
    capacity = rng.randint(900_000, 1_100_000)
    size = rng.randint(8, 64)
    older, newer = (f"{tag}{rng.randint(0, 9)}" for tag in ("z", "m"))
    ops = [["touch", older, size + 1], ["touch", newer, size], ["snapshot"],
           ["score", 1, size, -1], ["score", 3, size, -rng.randint(2, 9)], ["snapshot"]]
    return {"capacity": capacity, "ops": ops}


def _case(name: str, family: str, first: dict) -> Case:
    return {"name": name, "family": family, "phases": [first]}


def hidden_cases() -> List[Case]:
    """All hidden cases, in a fixed order (about 40, in 11 families)."""
    rng = random.Random(SEED)
    cases: List[Case] = []
    chapter = [["touch", k, b] for k, b in (("a", 40), ("b", 48), ("a", 40), ("c", 56), ("d", 48), ("a", 40))]
    cases.append(_case(N_("chapter example"), N_("chapter example"),
                       {"capacity": 128, "ops": chapter + [["snapshot"]]}))
    for i, capacity in enumerate([64, 100, 128, 256, 1000, 4096, 128, 300, 2048, 777, 160, 512]):
        keys = [f"p{j}" for j in range(rng.randint(4, 16))]
        sizes = sorted({max(1, capacity // rng.choice([2, 3, 4, 5, 8, 10])) for _ in range(3)})
        cases.append(_case(f"{N_('random')} #{i + 1}", N_("random sequences"),
                           {"capacity": capacity, "ops": _random_ops(rng, rng.randint(40, 90), keys, sizes)}))
    for i in range(3):
        capacity = rng.choice([60, 120, 240])
        keys = [f"t{j}" for j in range(8)]
        cases.append(_case(f"{N_('ties')} #{i + 1}", N_("ties in priority"),
                           {"capacity": capacity, "ops": _random_ops(rng, 60, keys, [capacity // 6])}))
    for i, capacity in enumerate([50, 120]):
        third = capacity // 3
        ops = [["touch", "x", capacity], ["snapshot"], ["touch", "y", capacity], ["touch", "y", capacity],
               ["touch", "a", third], ["touch", "b", third], ["touch", "c", capacity - 2 * third],
               ["snapshot"], ["touch", "a", third], ["touch", "d", third], ["touch", "x", capacity], ["snapshot"]]
        cases.append(_case(f"{N_('exact capacity')} #{i + 1}", N_("entry exactly at capacity"),
                           {"capacity": capacity, "ops": ops}))
    for i, capacity in enumerate([40, 256]):
        unit = max(1, capacity // 20)
        ops = [["touch", f"s{j}", unit] for j in range(capacity // unit)]
        ops += [["touch", f"s{j}", unit] for j in range(0, 6, 2)]
        ops += [["touch", "big", capacity - unit], ["snapshot"], ["touch", "s1", unit], ["touch", "big2", capacity],
                ["snapshot"]]
        cases.append(_case(f"{N_('multi-evict')} #{i + 1}", N_("several evictions for one add"),
                           {"capacity": capacity, "ops": ops}))
    for i in range(3):
        capacity = rng.choice([100, 150, 200])
        keys = [f"r{j}" for j in range(5)]
        ops: list = []
        for _ in range(4):  # each round reuses keys, evicts them, then brings them back
            for k in keys:
                ops.append(["touch", k, capacity // 4])
            ops += [["touch", keys[0], capacity // 4], ["touch", keys[0], capacity // 4], ["snapshot"]]
            rng.shuffle(keys)
        cases.append(_case(f"{N_('reuse after eviction')} #{i + 1}", N_("stale records and reuse after eviction"),
                           {"capacity": capacity, "ops": ops}))
    for i, capacity in enumerate([1, 2, 3]):
        keys = ["u", "v", "w"]
        cases.append(_case(f"{N_('tiny capacity')} #{i + 1}", N_("tiny capacities"),
                           {"capacity": capacity, "ops": _random_ops(rng, 40, keys, list(range(1, capacity + 1)))}))
    for i, capacity in enumerate([10 ** 9, 2 ** 40 + 7, 10 ** 6]):
        keys = [f"h{j}" for j in range(10)]
        sizes = [capacity // 3, capacity // 7 + 1, capacity // 1000 + 3, 1]
        cases.append(_case(f"{N_('large capacity')} #{i + 1}", N_("large capacities"),
                           {"capacity": capacity, "ops": _random_ops(rng, 60, keys, sizes)}))
    for i in range(3):
        capacity = rng.choice([128, 500])
        ops = [["touch", "a", capacity // 4], ["touch", "b", capacity // 2], ["touch", "a", capacity // 4]]
        ops += [["score", h, sz, age] for h in (0, 1, 3, 10) for sz in (1, capacity // 4, capacity) for age in (0, 1, 4, 99)]
        ops += [["retime", "a", 5], ["retime", "b", 1], ["snapshot"], ["touch", "c", capacity // 2], ["snapshot"]]
        cases.append(_case(f"{N_('score probes')} #{i + 1}", N_("score probes"), {"capacity": capacity, "ops": ops}))
    for i in range(6):
        cases.append({"name": f"{N_('crafted heap')} #{i + 1}", "family": N_("crafted heap records and ties"),
                      "phases": [_edge_phase(rng)]})
    for i in range(4):
        cases.append({"name": f"{N_('precision')} #{i + 1}", "family": N_("precision"),
                      "phases": [_precision_phase(rng)]})
    return cases
