"""One TODO's verdict: the reference's expected observations, and the points a learner's earn.

The grader (grade.py) runs each submission's TODO code in a sandbox and gets back its
observations of every hidden case (cases.py) as JSON. Here, in the grader's process, that data
is checked (`validate`: only documented keys and types, learner text bounded), compared case by
case with the reference's (compare.py), and turned into points (`judge`).

Each TODO is worth `POINTS`, shared equally by the case families; within a family, by the share
of its cases passed. The sum is rounded down to a whole point (`family_points`), so full marks
need every case. For the snapshot TODO a case whose rows come out in the right order, with the
right bytes and hits, but whose priorities are formatted wrongly (not rounded, rounded to other
places) earns `ORDER_CREDIT` of a case: a formatting slip costs less than a wrong order. See
docs/grading.md.
"""
from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Dict, List, Optional

import kvsched_lab
from kvsched_lab.grading.kernel import observe
from kvsched_lab.grading.kernel.audit import MAX_REVIEW_NOTES
from kvsched_lab.grading.judging.box_texts import how_it_ended, import_note, load_problem, why_stopped
from kvsched_lab.grading.judging.cases import hidden_cases
from kvsched_lab.grading.judging.compare import errors_in, first_mismatch
from kvsched_lab.grading.judging.stubs import known_stubs
from kvsched_lab.grading.learner.writers import HEAD_CAP, bounded, fenced, inline
from kvsched_lab.i18n.messages import Deferred as _  # feedback lines: rendered in --lang's language when written
from kvsched_lab.i18n.messages import Joined, N_
from kvsched_lab.sim.scheduler import TODO_METHODS

POINTS = 20  # per TODO; five TODOs make 100
ORDER_CREDIT = Fraction(3, 4)  # of a snapshot case whose order is right and only its priorities' format is not
REPO = Path(kvsched_lab.__file__).resolve().parent.parent


# A TODO's grade status (compared by programs, written to grades.csv as is).
STATUSES = (N_("passed"), N_("failed"), N_("not attempted"), N_("error"), N_("timed out"))


@dataclass
class TodoGrade:
    status: str  # one of STATUSES; grades.csv keeps it in English, the feedback shows it translated
    points: int = 0
    passed: int = 0
    total: int = 0
    origin: str = ""
    lines: List[str] = field(default_factory=list)  # feedback (`Deferred`: English until rendered in --lang)
    failing: List[str] = field(default_factory=list)  # the case families not fully passed (the class report)


@dataclass
class Reference:
    """What every submission in a batch is compared with; computed once, in this process."""

    cases: list
    expected: Dict[str, list]  # TODO -> per case, the observations of the reference's method among the fakes
    graded: Dict[str, List[int]]  # TODO -> the cases that tell its answer from its stand-in
    stubs: dict

    @classmethod
    def build(cls) -> "Reference":
        from solutions import KVCacheSchedulerSim

        cases = hidden_cases()
        # a JSON round trip, so expected and observed data have exactly the same types
        stand_ins = json.loads(json.dumps([observe.run_case(observe.FakeScheduler, c, catch=False) for c in cases]))
        expected, graded = {}, {}
        for name, method in TODO_METHODS.items():
            cls_ = observe.graded_class(method, inspect.getattr_static(KVCacheSchedulerSim, method))
            expected[name] = json.loads(json.dumps([observe.run_case(cls_, c, catch=False) for c in cases]))
            # A case where the stand-in shows the same as the reference (e.g. no eviction, for the stale
            # TODO) cannot tell an answer from doing nothing: it does not count for that TODO.
            graded[name] = [i for i, c in enumerate(cases)
                            if first_mismatch(c, stand_ins[i], expected[name][i], name == "score") is not None]
        return cls(cases, expected, graded, known_stubs(REPO / "notebooks"))


def family_points(counts: Dict[str, List[int]]) -> int:
    """`POINTS` shared equally by the families, each by its share of cases passed; rounded down.

    `counts`: family -> [cases passed, cases].
    """
    share = sum((Fraction(p, n) for p, n in counts.values()), Fraction(0)) / len(counts)
    return int(POINTS * share)  # exact arithmetic: int() of a non-negative Fraction rounds down


def families(cases: list, ok: List[Any]) -> Dict[str, List[Any]]:
    """Family -> [cases passed, cases], in case order; a case's credit may be a fraction (`ORDER_CREDIT`)."""
    counts: Dict[str, List[int]] = {}
    for case, good in zip(cases, ok):
        c = counts.setdefault(case["family"], [0, 0])
        c[0] += good
        c[1] += 1
    return counts


def validate(raw: Optional[str], n: int, todo: str = "") -> Optional[dict]:
    """A TODO's observations file from the sandbox as checked data, or None when it is not usable.

    Only the documented keys and types are kept, strings bounded; observations stay as data for
    compare.py, which never trusts them as a verdict. ``"by_harness"`` says whether the file has
    what the harness always writes for `todo` (code that rewrote it through the kernel often lacks it).
    """
    try:
        data = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError):  # garbled, or nested past what json can read back
        return None
    if not isinstance(data, dict) or not isinstance(data.get("cases", {}), dict):
        return None
    out: Dict[str, Any] = {"cases": {}}
    for key, rec in data.get("cases", {}).items():
        if isinstance(key, str) and key.isdigit() and int(key) < n and isinstance(rec, dict):
            clean: Dict[str, Any] = {}
            if isinstance(rec.get("obs"), list):
                clean["obs"] = rec["obs"]
            elif rec.get("timeout") is True:
                clean["timeout"] = True
            elif isinstance(rec.get("died"), str):
                clean["died"] = bounded(rec["died"])
            elif isinstance(rec.get("big"), int):
                clean["big"] = rec["big"]
            else:
                continue
            out["cases"][key] = clean
    for key in ("load", "note", "stopped"):
        if isinstance(data.get(key), str):
            out[key] = bounded(data[key])
    if data.get("stub") is True:
        out["stub"] = True
    out["out"] = data["out"] if isinstance(data.get("out"), int) and data["out"] >= 0 else 0
    out["head"] = data["head"][:HEAD_CAP] if isinstance(data.get("head"), str) else ""
    review = data.get("review") if isinstance(data.get("review"), list) else []
    out["review"] = [bounded(r, 200) for r in review[: MAX_REVIEW_NOTES] if isinstance(r, str)]
    out["by_harness"] = data.get("todo") == todo and isinstance(data.get("elapsed"), (int, float))
    return out


def _order_credit(todo: str, case: dict, got: Any, want: list) -> Fraction:
    """`ORDER_CREDIT` for a snapshot case that differs from the reference only in its priorities' values."""
    if todo != "snapshot":
        return Fraction(0)
    try:
        return ORDER_CREDIT if first_mismatch(case, got, want, order_only=True) is None else Fraction(0)
    except Exception:  # observations of an unexpected shape earn nothing
        return Fraction(0)


def judge(todo: str, result: Optional[dict], ref: Reference, reveal: bool = False) -> TodoGrade:
    """The verdict on one TODO from its validated observations (None: the cell never finished).

    `reveal`: the first difference shows the reference's value too (``--reveal-expected``)."""
    picked = ref.graded[todo]
    cases = [ref.cases[i] for i in picked]
    n = len(cases)
    if result is None:
        return TodoGrade("error", total=n, lines=[_("The grading cell for this TODO did not finish.")])
    if result.get("load"):
        return TodoGrade("error", total=n, lines=[_("Your code could not be loaded: {why}", why=load_problem(result["load"]))])
    if result.get("stub"):
        return TodoGrade("not attempted", total=n, lines=[_("The method is the skeleton's unchanged stub.")])
    every = observe.observed(result, len(ref.cases))
    records = [every[i] for i in picked]
    ok, observations, problems = [], [], {"timeout": 0, "died": 0, "big": 0, "not run": 0}
    first = None
    died_how = ""
    for case, rec, want in zip(cases, records, [ref.expected[todo][i] for i in picked]):
        if rec is None or "obs" not in rec:
            kind = "not run" if rec is None else next(k for k in ("timeout", "died", "big") if k in rec)
            problems[kind] += 1
            died_how = died_how or (rec or {}).get("died", "")
            ok.append(False)
            observations.append(None)
            continue
        observations.append(rec["obs"])
        try:
            miss = first_mismatch(case, rec["obs"], want, score_todo=(todo == "score"))
        except Exception:  # observations of an unexpected shape: a mismatch, whatever they hold
            miss = None if rec["obs"] == want else first_mismatch(case, [], want)
        ok.append(1 if miss is None else _order_credit(todo, case, rec["obs"], want))
        first = first or miss
    passed = sum(1 for credit in ok if credit == 1)
    errors = [bounded(e) for e in errors_in([o for o in observations if o is not None])]
    failing = n - passed
    by_family = families(cases, [credit == 1 for credit in ok])  # what the feedback shows: whole cases
    g = TodoGrade("failed", points=family_points(families(cases, ok)), passed=passed, total=n,
                  failing=[f for f, (p, m) in by_family.items() if p < m])
    ordered_only = sum(1 for credit in ok if 0 < credit < 1)
    if errors and len(errors) == failing and all(e.startswith("NotImplementedError") for e in errors) and not passed:
        return TodoGrade("not attempted", total=n, lines=[_("Every case raised {error}", error=inline(errors[0]))])
    if problems["timeout"]:
        g.status = "timed out"
    elif passed == n:
        g.status = "passed"
    elif not passed and (len(errors) == failing or problems["died"] + len(errors) == failing):
        g.status = "error"
    if passed == n:
        g.lines.append(_("All {n} hidden cases passed.", n=n))
    else:
        failed = [f for f, (p, m) in by_family.items() if p < m]
        g.lines.append(_("Passed {passed} of {n} hidden cases. By family: {families}.", passed=passed, n=n,
                         families=Joined(_("{family} {passed}/{total}", family=_(fam), passed=p, total=m)
                                         for fam, (p, m) in by_family.items())))
        g.lines.append(_("Failing: {families}.", families=Joined(_(fam) for fam in failed)))
    if ordered_only:
        g.lines.append(_("{count} case(s) listed the rows in the right order with other priority values (rounding?): "
                         "partial credit.", count=ordered_only))
    if problems["timeout"]:
        g.lines.append(_("{count} case(s) ran out of time (an infinite loop, or far too slow).",
                         count=problems["timeout"]))
    if problems["died"]:
        g.lines.append(_("{count} case(s) ended the grading process: {how}.", count=problems["died"], how=how_it_ended(died_how)))
    if problems["big"]:
        g.lines.append(_("{count} case(s) produced far too much data to compare.", count=problems["big"]))
    if problems["not run"]:
        g.lines.append(_("{count} case(s) were not run ({why}).", count=problems["not run"],
                         why=why_stopped(result["stopped"]) if "stopped" in result else _("the cell stopped")))
    if errors:
        g.lines.append(_("{count} case(s) raised an exception; the first: {error}", count=len(errors),
                         error=inline(errors[0])))
    if first is not None:
        first.reveal = reveal
        g.lines.append(_("First difference from the reference:\n\n{difference}", difference=fenced(first.text())))
    if result.get("note"):
        g.lines.append(_("Note: {note}.", note=import_note(result["note"])))
    if result.get("out"):
        g.lines.append(_("Your code printed {count} characters while graded (output is discarded); it began:\n\n{head}",
                         count=result["out"], head=fenced(result.get("head", "")[:300])))
    return g
