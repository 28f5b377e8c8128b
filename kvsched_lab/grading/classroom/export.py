"""``kvsched grade export OUT --roster CSV``: the graded class as Canvas and Moodle gradebook imports.

The lab is ONE assignment in a gradebook, so each import file has ONE grade column: the final
total (after overrides and the late rule). Everything else goes to ``points-by-todo.csv``, which is
for reading, never for an import (an import would turn each TODO and the late days into gradebook
items and count the lab twice). docs/grading.md names the LMS code the formats were checked against.

* ``canvas.csv``, Canvas's gradebook import (canvas-lms ``GradebookImporter``): the header
  ``Student, ID, SIS User ID, SIS Login ID, Section`` then the assignment, written
  ``NAME (CANVAS_ID)`` with ``--canvas-id`` (Canvas then updates that assignment) or ``NAME``
  (Canvas updates the published assignment of that exact title, or creates one); a
  ``Points Possible`` row; one row per student with a grade, keyed by ``SIS User ID`` (the roster
  id) and ``SIS Login ID`` (the e-mail). ``Student`` and ``ID`` stay empty: Canvas matches its
  internal ``ID`` first and a name last, and neither may match the wrong person.
* ``moodle.csv``, Moodle's "Import grades from CSV" (gradeimport_csv): ``ID number``,
  ``Email address`` and the assignment; map ``ID number`` to the user's ID number (or the e-mail
  to the e-mail address) and the assignment column to the grade item.

A student without exactly one submission has no grade and is left out of both imports (an empty
cell would erase a grade already in the gradebook, in both LMSs); each such case, and every
submission no student claims, is printed and written to ``export/roster-report.txt`` (roster.py
says how matching works). When no student has a grade (every pattern ambiguous, say) the export
fails with status 1 and leaves an earlier export as it was. Learner-controlled names are written
as spreadsheet text, never formulas.
"""
from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from kvsched_lab.grading.learner.writers import atomic_write, csv_cell
from kvsched_lab.grading.classroom.extensions import Extension, read_extensions
from kvsched_lab.grading.classroom.late import LateError, LateRule, read_times, rule
from kvsched_lab.grading.classroom.roster import RosterError, Student, last_part, match, read_roster
from kvsched_lab.grading.judging.verdict import POINTS
from kvsched_lab.sim.scheduler import TODO_METHODS

MAX_POINTS = POINTS * len(TODO_METHODS)
# Canvas's importer reads these as student columns, or drops a column whose header contains one of the
# second group (canvas-lms GradebookImporter): an assignment may not be named so.
CANVAS_RESERVED = ("Student", "LastName", "FirstName", "ID", "SIS User ID", "SIS Login ID", "Section",
                   "Integration ID", "Root Account")
CANVAS_NOT_ASSIGNMENT = ("Current Score", "Current Points", "Current Grade", "Final Score", "Final Points",
                         "Final Grade", "Override Score", "Override Grade", "Override Status", "Points Possible")
# points-by-todo.csv: for reading (one row per roster student), never an LMS import.
DETAIL_COLUMNS = ("id", "name", "email", "submission", *TODO_METHODS, "total", "due", "submitted", "late_days",
                  "final", "extension", "note")


def read_grades(out: Path) -> Dict[str, Dict[str, str]]:
    """Submission -> its grades.csv row (final points)."""
    path = out / "grades.csv"
    if not path.is_file():
        raise ValueError(f"{path} does not exist: grade the class into {out} first")
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if rows and not {"submission", "total", *TODO_METHODS} <= set(rows[0]):
        raise ValueError(f"{path} is not a grades.csv written by kvsched grade")
    by_name = {r["submission"]: r for r in rows}
    if len(by_name) != len(rows):  # kvsched grade names each learner once: keeping one would lose a grade
        twice = sorted(n for n, count in Counter(r["submission"] for r in rows).items() if count > 1)
        raise ValueError(f"{path} has several rows named {', '.join(twice[:3])}: grade the class again "
                         "(each learner then has a name of its own)")
    return by_name


def class_table(grades: Dict[str, Dict[str, str]], students: Sequence[Student], late: Optional[LateRule],
                times: Dict[str, object], extensions: Optional[Dict[str, Extension]] = None,
                ) -> Tuple[List[Dict[str, str]], List[str]]:
    """One dict per student (`DETAIL_COLUMNS`; strings, "" = none) and the roster report's lines.

    ``final`` is what the gradebook gets: the total after the late rule, counted from the student's
    extension (`extensions`: roster id -> `Extension`) where there is one; "" = no grade."""
    extensions = extensions or {}
    m = match(students, list(grades))
    times = {k.lower() if k.startswith("file:") else k: when for k, when in times.items()}  # file names: any case
    known = {f"id:{s.id}" for s in students} | {f"file:{x}".lower() for x in grades} | {
        f"file:{last_part(x)}" for x in grades}
    unknown = sorted(k for k in times if k not in known)
    if unknown:
        raise LateError(f"the times file names what neither the roster nor grades.csv has: {', '.join(unknown[:5])}")
    table = []
    for s in students:
        sub = m.submission[s.id]
        ext = extensions.get(s.id)
        row = {c: "" for c in DETAIL_COLUMNS}
        row.update(id=s.id, name=s.name, email=s.email, submission=sub or "",
                   extension=(ext.due.isoformat() + (f": {ext.reason}" if ext.reason else "")) if ext else "")
        if sub is None:
            row["note"] = "ambiguous (see roster-report.txt)" if s.id in m.ambiguous else "no submission"
        else:
            g = grades[sub]
            row.update({t: g[t] for t in TODO_METHODS}, total=g["total"], final=g["total"])
            if late is not None:
                when = (times.get(f"id:{s.id}") or times.get(f"file:{sub}".lower())
                        or times.get(f"file:{last_part(sub)}"))
                due = ext.due if ext else late.due
                days, final = late.apply(int(g["total"]), when, due)
                row.update(due=due.isoformat(), submitted=when.isoformat() if when else "", late_days=str(days),
                           final=str(final))
        table.append(row)
    return table, m.report(students)


def _csv(rows: List[List[str]]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer).writerows([[csv_cell(str(c)) for c in r] for r in rows])
    return buffer.getvalue().encode("utf-8")


def canvas_header(assignment: str, canvas_id: Optional[str]) -> str:
    """The assignment's column: ``NAME (ID)`` targets Canvas assignment ID; ``NAME`` one of that title (or a new one)."""
    return f"{assignment} ({canvas_id})" if canvas_id else assignment


def canvas_csv(table: Sequence[Dict[str, str]], assignment: str, canvas_id: Optional[str] = None) -> bytes:
    head = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", canvas_header(assignment, canvas_id)]
    possible = ["Points Possible", "", "", "", "", str(MAX_POINTS)]
    rows = [["", "", r["id"], r["email"], "", r["final"]] for r in table if r["final"] != ""]
    return _csv([head, possible, *rows])


def moodle_csv(table: Sequence[Dict[str, str]], assignment: str) -> bytes:
    rows = [[r["id"], r["email"], r["final"]] for r in table if r["final"] != ""]
    return _csv([["ID number", "Email address", assignment], *rows])


def details_csv(table: Sequence[Dict[str, str]]) -> bytes:
    """points-by-todo.csv: every roster student, per-TODO points, the late rule's working; not an import."""
    return _csv([list(DETAIL_COLUMNS), *([r[c] for c in DETAIL_COLUMNS] for r in table)])


def _assignment_name(text: str) -> str:
    """`text` as a gradebook column name, or ValueError: Canvas reads ``NAME (123)`` as an id, and its
    own columns (`CANVAS_RESERVED`, `CANVAS_NOT_ASSIGNMENT`) are not assignments."""
    name = text.strip()
    if not name or csv_cell(name) != name:
        raise ValueError(f"--assignment {text!r}: give a plain name (no leading =, +, -, @, no control characters)")
    if name in CANVAS_RESERVED or any(word in name for word in CANVAS_NOT_ASSIGNMENT):
        raise ValueError(f"--assignment {text!r}: Canvas reads that as one of its own columns, not an assignment")
    if re.search(r"\(\d+\)\s*$", name):
        raise ValueError(f"--assignment {text!r}: a name ending in (digits) reads as a Canvas id; use --canvas-id")
    return name


def export_main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="kvsched grade export", description=(
        "Write a graded class (OUT/grades.csv) as a Canvas and a Moodle gradebook import (one column each: the "
        "final total), keyed by the roster's ids, and points-by-todo.csv for reading. See docs/grading.md."))
    p.add_argument("out", metavar="OUT", help="the folder kvsched grade wrote")
    p.add_argument("--roster", required=True, help="CSV: id,name,email,file (file: a pattern of the submission name)")
    p.add_argument("--assignment", default="kvsched-lab", help="the gradebook column's name (default kvsched-lab)")
    p.add_argument("--canvas-id", default=None, metavar="ID",
                   help="the Canvas assignment's id (its URL's last number): the import updates that assignment")
    p.add_argument("--to", default=None, help="folder for the exports (default OUT/export)")
    p.add_argument("--due", default=None, help="due date, ISO 8601 (e.g. 2026-12-01T23:59:00+08:00)")
    p.add_argument("--times", default=None, help="CSV of submission times: id (or file), submitted")
    p.add_argument("--extensions", default=None,
                   help="CSV of per-student due dates: id, due and/or extra_days, reason (needs --due)")
    p.add_argument("--late-penalty", type=float, default=10.0,
                   help="percent of the total lost per started day late (default 10)")
    args = p.parse_args(argv)
    out = Path(args.out)
    try:
        assignment = _assignment_name(args.assignment)
        if args.canvas_id is not None and not re.fullmatch("[0-9]+", args.canvas_id):
            raise ValueError(f"--canvas-id {args.canvas_id!r}: Canvas ids are ASCII digits")
        if bool(args.due) != bool(args.times):
            raise LateError("--due and --times go together")
        if args.extensions and not args.due:
            raise LateError("--extensions moves due dates: give --due and --times too")
        late = rule(args.due, args.late_penalty) if args.due else None
        students = read_roster(Path(args.roster))
        problems: List[str] = []  # the times and the extensions files: every bad line of both, at once
        times, extensions = {}, {}
        if late is not None:
            try:
                times = read_times(Path(args.times), late.due)
            except LateError as e:
                problems.append(str(e))
            if args.extensions:
                try:
                    extensions = read_extensions(Path(args.extensions), late.due, [s.id for s in students])
                except LateError as e:
                    problems.append(str(e))
        if problems:
            raise LateError("\n".join(problems))
        table, report = class_table(read_grades(out), students, late, times, extensions)
    except (RosterError, LateError, ValueError) as e:
        print(f"kvsched grade export: {e}", file=sys.stderr)
        return 2
    for line in report:
        print(line)
    to = Path(args.to) if args.to else out / "export"
    graded = sum(1 for r in table if r["final"] != "")
    if not graded:
        print(f"kvsched grade export: no roster student has exactly one submission, so there is nothing to import; "
              f"{to} is left as it was (fix the roster's patterns: the lines above say which)", file=sys.stderr)
        return 1
    to.mkdir(parents=True, exist_ok=True)
    atomic_write(to / "canvas.csv", canvas_csv(table, assignment, args.canvas_id))
    atomic_write(to / "moodle.csv", moodle_csv(table, assignment))
    atomic_write(to / "points-by-todo.csv", details_csv(table))
    atomic_write(to / "roster-report.txt", "".join(line + "\n" for line in report).encode("utf-8"))
    print(f"exported {graded} of {len(table)} students (one column, {canvas_header(assignment, args.canvas_id)!r}: "
          f"the final total) to {to / 'canvas.csv'} and {to / 'moodle.csv'}; per-TODO points and late days in "
          f"{to / 'points-by-todo.csv'} (not an import); {len(report)} line(s) to review in {to / 'roster-report.txt'}")
    return 0
