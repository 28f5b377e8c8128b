"""The journal: each learner's grade written to ``OUT/journal.jsonl`` the moment it is known.

A long batch loses nothing to a kill: ``kvsched grade ... --resume`` reads the journal back and
grades only the learners it lacks (or whose files changed since: each entry carries the SHA-256
of the learner's copied files). The first line is a header (the version stamp, the options that
change grades, the shard); `open_journal` refuses to resume a journal whose header differs, so
one ``grades.csv`` never mixes two graders. Each entry is one JSON line, flushed and fsynced
before the next learner's is written; a line cut short by a kill is ignored when read back.
A shard's journal is also what ``kvsched grade merge`` reads (merge.py).

The folder is shared, so nothing read back is trusted: each entry is signed (an HMAC keyed with
the grader user's own key, kept outside OUT: journal_key.py) over the header and the entry, and
decoded strictly (every TODO there, each field of its type). An entry that fails either is
*rejected*: ``--resume`` grades that learner again and says so, merge refuses it, nothing crashes.
An entry holds everything a feedback file is made from (the oversized files not read included),
so feedback written from the journal is the bytes a plain run writes.

Line formats (JSON, one object a line)::

    {"kvsched_journal": 1, "stamp": {...}, "options": {...}, "shard": [K, N] or null}
    {"learner": NAME, "files_sha256": HEX, "grade": {...}, "mac": HEX}   # encode_grade's form
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from kvsched_lab.grading.batch.grade import Grade
from kvsched_lab.grading.batch.journal_key import journal_key, sign, verify
from kvsched_lab.grading.batch.stamp import Stamp, stamp_from
from kvsched_lab.grading.judging.verdict import POINTS, TodoGrade
from kvsched_lab.grading.learner.writers import atomic_write
from kvsched_lab.i18n.language import LANGUAGES
from kvsched_lab.i18n.messages import Deferred, Rendered
from kvsched_lab.sim.scheduler import TODO_METHODS

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
        if set(data) == {"rendered"}:
            rendered = _typed(data["rendered"], dict)
            if set(rendered) != set(LANGUAGES) or not all(isinstance(v, str) for v in rendered.values()):
                raise ValueError("a feedback line is not text in every language")
            return Rendered(rendered)
        if set(data) != {"template", "fields"}:
            raise ValueError("a feedback line is neither text nor a message")
        fields = _typed(data["fields"], dict)
        return Deferred(_typed(data["template"], str), **{str(k): _decode_text(v) for k, v in fields.items()})
    if data is None or isinstance(data, (str, int, float, bool)):
        return data
    raise ValueError("a feedback line is neither text nor a message")


def _typed(value: Any, kind: type) -> Any:
    """`value` if it is a `kind` (an int is no bool here), else ValueError."""
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ValueError(f"{type(value).__name__} where a {kind.__name__} belongs")
    return value


def _texts(value: Any) -> List[str]:
    return [_typed(x, str) for x in _typed(value, list)]


def encode_grade(g: Grade) -> Dict[str, Any]:
    """`g` as JSON-able data that `decode_grade` turns back into an equal `Grade` (everything its feedback
    is made from: the lines, the review notes, the files not read)."""
    return {"submission": g.submission, "error": g.error, "review": list(g.review), "sandboxed": g.sandboxed,
            "skipped": list(g.skipped), "sources": dict(g.sources), "elapsed_s": g.elapsed_s,
            "todos": {name: {"status": t.status, "points": t.points, "passed": t.passed, "total": t.total,
                             "origin": t.origin, "lines": [_encode_text(x) for x in t.lines],
                             "failing": list(t.failing)}
                      for name, t in g.todos.items()}}


def decode_grade(data: Any) -> Grade:
    """The `Grade` `encode_grade` made; ValueError (never KeyError or TypeError) for data of any other shape."""
    try:
        data = _typed(data, dict)
        todos_data = _typed(data["todos"], dict)
        if list(todos_data) != list(TODO_METHODS):
            raise ValueError(f"its TODOs are {', '.join(map(str, todos_data)) or 'none'}, not the five")
        todos = {}
        for name, t in todos_data.items():
            t = _typed(t, dict)
            points, passed, total = (_typed(t[k], int) for k in ("points", "passed", "total"))
            if not (0 <= points <= POINTS and 0 <= passed <= total):
                raise ValueError(f"{name}: {points} points, {passed} of {total} cases")
            todos[name] = TodoGrade(_typed(t["status"], str), points, passed, total, _typed(t["origin"], str),
                                    [_decode_text(x) for x in _typed(t["lines"], list)], _texts(t["failing"]))
        sources = _typed(data["sources"], dict)
        return Grade(_typed(data["submission"], str), todos, error=_typed(data["error"], str),
                     review=_texts(data["review"]), sandboxed=_typed(data["sandboxed"], bool),
                     skipped=_texts(data["skipped"]), sources={str(k): _typed(v, str) for k, v in sources.items()},
                     elapsed_s=float(_typed(data["elapsed_s"], (int, float))))
    except KeyError as e:
        raise ValueError(f"it lacks {e}") from None


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
        keys = list(self.options) + [k for k in other.options if k not in self.options]
        out += [f"{k} {other.options.get(k)!r} then, {self.options.get(k)!r} now" for k in keys
                if other.options.get(k) != self.options.get(k)]
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


def _signed_bytes(header: Header, learner: str, digest: str, grade: Any) -> bytes:
    """What an entry's HMAC covers: the header (so an entry moves to no other run or shard) and the entry."""
    return json.dumps([header.as_dict(), learner, digest, grade], sort_keys=True).encode("ascii")


def _entry(header: Header, key: bytes, data: Any) -> Tuple[str, Entry]:
    """(learner, entry) from one parsed line; ValueError saying why it is not to be trusted."""
    if not isinstance(data, dict) or not isinstance(data.get("learner"), str):
        raise ValueError("not a journal entry")
    learner, digest = data["learner"], data.get("files_sha256")
    if not isinstance(digest, str) or not verify(key, _signed_bytes(header, learner, digest, data.get("grade")),
                                                  data.get("mac")):
        raise ValueError("its signature does not check (edited, or written under another journal key)")
    grade = decode_grade(data["grade"])
    if grade.submission != learner:
        raise ValueError(f"it holds the grade of {grade.submission!r}")
    return learner, Entry(digest, grade)


@dataclass
class JournalRead:
    """A journal read back: its header, per learner the last entry that checks, and what was rejected."""

    header: Header
    entries: Dict[str, Entry]
    rejected: Dict[str, str]  # learner (or "line N") -> why its entry is not trusted; graded again


def read_journal(path: Path, key: Optional[bytes] = None) -> JournalRead:
    """`path` read back and checked (`key`: this user's journal key). ValueError when it is no journal."""
    key = journal_key() if key is None else key
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError as e:
        raise ValueError(f"cannot read the journal {path}: {e.strerror}") from None
    try:
        header = header_from(json.loads(lines[0]))
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as e:
        raise ValueError(f"{path} is not a kvsched grading journal: {e}") from None
    entries: Dict[str, Entry] = {}
    rejected: Dict[str, str] = {}
    for number, line in enumerate(lines[1:], start=2):
        if number == len(lines) and line:
            continue  # the last line cut short by a kill: that learner is graded again
        if not line:
            continue
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):
            rejected[f"line {number}"] = "not a journal entry"
            continue
        try:
            learner, entry = _entry(header, key, data)
        except (ValueError, TypeError, RecursionError) as e:
            who = data["learner"] if isinstance(data, dict) and isinstance(data.get("learner"), str) else f"line {number}"
            entries.pop(who, None)
            rejected[who] = str(e)
            continue
        entries[learner] = entry
        rejected.pop(learner, None)
    return JournalRead(header, entries, rejected)


def _entry_line(header: Header, key: bytes, learner: str, digest: str, grade: Grade) -> str:
    # ASCII: learner text (an exception message) may hold a lone surrogate, which no UTF-8 file takes
    data = json.loads(json.dumps(encode_grade(grade)))  # the signed form is the one read back
    mac = sign(key, _signed_bytes(header, learner, digest, data))
    return json.dumps({"learner": learner, "files_sha256": digest, "grade": data, "mac": mac}) + "\n"


@dataclass
class Journal:
    """An open journal: `record` appends one learner's entry, durably, from any worker thread."""

    path: Path
    header: Optional[Header] = None  # None: a batch without --out (nothing is recorded)
    key: bytes = b""
    entries: Dict[str, Entry] = field(default_factory=dict)  # what an earlier run already graded
    rejected: Dict[str, str] = field(default_factory=dict)  # entries that did not check: graded again
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def done(self, learner: str, digest: str) -> Optional[Grade]:
        """The journalled grade of `learner` if its files are the ones graded then, else None."""
        entry = self.entries.get(learner)
        return entry.grade if entry is not None and entry.files_sha256 == digest else None

    def record(self, learner: str, digest: str, grade: Grade) -> None:
        if self.header is None:
            return
        line = _entry_line(self.header, self.key, learner, digest, grade)
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())


def open_journal(out: Path, header: Header, resume: bool) -> Journal:
    """The journal in `out`: read back with `resume` (refused if its header differs), else started anew.

    ValueError, before anything is written, when `resume` meets a journal of another grader,
    other options or another shard. Entries that do not check are left out (`Journal.rejected`)."""
    path = out / JOURNAL
    key = journal_key()
    entries: Dict[str, Entry] = {}
    rejected: Dict[str, str] = {}
    if resume and path.exists():
        old = read_journal(path, key)
        why = header.differences(old.header)
        if why:
            raise ValueError(f"cannot resume {path}: it was written by another run ({why}); "
                             "grade into a new --out, or without --resume to start over")
        entries, rejected = old.entries, old.rejected
        # Rewritten with only the entries kept, so a resumed journal stays one entry per learner.
    write_journal(out, header, entries, key)
    return Journal(path, header, key, entries, rejected)


def write_journal(out: Path, header: Header, entries: Dict[str, Entry], key: Optional[bytes] = None) -> None:
    """A whole journal at once, atomically (a resumed run's start, a merge's end), every entry signed."""
    key = journal_key() if key is None else key
    out.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(header.as_dict()) + "\n"]
    lines += [_entry_line(header, key, name, e.files_sha256, e.grade) for name, e in entries.items()]
    atomic_write(out / JOURNAL, "".join(lines).encode("ascii"))  # json.dumps escapes any non-ASCII
