"""`kvsched grade`: grade submissions into ``grades.csv`` and one feedback file per submission.

A batch: find the learners (intake.py) and copy each one's regular files into a private folder;
parse each copy (submissions.py); build, once, the sandbox's library (``kvsched_lab`` without the
withheld files, with only the kernel side of this package) and the expected observations (the
reference's method for each TODO among the stand-ins of fakes.py, on every hidden case, here in
the grader's process). Per submission: a grading notebook of grader-owned cells that carry the
learner's TODO code as data, and the cases' inputs, go into a bubblewrap sandbox (sandbox.py)
where nbval runs them in a fresh kernel (nbrun.py, harness.py); the observations come back as
one line of JSON, and are validated, compared with the expected ones and scored (verdict.py).
After every sandbox has ended, ``grades.csv`` is written once, atomically, and its SHA-256 printed.
"""
from __future__ import annotations

import json
import os
import queue
import secrets
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import kvsched_lab
from kvsched_lab.grading import sandbox
from kvsched_lab.grading.intake import Learner, copy_in, discover
from kvsched_lab.grading.leases import UidLease, lease_uids
from kvsched_lab.grading.nbrun import RESULT_MARK
from kvsched_lab.grading.release_build import WITHHELD_FILES
from kvsched_lab.grading.reports import Grade, write_reports
from kvsched_lab.grading.submissions import Submission, load
from kvsched_lab.grading.verdict import Reference, TodoGrade, judge, validate
from kvsched_lab.grading.writers import bounded, fenced
from kvsched_lab.i18n.messages import Deferred as _  # feedback lines: rendered in --lang's language when written
from kvsched_lab.sim.scheduler import TODO_METHODS

PACKAGE = Path(kvsched_lab.__file__).resolve().parent
REPO = PACKAGE.parent
# The kernel side of this package: all the sandbox gets of it (no cases, no reference, no grader).
SANDBOX_SIDE = ("__init__.py", "audit.py", "fakes.py", "harness.py", "kernel_launcher.py", "nbrun.py", "observe.py")


# --------------------------------------------------------------------------- one submission

def _grading_notebook(todos: Sequence[str], config_name: str) -> dict:
    """Grader-owned cells only, made of grader constants: no learner text (name, path, code) is in them.

    The learner's code travels as data in the config file `config_name`, which `harness.setup` reads."""
    if not set(todos) <= set(TODO_METHODS) or not config_name.replace("-", "").replace(".", "").isalnum():
        raise ValueError("the grading notebook is made of grader constants only")
    cells = [("# Grader cell: load the cases' inputs; learner code never runs at this level.\n"
              f"import kvsched_lab.grading.harness as _kvh\n_kvh.setup({config_name!r})")]
    for name in todos:
        cells.append(f"# Grader cell for TODO {name}\n_kvh.grade_todo({name!r})")
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


def grade_one(sub: Submission, ref: Reference, workdir: Path, lib: Path, uid: int, timeout: float,
              memory_mb: int, sandboxed: bool) -> Grade:
    if sub.error:
        return Grade(sub.name, {name: TodoGrade("error") for name in TODO_METHODS}, error=sub.error,
                     sandboxed=sandboxed)
    grades: Dict[str, TodoGrade] = {}
    review: List[str] = list(sub.review)
    for name, t in sub.todos.items():
        if t.status != "run":
            grades[name] = TodoGrade(t.status, total=len(ref.cases), origin=t.origin, lines=[t.detail])
    to_run = {name: t for name, t in sub.todos.items() if t.status == "run"}
    run = None
    if to_run:
        inputs = workdir / "in"
        inputs.mkdir(parents=True)
        nonce = secrets.token_hex(8)
        config = "grading-config.json"
        cell_timeout = timeout + 5  # the cells keep their own time; nbval's only matters when a kernel dies
        (inputs / config).write_text(json.dumps({
            "nonce": nonce, "cases": [{"phases": c["phases"]} for c in ref.cases],
            "todos": {name: {"kind": t.kind, "source": t.source} for name, t in to_run.items()},
            "budget": timeout, "case_limit": max(0.5, timeout / 5)}), encoding="utf-8")
        (inputs / "grading.ipynb").write_text(json.dumps(_grading_notebook(list(to_run), config)), encoding="utf-8")
        (inputs / "box.json").write_text(json.dumps({"nonce": nonce, "todos": list(to_run), "memory_mb": memory_mb,
                                                     "cell_timeout": cell_timeout}), encoding="utf-8")
        for path in (inputs, *inputs.iterdir()):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        run = sandbox.run(inputs, lib, uid, memory_mb, 90 + len(to_run) * (timeout + 15), sandboxed,
                          workdir=workdir / "box")
        box = _box_result(run.stdout)
        tail = run.stdout.decode("utf-8", "replace")[-1500:]
        if run.timed_out:
            tail = "the sandbox ran past its wall-clock limit and was ended\n" + tail
        elif run.too_much_output:
            tail = "the sandbox wrote too much output and was ended\n" + tail
        elif run.over_budget:
            tail = run.over_budget + "; it was ended\n" + tail
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
    if sandboxed and run is not None and run.over_budget:
        review.append(run.over_budget)
    return Grade(sub.name, {name: grades[name] for name in TODO_METHODS}, review=review, sandboxed=sandboxed)


def _read_learner(learner: Learner, dest: Path, ref: Reference) -> Submission:
    """Copy and parse one learner's files inside that learner's own error handling: a file no check
    foresaw (nested too deep, an odd name, a reader bug) becomes this row's error, never the batch's."""
    try:
        path = copy_in(learner, dest)
        sub = (Submission(learner.name, path, error=learner.error) if learner.error
               else load(learner.name, path, ref.stubs))
    except (Exception, RecursionError, MemoryError) as e:  # noqa: B902 - one learner's file, one row
        sub = Submission(learner.name, dest, error=f"the submission could not be read ({type(e).__name__})")
    return sub


def grade_submissions(paths: Sequence[str], out: Optional[Path] = None, timeout: float = 10.0, jobs: int = 1,
                      memory_mb: int = 2048, keep_work: bool = False, ref: Optional[Reference] = None,
                      sandboxed: Optional[bool] = None, lang: str = "en") -> List[Grade]:
    """Grade every submission in `paths`; write reports to `out` when given. Never raises for a bad submission.

    `lang` is the feedback files' language (``en``, ``zh``); grades and grades.csv do not depend on it.

    `sandboxed` None means: sandboxed when bubblewrap works here, else unsandboxed. As root, the
    batch's sandboxes run as uids leased for this batch alone (leases.py).
    """
    if sandboxed is None:
        sandboxed = sandbox.probe()[0]
    ref = ref or Reference.build()
    learners: List[Learner] = discover(list(paths))
    base = Path(tempfile.mkdtemp(prefix="kvsched-grade-"))
    lease: Optional[UidLease] = lease_uids() if sandboxed and os.geteuid() == 0 else None
    if lease is not None:
        print(f"sandbox uids {lease.first_uid}-{lease.uid(max(1, jobs) - 1)} (leased for this batch)")
    try:
        lib = build_library(base / "lib")
        subs: List[Submission] = []
        skipped: Dict[int, List[str]] = {}
        for k, learner in enumerate(learners):  # every copy is made before any learner code runs
            subs.append(_read_learner(learner, base / f"{k:05d}" / "copy", ref))
            skipped[k] = list(learner.skipped)
        slots: "queue.Queue[int]" = queue.Queue()
        for slot in range(max(1, jobs)):
            slots.put(slot)

        def one(k: int) -> Grade:
            slot = slots.get()
            try:
                uid = lease.uid(slot) if lease is not None else slot
                g = grade_one(subs[k], ref, base / f"{k:05d}", lib, uid, timeout, memory_mb, sandboxed)
            except Exception as e:  # a grader bug on one submission must not sink the batch
                g = Grade(subs[k].name, {n: TodoGrade("error") for n in TODO_METHODS},
                          error=f"grader failure: {bounded(repr(e))}", sandboxed=sandboxed)
            finally:
                slots.put(slot)
            g.skipped = skipped[k]
            return g

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            grades = list(pool.map(one, range(len(subs))))
    finally:
        if lease is not None:
            lease.release()
        if keep_work and out is not None:
            shutil.copytree(base, out / "work", dirs_exist_ok=True, symlinks=True)
        shutil.rmtree(base, ignore_errors=True)
    if out is not None:
        digest = write_reports(grades, out, lang)
        print(f"grades.csv sha256 {digest}")
    return grades
