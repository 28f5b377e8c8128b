"""The runtime audit of learner code in the grading kernel's forked child: advisory review notes.

`watch` adds a ``sys.addaudithook`` hook before any learner code exists in the child and writes
``{"review": ...}`` lines to the results pipe when learner code does what a TODO has no need to
do. It runs in the learner's own process, so determined code can blind it: it informs the
instructor, it enforces nothing (isolation is the sandbox's job, sandbox.py).
"""
from __future__ import annotations

import json
import os
import sys
from typing import List

MAX_REVIEW_NOTES = 20  # distinct audit notes one child reports; more adds nothing for a reader
# Modules whose import by learner code is reported: the reference, the grader (this package), and
# the library's withheld versions of the chapter's scheduler.
WATCHED_IMPORTS = ("solutions", "kvsched_lab.grading", "kvsched_lab.sim.policies.seed", "kvsched_lab.sim.policies.seed_compact")
# Audit events reported as review notes (event name prefix -> what the note says).
WATCHED_EVENTS = {"subprocess.": "started a process", "os.system": "started a process",
                  "os.exec": "started a process", "os.spawn": "started a process",
                  "os.posix_spawn": "started a process", "os.fork": "forked a process",
                  "os.forkpty": "forked a process", "socket.": "used a socket", "os.kill": "sent a signal",
                  "os.killpg": "sent a signal", "ctypes.": "used ctypes", "gc.get_": "searched the heap (gc)",
                  "sys._current_frames": "read other threads' frames", "sys.addaudithook": "added an audit hook"}


def watch(wfd: int, allowed_roots: List[str]) -> None:
    """Report, as ``{"review": ...}`` lines on `wfd`, what a TODO has no need to do.

    A runtime audit hook (it cannot be removed once added): opening paths outside `allowed_roots`
    (the Python environment and the course library), starting or forking processes, sockets,
    signals, ctypes, searching the heap, importing the reference or the grader. A note is written
    the moment it happens, so code cannot hide it afterwards without also losing its results.
    """
    seen: set = set()
    write, dumps, fsdecode, isabs, abspath = os.write, json.dumps, os.fsdecode, os.path.isabs, os.path.abspath
    roots = tuple(r.rstrip("/") + "/" for r in allowed_roots)

    def note(text: str) -> None:
        if text not in seen and len(seen) < MAX_REVIEW_NOTES:
            seen.add(text)
            try:
                write(wfd, (dumps({"review": text[:200]}) + "\n").encode())
            except OSError:
                pass

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path = args[0] if args else None
            if isinstance(path, (str, bytes)):
                path = fsdecode(path)
                full = path if isabs(path) else abspath(path)
                if not full.startswith(roots):
                    note(f"opened {full!r}")
        elif event == "import":
            name = str(args[0]) if args else ""
            if any(name == w or name.startswith(w + ".") for w in WATCHED_IMPORTS):
                note(f"imports {name}")
        else:
            for prefix, what in WATCHED_EVENTS.items():
                if event.startswith(prefix):
                    note(what)
                    break

    sys.addaudithook(hook)


