"""Running the student bundle's notebooks for `kvsched release`: every notebook of both editions, in parallel.

Each notebook runs as a student who opens it first would run it: ``pytest --nbval-lax`` in a
fresh kernel, in a copy of the bundle that is exactly the bundle when its first cell runs (its
own answers folder empty, nothing another notebook wrote), so its outcome cannot depend on which
notebooks ran before it or beside it. A Run All of the notebooks in order sees the same: the
bundle's TODOs are untouched stubs, a check never saves an untouched stub (`lab.check`), and each
run checks that its notebook left nothing in the course folder (``notebooks/``) for a later
notebook to read; one that does is a problem.

`jobs` workers (default: the CPUs this process may use, at most `MAX_DEFAULT_JOBS`) take the
notebooks from one queue, longest first (`run_order`, by the CPU seconds each took in a full
release: a Chinese twin never before its English one), so the two editions run side by side and
the run ends on short notebooks, not on one long one with the other cores idle; a notebook that
takes far longer than that table says is a warning (`stale_table`), so a stale table is seen. A worker is one
pytest process with nbval (release_worker.py) in one copy of the bundle: it starts a new kernel
for each notebook it takes, and after the notebook's last cell it compares every file of its
copy with the bundle (SHA-256) and puts back what the notebook added, changed or removed. What is
provably identical is done once:

* pytest, nbval and their imports: once per worker, not once per notebook (each notebook still
  gets its own kernel; the copy is checked file by file against the bundle before the next one);
* the bundle's bytecode: compiled once into a staging copy that every worker's copy is made
  from (the same sources, their times kept, so Python's own check of each compiled file against
  its source accepts it);
* library replays: every run shares one fresh replay cache (``KVSCHED_REPLAY_CACHE``, read by
  `kvsched_lab.sim.replay.replay` where that cache is in place, ignored elsewhere), keyed by a
  hash of everything a result depends on (the simulator's source bytes, the same in every copy of
  one bundle; the policy's name and arguments; the capacity, metric and block sizes; the
  requests), so a Chinese notebook's replay of a library policy loads what its English twin
  computed (queued after it), and two runs asking for one key at once compute it once. A learner's own class or instance is never
  cached. The folder is new for each release and removed after it: nothing from another run or
  another user is read back.

Each notebook is named as it starts and as it ends, with its wall time, its CPU time (its
kernel's and its share of the worker's) and its verdict; a notebook that runs past its time is
stopped with its worker, and a new worker takes the rest of the queue.
"""
from __future__ import annotations

import compileall
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, TextIO, Tuple

from kvsched_lab.grading.kernel.nbrun import Outcomes, _limits, _pytest_args, write_kernelspec
from kvsched_lab.grading.release.release_build import ZH, bundle_notebooks

MAX_DEFAULT_JOBS = 4  # kernels at once by default: each holds a few hundred MB and one core
REPLAY_CACHE_ENV = "KVSCHED_REPLAY_CACHE"  # the replay cache's folder (kvsched_lab/sim/replay.py)
MEMORY_MB = 2048  # address space of a worker and of each of its kernels
KERNEL_START_S = 60.0  # a notebook's time beyond its cells' (4 x the cell limit): its kernel's start
# CPU seconds of the course's long notebooks, (English, Chinese), by number: measured in a full
# `kvsched release` on the 2-core development machine (2026-12-02, stubs, one replay cache; only
# 06's Chinese twin loads most of its replays). The queue's order, longest first; any other
# notebook counts as SHORT_S. A Chinese twin never goes ahead of its English one, so the replays
# it shares are the English one's to compute.
NOTEBOOK_CPU_S = {"06": (33.7, 18.4), "07": (40.1, 39.1), "08": (25.9, 24.4), "09": (37.3, 38.4),
                  "10": (20.5, 21.8)}
SHORT_S = (5.0, 5.0)
# A notebook whose CPU seconds pass both bounds of its expected ones is one the table no longer
# describes (a new long notebook counts as SHORT_S and would queue last): the release warns. Wide,
# because under load one notebook's CPU time varies by up to a quarter.
STALE_FACTOR, STALE_MARGIN_S = 2.0, 10.0


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


def expected_seconds(rel: str) -> float:
    """The CPU seconds the queue expects of notebook `rel` (`NOTEBOOK_CPU_S`); for a Chinese notebook
    at most its English twin's, so that it queues after it."""
    path = Path(rel)
    english, chinese = NOTEBOOK_CPU_S.get(path.name.split("_")[0], SHORT_S)
    return min(english, chinese) if path.parent.name == ZH else english


def stale_table(rel: str, cpu: float) -> List[str]:
    """A warning when notebook `rel` took far more than the `cpu` seconds the queue expected of it."""
    expected = expected_seconds(rel)
    if cpu <= max(STALE_FACTOR * expected, expected + STALE_MARGIN_S):
        return []
    return [f"{rel} took {cpu:.1f} s of CPU where the queue expected {expected:.1f} s: NOTEBOOK_CPU_S "
            "(release_nbval.py) no longer orders it; measure it and update the table"]


def run_order(rels: List[str]) -> List[str]:
    """`rels` longest first (`expected_seconds`), the bundle's order among equals."""
    return sorted(rels, key=lambda rel: -expected_seconds(rel))


def minutes(seconds: float) -> str:
    """``S s`` under a minute, else ``M min SS.S s`` (rounded first: 599.96 s is 10 min 00.0 s)."""
    tenths = round(seconds * 10)
    return f"{tenths // 600} min {tenths % 600 / 10:04.1f} s" if tenths >= 600 else f"{tenths / 10:.1f} s"


class _Progress:
    """One line as each notebook starts and as it ends, never two mixed."""

    def __init__(self, total: int, stream: Optional[TextIO]) -> None:
        self.total, self.done, self.stream = total, 0, stream
        self.started = time.monotonic()

    def say(self, line: str) -> None:
        print(line, file=self.stream or sys.stdout, flush=True)

    def start(self, rel: str, k: int) -> None:
        self.say(f"  nbval: {rel} ({k} of {self.total}) started")

    def end(self, rel: str, k: int, seconds: float, cpu: Optional[float], verdict: str) -> None:
        self.done += 1
        spent = "" if cpu is None else f", {cpu:.1f} s CPU"
        self.say(f"  nbval: {rel} ({k} of {self.total}) {verdict} in {seconds:.1f} s{spent} "
                 f"[{self.done} of {self.total} done, {minutes(time.monotonic() - self.started)} in]")


@dataclass
class _Worker:
    """One worker process (release_worker.py), its folder, and how far its events file is read."""
    proc: subprocess.Popen
    folder: Path
    events: Path
    read: int = 0  # bytes of `events` handled
    current: str = ""  # the notebook it runs ("" between notebooks)
    since: float = field(default_factory=time.monotonic)  # its last event
    claimed: int = 0  # notebooks it has started
    killed: bool = False  # stopped for running past its time

    def tail(self) -> str:
        log = self.folder / "pytest.log"
        return log.read_bytes()[-1500:].decode("utf-8", "replace") if log.is_file() else ""


def _worker_env(folder: Path, jupyter: Path) -> Dict[str, str]:
    """The environment of a worker: only its own Jupyter folders, no caller's Python or pytest settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JUPYTER", "IPYTHON", "PYTEST"))}
    env.update(JUPYTER_PATH=str(jupyter), JUPYTER_RUNTIME_DIR=str(folder / "runtime"),
               JUPYTER_CONFIG_DIR=str(folder / "jupyter-config"), IPYTHONDIR=str(folder / "ipython"),
               JUPYTER_PLATFORM_DIRS="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1",
               # the worker is grader code and imports this package; kernels ignore it (python -I)
               PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    return env


class _Pool:
    """The workers of one nbval run: started while the queue holds unclaimed notebooks, watched for
    their events and their time, and each notebook's (problems, warnings) as it ends."""

    def __init__(self, bundle: Path, staging: Path, work: Path, rels: List[str], cell_timeout: float,
                 jobs: int, progress: _Progress) -> None:
        self.bundle, self.staging, self.work, self.jobs, self.progress = bundle, staging, work, jobs, progress
        self.place = {rel: k for k, rel in enumerate(rels, start=1)}
        self.order = run_order(rels)
        self.cell_timeout, self.budget = cell_timeout, KERNEL_START_S + cell_timeout * 4  # seconds of one notebook
        self.claims = work / "claims"
        self.claims.mkdir(parents=True)
        self.results: Dict[str, Tuple[List[str], List[str]]] = {}
        self.workers: List[_Worker] = []
        self.started = 0
        self.stalled = ""  # the log of a worker that ended without taking a notebook: start no more

    def _unclaimed(self) -> List[str]:
        return [rel for k, rel in enumerate(self.order) if not (self.claims / str(k)).exists()]

    def _start(self) -> None:
        self.started += 1
        folder = self.work / f"worker-{self.started}"
        copy = folder / "bundle"
        shutil.copytree(self.staging, copy, symlinks=True)
        jupyter = write_kernelspec(folder, copy, MEMORY_MB)
        (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # no project config applies
        notebooks = [str(copy / rel) for rel in self.order]
        args = _pytest_args(notebooks, self.cell_timeout) + ["--rootdir", str(copy), "--continue-on-collection-errors"]
        events = folder / "events.jsonl"
        with open(folder / "pytest.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kvsched_lab.grading.release.release_worker", str(events), str(self.claims),
                 str(self.staging), str(copy), "--"] + args, cwd=folder, env=_worker_env(folder, jupyter),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_limits(MEMORY_MB),
                start_new_session=True)
        self.workers.append(_Worker(proc, folder, events))

    def _events(self, worker: _Worker) -> None:
        """Handle the whole lines `worker` has added to its events file since the last look."""
        try:
            with open(worker.events, "rb") as f:
                f.seek(worker.read)
                data = f.read()
        except FileNotFoundError:
            return
        lines = data[:data.rfind(b"\n") + 1]
        worker.read += len(lines)
        for line in lines.decode("utf-8", "replace").splitlines():
            try:
                event = json.loads(line)
                rel = event["notebook"]
                k = self.place[rel]
            except (ValueError, KeyError, TypeError):
                continue  # not a line the worker wrote: the notebook it runs ends as not finished
            worker.since = time.monotonic()
            if event.get("event") == "start":
                worker.current, worker.claimed = rel, worker.claimed + 1
                self.progress.start(rel, k)
            elif event.get("event") == "end" and rel == worker.current:
                worker.current = ""
                self._ended(rel, event)

    def _ended(self, rel: str, event: dict) -> None:
        outcomes: Outcomes = {str(node): tuple(v) for node, v in dict(event.get("outcomes", {})).items()}
        problems, warnings = check_outcomes(self.bundle, self.bundle / rel, outcomes)
        problems += [str(p) for p in event.get("left", [])]
        cpu = float(event.get("kernel_cpu", 0)) + float(event.get("nbval_cpu", 0))
        self.results[rel] = problems, warnings + stale_table(rel, cpu)
        self.progress.end(rel, self.place[rel], float(event.get("seconds", 0)), cpu,
                          f"{len(problems)} problem(s)" if problems else "ok")

    def _reap(self, worker: _Worker) -> None:
        """A worker has exited: what it ran, its notebook cut short, whether to start another."""
        self._events(worker)
        if worker.current:
            why = f"within {self.budget:.0f} s" if worker.killed else "(its worker ended)"
            self.results[worker.current] = [f"nbval did not finish {worker.current} {why}:\n{worker.tail()}"], []
            self.progress.end(worker.current, self.place[worker.current], time.monotonic() - worker.since, None,
                              "did not finish")
        elif not worker.claimed and self._unclaimed():
            self.stalled = worker.tail()
        self.workers.remove(worker)
        shutil.rmtree(worker.folder, ignore_errors=True)  # its copy: free the disk as soon as it is done

    def run(self) -> Dict[str, Tuple[List[str], List[str]]]:
        """Every notebook's (problems, warnings), once every worker has ended."""
        try:
            while True:
                for worker in list(self.workers):
                    self._events(worker)
                    if worker.proc.poll() is not None:
                        self._reap(worker)
                    elif time.monotonic() - worker.since > self.budget:
                        os.killpg(worker.proc.pid, signal.SIGKILL)  # the worker, its kernel and their children
                        worker.proc.wait()
                        worker.killed = True
                        self._reap(worker)
                unclaimed = self._unclaimed()
                while unclaimed and not self.stalled and len(self.workers) < min(self.jobs, len(unclaimed)):
                    self._start()
                if not self.workers:
                    break
                time.sleep(0.25)
        finally:
            for worker in self.workers:  # interrupted: leave no worker behind
                os.killpg(worker.proc.pid, signal.SIGKILL)
                worker.proc.wait()
        for rel in self._unclaimed() if self.stalled else []:
            self.results[rel] = [f"nbval did not run {rel}:\n{self.stalled}"], []
        return self.results


def nbval_only_checks_fail(bundle: Path, cell_timeout: float, jobs: Optional[int] = None,
                           stream: Optional[TextIO] = None) -> Tuple[List[str], List[str]]:
    """(problems, warnings) of running every notebook of the bundle as a student would, with stubs.

    `jobs` workers (default `default_jobs()`) take the notebooks longest first (`run_order`), each
    in a fresh kernel in a copy that is the bundle; problems and warnings come in the bundle's
    notebook order, whatever order the runs end in.
    """
    rels = [p.relative_to(bundle).as_posix() for p in bundle_notebooks(bundle)]
    if not rels:
        return ["the bundle has no notebooks"], []
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, not {jobs}")
    with tempfile.TemporaryDirectory(prefix="kvsched-release-") as tmp:
        staging = Path(tmp) / "staging"
        shutil.copytree(bundle, staging, symlinks=True)
        compileall.compile_dir(str(staging / "kvsched_lab"), quiet=1)  # once, for every copy
        with replay_cache(Path(tmp) / "replays"):
            done = _Pool(bundle, staging, Path(tmp) / "runs", rels, cell_timeout, jobs,
                         _Progress(len(rels), stream)).run()
    problems = [p for rel in rels for p in done.get(rel, ([f"nbval did not run {rel}"], []))[0]]
    warnings = [w for rel in rels for w in done.get(rel, ([], []))[1]]
    return problems, warnings
