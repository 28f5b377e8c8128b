"""``kvsched grade export OUT --roster CSV``: the graded class as a Canvas and a Moodle grade-import CSV.

Both files have one row per roster student, in roster order, keyed by the roster's id (Canvas:
``SIS User ID``, with the e-mail as ``SIS Login ID``; Moodle: ``ID number`` and ``Email
address``, either can be the "identify user by" column), and columns for the total and each
TODO (the final points, after overrides; with a due date, the total after the late penalty and
the days late). Canvas's second row is its ``Points Possible`` row. A student without exactly
one submission is exported with empty grades, and every such case, and every submission no
student claims, is printed and written to ``export/roster-report.txt`` (roster.py says how
matching works). Learner-controlled names are written as spreadsheet text, never formulas.
"""
from __future__ import annotations

import argparse
import csv
import io
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from kvsched_lab.grading.learner.writers import atomic_write, csv_cell
from kvsched_lab.grading.classroom.late import LateError, LateRule, read_times, rule
from kvsched_lab.grading.classroom.roster import RosterError, Student, last_part, match, read_roster
from kvsched_lab.grading.judging.verdict import POINTS
from kvsched_lab.sim.scheduler import TODO_METHODS


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
                times: Dict[str, object]) -> Tuple[List[Dict[str, str]], List[str]]:
    """One dict per student (id, name, email, submission, total, the TODOs, late_days; strings, "" = no grade),
    and the roster report's lines."""
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
        row = {"id": s.id, "name": s.name, "email": s.email, "submission": sub or "", "late_days": ""}
        row.update({t: "" for t in TODO_METHODS}, total="")
        if sub is not None:
            g = grades[sub]
            row.update({t: g[t] for t in TODO_METHODS}, total=g["total"])
            if late is not None:
                when = (times.get(f"id:{s.id}") or times.get(f"file:{sub}".lower())
                        or times.get(f"file:{last_part(sub)}"))
                days, total = late.apply(int(g["total"]), when)
                row.update(total=str(total), late_days=str(days))
        table.append(row)
    return table, m.report(students)


def _csv(rows: List[List[str]]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer).writerows([[csv_cell(str(c)) for c in r] for r in rows])
    return buffer.getvalue().encode("utf-8")


def canvas_csv(table: Sequence[Dict[str, str]], assignment: str, late: bool) -> bytes:
    head = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", f"{assignment} total",
            *(f"{assignment}: {t}" for t in TODO_METHODS)] + (["late days"] if late else [])
    possible = ["    Points Possible", "", "", "", "", str(POINTS * len(TODO_METHODS)),
                *(str(POINTS) for _ in TODO_METHODS)] + ([""] if late else [])
    rows = [[r["name"], "", r["id"], r["email"], "", r["total"], *(r[t] for t in TODO_METHODS)]
            + ([r["late_days"]] if late else []) for r in table]
    return _csv([head, possible, *rows])


def moodle_csv(table: Sequence[Dict[str, str]], assignment: str, late: bool) -> bytes:
    head = ["ID number", "Email address", "Full name", f"{assignment} total",
            *(f"{assignment}: {t}" for t in TODO_METHODS)] + (["Late days"] if late else [])
    rows = [[r["id"], r["email"], r["name"], r["total"], *(r[t] for t in TODO_METHODS)]
            + ([r["late_days"]] if late else []) for r in table]
    return _csv([head, *rows])


def export_main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="kvsched grade export", description=(
        "Write a graded class (OUT/grades.csv) as a Canvas gradebook CSV and a Moodle grade-import CSV, "
        "keyed by the roster's ids. See docs/grading.md."))
    p.add_argument("out", metavar="OUT", help="the folder kvsched grade wrote")
    p.add_argument("--roster", required=True, help="CSV: id,name,email,file (file: a pattern of the submission name)")
    p.add_argument("--assignment", default="kvsched-lab", help="the assignment's column name (default kvsched-lab)")
    p.add_argument("--to", default=None, help="folder for the exports (default OUT/export)")
    p.add_argument("--due", default=None, help="due date, ISO 8601 (e.g. 2026-12-01T23:59:00+08:00)")
    p.add_argument("--times", default=None, help="CSV of submission times: id (or file), submitted")
    p.add_argument("--late-penalty", type=float, default=10.0,
                   help="percent of the total lost per started day late (default 10)")
    args = p.parse_args(argv)
    out = Path(args.out)
    try:
        if bool(args.due) != bool(args.times):
            raise LateError("--due and --times go together")
        late = rule(args.due, args.late_penalty) if args.due else None
        times = read_times(Path(args.times), late.due) if late else {}
        table, report = class_table(read_grades(out), read_roster(Path(args.roster)), late, times)
    except (RosterError, LateError, ValueError) as e:
        print(f"kvsched grade export: {e}", file=sys.stderr)
        return 2
    to = Path(args.to) if args.to else out / "export"
    to.mkdir(parents=True, exist_ok=True)
    atomic_write(to / "canvas.csv", canvas_csv(table, args.assignment, late is not None))
    atomic_write(to / "moodle.csv", moodle_csv(table, args.assignment, late is not None))
    atomic_write(to / "roster-report.txt", "".join(line + "\n" for line in report).encode("utf-8"))
    for line in report:
        print(line)
    graded = sum(1 for r in table if r["total"] != "")
    print(f"exported {graded} of {len(table)} students to {to / 'canvas.csv'} and {to / 'moodle.csv'}; "
          f"{len(report)} line(s) to review in {to / 'roster-report.txt'}")
    return 0
