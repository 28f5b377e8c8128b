"""Running the student bundle's notebooks for `kvsched release`: every notebook of both editions, in parallel.

Each notebook runs as a student who opens it first would run it: ``pytest --nbval-lax`` in a
fresh kernel, in a fresh copy of the bundle of its own (its own answers folder, kernel and nbval
report), so its outcome cannot depend on which notebooks ran before it or beside it. A Run All
of the notebooks in order sees the same: the bundle's TODOs are untouched stubs, a check never
saves an untouched stub (`lab.check`), and each run checks that its notebook left nothing in the
course folder (``notebooks/``) for a later notebook to read; one that does is a problem.

The notebooks are jobs for a pool of `jobs` workers (default: the CPUs this process may use, at
most `MAX_DEFAULT_JOBS`), the English edition first, then the Chinese one. What is provably
identical is done once:

* the bundle's bytecode: compiled once into a staging copy that every notebook's copy is made
  from (the same sources, their times kept, so Python's own check of each compiled file against
  its source accepts it);
* library replays: every run shares one fresh replay cache (``KVSCHED_REPLAY_CACHE``, read by
  `kvsched_lab.sim.replay.replay` where that cache is in place, ignored elsewhere), keyed by a
  hash of everything a result depends on (the simulator's source bytes, the same in every copy of
  one bundle; the policy's name and arguments; the capacity, metric and block sizes; the
  requests), so a Chinese notebook's replay of a library policy loads what its English twin
  computed, and two runs asking for one key at once compute it once. A learner's own class or
  instance is never cached. The folder is new for each release and removed after it: nothing
  from another run or another user is read back.

Each notebook is named as it starts and as it ends, with its wall time and verdict.
"""
from __future__ import annotations

import compileall
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List, Optional, TextIO, Tuple

from kvsched_lab.grading.kernel.nbrun import Outcomes, run_nbval
from kvsched_lab.grading.release.release_build import bundle_notebooks

MAX_DEFAULT_JOBS = 4  # kernels at once by default: each holds a few hundred MB and one core
REPLAY_CACHE_ENV = "KVSCHED_REPLAY_CACHE"  # the replay cache's folder (kvsched_lab/sim/replay.py)
_ANSWERS = "kvsched_answers"  # lab.ANSWERS_DIRNAME: the answers folder inside the course folder


def default_jobs() -> int:
    """The CPUs this process may run on, at most `MAX_DEFAULT_JOBS` (at least 1)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_DEFAULT_JOBS, cpus))


def _code_cell_tags(nb: dict) -> List[List[str]]:
    return [c.get("metadata", {}).get("tags", []) for c in nb.get("cells", []) if c.get("cell_type") == "code"]


def check_outcomes(copy: Path, path: Path, outcomes: Outcomes) -> Tuple[List[str], List[str]]:
    """Problems: a failing cell that is not a check, a cell nbval never ran; warnings: a check passing on its stub."""
    problems, warnings = [], []
    tags = _code_cell_tags(json.loads(path.read_text(encoding="utf-8")))
    rel = path.relative_to(copy).as_posix()
    for k, cell_tags in enumerate(tags):
        outcome, message = outcomes.get(f"{rel}::Cell {k}", ("missing", ""))
        # notebook 08's practice checks (not graded) fail on their stubs too
        is_check = any(t.startswith(("check:", "practice-check:")) for t in cell_tags)
        if outcome == "failed" and not is_check:
            problems.append(f"{rel} code cell {k + 1} fails with the stubs: {message}")
        elif outcome == "passed" and is_check:
            warnings.append(f"{rel} code cell {k + 1} ({', '.join(cell_tags)}) passes on the untouched stub")
        elif outcome == "missing":
            problems.append(f"{rel} code cell {k + 1} was not run by nbval")
    return problems, warnings


def _course_files(copy: Path) -> List[str]:
    """Every file under the copy's ``notebooks/`` (bytecode caches aside), relative to the copy."""
    return sorted(p.relative_to(copy).as_posix() for p in (copy / "notebooks").rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


def left_behind(copy: Path, before: List[str]) -> List[str]:
    """Problems naming each file a run added to the course folder, where a Run All in order would
    hand it to the notebooks after it (an answer saved from a stub above all)."""
    new = sorted(set(_course_files(copy)) - set(before))
    return [f"{rel} was left by the run: a later notebook of a Run All in order would read it"
            + (" (a saved answer: the untouched stubs must not save one)" if f"/{_ANSWERS}/" in f"/{rel}" else "")
            for rel in new]


@contextmanager
def replay_cache(folder: Path) -> Iterator[Path]:
    """``KVSCHED_REPLAY_CACHE=folder`` for the processes started inside (the kernels inherit it); the
    caller's own value, if any, is set aside and put back (a cache from elsewhere is never read)."""
    folder.mkdir(parents=True, exist_ok=True)
    old = os.environ.get(REPLAY_CACHE_ENV)
    os.environ[REPLAY_CACHE_ENV] = str(folder)
    try:
        yield folder
    finally:
        if old is None:
            os.environ.pop(REPLAY_CACHE_ENV, None)
        else:
            os.environ[REPLAY_CACHE_ENV] = old


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:04.1f} s" if seconds >= 60 else f"{seconds:.1f} s"


class _Progress:
    """One line as each notebook starts and as it ends, from any worker, never two mixed."""

    def __init__(self, total: int, stream: Optional[TextIO]) -> None:
        self.total, self.done, self.stream = total, 0, stream
        self.started = time.monotonic()
        self.lock = threading.Lock()

    def say(self, line: str) -> None:
        with self.lock:
            print(line, file=self.stream or sys.stdout, flush=True)

    def start(self, rel: str, k: int) -> None:
        self.say(f"  nbval: {rel} ({k} of {self.total}) started")

    def end(self, rel: str, k: int, seconds: float, verdict: str) -> None:
        with self.lock:
            self.done += 1
            done = self.done
        self.say(f"  nbval: {rel} ({k} of {self.total}) {verdict} in {seconds:.1f} s "
                 f"[{done} of {self.total} done, {_minutes(time.monotonic() - self.started)} in]")


def _run_one(staging: Path, work: Path, rel: str, k: int, cell_timeout: float,
             progress: _Progress) -> Tuple[List[str], List[str]]:
    """Notebook `rel` of the bundle, run in a fresh copy of `staging`: its (problems, warnings)."""
    copy = work / f"{k:02d}" / "bundle"
    shutil.copytree(staging, copy)
    before = _course_files(copy)
    progress.start(rel, k)
    began = time.monotonic()
    outcomes, tail = run_nbval([copy / rel], copy, copy, cell_timeout=cell_timeout, wall_timeout=60 + cell_timeout * 4)
    seconds = time.monotonic() - began
    if outcomes is None:
        problems, warnings = [f"nbval did not run {rel}:\n{tail[-1500:]}"], []
    else:
        problems, warnings = check_outcomes(copy, copy / rel, outcomes)
        problems += left_behind(copy, before)
    verdict = "did not run" if outcomes is None else f"{len(problems)} problem(s)" if problems else "ok"
    progress.end(rel, k, seconds, verdict)
    shutil.rmtree(copy.parent, ignore_errors=True)  # a copy per notebook: free its disk as soon as it is done
    return problems, warnings


def nbval_only_checks_fail(bundle: Path, cell_timeout: float, jobs: Optional[int] = None,
                           stream: Optional[TextIO] = None) -> Tuple[List[str], List[str]]:
    """(problems, warnings) of running every notebook of the bundle as a student would, with stubs.

    `jobs` notebooks at once (default `default_jobs()`), each in its own fresh copy of the bundle;
    problems and warnings come in the bundle's notebook order, whatever order the runs end in.
    """
    rels = [p.relative_to(bundle).as_posix() for p in bundle_notebooks(bundle)]
    if not rels:
        return ["the bundle has no notebooks"], []
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, not {jobs}")
    with tempfile.TemporaryDirectory(prefix="kvsched-release-") as tmp:
        staging = Path(tmp) / "staging"
        shutil.copytree(bundle, staging)
        compileall.compile_dir(str(staging / "kvsched_lab"), quiet=1)  # once, for every copy
        progress = _Progress(len(rels), stream)
        with replay_cache(Path(tmp) / "replays"), ThreadPoolExecutor(max_workers=jobs) as pool:
            runs = [pool.submit(_run_one, staging, Path(tmp) / "runs", rel, k, cell_timeout, progress)
                    for k, rel in enumerate(rels, start=1)]
            done = [run.result() for run in runs]
    problems = [p for ps, _ in done for p in ps]
    warnings = [w for _, ws in done for w in ws]
    return problems, warnings

