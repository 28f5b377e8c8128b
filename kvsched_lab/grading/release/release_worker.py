"""One nbval worker of `kvsched release`: a pytest process that runs notebooks one after another,
each in a fresh kernel, in one copy of the bundle that is put back as it was after each.

release_nbval.py starts a few of these side by side, each as
``python -m kvsched_lab.grading.release.release_worker EVENTS CLAIMS STAGING COPY -- PYTEST_ARGS``
with every notebook of both editions in PYTEST_ARGS, longest first. They share the queue through
the CLAIMS folder: before its first cell runs, a notebook is claimed by creating ``CLAIMS/K``
(K: its place in the list) with ``O_EXCL``, which exactly one worker can do; a worker skips the
notebooks another has claimed without starting their kernels. So whichever worker is free takes
the next notebook, and pytest, nbval and their imports start once per worker, not once per
notebook.

Each notebook still starts as a student who opens it first would see it:

* nbval starts a new kernel for every notebook file and stops it after the file's last cell;
* after that last cell, every file of COPY is compared (SHA-256) with the same file of STAGING,
  the copy every worker's copy was made from: a file the notebook added is removed, one it changed
  or removed is copied back, so the next notebook finds exactly the bundle again. A file it added
  to the course folder (``notebooks/``, bytecode caches aside) is named in the notebook's report,
  since in a Run All in order the notebooks after it would read it.

EVENTS gets one JSON line as each notebook starts and one as it ends: its cells' outcomes, what
it left behind, its wall seconds and its CPU seconds (its kernel's, and this process's own).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from kvsched_lab.grading.kernel.nbrun import IpcKernels, cell_message

_COURSE = "notebooks"  # the course folder: what a later notebook of a Run All would read
_ANSWERS = "kvsched_answers"  # lab.ANSWERS_DIRNAME: the answers folder inside the course folder


def tree_digests(root: Path) -> Dict[str, str]:
    """SHA-256 of every file under `root` by path relative to it; a link (never followed) or an
    unreadable file as a word that no digest equals."""
    out = {}
    for folder, dirs, files in os.walk(root):
        links = [d for d in dirs if os.path.islink(os.path.join(folder, d))]
        dirs[:] = [d for d in dirs if d not in links]
        for name in files + links:
            path = Path(folder, name)
            try:
                out[path.relative_to(root).as_posix()] = "link" if path.is_symlink() else \
                    hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                out[path.relative_to(root).as_posix()] = "unreadable"
    return out


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.is_symlink() or path.exists():
        path.unlink()


def left_behind_problem(rel: str) -> str:
    """The problem naming a file a run added to the course folder."""
    return (f"{rel} was left by the run: a later notebook of a Run All in order would read it"
            + (" (a saved answer: the untouched stubs must not save one)" if f"/{_ANSWERS}/" in f"/{rel}" else ""))


def put_back(copy: Path, staging: Path, expected: Dict[str, str]) -> List[str]:
    """Make `copy` file for file what `staging` is (`expected`: its digests); the course-folder files
    the run added (bytecode caches aside), each as a problem."""
    now = tree_digests(copy)
    added = sorted(set(now) - set(expected))
    for rel in added:
        _remove(copy / rel)
    for rel in sorted(rel for rel, digest in expected.items() if now.get(rel) != digest):
        _remove(copy / rel)
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(staging / rel, copy / rel)
    for folder, dirs, files in os.walk(copy, topdown=False):  # folders the run made, now empty
        rel = Path(folder).relative_to(copy).as_posix()
        if not dirs and not files and rel != "." and not (staging / rel).is_dir():
            Path(folder).rmdir()
    return [left_behind_problem(rel) for rel in added
            if rel.startswith(f"{_COURSE}/") and "__pycache__" not in rel.split("/")]


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _file_of(item) -> str:  # noqa: ANN001 - a pytest item
    return item.nodeid.split("::")[0]


class Worker:
    """pytest plugin: claims each notebook before its first cell, skips the ones another worker
    claimed, records each cell's outcome, and puts the copy back after each notebook."""

    def __init__(self, events: Path, claims: Path, staging: Path, copy: Path, notebooks: List[str]) -> None:
        self.events, self.claims, self.staging, self.copy = events, claims, staging, copy
        self.place = {rel: k for k, rel in enumerate(notebooks)}
        self.expected = tree_digests(staging)
        self.seen, self.mine = "", False
        self.outcomes: Dict[str, List[str]] = {}
        self.began = self.kernel_cpu = self.own_cpu = 0.0

    def _say(self, **event) -> None:  # noqa: ANN003 - one JSON object per line
        with open(self.events, "a", encoding="utf-8") as f:
            f.write(json.dumps(event) + "\n")

    def _claim(self, rel: str) -> bool:
        try:
            os.close(os.open(self.claims / str(self.place[rel]), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except (FileExistsError, KeyError):
            return False
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem) -> Optional[bool]:  # noqa: ANN001 - pytest's hook
        rel = _file_of(item)
        if rel != self.seen:  # a notebook's first cell: claim it, or leave it to the worker that did
            self.seen, self.mine = rel, self._claim(rel)
            if self.mine:
                # The cell before the notebooks skipped here was torn down for the first of them, so
                # collectors they share with it and not with this one (the folder notebooks/zh) are
                # still set up: tear those down, or pytest refuses to set this notebook up.
                item.session._setupstate.teardown_exact(item)
                self.outcomes = {}
                self.began = time.monotonic()
                self.kernel_cpu, self.own_cpu = _cpu(resource.RUSAGE_CHILDREN), _cpu(resource.RUSAGE_SELF)
                self._say(event="start", notebook=rel)
        return None if self.mine else True  # True: pytest neither sets this cell up nor runs it

    def pytest_runtest_logreport(self, report) -> None:  # noqa: ANN001 - pytest's hook
        if report.when == "call" or report.outcome != "passed":
            text = str(report.longrepr or "")
            crash = str(getattr(getattr(report.longrepr, "reprcrash", None), "message", ""))
            # not a cell's own error (nbval's, the kernel's): the exception, not the traceback's first line
            message = crash if crash and not re.search(r"^\s*Cell \d+: ", text, re.M) else cell_message(text)
            self.outcomes[report.nodeid] = [report.outcome, f"{message} (in {report.when})"
                                            if report.when != "call" else message]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):  # noqa: ANN001, ANN201 - pytest's hook
        yield  # the notebook's kernel is stopped here when this was its last cell
        rel = _file_of(item)
        if nextitem is None or _file_of(nextitem) != rel:
            seconds = time.monotonic() - self.began
            try:
                left = put_back(self.copy, self.staging, self.expected)
            except OSError as e:  # the next notebook would not find the bundle: this worker stops
                left = [f"{rel}: its copy of the bundle could not be put back as it was ({e})"]
                item.session.shouldstop = "the copy of the bundle could not be put back"
            self._say(event="end", notebook=rel, outcomes=self.outcomes, left=left, seconds=round(seconds, 2),
                      kernel_cpu=round(_cpu(resource.RUSAGE_CHILDREN) - self.kernel_cpu, 2),
                      nbval_cpu=round(_cpu(resource.RUSAGE_SELF) - self.own_cpu, 2))


def main(argv: List[str]) -> int:
    events, claims, staging, copy = (Path(a) for a in argv[:4])
    args = argv[argv.index("--") + 1:]
    # jsonschema's optional IRI checker costs ~1.5 s of CPU to import; nbformat works without it.
    sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]
    notebooks = [Path(a).relative_to(copy).as_posix() for a in args if a.endswith(".ipynb")]  # the queue, in order
    worker = Worker(events, claims, staging, copy, notebooks)
    return int(pytest.main(args, plugins=[worker, IpcKernels()]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
