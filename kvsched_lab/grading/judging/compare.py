"""Compare a learner's observations with the reference's, in the grader process.

Floats compare with a relative tolerance (1e-9), so a score written with the terms in another
order still passes. A snapshot's priorities are rounded to 4 places by the snapshot itself; when
the score TODO is graded they may differ by one unit in the last place, which is allowed too.
A mismatch is described by the case, the operation where the learner's code first parts from the
reference, what differs there (the log events, the snapshot, the final heap...) and what the
learner's code showed. What the reference showed is kept back unless the instructor asks for it
(``--reveal-expected``): otherwise a learner resubmitting could read the hidden expectations one
case at a time. The hidden cases' code itself is never shown.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, List, Optional

from kvsched_lab.grading.kernel.observe import Case
from kvsched_lab.i18n.messages import Deferred
from kvsched_lab.i18n.messages import Deferred as _  # feedback words: rendered in --lang's language when written
from kvsched_lab.i18n.messages import N_, translate
from kvsched_lab.i18n.width import display_width

REL_TOL = 1e-9
SNAPSHOT_TOL = 1.0001e-4  # one unit of round(priority, 4), for the score TODO only


@dataclass
class Mismatch:
    """Where a case first went differently, in words a learner can act on."""

    case: str  # the case's name, e.g. "ties #1"
    where: str  # e.g. "phase 2, operation 9 of 27: touch('w8', 12)" (a `Deferred` when built here)
    what: str  # e.g. "log events"
    observed: str
    expected: str
    reveal: bool = False  # show `expected` (the instructor's --reveal-expected); else only that it differs

    def text(self) -> "MismatchText":
        """Three lines: the case and where, then the observed value over the expected one (or, by
        default, over a line saying what differs from the reference, its value not shown)."""
        return MismatchText(self)


def _in(lang: str, text: str) -> str:
    return text.render(lang) if isinstance(text, Deferred) else text


def case_label(name: str, lang: str) -> str:
    """A case's name in `lang`: its kind translated (``N_`` in cases.py), its number kept."""
    kind, sep, number = name.rpartition(" #")
    return translate(lang, kind) + sep + number if sep else translate(lang, name)


class MismatchText(Deferred):
    """A `Mismatch` as text in the language it is rendered in; "expected" stays under "observed"."""

    def __new__(cls, m: Mismatch) -> "MismatchText":
        self = str.__new__(cls, cls.lines(m, "en"))
        self.template, self.fields, self.mismatch = str(self), {}, m
        return self

    def render(self, lang: str) -> str:
        return self.lines(self.mismatch, lang)

    @staticmethod
    def lines(m: Mismatch, lang: str) -> str:
        what = _in(lang, m.what)
        observed = translate(lang, N_("{what}: observed"), what=what)
        head = translate(lang, N_("case '{case}', {where}"), case=case_label(m.case, lang), where=_in(lang, m.where))
        if not m.reveal:
            return (head + f"\n  {observed} {_in(lang, m.observed)}\n  "
                    + translate(lang, N_("this differs from what the reference shows there (its value is not shown)")))
        expected = translate(lang, N_("expected"))
        pad = " " * max(0, display_width(observed) - display_width(expected))
        return head + f"\n  {observed} {_in(lang, m.observed)}\n  {pad}{expected} {_in(lang, m.expected)}"


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


def _identical(a: Any, b: Any) -> bool:
    """The same data, types included (``true`` is not ``1``): then every `same` below holds, so a
    matching case (most of them) is decided by one C-speed comparison instead of a walk in Python."""
    try:
        return json.dumps(a, allow_nan=False) == json.dumps(b, allow_nan=False)
    except (TypeError, ValueError):  # not JSON data, or NaN (never `same` as itself): walk it
        return False


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
        return _("a stale heap record pushed for {prefix} (priority {priority}, last_used {last_used} from its entry's)",
                 prefix=repr(op[1]), priority=f"{op[2]:+g}", last_used=f"{op[3]:+d}")
    if kind == "orphan":
        return _("a heap record pushed for {prefix}, which is not cached", prefix=repr(op[1]))
    if kind == "unqueue":
        return _("the live heap record of {prefix} removed", prefix=repr(op[1]))
    if kind == "retime":
        return _("{prefix}'s last_used set to time-{age}, then _refresh_queue({prefix})", prefix=repr(op[1]), age=op[2])
    return repr(op)


_STEP_PARTS = {"touch": (_("log events"), "current_bytes"), "evict": (_("log events"), "current_bytes"),
               "snapshot": ("snapshot",), "score": ("score",)}
_RESULT = (_("result"),)  # any other step's one part


def _step_diff(got: list, want: list, score_todo: bool, order_only: bool = False) -> Optional[tuple]:
    """(what, observed, expected) for the first differing part of one step's result, or None."""
    if isinstance(got, list) and len(got) == 2 and got[0] == "error":
        return _("result"), _("raised {error}", error=got[1]), _show(want[1:] if len(want) > 2 else want[1])
    if not isinstance(got, list) or not got or got[0] != want[0]:
        return _("result"), _show(got), _show(want)
    for i, part in enumerate(_STEP_PARTS.get(want[0], _RESULT), start=1):
        g, w = got[i] if i < len(got) else None, want[i] if i < len(want) else None
        ok = _same_snapshot(g, w, score_todo, order_only) if want[0] == "snapshot" else same(g, w)
        if not ok:
            return part, _show(g), _show(w)
    return None


def _final_diff(got: Any, want: dict) -> Optional[tuple]:
    if not isinstance(got, dict) or "error" in got:
        return _("final state"), _show(got.get("error") if isinstance(got, dict) else got), _("a readable state")
    for key, what in (("log", "log"), ("current_bytes", "current_bytes"), ("entries", "entries"),
                      ("queue", _("heap records (sorted)")), ("heap", _("queue is a valid heap")), ("time", "time")):
        g, w = got.get(key), want[key]
        if same(g, w):
            continue
        if isinstance(g, list) and isinstance(w, list):
            for i in range(max(len(g), len(w))):
                gi = g[i] if i < len(g) else "<none>"
                wi = w[i] if i < len(w) else "<none>"
                if not same(gi, wi):
                    if key == "entries":
                        item = _("{what} item {index} [prefix, priority, last_used, hits, bytes, entry.prefix]",
                                 what=what, index=i)
                    else:
                        item = _("{what} item {index}", what=what, index=i)
                    return item, _show(gi), _show(wi)
        return what, _show(g), _show(w)
    return None


def first_mismatch(case: Case, got: Any, want: list, score_todo: bool = False,
                   order_only: bool = False) -> Optional[Mismatch]:
    """None when `got` (the learner's observations of `case`) matches `want` (the reference's).

    `order_only`: snapshots compare without their priorities (the snapshot TODO's partial credit
    for rows in the right order whose priority is formatted wrongly, see verdict.py)."""
    if not isinstance(got, list) or len(got) != len(want):
        return Mismatch(case["name"], _("the whole case"), _("observations"), _show(got),
                        _("{count} phases", count=len(want)))
    if _identical(got, want):
        return None
    for p, (phase, g, w) in enumerate(zip(case["phases"], got, want), start=1):
        gsteps, wsteps = g.get("steps", []), w["steps"]
        for k, wstep in enumerate(wsteps):
            gstep = gsteps[k] if k < len(gsteps) else ["missing"]
            diff = _step_diff(gstep, wstep, score_todo, order_only)
            if diff:
                where = _("phase {phase} (capacity {capacity}), operation {index} of {count}: {op}", phase=p,
                          capacity=phase["capacity"], index=k + 1, count=len(wsteps), op=describe_op(phase["ops"][k]))
                return Mismatch(case["name"], where, *diff)
        diff = _final_diff(g.get("final"), w["final"])
        if diff:
            return Mismatch(case["name"], _("phase {phase} (capacity {capacity}), final state", phase=p,
                                            capacity=phase["capacity"]), *diff)
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
