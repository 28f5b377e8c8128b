"""Observing a scheduler on a hidden case: the data both sides of the grading boundary compare.

``run_case(graded_class(method, fn), case)`` puts one method (the reference's in the grader, the
learner's in the sandbox's forked child) among the stand-ins of fakes.py, runs the case's
operations and records what can be observed (`state`, `apply_op`) as plain JSON-able data
(`plain`), ordered the same way on both sides (`order_key`). Nothing here decides a grade.

Standard library and the stand-ins only: this file runs in the grading kernel too.
"""
from __future__ import annotations

import heapq
import json
import math
from typing import Any, Dict, List, Optional

from kvsched_lab.grading.kernel.fakes import FakeScheduler

Case = Dict[str, Any]  # {"name", "family", "phases": [{"capacity": int, "ops": [op, ...]}]}


def graded_class(method: str, fn: Any) -> type:
    """The class one TODO is graded on: `fn` as `method`, the stand-ins of fakes.py around it."""
    return type("KVCacheSchedulerSim", (FakeScheduler,), {method: fn})


def plain(x: Any, depth: int = 0) -> Any:
    """`x` as JSON-able data; anything unexpected becomes ``{"repr": ...}`` so it compares unequal."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, (list, tuple)) and depth < 4:
        return [plain(v, depth + 1) for v in x]
    try:
        text = repr(x)
    except BaseException:  # a learner object whose repr raises still needs a verdict
        text = f"<{type(x).__name__} with a failing repr>"
    return {"repr": text[:200]}


def order_key(x: Any) -> tuple:
    """Total, numeric-aware order on `plain` data, so both sides sort records the same way."""
    if isinstance(x, bool) or not isinstance(x, (int, float, str, list)):
        return (3, json.dumps(x, sort_keys=True, default=repr))
    if isinstance(x, (int, float)):
        return (0, -math.inf) if x != x else (0, x)  # NaN sorts first rather than breaking the sort
    if isinstance(x, str):
        return (1, x)
    return (2, tuple(order_key(v) for v in x))


def _is_heap(queue: List[Any]) -> bool:
    try:
        return all(not (queue[i] < queue[(i - 1) // 2]) for i in range(1, len(queue)))
    except Exception:  # records that cannot be compared are no heap
        return False


def state(sim: Any) -> Dict[str, Any]:
    """Everything observable about `sim`: log, entries, heap records, bytes, clock."""
    entries = [
        [plain(key)] + [plain(getattr(e, f, None)) for f in ("priority", "last_used", "hits", "bytes", "prefix")]
        for key, e in sim.entries.items()
    ]
    queue = [plain(r) for r in sim.queue]
    return {
        "log": plain(list(sim.log)),
        "current_bytes": plain(sim.current_bytes),
        "entries": sorted(entries, key=order_key),
        "queue": sorted(queue, key=order_key),
        "heap": _is_heap(list(sim.queue)),
        "time": plain(sim.time),
    }


def _events(sim: Any, before: int) -> list:
    return plain(list(sim.log)[before:])


def apply_op(sim: Any, op: list) -> list:
    """Run one case operation on `sim`; return what it showed (see `describe_op` in compare.py)."""
    kind = op[0]
    if kind == "touch":
        before = len(sim.log)
        sim.touch(op[1], op[2])
        return ["touch", _events(sim, before), plain(sim.current_bytes)]
    if kind == "evict":
        before = len(sim.log)
        sim._evict_until_fit(op[1])
        return ["evict", _events(sim, before), plain(sim.current_bytes)]
    if kind == "snapshot":
        return ["snapshot", plain(sim.snapshot())]
    if kind == "score":
        _, hits, size, age = op
        return ["score", plain(sim._score(hits, size, sim.time - age))]
    # The remaining operations set up heap states a natural sequence never reaches, to check
    # the stale test itself rather than its common cases.
    if kind == "stale":  # a record for a live entry that differs from its current one
        _, key, d_priority, d_last_used = op
        e = sim.entries.get(key)
        if e is not None:
            heapq.heappush(sim.queue, (e.priority + d_priority, e.last_used + d_last_used, key))
        return ["stale", e is not None]
    if kind == "orphan":  # a record for a key that is not cached
        _, key, priority, last_used = op
        heapq.heappush(sim.queue, (priority, last_used, key))
        return ["orphan"]
    if kind == "unqueue":  # drop the live record of an entry
        e = sim.entries.get(op[1])
        if e is not None:
            live = (e.priority, e.last_used, op[1])
            sim.queue[:] = [r for r in sim.queue if r != live]
            heapq.heapify(sim.queue)
        return ["unqueue", e is not None]
    if kind == "retime":  # an older last_used, then a re-score: recency below 1
        _, key, age = op
        e = sim.entries.get(key)
        if e is not None:
            e.last_used = sim.time - age
            sim._refresh_queue(key)
        return ["retime", e is not None]
    raise ValueError(f"unknown case operation {kind!r}")


def error_text(exc: BaseException) -> str:
    name = type(exc).__name__
    try:
        msg = str(exc)
    except BaseException:
        msg = "<unprintable message>"
    return f"{name}: {msg[:300]}" if msg else name


def run_case(cls: type, case: Case, catch: bool = True) -> List[Dict[str, Any]]:
    """Observations of `case` on a fresh `cls` per phase: each step's result, then the final state.

    With `catch`, an exception ends its phase and is recorded as ``["error", "Type: message"]``
    (learner code); without it, it propagates (the reference must never raise on a hidden case).
    """
    out = []
    for phase in case["phases"]:
        steps: list = []
        try:
            sim = cls(phase["capacity"])
            for op in phase["ops"]:
                steps.append(apply_op(sim, op))
            final: Any = state(sim)
        except BaseException as e:  # noqa: B902 - learner code may raise anything, even SystemExit
            if not catch:
                raise
            steps.append(["error", error_text(e)])
            try:
                final = state(sim)
            except BaseException as e2:
                final = {"error": error_text(e2)}
        out.append({"steps": steps, "final": final})
    return out



def observed(result: Optional[dict], n: int) -> List[Optional[dict]]:
    """Per-case records of a kernel result, in case order (None: not run)."""
    cases = (result or {}).get("cases", {})
    return [cases.get(str(i)) for i in range(n)]
