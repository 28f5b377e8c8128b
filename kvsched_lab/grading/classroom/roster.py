"""The class roster: which student each graded submission belongs to, with nothing dropped.

A roster is CSV with the header ``id,name,email,file`` (any column order): the student's id (the
LMS's: Canvas SIS user id, Moodle ID number), name, e-mail, and a file-name pattern (shell style,
``*`` and ``?``; several separated by ``;``; case does not matter) that matches the last part of
the student's submission name in grades.csv (``alice*`` matches ``class/alice.py`` and
``class/Alice/``). Matching reports, never guesses:

* a submission no pattern matches: *unmatched submission* (it stays in grades.csv, out of the exports);
* a student no submission matches: *no submission* (exported with an empty grade);
* a student whose patterns match several submissions, or a submission several students' patterns
  match: *ambiguous* (the student is exported with an empty grade; fix the patterns).

Mistakes in the roster file itself (bad header, a repeated or empty id, an empty pattern) raise
`RosterError` naming the line, before anything is written.
"""
from __future__ import annotations

import csv
import fnmatch
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from kvsched_lab.grading.classroom.overrides import read_instructor_file

HEADER = ("id", "name", "email", "file")


class RosterError(ValueError):
    """A mistake in the roster file; the message names the line."""


@dataclass(frozen=True)
class Student:
    id: str  # the LMS's id for the student
    name: str
    email: str
    patterns: tuple  # lower-case shell patterns matched against a submission's last name part
    line: int  # in the roster file


@dataclass
class Matching:
    """Who handed in what: every student and every submission appear exactly once across the fields."""

    submission: Dict[str, Optional[str]] = field(default_factory=dict)  # student id -> submission (None: none/ambiguous)
    unmatched: List[str] = field(default_factory=list)  # submissions no student's pattern matches
    missing: List[str] = field(default_factory=list)  # ids of students with no submission
    ambiguous: Dict[str, List[str]] = field(default_factory=dict)  # student id -> the submissions in question

    def report(self, students: Sequence[Student]) -> List[str]:
        """The lines an instructor must read (empty: every student has exactly one submission)."""
        names = {s.id: s.name for s in students}
        lines = [f"unmatched submission (no roster pattern matches it): {s}" for s in self.unmatched]
        lines += [f"no submission for {i} ({names[i]})" for i in self.missing]
        lines += [f"ambiguous for {i} ({names[i]}): {', '.join(subs)} (fix the roster's patterns)"
                  for i, subs in self.ambiguous.items()]
        return lines


def read_roster(path: Path) -> List[Student]:
    text = read_instructor_file(path, RosterError)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header: Optional[List[str]] = None
    students: List[Student] = []
    seen: Dict[str, int] = {}
    try:
        for row in reader:
            line = reader.line_num
            if not any(c.strip() for c in row):
                continue
            if header is None:
                header = [c.strip().lower() for c in row]
                if sorted(header) != sorted(HEADER):
                    raise RosterError(f"{path}, line {line}: the header must be {','.join(HEADER)} "
                                      f"(got {','.join(header)})")
                continue
            if len(row) != len(header):
                raise RosterError(f"{path}, line {line}: {len(row)} fields, the header has {len(header)}")
            cells = {c: row[header.index(c)].strip() for c in HEADER}
            patterns = tuple(p.strip().lower() for p in cells["file"].split(";") if p.strip())
            if not cells["id"]:
                raise RosterError(f"{path}, line {line}: no id")
            if cells["id"] in seen:
                raise RosterError(f"{path}, line {line}: id {cells['id']!r} is already on line {seen[cells['id']]}")
            if not patterns:
                raise RosterError(f"{path}, line {line}: no file pattern for {cells['id']}")
            seen[cells["id"]] = line
            students.append(Student(cells["id"], cells["name"], cells["email"], patterns, line))
    except csv.Error as e:
        raise RosterError(f"{path}, line {reader.line_num}: not valid CSV ({e})") from None
    if header is None:
        raise RosterError(f"{path}: empty; the first line must be the header {','.join(HEADER)}")
    return students


def last_part(submission: str) -> str:
    """The part of a grades.csv name a pattern is matched against: the file or folder name, lower case."""
    return Path(submission.lstrip("'")).name.lower()


def match(students: Sequence[Student], submissions: Sequence[str]) -> Matching:
    """Pair students with submissions (see the module docstring for the rules)."""
    hits = {s.id: [x for x in submissions if any(fnmatch.fnmatchcase(last_part(x), p) for p in s.patterns)]
            for s in students}
    owners: Dict[str, List[str]] = {}
    for sid, subs in hits.items():
        for x in subs:
            owners.setdefault(x, []).append(sid)
    m = Matching(unmatched=[x for x in submissions if x not in owners])
    for s in students:
        subs = hits[s.id]
        shared = [x for x in subs if len(owners[x]) > 1]
        if len(subs) == 1 and not shared:
            m.submission[s.id] = subs[0]
        else:
            m.submission[s.id] = None
            if subs:
                m.ambiguous[s.id] = subs
            else:
                m.missing.append(s.id)
    return m
