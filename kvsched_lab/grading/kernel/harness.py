"""The grading kernel's side of the harness: run one learner method on the cases' inputs, with limits.

In the grading kernel (inside the sandbox), `setup` and `grade_todo` put one learner method
among the stand-ins of fakes.py and run the cases' inputs (observe.py) in a forked child with
time, memory, file and output limits and the runtime audit hook (audit.py), then write the
observations to a nonce-named JSON file. The time limits count the child's CPU seconds, so a
loaded machine (other sandboxes, other jobs) cannot time out a correct answer; a wall-clock
backstop, `WALL_PER_CPU` times as long, still ends code that waits without computing. The grader validates and compares them; nothing here
decides a grade, and the kernel never holds a reference method or an expected result.

It imports only the standard library, ``kvsched_lab.sim.scheduler``/``kvsched_lab.course.todos``, the
stand-ins, observe.py and audit.py: the sandbox gets a copy of ``kvsched_lab`` without ``solutions``
and with only the kernel side of ``kvsched_lab.grading``.
"""
from __future__ import annotations

import builtins
import inspect
import io
import json
import os
import resource
import select
import signal
import sys
import time
import types
import warnings
from typing import Any, Dict, Optional, Tuple

from kvsched_lab.grading.kernel.audit import Channel, fingerprint_modules, guard_channel, keep_notes, tampered, watch
from kvsched_lab.grading.kernel.observe import error_text, graded_class, run_case
from kvsched_lab.sim.scheduler import TODO_METHODS, SchedulerSkeleton
from kvsched_lab.course.todos import cell_namespace

LINE_CAP = 512 << 10  # one case's observations (honest ones: a few KiB); bigger means junk
CHILD_READ_CAP = 16 << 20  # all of one child's output through the pipe
OUTPUT_HEAD = 2000  # characters of a learner's printed output kept for the feedback
STOP_AFTER_TIMEOUTS = 3  # consecutive timed-out cases before the rest are not run
# Wall seconds allowed per CPU second of a limit: code that sleeps or blocks uses no CPU, and is
# ended by this backstop instead; 10 leaves room for a process given a tenth of a core.
WALL_PER_CPU = 10
# The harness's own texts in a result, in English (the box's report); the grader reads each back by
# its template and writes the learner its own line, in the feedback's language (judging/box_texts.py).
KILLED = "the process was killed by {signal}{hint}"
KILL_HINTS = {"SIGKILL": " (out of memory?)", "SIGXCPU": " (CPU time limit)"}
EXITED = "the process exited with status {status} (os._exit or a crash)"
BUDGET_USED = "time budget used up"
IN_A_ROW = "{count} cases in a row timed out"
RAISED_AT_IMPORT = "the file raised {error} at import, after defining the class"
# Why `load_learner` could not find the learner's function, in its own words (a `LoadProblem`).
NO_FUNCTION = "the todo:{todo} cell defines no function named {method}"
NO_CLASS = "the file defines no class KVCacheSchedulerSim"
DEFINES = " (it defines {names})"  # after NO_FUNCTION or NO_CLASS, when the code defines others
NO_METHOD = "KVCacheSchedulerSim has no method {method}"
NOT_PLAIN = "{method} must be a plain function taking self, not {kind}"
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# What the parent reports about the results channel itself, whatever the child's audit says.
CHANNEL_GAP = "tampered with the results channel: lines lost or repeated (closed, redirected, or shared by a fork)"
CHANNEL_FORGED = "tampered with the results channel: a line the harness did not write"
CHANNEL_SILENT = "tampered with the results channel: it went silent before the harness finished"
TAMPERED = "tampered with the grading harness or sys.modules ({names})"


# --------------------------------------------------------------------------- kernel side

_CFG: Dict[str, Any] = {}


def setup(config_path: str) -> None:
    """Load the grader's config (the cases' inputs, limits, the paths learner code may read).

    Called by the grader's first cell, before any learner code exists in this kernel. The file
    holds no reference method and no expected result; it is deleted all the same.
    """
    with open(config_path, encoding="utf-8") as f:
        _CFG.update(json.load(f))
    os.remove(config_path)
    library = os.path.dirname(os.path.abspath(sys.modules["kvsched_lab"].__file__))  # the package, not beside it
    _CFG["allowed_roots"] = sorted({sys.prefix, sys.base_prefix, library})


class _Sink(io.TextIOBase):
    """Stand-in for stdout/stderr in a child: counts everything, keeps the start."""

    def __init__(self) -> None:
        self.total = 0
        self.head = ""

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        s = str(s)
        self.total += len(s)
        if len(self.head) < OUTPUT_HEAD:
            self.head += s[: OUTPUT_HEAD - len(self.head)]
        return len(s)


def _confine(budget: float) -> None:
    """Limits for a child that will run learner code (Linux/macOS; each is best effort)."""
    os.setpgid(0, 0)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a refused write raises instead of killing
    limits = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, 0),  # no files: results go by pipe
              (resource.RLIMIT_CPU, int(budget) + 2)]  # a backstop to the parent's clock
    for what, value in limits:
        try:
            resource.setrlimit(what, (value, value))
        except (ValueError, OSError):
            pass
    try:  # die with the kernel rather than spin on as an orphan (Linux)
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class LoadProblem(Exception):
    """The learner's code ran but holds no usable function; the text is one of the templates above."""


def load_learner(todo: str, kind: str, source: str) -> Any:
    """The learner's function for `todo` from a TODO cell (`kind` "cell") or a .py file ("py").

    Returns None when it is the untouched stub inherited from `SchedulerSkeleton`.
    """
    method = TODO_METHODS[todo]
    if kind == "cell":
        ns = cell_namespace()
        exec(compile(source, f"<todo:{todo} cell>", "exec"), ns)
        fn = ns.get(method)
        if fn is None:
            defined = sorted(k for k, v in ns.items() if inspect.isfunction(v))
            raise LoadProblem(NO_FUNCTION.format(todo=todo, method=method)
                              + (DEFINES.format(names=", ".join(defined)) if defined else ""))
    else:
        module = types.ModuleType("submission")  # a real module: dataclasses look their module up
        sys.modules["submission"] = module
        ns = module.__dict__
        try:
            exec(compile(source, "submission.py", "exec"), ns)
        except BaseException as e:  # the class may be defined before a failing top-level test
            if not isinstance(ns.get("KVCacheSchedulerSim"), type):
                raise
            _CFG["note"] = RAISED_AT_IMPORT.format(error=error_text(e))
        cls = ns.get("KVCacheSchedulerSim")
        if not isinstance(cls, type):
            classes = sorted(k for k, v in ns.items() if isinstance(v, type) and not k.startswith("_"))
            raise LoadProblem(NO_CLASS + (DEFINES.format(names=", ".join(classes)) if classes else ""))
        fn = inspect.getattr_static(cls, method, None)
        if fn is None:
            raise LoadProblem(NO_METHOD.format(method=method))
    if not inspect.isfunction(fn):
        raise LoadProblem(NOT_PLAIN.format(method=method, kind=type(fn).__name__))
    if fn is inspect.getattr_static(SchedulerSkeleton, method):
        return None
    return fn


def _no_input(*args: Any) -> str:
    raise EOFError("input() is not available while grading")


def _child(todo: str, kind: str, source: str, start: int, wfd: int) -> None:
    """Body of the forked child: never returns."""
    try:
        _confine(_CFG["budget"])
        channel = Channel(wfd)
        sink = _Sink()
        sys.stdout = sys.stderr = sink
        sys.stdin = io.StringIO()
        builtins.input = _no_input
        note = watch(channel, _CFG.get("allowed_roots", []))  # before any learner code exists in this process
        guard_channel(channel, note)
        before = fingerprint_modules()
        try:
            fn = load_learner(todo, kind, source)
        except LoadProblem as e:  # the harness's words, read back by their template
            channel.send({"load": str(e)})
            return
        except BaseException as e:
            channel.send({"load": error_text(e)})
            return
        if fn is None:
            channel.send({"stub": True})
            return
        if start == 0 and _CFG.get("note"):
            channel.send({"note": _CFG["note"]})
        graded = graded_class(TODO_METHODS[todo], fn)
        cases = _CFG["cases"]
        for k in range(start, len(cases)):
            obs = run_case(graded, cases[k])
            changed = tampered(before, fingerprint_modules())
            if changed:
                note(TAMPERED.format(names=", ".join(changed[:3])))
            line = json.dumps({"i": k, "obs": obs})
            channel.send({"i": k, "obs": obs} if len(line) <= LINE_CAP else {"i": k, "big": len(line)})
        channel.send({"done": True, "out": sink.total, "head": sink.head})
    except BaseException:
        pass
    finally:
        os._exit(0)


def _describe_exit(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return KILLED.format(signal=name, hint=KILL_HINTS.get(name, ""))
    return EXITED.format(status=os.WEXITSTATUS(status))


def _kill(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
            return
        except OSError:
            continue


def _cpu_seconds(pid: int) -> Optional[float]:
    """CPU seconds (user and system) the running child `pid` has used so far, None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None  # no /proc (macOS): the limits fall back to wall-clock time
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15 of stat)


class _Clock:
    """A TODO's time: the CPU seconds of its children, and the wall clock for the backstop.

    `used` is the CPU of the children that ended (from their rusage) plus the running one's;
    without /proc it is wall-clock time, which is never less."""

    def __init__(self, budget: float) -> None:
        self.budget, self.ended, self.started = budget, 0.0, time.monotonic()
        self.wall_deadline = self.started + budget * WALL_PER_CPU

    def used(self, pid: Optional[int] = None) -> float:
        running = _cpu_seconds(pid) if pid is not None else 0.0
        if running is None:
            return time.monotonic() - self.started
        return self.ended + running

    def over(self) -> bool:
        return self.used() >= self.budget or time.monotonic() >= self.wall_deadline


def _run_child(todo: str, kind: str, source: str, start: int, clock: _Clock, result: dict) -> int:
    """Fork a child for cases `start`...; fill `result`; return the next case index to try.

    A case ends as timed out when the child has used `case_limit` CPU seconds on it (or the
    TODO's budget is spent), or after `WALL_PER_CPU` times that in wall-clock time."""
    rfd, wfd = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork in a threaded process; the child never uses the kernel's threads.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        os.close(rfd)
        _child(todo, kind, source, start, wfd)
    os.close(wfd)
    try:
        os.setpgid(pid, pid)  # also done in the child; whichever runs first wins the race
    except OSError:
        pass
    nxt, buf, received, reason, expected_n = start, b"", 0, None, 0
    case_limit = _CFG["case_limit"]

    def new_case() -> Tuple[float, float]:  # (CPU seconds, wall deadline) at which the next case times out
        return (min(clock.budget, clock.used(pid) + case_limit),
                min(clock.wall_deadline, time.monotonic() + case_limit * WALL_PER_CPU))

    case_cpu, case_wall = new_case()
    finished = False
    while not finished:
        # Sleep until the case could have used its CPU (one process gains at most a CPU second
        # per second), then look at what it really used: on a busy machine, far less.
        wait = min(case_cpu - clock.used(pid), case_wall - time.monotonic())
        if wait <= 0:
            reason = "timeout"
            break
        if not select.select([rfd], [], [], wait)[0]:
            continue
        chunk = os.read(rfd, 1 << 16)
        if not chunk:
            break
        received += len(chunk)
        if received > CHILD_READ_CAP:
            reason = "big"
            break
        buf += chunk
        while b"\n" in buf and reason is None:
            line, buf = buf.split(b"\n", 1)
            try:
                rec = json.loads(line)
            except ValueError:  # only learner code writing into the pipe can garble it
                rec = None
            if not isinstance(rec, dict) or not isinstance(rec.get("n"), int):
                keep_notes(result["review"], CHANNEL_FORGED)
                reason = "big"
                break
            if rec["n"] != expected_n:  # one note however often: a flood of them would push others out
                keep_notes(result["review"], CHANNEL_GAP)
            expected_n = rec["n"] + 1
            if "i" in rec:
                result["cases"][str(rec["i"])] = rec
                nxt = rec["i"] + 1
                case_cpu, case_wall = new_case()
            elif "review" in rec:
                keep_notes(result["review"], str(rec["review"])[:200])
            elif "done" in rec:
                result["out"] += rec["out"]
                result["head"] = result["head"] or rec["head"]
                finished = True
            else:
                result.update({k: rec[k] for k in ("load", "stub", "note") if k in rec})
                finished = finished or "load" in rec or "stub" in rec
        if reason is not None:
            break
    _kill(pid)
    _, status, usage = os.wait4(pid, 0)
    clock.ended += usage.ru_utime + usage.ru_stime
    os.close(rfd)
    if finished or result.get("load") or result.get("stub"):
        return len(_CFG["cases"])
    if reason is None:
        result["cases"][str(nxt)] = {"i": nxt, "died": _describe_exit(status)}
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:  # the harness's own exit, its work unsent
            keep_notes(result["review"], CHANNEL_SILENT)
    elif reason == "big":
        result["cases"][str(nxt)] = {"i": nxt, "big": received}
    else:
        result["cases"][str(nxt)] = {"i": nxt, "timeout": True}
    return nxt + 1


def grade_todo(todo: str) -> None:
    """Grade one TODO: run every case in forked children, write ``<nonce>.<todo>.json``.

    The TODO's code and its kind come from the config as data (the grading notebook's cells hold
    grader constants only, so no learner text is ever parsed as the grader's code).

    A case that times out, dies (``os._exit``, a signal) or floods the pipe is recorded as such and
    a new child goes on from the next case, within the TODO's time budget (CPU seconds of its
    children; wall-clock time only as the backstop, `WALL_PER_CPU` times the budget).
    """
    kind, source = _CFG["todos"][todo]["kind"], _CFG["todos"][todo]["source"]
    clock = _Clock(_CFG["budget"])
    result: Dict[str, Any] = {"todo": todo, "cases": {}, "out": 0, "head": "", "review": []}
    n = len(_CFG["cases"])
    i, timeouts = 0, 0
    while i < n:
        if clock.over() or timeouts >= STOP_AFTER_TIMEOUTS:
            result["stopped"] = BUDGET_USED if clock.over() else IN_A_ROW.format(count=STOP_AFTER_TIMEOUTS)
            break
        nxt = _run_child(todo, kind, source, i, clock, result)
        last = result["cases"].get(str(nxt - 1), {})
        timeouts = timeouts + 1 if last.get("timeout") else 0
        i = nxt
    result["elapsed"] = round(time.monotonic() - clock.started, 3)
    result["cpu"] = round(clock.used(), 3)
    path = f"{_CFG['nonce']}.{todo}.json"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f)
    print(f"{todo}: {len(result['cases'])} of {n} cases observed in {result['elapsed']} s "
          f"({result['cpu']} CPU seconds)")


