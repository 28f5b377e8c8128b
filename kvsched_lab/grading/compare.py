"""Compare a learner's observations with the reference's, in the grader process.

Floats compare with a relative tolerance (1e-9), so a score written with the terms in another
order still passes. A snapshot's priorities are rounded to 4 places by the snapshot itself; when
the score TODO is graded they may differ by one unit in the last place, which is allowed too.
A mismatch is described by what the learner's code showed against what the reference showed,
at the first operation where they part; the hidden cases' code itself is never shown.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, List, Optional

from kvsched_lab.grading.observe import Case

REL_TOL = 1e-9
SNAPSHOT_TOL = 1.0001e-4  # one unit of round(priority, 4), for the score TODO only


@dataclass
class Mismatch:
    """Where a case first went differently, in words a learner can act on."""

    case: str
    where: str  # e.g. "phase 2, operation 9 of 27: touch('w8', 12)"
    what: str  # e.g. "log events"
    observed: str
    expected: str

    def text(self) -> str:
        return (f"case '{self.case}', {self.where}\n"
                f"  {self.what}: observed {self.observed}\n"
                f"  {' ' * len(self.what)}  expected {self.expected}")


def same(a: Any, b: Any, tol: float = 0.0) -> bool:
    """Equal `plain` data; floats within REL_TOL (or the absolute `tol` when given)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=max(tol, 1e-12))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, tol) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _without_priority(rows: Any) -> Any:
    """Snapshot rows without their priority: what is left is the order (and each row's bytes, hits)."""
    if isinstance(rows, list) and all(isinstance(r, list) and len(r) == 4 for r in rows):
        return [[r[0], r[1], r[3]] for r in rows]
    return rows


def _same_snapshot(a: Any, b: Any, score_todo: bool, order_only: bool = False) -> bool:
    if order_only:
        return same(_without_priority(a), _without_priority(b))
    if not (score_todo and isinstance(a, list) and isinstance(b, list) and len(a) == len(b)):
        return same(a, b)
    # rows are (prefix, bytes, round(priority, 4), hits): only the priority gets the wider tolerance
    for x, y in zip(a, b):
        if not (isinstance(x, list) and isinstance(y, list) and len(x) == len(y) == 4):
            return same(a, b)
        if not (same(x[:2], y[:2]) and same(x[3], y[3]) and same(x[2], y[2], SNAPSHOT_TOL)):
            return False
    return True


def _show(x: Any, limit: int = 240) -> str:
    text = repr(x)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_op(op: list) -> str:
    kind = op[0]
    if kind == "touch":
        return f"touch({op[1]!r}, {op[2]})"
    if kind == "evict":
        return f"_evict_until_fit({op[1]})"
    if kind == "snapshot":
        return "snapshot()"
    if kind == "score":
        return f"_score(hits={op[1]}, size={op[2]}, last_used=time-{op[3]})"
    if kind == "stale":
        return f"a stale heap record pushed for {op[1]!r} (priority {op[2]:+g}, last_used {op[3]:+d} from its entry's)"
    if kind == "orphan":
        return f"a heap record pushed for {op[1]!r}, which is not cached"
    if kind == "unqueue":
        return f"the live heap record of {op[1]!r} removed"
    if kind == "retime":
        return f"{op[1]!r}'s last_used set to time-{op[2]}, then _refresh_queue({op[1]!r})"
    return repr(op)


_STEP_PARTS = {"touch": ("log events", "current_bytes"), "evict": ("log events", "current_bytes"),
               "snapshot": ("snapshot",), "score": ("score",)}


def _step_diff(got: list, want: list, score_todo: bool, order_only: bool = False) -> Optional[tuple]:
    """(what, observed, expected) for the first differing part of one step's result, or None."""
    if isinstance(got, list) and len(got) == 2 and got[0] == "error":
        return "result", f"raised {got[1]}", _show(want[1:] if len(want) > 2 else want[1])
    if not isinstance(got, list) or not got or got[0] != want[0]:
        return "result", _show(got), _show(want)
    for i, part in enumerate(_STEP_PARTS.get(want[0], ("result",)), start=1):
        g, w = got[i] if i < len(got) else None, want[i] if i < len(want) else None
        ok = _same_snapshot(g, w, score_todo, order_only) if want[0] == "snapshot" else same(g, w)
        if not ok:
            return part, _show(g), _show(w)
    return None


def _final_diff(got: Any, want: dict) -> Optional[tuple]:
    if not isinstance(got, dict) or "error" in got:
        return "final state", _show(got.get("error") if isinstance(got, dict) else got), "a readable state"
    for key, what in (("log", "log"), ("current_bytes", "current_bytes"), ("entries", "entries"),
                      ("queue", "heap records (sorted)"), ("heap", "queue is a valid heap"), ("time", "time")):
        g, w = got.get(key), want[key]
        if same(g, w):
            continue
        if isinstance(g, list) and isinstance(w, list):
            for i in range(max(len(g), len(w))):
                gi = g[i] if i < len(g) else "<none>"
                wi = w[i] if i < len(w) else "<none>"
                if not same(gi, wi):
                    field = "[prefix, priority, last_used, hits, bytes, entry.prefix]" if key == "entries" else ""
                    return f"{what} item {i} {field}".rstrip(), _show(gi), _show(wi)
        return what, _show(g), _show(w)
    return None


def first_mismatch(case: Case, got: Any, want: list, score_todo: bool = False,
                   order_only: bool = False) -> Optional[Mismatch]:
    """None when `got` (the learner's observations of `case`) matches `want` (the reference's).

    `order_only`: snapshots compare without their priorities (the snapshot TODO's partial credit
    for rows in the right order whose priority is formatted wrongly, see verdict.py)."""
    if not isinstance(got, list) or len(got) != len(want):
        return Mismatch(case["name"], "the whole case", "observations", _show(got), f"{len(want)} phases")
    for p, (phase, g, w) in enumerate(zip(case["phases"], got, want), start=1):
        gsteps, wsteps = g.get("steps", []), w["steps"]
        for k, wstep in enumerate(wsteps):
            gstep = gsteps[k] if k < len(gsteps) else ["missing"]
            diff = _step_diff(gstep, wstep, score_todo, order_only)
            if diff:
                where = (f"phase {p} (capacity {phase['capacity']}), operation {k + 1} of {len(wsteps)}: "
                         f"{describe_op(phase['ops'][k])}")
                return Mismatch(case["name"], where, *diff)
        diff = _final_diff(g.get("final"), w["final"])
        if diff:
            return Mismatch(case["name"], f"phase {p} (capacity {phase['capacity']}), final state", *diff)
    return None


def error_of(got: Any) -> Optional[str]:
    """The exception a case's observations end with, if any."""
    if isinstance(got, list):
        for phase in got:
            steps = phase.get("steps") if isinstance(phase, dict) else None
            if isinstance(steps, list) and steps and isinstance(steps[-1], list) and steps[-1][:1] == ["error"]:
                return steps[-1][1]
    return None


def errors_in(observations: List[Any]) -> List[str]:
    return [e for e in (error_of(o) for o in observations) if e]
