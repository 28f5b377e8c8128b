"""Grading one submission, and the reports: a `Grade`, its feedback file, ``grades.csv``.

A batch (batch.py) finds the learners (intake.py), copies each one's regular files into a
private folder, parses each copy (submissions.py) and builds, once, the sandbox's library
(``kvsched_lab`` without the withheld files, with only the kernel side of this package) and the
expected observations (the reference's method for each TODO among the stand-ins of fakes.py, on
every hidden case, here in the grader's process). Per submission (`grade_one`): a grading
notebook of grader-owned cells made of grader constants (the learner's code and names travel in
the config, as data), and the cases' inputs, go into a bubblewrap sandbox (sandbox.py) where nbval runs them in a fresh kernel
(nbrun.py, harness.py); the observations come back as one line of JSON, and are validated,
compared with the expected ones and scored (verdict.py). The end of a run (feedback,
``grades.csv`` written once, atomically, and the manifest) is manifest.py's `write_class`, which
calls `write_reports` here.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import kvsched_lab
from kvsched_lab.grading import kernel
from kvsched_lab.grading.box import sandbox
from kvsched_lab.grading.classroom import class_files, feedback_html
from kvsched_lab.grading.learner.intake import MAX_FILE_BYTES
from kvsched_lab.grading.kernel.harness import WALL_PER_CPU
from kvsched_lab.grading.kernel.nbrun import RESULT_MARK
from kvsched_lab.grading.classroom.overrides import EXTRA_COLUMNS, Override, apply_overrides, feedback_section
from kvsched_lab.grading.release.release_build import WITHHELD_FILES
from kvsched_lab.grading.batch.options import BatchOptions
from kvsched_lab.grading.batch.stamp import Stamp
from kvsched_lab.grading.judging.error_texts import submission_error
from kvsched_lab.grading.judging.review_texts import NOT_WRITTEN, review_notes
from kvsched_lab.grading.judging.submissions import Submission
from kvsched_lab.grading.judging.unfinished import why_unfinished
from kvsched_lab.grading.judging.verdict import POINTS, Reference, TodoGrade, judge, validate
from kvsched_lab.grading.learner.writers import atomic_write, bounded, csv_cell, encoded, feedback_file_name, inline
from kvsched_lab.i18n.language import normalize
from kvsched_lab.i18n.messages import Deferred
from kvsched_lab.i18n.messages import Deferred as _  # feedback lines: rendered in --lang's language when written
from kvsched_lab.i18n.messages import N_
from kvsched_lab.sim.scheduler import TODO_METHODS

COLUMNS = ["submission", *TODO_METHODS, "total", "status", *EXTRA_COLUMNS]
PACKAGE = Path(kvsched_lab.__file__).resolve().parent
REPO = PACKAGE.parent
NORMAL = ("passed", "failed", "not attempted")
CORRECTED = N_("corrected")  # a feedback heading's status when an override set the TODO's points
# The kernel side of this package, one folder: all the sandbox gets of it (no cases, no reference, no grader).
SANDBOX_ROOM = Path(kernel.__file__).resolve().parent


@dataclass
class Grade:
    submission: str
    todos: Dict[str, TodoGrade]
    error: str = ""
    review: List[str] = field(default_factory=list)  # for the instructor: audit notes, two attempts at one TODO
    sandboxed: bool = True
    skipped: List[str] = field(default_factory=list)  # oversized files without a TODO, not read
    sources: Dict[str, str] = field(default_factory=dict)  # TODO -> the code graded (for the similarity report)
    elapsed_s: float = 0.0  # wall-clock seconds its grading took (the class report's timing figure)

    @property
    def total(self) -> int:
        return sum(t.points for t in self.todos.values())

    @property
    def status(self) -> str:
        if self.error:
            parts = [f"error: {bounded(self.error)}"]
        else:
            parts = [f"{name}: {t.status}" for name, t in self.todos.items() if t.status not in NORMAL]
        if self.review:
            parts.append("review: " + ", ".join(bounded(r, 200) for r in self.review))
        if not self.sandboxed:
            parts.append("unsandboxed")
        return "; ".join(parts) or "ok"


# --------------------------------------------------------------------------- one submission

def _grading_notebook(todos: Sequence[str], config_name: str) -> dict:
    """Grader-owned cells only, made of grader constants: no learner text (name, path, code) is in them.

    The learner's code travels as data in the config file `config_name`, which `harness.setup` reads."""
    if not set(todos) <= set(TODO_METHODS) or not config_name.replace("-", "").replace(".", "").isalnum():
        raise ValueError("the grading notebook is made of grader constants only")
    cells = [("# Grader cell: load the cases' inputs; learner code never runs at this level.\n"
              f"import kvsched_lab.grading.kernel.harness as _kvh\n_kvh.setup({config_name!r})")]
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
        if here == grading:  # grading/'s own __init__.py (the rooms' package) and the kernel's room only
            out |= {n for n in names if n != "__init__.py" and (here / n).resolve() != SANDBOX_ROOM}
        return out

    shutil.copytree(PACKAGE, lib / "kvsched_lab", ignore=skip)
    for path in [lib, *lib.rglob("*")]:  # readable by the sandbox's own uid, writable by nobody else
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return lib


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


def grade_one(sub: Submission, ref: Reference, workdir: Path, lib: Path, uid: int, options: BatchOptions) -> Grade:
    """One submission graded in its own sandbox (as root, running as the leased `uid`), as `options` say
    (its `reveal_expected`: the feedback shows the reference's value at a first difference)."""
    timeout, memory_mb, sandboxed = options.timeout, options.memory_mb, bool(options.sandboxed)
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
        # The cells keep their own time (CPU seconds, harness.py); nbval's wall-clock limit only
        # matters when a kernel dies, so it waits out the harness's own wall-clock backstop.
        cell_timeout = timeout * WALL_PER_CPU + 5
        (inputs / config).write_text(json.dumps({
            "nonce": nonce, "cases": [{"phases": c["phases"]} for c in ref.cases],
            "todos": {name: {"kind": t.kind, "source": t.source} for name, t in to_run.items()},
            "budget": timeout, "case_limit": max(0.5, timeout / 5)}), encoding="utf-8")
        (inputs / "grading.ipynb").write_text(json.dumps(_grading_notebook(list(to_run), config)), encoding="utf-8")
        (inputs / "box.json").write_text(json.dumps({"nonce": nonce, "todos": list(to_run), "memory_mb": memory_mb,
                                                     "cell_timeout": cell_timeout}), encoding="utf-8")
        for path in (inputs, *inputs.iterdir()):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        run = sandbox.run(inputs, lib, uid, memory_mb, 90 + len(to_run) * (cell_timeout + 10), sandboxed,
                          workdir=workdir / "box")
        box = _box_result(run.stdout)
        tail = run.stdout.decode("utf-8", "replace")[-1500:]
        # Said in the feedback's language (judging/unfinished.py); the limit's details go to review.
        ended = "wall" if run.timed_out else "output" if run.too_much_output else "budget" if run.over_budget else None
        outcomes = (box or {}).get("outcomes") if isinstance((box or {}).get("outcomes"), dict) else None
        results = (box or {}).get("results") if isinstance((box or {}).get("results"), dict) else {}
        if box and isinstance(box.get("tail"), str):
            tail = box["tail"]
        for k, (name, t) in enumerate(to_run.items(), start=1):
            result = validate(results.get(name), len(ref.cases), name)
            g = judge(name, result, ref, options.reveal_expected)
            if result is None:
                outcome = (outcomes or {}).get(f"grading.ipynb::Cell {k}")
                g.lines.append(why_unfinished(tuple(outcome) if isinstance(outcome, list) else None,
                                              outcomes is None, tail, ended))
            else:
                review += [r for r in result["review"] if r not in review]
                if not result["by_harness"]:
                    review.append(NOT_WRITTEN.format(todo=name))
            g.origin = t.origin
            grades[name] = g
    if run is not None and run.over_budget:
        review.append(run.over_budget)
    return Grade(sub.name, {name: grades[name] for name in TODO_METHODS}, review=review, sandboxed=sandboxed,
                 sources={name: t.source for name, t in sub.todos.items() if t.status == "run"})


# --------------------------------------------------------------------------- reports

def feedback_text(g: Grade, lang: str = "en", stamp: Optional[Stamp] = None,
                  corrections: Sequence[Override] = ()) -> str:
    """The feedback file of `g`, in `lang` (``en``, ``zh``); statuses, names and numbers stay as in grades.csv.

    With `stamp`, its last line says which grader and which hidden cases graded it. `corrections`:
    the instructor's overrides for `g`, shown (with their reasons) below the total."""
    lang = normalize(lang)

    def say(text: str) -> str:
        return text.render(lang) if isinstance(text, Deferred) else text

    out = [say(_("# Feedback: {submission}", submission=inline(g.submission, 200))), "",
           say(_("Total: {total} / {points}", total=g.total, points=POINTS * len(TODO_METHODS))), ""]
    out += [line for text in feedback_section(corrections, {n: t.points for n, t in g.todos.items()})
            for line in (say(text), "")]
    if g.error:
        out += [say(_("This submission could not be graded: {error}.", error=submission_error(g.error))), ""]
    else:
        out += [say(_("Each TODO is graded alone: only your method is put into a scheduler whose other methods are\n"
                      "the grader's stand-ins, so a mistake in one TODO costs no points in another. The hidden cases\n"
                      "come in families (ordinary sequences, ties, capacity edges, stale records, precision...); each\n"
                      "family is an equal share of a TODO's points.")), ""]
    corrected = {o.todo: o.points for o in corrections}
    for name, t in g.todos.items():
        # A corrected TODO's heading (and so its HTML badge) shows the final points, not the graded ones.
        status, points = (_(CORRECTED), corrected[name]) if name in corrected else (_(t.status), t.points)
        out.append(say(_("## {name} ({method}): {status}, {points}/{total}", name=name, method=TODO_METHODS[name],
                         status=status, points=points, total=POINTS)))
        out.append("")
        if name in corrected:
            out += [say(_("As graded: {status}, {points}/{total}; the instructor's correction and its reason are "
                          "above.", status=_(t.status), points=t.points, total=POINTS)), ""]
        if t.origin:
            out += [say(_("Graded: {origin}", origin=inline(t.origin, 200))), ""]
        out += [line for text in t.lines if text for line in (say(text), "")]
    if g.review:
        out += [say(_("## For the instructor")), "",
                say(_("Review notes from the runtime audit (they do not change the grade): {notes}.",
                      notes=review_notes(g.review))), ""]
    if g.skipped:
        out += [say(_("Not read: {files} (larger than {mib} MiB, with no todo: tag in its first {mib} MiB).",
                      files=", ".join(inline(s, 200) for s in g.skipped), mib=MAX_FILE_BYTES >> 20)), ""]
    if not g.sandboxed:
        out += [say(_("Graded without the sandbox (`--no-sandbox`).")), ""]
    if stamp is not None:
        out += ["---", "", say(stamp.feedback_line()), ""]
    return "\n".join(out)


def write_reports(grades: List[Grade], out: Path, lang: str = "en", stamp: Optional[Stamp] = None,
                  overrides: Sequence[Override] = ()) -> str:
    """Feedback files (in `lang`, stamped with `stamp`; Markdown and HTML), ``details.json``, then
    ``grades.csv`` written once, atomically; returns the CSV's SHA-256 (manifest.py's `write_class`
    adds the manifest). `overrides` are applied to the rows (overrides.py) and shown in the feedback.

    The language changes only the feedback files: grades.csv is the same bytes in every language."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "feedback").mkdir(exist_ok=True)
    rows = [[csv_cell(g.submission), *(g.todos[n].points for n in TODO_METHODS), g.total, csv_cell(g.status)] for g in grades]
    table = apply_overrides([dict(zip(COLUMNS, r)) for r in rows], overrides)  # raises before anything is written
    by_row, used, names = class_files.resolved(overrides, rows), set(), []
    for g in grades:
        name = feedback_file_name(g.submission, used)[:-3]
        names.append(name)
        text = feedback_text(g, lang, stamp, by_row.get(csv_cell(g.submission), []))
        atomic_write(out / "feedback" / f"{name}.md", encoded(text))
        atomic_write(out / "feedback" / f"{name}.html", encoded(feedback_html.render(text, lang)))
    class_files.write_details(out, grades, names)
    class_files.write_overrides(out, overrides)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    writer.writerows([row[c] if c != "overrides" else csv_cell(row[c]) for c in COLUMNS] for row in table)
    data = encoded(buffer.getvalue())
    atomic_write(out / "grades.csv", data)
    return hashlib.sha256(data).hexdigest()
