"""`kvsched grade`: grade submissions into ``grades.csv`` and one feedback file per submission.

A batch: find the learners (intake.py) and copy each one's regular files into a private folder;
parse each copy (submissions.py); build, once, the sandbox's library (``kvsched_lab`` without the
withheld files, with only the kernel side of this package) and the expected observations (the
reference's method for each TODO among the stand-ins of fakes.py, on every hidden case, here in
the grader's process). Per submission: a grading notebook of grader-owned cells that carry the
learner's TODO code as data, and the cases' inputs, go into a bubblewrap sandbox (sandbox.py)
where nbval runs them in a fresh kernel (nbrun.py, harness.py); the observations come back as
one line of JSON, are validated here and compared with the expected ones (compare.py). After
every sandbox has ended, ``grades.csv`` is written once, atomically, and its SHA-256 printed.

Each TODO is worth `POINTS`, shared equally by the case families (cases.py); within a family,
by the share of its cases passed. The sum is rounded down to a whole point, so full marks need
every case. See docs/grading.md.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import inspect
import io
import json
import os
import queue
import re
import secrets
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import kvsched_lab
from kvsched_lab.grading import harness, sandbox
from kvsched_lab.grading.cases import hidden_cases
from kvsched_lab.grading.compare import errors_in, first_mismatch
from kvsched_lab.grading.intake import Learner, copy_in, discover
from kvsched_lab.grading.nbrun import RESULT_MARK
from kvsched_lab.grading.release import WITHHELD_FILES
from kvsched_lab.grading.stubs import known_stubs
from kvsched_lab.grading.submissions import Submission, TodoSource, load
from kvsched_lab.i18n.language import LANGUAGES, normalize
from kvsched_lab.i18n.messages import Deferred
from kvsched_lab.i18n.messages import Deferred as _  # feedback lines: rendered in --lang's language when written
from kvsched_lab.scheduler import TODO_METHODS

POINTS = 20  # per TODO; five TODOs make 100
COLUMNS = ["submission", *TODO_METHODS, "total", "status"]
PACKAGE = Path(kvsched_lab.__file__).resolve().parent
REPO = PACKAGE.parent
NORMAL = ("passed", "failed", "not attempted")
# The kernel side of this package: all the sandbox gets of it (no cases, no reference, no grader).
SANDBOX_SIDE = ("__init__.py", "fakes.py", "harness.py", "kernel_launcher.py", "nbrun.py")
TEXT_CAP = 300  # characters of one learner-controlled message shown in feedback
HEAD_CAP = 2000  # characters of a learner's printed output shown in feedback


@dataclass
class TodoGrade:
    status: str  # passed | failed | not attempted | error | timed out
    points: int = 0
    passed: int = 0
    total: int = 0
    origin: str = ""
    lines: List[str] = field(default_factory=list)  # feedback (`Deferred`: English until rendered in --lang)


@dataclass
class Grade:
    submission: str
    todos: Dict[str, TodoGrade]
    error: str = ""
    review: List[str] = field(default_factory=list)
    sandboxed: bool = True

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
        if not self.sandboxed:
            parts.append("unsandboxed")
        return "; ".join(parts) or "ok"


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
        stand_ins = json.loads(json.dumps([harness.run_case(harness.FakeScheduler, c, catch=False) for c in cases]))
        expected, graded = {}, {}
        for name, method in TODO_METHODS.items():
            cls_ = harness.graded_class(method, inspect.getattr_static(KVCacheSchedulerSim, method))
            expected[name] = json.loads(json.dumps([harness.run_case(cls_, c, catch=False) for c in cases]))
            # A case where the stand-in shows the same as the reference (e.g. no eviction, for the stale
            # TODO) cannot tell an answer from doing nothing: it does not count for that TODO.
            graded[name] = [i for i, c in enumerate(cases)
                            if first_mismatch(c, stand_ins[i], expected[name][i], name == "score") is not None]
        return cls(cases, expected, graded, known_stubs(REPO / "notebooks"))


# --------------------------------------------------------------------------- learner text

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def bounded(text: Any, limit: int = TEXT_CAP) -> str:
    """Learner-controlled text for one line of feedback: a string, no control characters, at most `limit`."""
    text = _CONTROL.sub("?", str(text)).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fenced(text: str, limit: int = HEAD_CAP) -> str:
    """`text` as a Markdown code block that nothing inside it can close (bounded, control characters replaced)."""
    body = _CONTROL.sub("?", text[:limit]).replace("\r", "")
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{body}\n{fence}"


# --------------------------------------------------------------------------- one TODO's verdict

def family_points(counts: Dict[str, List[int]]) -> int:
    """`POINTS` shared equally by the families, each by its share of cases passed; rounded down.

    `counts`: family -> [cases passed, cases].
    """
    share = sum((Fraction(p, n) for p, n in counts.values()), Fraction(0)) / len(counts)
    return int(POINTS * share)  # exact arithmetic: int() of a non-negative Fraction rounds down


def families(cases: list, ok: List[bool]) -> Dict[str, List[int]]:
    """Family -> [cases passed, cases], in case order."""
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
    out["review"] = [bounded(r, 200) for r in review[: harness.MAX_REVIEW_NOTES] if isinstance(r, str)]
    out["by_harness"] = data.get("todo") == todo and isinstance(data.get("elapsed"), (int, float))
    return out


def judge(todo: str, result: Optional[dict], ref: Reference) -> TodoGrade:
    """The verdict on one TODO from its validated observations (None: the cell never finished)."""
    picked = ref.graded[todo]
    cases = [ref.cases[i] for i in picked]
    n = len(cases)
    if result is None:
        return TodoGrade("error", total=n, lines=[_("The grading cell for this TODO did not finish.")])
    if result.get("load"):
        return TodoGrade("error", total=n, lines=[_("Your code could not be loaded: {why}", why=result["load"])])
    if result.get("stub"):
        return TodoGrade("not attempted", total=n, lines=[_("The method is the skeleton's unchanged stub.")])
    every = harness.observed(result, len(ref.cases))
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
        ok.append(miss is None)
        first = first or miss
    passed = sum(ok)
    errors = [bounded(e) for e in errors_in([o for o in observations if o is not None])]
    failing = n - passed
    by_family = families(cases, ok)
    g = TodoGrade("failed", points=family_points(by_family), passed=passed, total=n)
    if errors and len(errors) == failing and all(e.startswith("NotImplementedError") for e in errors) and not passed:
        return TodoGrade("not attempted", total=n, lines=[_("Every case raised {error}", error=errors[0])])
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
                         families=", ".join(f"{fam} {p}/{m}" for fam, (p, m) in by_family.items())))
        g.lines.append(_("Failing: {families}.", families="; ".join(failed)))
    if problems["timeout"]:
        g.lines.append(_("{count} case(s) ran out of time (an infinite loop, or far too slow).",
                         count=problems["timeout"]))
    if problems["died"]:
        g.lines.append(_("{count} case(s) ended the grading process: {how}.", count=problems["died"], how=died_how))
    if problems["big"]:
        g.lines.append(_("{count} case(s) produced far too much data to compare.", count=problems["big"]))
    if problems["not run"]:
        g.lines.append(_("{count} case(s) were not run ({why}).", count=problems["not run"],
                         why=result["stopped"] if "stopped" in result else _("the cell stopped")))
    if errors:
        g.lines.append(_("{count} case(s) raised an exception; the first: {error}", count=len(errors), error=errors[0]))
    if first is not None:
        g.lines.append(_("First difference from the reference:\n\n{difference}", difference=fenced(first.text())))
    if result.get("note"):
        g.lines.append(_("Note: {note}.", note=result["note"]))
    if result.get("out"):
        g.lines.append(_("Your code printed {count} characters while graded (output is discarded); it began:\n\n{head}",
                         count=result["out"], head=fenced(result.get("head", "")[:300])))
    return g


# --------------------------------------------------------------------------- one submission

def _grading_notebook(todos: Dict[str, TodoSource], config_name: str) -> dict:
    """Grader-owned cells only: the learner's TODO code travels inside them as data."""
    cells = [("# Grader cell: load the cases' inputs; learner code never runs at this level.\n"
              f"import kvsched_lab.grading.harness as _kvh\n_kvh.setup({config_name!r})")]
    for name, t in todos.items():
        cells.append(f"# Grader cell for TODO {name}: {bounded(t.origin, 200)}\n"
                     f"_kvh.grade_todo({name!r}, {t.kind!r}, {t.source!r})")
    return {"nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [],
                       "source": src} for i, src in enumerate(cells)]}


def build_library(lib: Path) -> Path:
    """The sandbox's ``kvsched_lab``: no withheld files, only the kernel side of this package."""
    withheld = {(REPO / rel).resolve() for rel in WITHHELD_FILES}
    grading = (PACKAGE / "grading").resolve()

    def skip(folder: str, names: List[str]) -> set:
        here = Path(folder).resolve()
        out = {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".egg-info"))
               or (here / n).resolve() in withheld}
        if here == grading:
            out |= {n for n in names if n not in SANDBOX_SIDE}
        return out

    shutil.copytree(PACKAGE, lib / "kvsched_lab", ignore=skip)
    for path in [lib, *lib.rglob("*")]:  # readable by the sandbox's own uid, writable by nobody else
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return lib


def _why_unfinished(outcome: Optional[tuple], no_report: bool, tail: str) -> str:
    """Why a grading cell wrote no result, from nbval's report on it."""
    if no_report:
        return _("The grading run itself failed; its output ended with:\n\n{tail}", tail=fenced(tail[-1500:], 1500))
    message = bounded(outcome[1]) if outcome else ""
    if "Kernel dead" in message or "Timeout" in message or not outcome:
        return _("The grading kernel died or stopped responding: code under test killed it, or it ran out of "
                 "memory. TODOs graded after this one could not be graded either.")
    return _("The grading cell failed: {message}", message=message)


def _box_result(stdout: bytes) -> Optional[dict]:
    """The runner's result line from a sandbox's output (the last one), or None."""
    mark = RESULT_MARK.encode()
    for line in reversed(stdout.split(b"\n")):
        if line.startswith(mark):
            try:
                data = json.loads(line[len(mark):].decode("utf-8", "replace"))
            except (ValueError, RecursionError):
                return None
            return data if isinstance(data, dict) else None
    return None


def grade_one(sub: Submission, ref: Reference, workdir: Path, lib: Path, job: int, timeout: float,
              memory_mb: int, sandboxed: bool) -> Grade:
    if sub.error:
        return Grade(sub.name, {name: TodoGrade("error") for name in TODO_METHODS}, error=sub.error,
                     sandboxed=sandboxed)
    grades: Dict[str, TodoGrade] = {}
    review: List[str] = []
    for name, t in sub.todos.items():
        if t.status != "run":
            grades[name] = TodoGrade(t.status, total=len(ref.cases), origin=t.origin, lines=[t.detail])
    to_run = {name: t for name, t in sub.todos.items() if t.status == "run"}
    if to_run:
        inputs = workdir / "in"
        inputs.mkdir(parents=True)
        nonce = secrets.token_hex(8)
        config = "grading-config.json"
        cell_timeout = timeout + 5  # the cells keep their own time; nbval's only matters when a kernel dies
        (inputs / config).write_text(json.dumps({
            "nonce": nonce, "cases": [{"phases": c["phases"]} for c in ref.cases],
            "budget": timeout, "case_limit": max(0.5, timeout / 5)}), encoding="utf-8")
        (inputs / "grading.ipynb").write_text(json.dumps(_grading_notebook(to_run, config)), encoding="utf-8")
        (inputs / "box.json").write_text(json.dumps({"nonce": nonce, "todos": list(to_run), "memory_mb": memory_mb,
                                                     "cell_timeout": cell_timeout}), encoding="utf-8")
        for path in (inputs, *inputs.iterdir()):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        run = sandbox.run(inputs, lib, job, memory_mb, 90 + len(to_run) * (timeout + 15), sandboxed,
                          workdir=workdir / "box")
        box = _box_result(run.stdout)
        tail = run.stdout.decode("utf-8", "replace")[-1500:]
        if run.timed_out:
            tail = "the sandbox ran past its wall-clock limit and was ended\n" + tail
        elif run.too_much_output:
            tail = "the sandbox wrote too much output and was ended\n" + tail
        outcomes = (box or {}).get("outcomes") if isinstance((box or {}).get("outcomes"), dict) else None
        results = (box or {}).get("results") if isinstance((box or {}).get("results"), dict) else {}
        if box and isinstance(box.get("tail"), str):
            tail = box["tail"]
        for k, (name, t) in enumerate(to_run.items(), start=1):
            result = validate(results.get(name), len(ref.cases), name)
            g = judge(name, result, ref)
            if result is None:
                outcome = (outcomes or {}).get(f"grading.ipynb::Cell {k}")
                g.lines.append(_why_unfinished(tuple(outcome) if isinstance(outcome, list) else None,
                                               outcomes is None, tail))
            else:
                review += [r for r in result["review"] if r not in review]
                if not result["by_harness"]:
                    review.append(f"the {name} results were not written by the grading harness (rewritten?)")
            g.origin = t.origin
            grades[name] = g
    return Grade(sub.name, {name: grades[name] for name in TODO_METHODS}, review=review, sandboxed=sandboxed)


# --------------------------------------------------------------------------- reports

def feedback_text(g: Grade, lang: str = "en") -> str:
    """The feedback file of `g`, in `lang` (``en``, ``zh``); statuses, names and numbers stay as in grades.csv."""
    lang = normalize(lang)

    def say(text: str) -> str:
        return text.render(lang) if isinstance(text, Deferred) else text

    out = [say(_("# Feedback: {submission}", submission=bounded(g.submission, 200))), "",
           say(_("Total: {total} / {points}", total=g.total, points=POINTS * len(TODO_METHODS))), ""]
    if g.error:
        out += [say(_("This submission could not be graded: {error}.", error=bounded(g.error))), ""]
    else:
        out += [say(_("Each TODO is graded alone: only your method is put into a scheduler whose other methods are\n"
                      "the grader's stand-ins, so a mistake in one TODO costs no points in another. The hidden cases\n"
                      "come in families (ordinary sequences, ties, capacity edges, stale records, precision...); each\n"
                      "family is an equal share of a TODO's points.")), ""]
    for name, t in g.todos.items():
        out.append(f"## {name} ({TODO_METHODS[name]}): {t.status}, {t.points}/{POINTS}")
        out.append("")
        if t.origin:
            out += [say(_("Graded: {origin}", origin=bounded(t.origin, 200))), ""]
        out += [line for text in t.lines if text for line in (say(text), "")]
    if g.review:
        out += [say(_("## For the instructor")), "",
                say(_("Review notes from the runtime audit (they do not change the grade): {notes}.",
                      notes="; ".join(g.review))), ""]
    if not g.sandboxed:
        out += [say(_("Graded without the sandbox (`--no-sandbox`).")), ""]
    return "\n".join(out)


def _feedback_name(name: str, used: set) -> str:
    base = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name.strip("./"))[:150] or "submission"
    stem, k = base, 1
    while stem in used:
        k += 1
        stem = f"{base}-{k}"
    used.add(stem)
    return stem + ".md"


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _csv_cell(text: str) -> str:
    """A status a spreadsheet shows as text, never runs as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def write_reports(grades: List[Grade], out: Path, lang: str = "en") -> str:
    """Feedback files (in `lang`), then ``grades.csv`` written once, atomically; returns the CSV's SHA-256.

    The language changes only the feedback files: grades.csv is the same bytes in every language."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "feedback").mkdir(exist_ok=True)
    used: set = set()
    for g in grades:
        _atomic_write(out / "feedback" / _feedback_name(g.submission, used), feedback_text(g, lang).encode("utf-8"))
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    for g in grades:
        writer.writerow([_csv_cell(g.submission), *(g.todos[n].points for n in TODO_METHODS), g.total,
                         _csv_cell(g.status)])
    data = buffer.getvalue().encode("utf-8")
    _atomic_write(out / "grades.csv", data)
    return hashlib.sha256(data).hexdigest()


def _fingerprint_grader() -> str:
    """Hash of the reference and the grader's code, to notice a submission that rewrote them."""
    h = hashlib.sha256()
    for path in sorted((REPO / "solutions").glob("*.py")) + sorted((PACKAGE / "grading").glob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()


def grade_submissions(paths: Sequence[str], out: Optional[Path] = None, timeout: float = 10.0, jobs: int = 1,
                      memory_mb: int = 2048, keep_work: bool = False, ref: Optional[Reference] = None,
                      sandboxed: Optional[bool] = None, lang: str = "en") -> List[Grade]:
    """Grade every submission in `paths`; write reports to `out` when given. Never raises for a bad submission.

    `lang` is the feedback files' language (``en``, ``zh``); grades and grades.csv do not depend on it.

    `sandboxed` None means: sandboxed when bubblewrap works here, else unsandboxed.
    """
    if sandboxed is None:
        sandboxed = sandbox.probe()[0]
    ref = ref or Reference.build()
    learners: List[Learner] = discover(list(paths))
    base = Path(tempfile.mkdtemp(prefix="kvsched-grade-"))
    try:
        lib = build_library(base / "lib")
        subs: List[Submission] = []
        for k, learner in enumerate(learners):  # every copy is made before any learner code runs
            path = copy_in(learner, base / f"{k:05d}" / "copy")
            subs.append(Submission(learner.name, path, error=learner.error) if learner.error
                        else load(learner.name, path, ref.stubs))
        slots: "queue.Queue[int]" = queue.Queue()
        for slot in range(max(1, jobs)):
            slots.put(slot)

        def one(k: int) -> Grade:
            slot = slots.get()
            try:
                return grade_one(subs[k], ref, base / f"{k:05d}", lib, slot, timeout, memory_mb, sandboxed)
            except Exception as e:  # a grader bug on one submission must not sink the batch
                return Grade(subs[k].name, {n: TodoGrade("error") for n in TODO_METHODS},
                             error=f"grader failure: {bounded(repr(e))}", sandboxed=sandboxed)
            finally:
                slots.put(slot)

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            grades = list(pool.map(one, range(len(subs))))
    finally:
        if keep_work and out is not None:
            shutil.copytree(base, out / "work", dirs_exist_ok=True, symlinks=True)
        shutil.rmtree(base, ignore_errors=True)
    if out is not None:
        digest = write_reports(grades, out, lang)
        print(f"grades.csv sha256 {digest}")
    return grades


def grade_main(argv: Optional[List[str]] = None) -> int:
    """``kvsched grade SUBMISSION... [--out DIR] [--timeout S] [--jobs N] [--no-sandbox] [--lang zh]``; 0 when graded."""
    p = argparse.ArgumentParser(prog="kvsched grade", description=(
        "Grade learner submissions against the hidden reference (instructors only). A SUBMISSION is a "
        "class folder (each .ipynb/.py in it is one learner, each subfolder one learner), or one .ipynb "
        "or .py file. Learner code runs in a bubblewrap sandbox. See docs/grading.md."))
    p.add_argument("submissions", nargs="+", metavar="SUBMISSION")
    p.add_argument("--out", default="grades", help="where grades.csv and feedback/ go (default: ./grades)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds each TODO may run in all (default 10)")
    p.add_argument("--jobs", type=int, default=1, help="submissions graded in parallel (default 1)")
    p.add_argument("--memory-mb", type=int, default=2048, help="address-space limit per process (default 2048)")
    p.add_argument("--keep-work", action="store_true", help="keep grading inputs and logs in OUT/work")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run learner code without the sandbox (where bubblewrap cannot run; rows say 'unsandboxed')")
    p.add_argument("--lang", default="en", choices=LANGUAGES,
                   help="language of the feedback files (default en); grades.csv is the same in every language")
    args = p.parse_args(argv)
    try:
        import solutions  # noqa: F401
    except ImportError:
        print("kvsched grade: the reference (solutions/) is not here; grading needs the instructor's copy",
              file=sys.stderr)
        return 2
    if not args.no_sandbox:
        works, why = sandbox.probe()
        if not works:
            print(f"kvsched grade: cannot sandbox learner code here: {why}.\nTo enable it: {sandbox.HOW_TO_ENABLE}.\n"
                  "To grade without it (only submissions you trust): kvsched grade --no-sandbox ...", file=sys.stderr)
            return 2
    before = _fingerprint_grader()
    started = time.monotonic()
    grades = grade_submissions(args.submissions, Path(args.out), args.timeout, args.jobs, args.memory_mb,
                               args.keep_work, sandboxed=not args.no_sandbox, lang=args.lang)
    width = max([len(g.submission) for g in grades] + [10])
    for g in grades:
        print(f"{g.submission:<{width}}  {g.total:>3}  " + " ".join(f"{g.todos[n].points:>2}" for n in TODO_METHODS)
              + f"  {g.status}")
    print(f"graded {len(grades)} submission(s) in {time.monotonic() - started:.1f} s -> {Path(args.out) / 'grades.csv'}")
    if _fingerprint_grader() != before:
        print("kvsched grade: solutions/ or the grader changed during grading; a submission may have tampered "
              "with them. Restore them and regrade.", file=sys.stderr)
        return 3
    return 0
