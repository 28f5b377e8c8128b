"""The runtime audit of learner code in the grading kernel's forked child: advisory review notes.

`watch` adds a ``sys.addaudithook`` hook before any learner code exists in the child and sends
``{"review": ...}`` lines through the results `Channel` when learner code does what a TODO has no
need to do; `guard_channel` wraps the primitives that could close or redirect that channel, or
start a process without an audit event. It runs in the learner's own process, so determined code
can still blind it: **it is advisory**. It informs the instructor and enforces nothing; isolation
is the sandbox's (sandbox.py, limits.py) and the grade is the comparison of observations outside
(verdict.py). What the parent can see for itself (harness.py) is reported regardless: every line
carries a sequence number, so lines lost while the channel was closed or redirected show as a
gap, and a channel that went silent before the harness finished shows too.

Notes are ranked (`severity`): when more than `MAX_REVIEW_NOTES` arrive, the most serious are
kept, so harmless notes cannot push ``imports solutions`` out.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, List

MAX_REVIEW_NOTES = 20  # distinct audit notes one child reports; more adds nothing for a reader
# Modules whose import by learner code is reported: the reference, the grader (this package), and
# the library's withheld versions of the chapter's scheduler.
WATCHED_IMPORTS = ("solutions", "kvsched_lab.grading", "kvsched_lab.sim.policies.seed",
                   "kvsched_lab.sim.policies.seed_compact", "_posixsubprocess")
# Audit events reported as review notes (event name prefix -> what the note says).
WATCHED_EVENTS = {"subprocess.": "started a process", "os.system": "started a process",
                  "os.exec": "started a process", "os.spawn": "started a process",
                  "os.posix_spawn": "started a process", "os.fork": "forked a process",
                  "os.forkpty": "forked a process", "socket.": "used a socket", "os.kill": "sent a signal",
                  "os.killpg": "sent a signal", "ctypes.": "used ctypes", "gc.get_": "searched the heap (gc)",
                  "sys._current_frames": "read other threads' frames", "sys.addaudithook": "added an audit hook"}


# The notes with fields, in their words (judging/review_texts.py reads each back into the feedback's language).
OPENED = "opened {path}"
OPENED_MEMORY = "opened process memory for writing ({path})"
IMPORTS = "imports {module}"
CLOSED_CHANNEL = "tried to close or redirect the results channel ({call})"
STARTED_VIA = "started a process ({call})"

# Most serious first: a note starting with one of these ranks by its position (others rank last).
SEVERITY = ("imports solutions", "tampered", "opened process memory", "imports kvsched_lab.grading",
            "replaced modules", "imports ", "tried to close", "started a process", "forked a process",
            "used ctypes", "searched the heap", "read other threads", "added an audit hook", "sent a signal",
            "used a socket", "opened ")
NOTE_BUDGET = 200  # distinct notes one child sends (each bounded to 200 characters): the parent keeps the best


def severity(note: str) -> int:
    """Rank of `note`: 0 is the most serious."""
    return next((k for k, start in enumerate(SEVERITY) if note.startswith(start)), len(SEVERITY))


def keep_notes(notes: List[str], new: str) -> None:
    """Add `new` to `notes` (distinct, at most `MAX_REVIEW_NOTES`), dropping the least serious when full."""
    if new in notes:
        return
    notes.append(new)
    if len(notes) > MAX_REVIEW_NOTES:
        notes.remove(max(reversed(notes), key=severity))  # the least serious, the latest among equals
    notes.sort(key=severity)


class Channel:
    """The child's results pipe: one JSON object per line, each numbered (``"n"``) from 0."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.sent = 0
        self._write, self._dumps = os.write, json.dumps  # bound now: learner code may replace os.write

    def send(self, record: dict) -> None:
        record["n"] = self.sent
        self.sent += 1  # counted even when the write fails: the parent then sees the gap
        data = (self._dumps(record) + "\n").encode()
        while data:
            data = data[self._write(self.fd, data):]


def _refusing(fn: Callable, channel: Channel, note: Callable[[str], None], name: str) -> Callable:
    """`fn` (os.close, os.dup2, os.closerange) refusing to close or replace the channel's descriptor."""
    def guarded(*args: Any, **kwargs: Any) -> Any:
        fds = [a for a in args if isinstance(a, int)]
        if name == "close":
            hits = fds[:1] == [channel.fd]
        elif name == "dup2":  # dup2(fd, fd2) replaces fd2; copying the channel elsewhere is harmless
            hits = len(fds) >= 2 and fds[1] == channel.fd
        else:  # closerange(low, high)
            hits = len(fds) >= 2 and fds[0] <= channel.fd < fds[1]
        if hits:
            note(CLOSED_CHANNEL.format(call=f"os.{name}"))
            raise OSError(9, "Bad file descriptor (the grading harness's results channel)")
        return fn(*args, **kwargs)
    return guarded


def fingerprint_modules(prefix: str = "kvsched_lab") -> dict:
    """Identity of `sys.modules` and of every module under `prefix` and its functions, to notice tampering."""
    out: dict = {"sys.modules": id(sys.modules)}
    for name, module in list(sys.modules.items()):
        if name == prefix or name.startswith(prefix + "."):
            out[name] = id(module)
            if name.startswith(prefix + ".grading"):
                out.update({f"{name}.{k}": id(v) for k, v in list(vars(module).items()) if callable(v)})
    return out


def tampered(before: dict, after: dict) -> List[str]:
    """Names whose identity changed between two `fingerprint_modules` (a module or function replaced)."""
    return sorted(k for k in before if after.get(k) != before[k])


def guard_channel(channel: Channel, note: Callable[[str], None]) -> None:
    """Wrap what could blind the channel or start a process unseen (best effort: see the docstring)."""
    import posix

    for module in (os, posix):
        for name in ("close", "dup2", "closerange"):
            if hasattr(module, name):
                setattr(module, name, _refusing(getattr(module, name), channel, note, name))
    try:
        import _posixsubprocess

        fork_exec = _posixsubprocess.fork_exec

        def noted(*args: Any, **kwargs: Any) -> Any:
            note(STARTED_VIA.format(call="_posixsubprocess.fork_exec"))
            return fork_exec(*args, **kwargs)

        _posixsubprocess.fork_exec = noted
    except ImportError:
        pass


def watch(channel: Channel, allowed_roots: List[str]) -> Callable[[str], None]:
    """Report, as ``{"review": ...}`` lines on `channel`, what a TODO has no need to do; return `note`.

    A runtime audit hook (it cannot be removed once added): opening paths outside `allowed_roots`
    (the Python environment and the course library; any path form: str, bytes, os.PathLike),
    opening a process's memory for writing, starting or forking processes, sockets, signals,
    ctypes, searching the heap, importing the reference or the grader. A note is sent the moment
    it happens, so code cannot hide it afterwards without also losing its results.
    """
    seen: set = set()
    fspath, fsdecode, isabs, abspath = os.fspath, os.fsdecode, os.path.isabs, os.path.abspath
    roots = tuple(r.rstrip("/") + "/" for r in allowed_roots)

    def note(text: str) -> None:
        if text not in seen and len(seen) < NOTE_BUDGET:
            seen.add(text)
            try:
                channel.send({"review": text[:200]})
            except (OSError, ValueError):
                pass

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path = args[0] if args else None
            try:
                path = fsdecode(fspath(path)) if not isinstance(path, int) and path is not None else None
            except TypeError:
                path = None
            if path is not None:
                full = path if isabs(path) else abspath(path)
                mode = args[1] if len(args) > 1 else None
                flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
                writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or flags & (os.O_WRONLY | os.O_RDWR)
                if full.startswith("/proc/") and full.endswith("/mem") and writing:
                    note(OPENED_MEMORY.format(path=repr(full)))
                elif not full.startswith(roots):
                    note(OPENED.format(path=repr(full)))
        elif event == "import":
            name = str(args[0]) if args else ""
            if any(name == w or name.startswith(w + ".") for w in WATCHED_IMPORTS):
                note(IMPORTS.format(module=name))
        else:
            for prefix, what in WATCHED_EVENTS.items():
                if event.startswith(prefix):
                    note(what)
                    break

    sys.addaudithook(hook)
    return note
