"""What one graded submission is (`Grade`) and the reports written from a batch of them.

``grades.csv`` (one row per submission: its name relative to the class folder, the points per
TODO, the total, the status) is written once, atomically, after every sandbox has ended; one
feedback file per submission, in the instructor's ``--lang``, with an injective file name. Every
learner-supplied string goes through writers.py on its way out.
"""
from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

from kvsched_lab.grading.intake import MAX_FILE_BYTES
from kvsched_lab.grading.verdict import POINTS, TodoGrade
from kvsched_lab.grading.writers import atomic_write, bounded, csv_cell, encoded, feedback_file_name, inline
from kvsched_lab.i18n.language import normalize
from kvsched_lab.i18n.messages import Deferred
from kvsched_lab.i18n.messages import Deferred as _  # feedback lines: rendered in --lang's language when written
from kvsched_lab.sim.scheduler import TODO_METHODS

COLUMNS = ["submission", *TODO_METHODS, "total", "status"]
NORMAL = ("passed", "failed", "not attempted")  # TODO statuses the status column leaves out


@dataclass
class Grade:
    submission: str
    todos: Dict[str, TodoGrade]
    error: str = ""
    review: List[str] = field(default_factory=list)  # for the instructor: audit notes, two attempts at one TODO
    sandboxed: bool = True
    skipped: List[str] = field(default_factory=list)  # oversized files without a TODO, not read

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


def feedback_text(g: Grade, lang: str = "en") -> str:
    """The feedback file of `g`, in `lang` (``en``, ``zh``); statuses, names and numbers stay as in grades.csv."""
    lang = normalize(lang)

    def say(text: str) -> str:
        return text.render(lang) if isinstance(text, Deferred) else text

    out = [say(_("# Feedback: {submission}", submission=inline(g.submission, 200))), "",
           say(_("Total: {total} / {points}", total=g.total, points=POINTS * len(TODO_METHODS))), ""]
    if g.error:
        out += [say(_("This submission could not be graded: {error}.", error=inline(g.error))), ""]
    else:
        out += [say(_("Each TODO is graded alone: only your method is put into a scheduler whose other methods are\n"
                      "the grader's stand-ins, so a mistake in one TODO costs no points in another. The hidden cases\n"
                      "come in families (ordinary sequences, ties, capacity edges, stale records, precision...); each\n"
                      "family is an equal share of a TODO's points.")), ""]
    for name, t in g.todos.items():
        out.append(f"## {name} ({TODO_METHODS[name]}): {t.status}, {t.points}/{POINTS}")
        out.append("")
        if t.origin:
            out += [say(_("Graded: {origin}", origin=inline(t.origin, 200))), ""]
        out += [line for text in t.lines if text for line in (say(text), "")]
    if g.review:
        out += [say(_("## For the instructor")), "",
                say(_("Review notes from the runtime audit (they do not change the grade): {notes}.",
                      notes="; ".join(inline(r, 200) for r in g.review))), ""]
    if g.skipped:
        out += [say(_("Not read: {files} (larger than {mib} MiB and holding no TODO cell).",
                      files=", ".join(inline(s, 200) for s in g.skipped), mib=MAX_FILE_BYTES >> 20)), ""]
    if not g.sandboxed:
        out += [say(_("Graded without the sandbox (`--no-sandbox`).")), ""]
    return "\n".join(out)


def write_reports(grades: List[Grade], out: Path, lang: str = "en") -> str:
    """Feedback files (in `lang`), then ``grades.csv`` written once, atomically; returns the CSV's SHA-256.

    The language changes only the feedback files: grades.csv is the same bytes in every language.
    `out` is the instructor's output folder, checked before grading (grade.py)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "feedback").mkdir(exist_ok=True)
    used: set = set()
    for g in grades:
        atomic_write(out / "feedback" / feedback_file_name(g.submission, used), encoded(feedback_text(g, lang)))
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    for g in grades:
        writer.writerow([csv_cell(g.submission), *(g.todos[n].points for n in TODO_METHODS), g.total,
                         csv_cell(g.status)])
    data = encoded(buffer.getvalue())
    atomic_write(out / "grades.csv", data)
    return hashlib.sha256(data).hexdigest()
