"""The journal: each learner's grade written to ``OUT/journal.jsonl`` the moment it is known.

A long batch loses nothing to a kill: ``kvsched grade ... --resume`` reads the journal back and
grades only the learners it lacks (or whose files changed since: each entry carries the SHA-256
of the learner's copied files). The first line is a header (the version stamp, the options that
change grades, the shard); `open_journal` refuses to resume a journal whose header differs, so
one ``grades.csv`` never mixes two graders. Each entry is one JSON line, flushed and fsynced
before the next learner's is written; a line cut short by a kill is ignored when read back.
A shard's journal is also what ``kvsched grade merge`` reads (merge.py).

Line formats (JSON, one object a line)::

    {"kvsched_journal": 1, "stamp": {...}, "options": {...}, "shard": [K, N] or null}
    {"learner": NAME, "files_sha256": HEX, "grade": {...}}   # encode_grade's form
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from kvsched_lab.grading.batch.grade import Grade
from kvsched_lab.grading.batch.stamp import Stamp, stamp_from
from kvsched_lab.grading.judging.verdict import TodoGrade
from kvsched_lab.grading.learner.writers import atomic_write
from kvsched_lab.i18n.language import LANGUAGES
from kvsched_lab.i18n.messages import Deferred, Rendered

JOURNAL = "journal.jsonl"
FORMAT = 1


# --------------------------------------------------------------------------- grades as JSON

def _encode_text(text: Any) -> Any:
    """A feedback line: a plain string; a `Deferred` template kept as template and fields (rendered
    later); any other message (a joined list, a fenced block, a mismatch) as its text in every
    language, since its English text is no template (it may hold braces)."""
    if type(text) is Deferred:
        return {"template": text.template, "fields": {k: _encode_text(v) for k, v in text.fields.items()}}
    if isinstance(text, Deferred):
        return {"rendered": {lang: text.render(lang) for lang in LANGUAGES}}
    return text if isinstance(text, (str, int, float, bool)) or text is None else str(text)


def _decode_text(data: Any) -> Any:
    if isinstance(data, dict):
        if "rendered" in data:
            return Rendered(data["rendered"])
        return Deferred(data["template"], **{k: _decode_text(v) for k, v in data["fields"].items()})
    return data


def encode_grade(g: Grade) -> Dict[str, Any]:
    """`g` as JSON-able data that `decode_grade` turns back into an equal `Grade` (feedback lines included)."""
    return {"submission": g.submission, "error": g.error, "review": list(g.review), "sandboxed": g.sandboxed,
            "sources": dict(g.sources), "elapsed_s": g.elapsed_s,
            "todos": {name: {"status": t.status, "points": t.points, "passed": t.passed, "total": t.total,
                             "origin": t.origin, "lines": [_encode_text(x) for x in t.lines],
                             "failing": list(t.failing)}
                      for name, t in g.todos.items()}}


def decode_grade(data: Dict[str, Any]) -> Grade:
    todos = {name: TodoGrade(t["status"], t["points"], t["passed"], t["total"], t["origin"],
                             [_decode_text(x) for x in t["lines"]], list(t["failing"]))
             for name, t in data["todos"].items()}
    return Grade(data["submission"], todos, error=data["error"], review=list(data["review"]),
                 sandboxed=data["sandboxed"], sources=dict(data["sources"]), elapsed_s=float(data["elapsed_s"]))


def files_digest(path: Path, error: str = "") -> str:
    """SHA-256 of a learner's copied files (relative names and bytes), or of why it cannot be graded."""
    h = hashlib.sha256(b"error\0" + os.fsencode(error) if error else b"files\0")  # any name: fsencode
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path] if path.is_file() else []
    for p in files:
        h.update(os.fsencode(str(p.relative_to(path) if path.is_dir() else p.name)) + b"\0")
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


# --------------------------------------------------------------------------- the file

@dataclass
class Header:
    stamp: Stamp
    options: Dict[str, Any]  # what changes a grade: timeout, memory_mb, sandboxed
    shard: Optional[Tuple[int, int]]  # (K, N), or None for the whole class

    def as_dict(self) -> Dict[str, Any]:
        return {"kvsched_journal": FORMAT, "stamp": self.stamp.as_dict(), "options": self.options,
                "shard": list(self.shard) if self.shard else None}

    def differences(self, other: "Header") -> str:
        """"" when a journal with header `other` may be resumed by a run with this one."""
        out = [self.stamp.differences(other.stamp)]
        out += [f"{k} {other.options.get(k)!r} then, {v!r} now" for k, v in self.options.items()
                if other.options.get(k) != v]
        if self.shard != other.shard:
            out.append(f"shard {_shard_text(other.shard)} then, {_shard_text(self.shard)} now")
        return "; ".join(x for x in out if x)


def _shard_text(shard: Optional[Tuple[int, int]]) -> str:
    return f"{shard[0]}/{shard[1]}" if shard else "none (whole class)"


def header_from(data: Any) -> Header:
    if not isinstance(data, dict) or data.get("kvsched_journal") != FORMAT:
        raise ValueError("its first line is not a kvsched journal header")
    shard = data.get("shard")
    return Header(stamp_from(data.get("stamp")), dict(data.get("options") or {}),
                  (int(shard[0]), int(shard[1])) if shard else None)


@dataclass
class Entry:
    files_sha256: str
    grade: Grade


def read_journal(path: Path) -> Tuple[Header, Dict[str, Entry]]:
    """The header and, per learner, the last complete entry. ValueError when it is no journal."""
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError as e:
        raise ValueError(f"cannot read the journal {path}: {e.strerror}") from None
    try:
        header = header_from(json.loads(lines[0]))
    except ValueError as e:
        raise ValueError(f"{path} is not a kvsched grading journal: {e}") from None
    entries: Dict[str, Entry] = {}
    for line in lines[1:]:
        try:
            data = json.loads(line)
            entries[data["learner"]] = Entry(data["files_sha256"], decode_grade(data["grade"]))
        except (ValueError, KeyError, TypeError):  # a line cut short by a kill: that learner is graded again
            continue
    return header, entries


def _entry_line(learner: str, digest: str, grade: Grade) -> str:
    # ASCII: learner text (an exception message) may hold a lone surrogate, which no UTF-8 file takes
    return json.dumps({"learner": learner, "files_sha256": digest, "grade": encode_grade(grade)}) + "\n"


@dataclass
class Journal:
    """An open journal: `record` appends one learner's entry, durably, from any worker thread."""

    path: Path
    entries: Dict[str, Entry] = field(default_factory=dict)  # what an earlier run already graded
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def done(self, learner: str, digest: str) -> Optional[Grade]:
        """The journalled grade of `learner` if its files are the ones graded then, else None."""
        entry = self.entries.get(learner)
        return entry.grade if entry is not None and entry.files_sha256 == digest else None

    def record(self, learner: str, digest: str, grade: Grade) -> None:
        line = _entry_line(learner, digest, grade)
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())


def open_journal(out: Path, header: Header, resume: bool) -> Journal:
    """The journal in `out`: read back with `resume` (refused if its header differs), else started anew.

    ValueError, before anything is written, when `resume` meets a journal of another grader,
    other options or another shard."""
    path = out / JOURNAL
    entries: Dict[str, Entry] = {}
    if resume and path.exists():
        old, entries = read_journal(path)
        why = header.differences(old)
        if why:
            raise ValueError(f"cannot resume {path}: it was written by another run ({why}); "
                             "grade into a new --out, or without --resume to start over")
        # Rewritten with only the entries kept, so a resumed journal stays one entry per learner.
    write_journal(out, header, entries)
    return Journal(path, entries)


def write_journal(out: Path, header: Header, entries: Dict[str, Entry]) -> None:
    """A whole journal at once, atomically (a resumed run's start, a merge's end)."""
    out.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(header.as_dict()) + "\n"]
    lines += [_entry_line(name, e.files_sha256, e.grade) for name, e in entries.items()]
    atomic_write(out / JOURNAL, "".join(lines).encode("ascii"))  # json.dumps escapes any non-ASCII
