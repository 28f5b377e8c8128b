"""`kvsched grade`: grade submissions into ``grades.csv`` and one feedback file per submission.

Per submission: parse it (submissions.py), build a grading notebook of grader-owned cells that
carry the learner's TODO code, run it with ``pytest --nbval-lax`` in a fresh kernel (nbrun.py),
and compare the observations the kernel wrote with the reference's, computed here (compare.py).
Each TODO is worth `POINTS`; partial credit is the share of hidden cases passed, rounded down to
a whole point, so full marks need every case. See docs/grading.md.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import secrets
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import kvsched_lab
from kvsched_lab.grading import harness
from kvsched_lab.grading.cases import hidden_cases
from kvsched_lab.grading.compare import errors_in, first_mismatch
from kvsched_lab.grading.nbrun import run_nbval
from kvsched_lab.grading.stubs import known_stubs
from kvsched_lab.grading.submissions import Submission, TodoSource, discover, load
from kvsched_lab.scheduler import TODO_METHODS
from kvsched_lab.todos import reference_sources

POINTS = 20  # per TODO; five TODOs make 100
COLUMNS = ["submission", *TODO_METHODS, "total", "status"]
PACKAGE = Path(kvsched_lab.__file__).resolve().parent
REPO = PACKAGE.parent
NORMAL = ("passed", "failed", "not attempted")


@dataclass
class TodoGrade:
    status: str  # passed | failed | not attempted | error | timed out
    points: int = 0
    passed: int = 0
    total: int = 0
    origin: str = ""
    lines: List[str] = field(default_factory=list)  # feedback


@dataclass
class Grade:
    submission: str
    todos: Dict[str, TodoGrade]
    error: str = ""
    review: List[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(t.points for t in self.todos.values())

    @property
    def status(self) -> str:
        if self.error:
            parts = [f"error: {self.error}"]
        else:
            parts = [f"{name}: {t.status}" for name, t in self.todos.items() if t.status not in NORMAL]
        if self.review:
            parts.append("review: " + ", ".join(self.review))
        return "; ".join(parts) or "ok"


@dataclass
class Reference:
    """What every submission in a batch is compared with; computed once, in this process."""

    cases: list
    expected: list
    sources: Dict[str, str]
    stubs: dict

    @classmethod
    def build(cls) -> "Reference":
        from solutions import KVCacheSchedulerSim

        cases = hidden_cases()
        expected = [harness.run_case(KVCacheSchedulerSim, c, catch=False) for c in cases]
        # a JSON round trip, so expected and observed data have exactly the same types
        return cls(cases, json.loads(json.dumps(expected)), reference_sources(), known_stubs(REPO / "notebooks"))


# --------------------------------------------------------------------------- one TODO's verdict

def _families(ref: Reference, ok: List[bool]) -> str:
    counts: Dict[str, List[int]] = {}
    for case, good in zip(ref.cases, ok):
        c = counts.setdefault(case["family"], [0, 0])
        c[0] += good
        c[1] += 1
    return ", ".join(f"{fam} {p}/{n}" for fam, (p, n) in counts.items())


def judge(todo: str, result: Optional[dict], ref: Reference) -> TodoGrade:
    """The verdict on one TODO from the kernel's result file (None: the cell never finished)."""
    n = len(ref.cases)
    if result is None:
        return TodoGrade("error", total=n, lines=["The grading cell for this TODO did not finish."])
    if result.get("load"):
        return TodoGrade("error", total=n, lines=[f"Your code could not be loaded: {result['load']}"])
    if result.get("stub"):
        return TodoGrade("not attempted", total=n, lines=["The method is the skeleton's unchanged stub."])
    records = harness.observed(result, n)
    ok, observations, problems = [], [], {"timeout": 0, "died": 0, "big": 0, "not run": 0}
    first = None
    died_how = ""
    for case, rec, want in zip(ref.cases, records, ref.expected):
        if rec is None or "obs" not in rec:
            kind = "not run" if rec is None else next(k for k in ("timeout", "died", "big") if k in rec)
            problems[kind] += 1
            died_how = died_how or (rec or {}).get("died", "")
            ok.append(False)
            observations.append(None)
            continue
        observations.append(rec["obs"])
        miss = first_mismatch(case, rec["obs"], want, score_todo=(todo == "score"))
        ok.append(miss is None)
        first = first or miss
    passed = sum(ok)
    errors = errors_in([o for o in observations if o is not None])
    failing = n - passed
    g = TodoGrade("failed", points=POINTS * passed // n, passed=passed, total=n)
    if errors and len(errors) == failing and all(e.startswith("NotImplementedError") for e in errors) and not passed:
        return TodoGrade("not attempted", total=n, lines=[f"Every case raised {errors[0]}"])
    if problems["timeout"]:
        g.status = "timed out"
    elif passed == n:
        g.status = "passed"
    elif not passed and (len(errors) == failing or problems["died"] + len(errors) == failing):
        g.status = "error"
    g.lines.append(f"All {n} hidden cases passed." if passed == n else
                   f"Passed {passed} of {n} hidden cases ({_families(ref, ok)}).")
    if problems["timeout"]:
        g.lines.append(f"{problems['timeout']} case(s) ran out of time (an infinite loop, or far too slow).")
    if problems["died"]:
        g.lines.append(f"{problems['died']} case(s) ended the grading process: {died_how}.")
    if problems["big"]:
        g.lines.append(f"{problems['big']} case(s) produced far too much data to compare.")
    if problems["not run"]:
        g.lines.append(f"{problems['not run']} case(s) were not run ({result.get('stopped', 'the cell stopped')}).")
    if errors:
        g.lines.append(f"{len(errors)} case(s) raised an exception; the first: {errors[0]}")
    if first is not None:
        g.lines.append("First difference from the reference:\n\n```\n" + first.text() + "\n```")
    if result.get("note"):
        g.lines.append(f"Note: {result['note']}.")
    if result.get("out"):
        head = result.get("head", "")[:300]
        g.lines.append(f"Your code printed {result['out']} characters while graded (output is discarded); "
                       f"it began:\n\n```\n{head}\n```")
    return g


# --------------------------------------------------------------------------- one submission

def _grading_notebook(todos: Dict[str, TodoSource], config_name: str) -> dict:
    """Grader-owned cells only: the learner's TODO code travels inside them as data."""
    cells = [("# Grader cell: load the hidden cases; learner code never runs at this level.\n"
              f"import _kvsched_harness as _kvh\n_kvh.setup({config_name!r})")]
    for name, t in todos.items():
        cells.append(f"# Grader cell for TODO {name}: {t.origin}\n"
                     f"_kvh.grade_todo({name!r}, {t.kind!r}, {t.source!r})")
    return {"nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [],
                       "source": src} for i, src in enumerate(cells)]}


def _copy_lib(lib: Path) -> None:
    """The kernel's own kvsched_lab: no grading package, no `solutions` next to it."""
    shutil.copytree(PACKAGE, lib / "kvsched_lab", ignore=shutil.ignore_patterns("grading", "__pycache__"))
    shutil.copyfile(Path(harness.__file__), lib / "_kvsched_harness.py")


def _why_unfinished(outcome: Optional[tuple], no_report: bool, tail: str) -> str:
    """Why a grading cell wrote no result, from nbval's report on it."""
    if no_report:
        return f"The grading run itself failed; pytest's output ended with:\n\n```\n{tail[-1500:]}\n```"
    message = outcome[1] if outcome else ""
    if "Kernel dead" in message or "Timeout" in message or not outcome:
        return ("The grading kernel died or stopped responding: code under test killed it, or it ran out of "
                "memory. TODOs graded after this one could not be graded either.")
    return f"The grading cell failed: {message}"


def grade_one(sub: Submission, ref: Reference, workdir: Path, timeout: float, memory_mb: int) -> Grade:
    if sub.error:
        return Grade(sub.name, {name: TodoGrade("error") for name in TODO_METHODS}, error=sub.error)
    grades: Dict[str, TodoGrade] = {}
    for name, t in sub.todos.items():
        if t.status != "run":
            grades[name] = TodoGrade(t.status, total=len(ref.cases), origin=t.origin, lines=[t.detail])
    to_run = {name: t for name, t in sub.todos.items() if t.status == "run"}
    if to_run:
        workdir.mkdir(parents=True)
        _copy_lib(workdir / "lib")
        nonce = secrets.token_hex(8)
        config = f"grading-{nonce}.json"
        (workdir / config).write_text(json.dumps({
            "nonce": nonce, "refs": ref.sources, "cases": ref.cases,
            "budget": timeout, "case_limit": max(0.5, timeout / 5)}), encoding="utf-8")
        (workdir / "grading.ipynb").write_text(json.dumps(_grading_notebook(to_run, config)), encoding="utf-8")
        # The cells keep their own time; nbval's timeout only matters when a kernel dies mid-cell.
        outcomes, tail = run_nbval([workdir / "grading.ipynb"], workdir, workdir / "lib", cell_timeout=timeout + 5,
                                   wall_timeout=90 + len(to_run) * (timeout + 15), memory_mb=memory_mb)
        for k, (name, t) in enumerate(to_run.items(), start=1):
            path = workdir / f"{nonce}.{name}.json"
            try:
                result = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
            except (OSError, ValueError):
                result = None
            g = judge(name, result, ref)
            if result is None:
                g.lines.append(_why_unfinished((outcomes or {}).get(f"grading.ipynb::Cell {k}"), outcomes is None,
                                               tail))
            g.origin = t.origin
            grades[name] = g
    return Grade(sub.name, {name: grades[name] for name in TODO_METHODS}, review=sub.review)


# --------------------------------------------------------------------------- reports

def feedback_text(g: Grade) -> str:
    out = [f"# Feedback: {g.submission}", "", f"Total: {g.total} / {POINTS * len(TODO_METHODS)}", ""]
    if g.error:
        out += [f"This submission could not be graded: {g.error}.", ""]
    else:
        out += ["Each TODO is graded alone: only your method is put into the reference scheduler, so a mistake",
                "in one TODO costs no points in another. Every hidden case has three phases, each on a fresh",
                "scheduler: a sequence of its family, an edge-case probe (crafted stale heap records, ties), and",
                "a precision probe (priorities equal to four decimals, last_used ahead of the clock).", ""]
    for name, t in g.todos.items():
        out.append(f"## {name} ({TODO_METHODS[name]}): {t.status}, {t.points}/{POINTS}")
        out.append("")
        if t.origin:
            out += [f"Graded: {t.origin}", ""]
        out += [line for text in t.lines if text for line in (text, "")]
    if g.review:
        out += ["## For the instructor", "", "Flagged for review (does not change the grade): "
                + ", ".join(g.review) + ".", ""]
    return "\n".join(out)


def _feedback_name(name: str, used: set) -> str:
    base = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name.strip("./")) or "submission"
    stem, k = base, 1
    while stem in used:
        k += 1
        stem = f"{base}-{k}"
    used.add(stem)
    return stem + ".md"


def write_reports(grades: List[Grade], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "feedback").mkdir(exist_ok=True)
    csv_path = out / "grades.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for g in grades:
            w.writerow([g.submission, *(g.todos[n].points for n in TODO_METHODS), g.total, g.status])
    used: set = set()
    for g in grades:
        (out / "feedback" / _feedback_name(g.submission, used)).write_text(feedback_text(g), encoding="utf-8")
    return csv_path


def _fingerprint_grader() -> str:
    """Hash of the reference and the grader's code, to notice a submission that rewrote them."""
    h = hashlib.sha256()
    for path in sorted((REPO / "solutions").glob("*.py")) + sorted((PACKAGE / "grading").glob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()


def grade_submissions(paths: Sequence[str], out: Optional[Path] = None, timeout: float = 10.0, jobs: int = 1,
                      memory_mb: int = 2048, keep_work: bool = False,
                      ref: Optional[Reference] = None) -> List[Grade]:
    """Grade every submission in `paths`; write reports to `out` when given. Never raises for a bad submission."""
    ref = ref or Reference.build()
    specs = discover(list(paths))
    base = Path(tempfile.mkdtemp(prefix="kvsched-grade-"))

    def one(k: int) -> Grade:
        name, path = specs[k]
        try:
            return grade_one(load(name, path, ref.stubs), ref, base / f"{k:05d}", timeout, memory_mb)
        except Exception as e:  # a grader bug on one submission must not sink the batch
            return Grade(name, {n: TodoGrade("error") for n in TODO_METHODS}, error=f"grader failure: {e!r}")

    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            grades = list(pool.map(one, range(len(specs))))
    finally:
        if keep_work and out is not None:
            shutil.copytree(base, out / "work", dirs_exist_ok=True)
        shutil.rmtree(base, ignore_errors=True)
    if out is not None:
        write_reports(grades, out)
    return grades


def grade_main(argv: Optional[List[str]] = None) -> int:
    """``kvsched grade SUBMISSION... [--out DIR] [--timeout S] [--jobs N]``; 0 when the batch was graded."""
    p = argparse.ArgumentParser(prog="kvsched grade", description=(
        "Grade learner submissions against the hidden reference (instructors only). A SUBMISSION is a "
        "folder of one learner's notebooks, one notebook, one .py defining KVCacheSchedulerSim, or a "
        "class folder holding such entries. See docs/grading.md."))
    p.add_argument("submissions", nargs="+", metavar="SUBMISSION")
    p.add_argument("--out", default="grades", help="where grades.csv and feedback/ go (default: ./grades)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds each TODO may run in all (default 10)")
    p.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel (default 1)")
    p.add_argument("--memory-mb", type=int, default=2048, help="address-space limit per process (default 2048)")
    p.add_argument("--keep-work", action="store_true", help="keep grading notebooks and logs in OUT/work")
    args = p.parse_args(argv)
    try:
        import solutions  # noqa: F401
    except ImportError:
        print("kvsched grade: the reference (solutions/) is not here; grading needs the instructor's copy",
              file=sys.stderr)
        return 2
    before = _fingerprint_grader()
    started = time.monotonic()
    grades = grade_submissions(args.submissions, Path(args.out), args.timeout, args.jobs, args.memory_mb,
                               args.keep_work)
    width = max([len(g.submission) for g in grades] + [10])
    for g in grades:
        print(f"{g.submission:<{width}}  {g.total:>3}  " + " ".join(f"{g.todos[n].points:>2}" for n in TODO_METHODS)
              + f"  {g.status}")
    print(f"graded {len(grades)} submission(s) in {time.monotonic() - started:.1f} s -> {Path(args.out) / 'grades.csv'}")
    if _fingerprint_grader() != before:
        print("kvsched grade: solutions/ or the grader changed during grading; a submission may have tampered "
              "with them. Restore them and regrade in a container.", file=sys.stderr)
        return 3
    return 0
