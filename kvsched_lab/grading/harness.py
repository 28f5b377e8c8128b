"""Grading harness: run hidden cases on a scheduler class and record what can be observed.

This one file runs on both sides of the grading boundary:

* in the grader process, ``run_case(graded_class(reference_method), case)`` gives the expected
  observations: the reference's method for one TODO among the stand-ins of fakes.py;
* in the grading kernel (inside the sandbox), `setup` and `grade_todo` put one learner method
  among the same stand-ins and run the cases' inputs in a forked child with time, memory, file
  and output limits and a runtime audit hook (`watch`), then write the observations to a
  nonce-named JSON file. The grader validates and compares them; nothing here decides a grade,
  and the kernel never holds a reference method or an expected result.

It imports only the standard library, ``kvsched_lab.sim.scheduler``/``kvsched_lab.course.todos`` and the
stand-ins: the sandbox gets a copy of ``kvsched_lab`` without ``solutions`` and with only the
kernel side of ``kvsched_lab.grading``.
"""
from __future__ import annotations

import builtins
import heapq
import inspect
import io
import json
import math
import os
import resource
import select
import signal
import sys
import time
import types
import warnings
from typing import Any, Dict, List, Optional

from kvsched_lab.grading.fakes import FakeScheduler
from kvsched_lab.sim.scheduler import TODO_METHODS, SchedulerSkeleton
from kvsched_lab.course.todos import cell_namespace

Case = Dict[str, Any]  # {"name", "family", "phases": [{"capacity": int, "ops": [op, ...]}]}

LINE_CAP = 4 << 20  # one case's observations; bigger means the learner's code returned junk
CHILD_READ_CAP = 64 << 20  # all of one child's output through the pipe
OUTPUT_HEAD = 2000  # characters of a learner's printed output kept for the feedback
STOP_AFTER_TIMEOUTS = 3  # consecutive timed-out cases before the rest are not run
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


def graded_class(method: str, fn: Any) -> type:
    """The class one TODO is graded on: `fn` as `method`, the stand-ins of fakes.py around it."""
    return type("KVCacheSchedulerSim", (FakeScheduler,), {method: fn})


# --------------------------------------------------------------------------- observing

def plain(x: Any, depth: int = 0) -> Any:
    """`x` as JSON-able data; anything unexpected becomes ``{"repr": ...}`` so it compares unequal."""
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, (list, tuple)) and depth < 4:
        return [plain(v, depth + 1) for v in x]
    try:
        text = repr(x)
    except BaseException:  # a learner object whose repr raises still needs a verdict
        text = f"<{type(x).__name__} with a failing repr>"
    return {"repr": text[:200]}


def order_key(x: Any) -> tuple:
    """Total, numeric-aware order on `plain` data, so both sides sort records the same way."""
    if isinstance(x, bool) or not isinstance(x, (int, float, str, list)):
        return (3, json.dumps(x, sort_keys=True, default=repr))
    if isinstance(x, (int, float)):
        return (0, -math.inf) if x != x else (0, x)  # NaN sorts first rather than breaking the sort
    if isinstance(x, str):
        return (1, x)
    return (2, tuple(order_key(v) for v in x))


def _is_heap(queue: List[Any]) -> bool:
    try:
        return all(not (queue[i] < queue[(i - 1) // 2]) for i in range(1, len(queue)))
    except Exception:  # records that cannot be compared are no heap
        return False


def state(sim: Any) -> Dict[str, Any]:
    """Everything observable about `sim`: log, entries, heap records, bytes, clock."""
    entries = [
        [plain(key)] + [plain(getattr(e, f, None)) for f in ("priority", "last_used", "hits", "bytes", "prefix")]
        for key, e in sim.entries.items()
    ]
    queue = [plain(r) for r in sim.queue]
    return {
        "log": plain(list(sim.log)),
        "current_bytes": plain(sim.current_bytes),
        "entries": sorted(entries, key=order_key),
        "queue": sorted(queue, key=order_key),
        "heap": _is_heap(list(sim.queue)),
        "time": plain(sim.time),
    }


def _events(sim: Any, before: int) -> list:
    return plain(list(sim.log)[before:])


def apply_op(sim: Any, op: list) -> list:
    """Run one case operation on `sim`; return what it showed (see `describe_op` in compare.py)."""
    kind = op[0]
    if kind == "touch":
        before = len(sim.log)
        sim.touch(op[1], op[2])
        return ["touch", _events(sim, before), plain(sim.current_bytes)]
    if kind == "evict":
        before = len(sim.log)
        sim._evict_until_fit(op[1])
        return ["evict", _events(sim, before), plain(sim.current_bytes)]
    if kind == "snapshot":
        return ["snapshot", plain(sim.snapshot())]
    if kind == "score":
        _, hits, size, age = op
        return ["score", plain(sim._score(hits, size, sim.time - age))]
    # The remaining operations set up heap states a natural sequence never reaches, to check
    # the stale test itself rather than its common cases.
    if kind == "stale":  # a record for a live entry that differs from its current one
        _, key, d_priority, d_last_used = op
        e = sim.entries.get(key)
        if e is not None:
            heapq.heappush(sim.queue, (e.priority + d_priority, e.last_used + d_last_used, key))
        return ["stale", e is not None]
    if kind == "orphan":  # a record for a key that is not cached
        _, key, priority, last_used = op
        heapq.heappush(sim.queue, (priority, last_used, key))
        return ["orphan"]
    if kind == "unqueue":  # drop the live record of an entry
        e = sim.entries.get(op[1])
        if e is not None:
            live = (e.priority, e.last_used, op[1])
            sim.queue[:] = [r for r in sim.queue if r != live]
            heapq.heapify(sim.queue)
        return ["unqueue", e is not None]
    if kind == "retime":  # an older last_used, then a re-score: recency below 1
        _, key, age = op
        e = sim.entries.get(key)
        if e is not None:
            e.last_used = sim.time - age
            sim._refresh_queue(key)
        return ["retime", e is not None]
    raise ValueError(f"unknown case operation {kind!r}")


def error_text(exc: BaseException) -> str:
    name = type(exc).__name__
    try:
        msg = str(exc)
    except BaseException:
        msg = "<unprintable message>"
    return f"{name}: {msg[:300]}" if msg else name


def run_case(cls: type, case: Case, catch: bool = True) -> List[Dict[str, Any]]:
    """Observations of `case` on a fresh `cls` per phase: each step's result, then the final state.

    With `catch`, an exception ends its phase and is recorded as ``["error", "Type: message"]``
    (learner code); without it, it propagates (the reference must never raise on a hidden case).
    """
    out = []
    for phase in case["phases"]:
        steps: list = []
        try:
            sim = cls(phase["capacity"])
            for op in phase["ops"]:
                steps.append(apply_op(sim, op))
            final: Any = state(sim)
        except BaseException as e:  # noqa: B902 - learner code may raise anything, even SystemExit
            if not catch:
                raise
            steps.append(["error", error_text(e)])
            try:
                final = state(sim)
            except BaseException as e2:
                final = {"error": error_text(e2)}
        out.append({"steps": steps, "final": final})
    return out


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
            raise LookupError(f"the todo:{todo} cell defines no function named {method}"
                              + (f" (it defines {', '.join(defined)})" if defined else ""))
    else:
        module = types.ModuleType("submission")  # a real module: dataclasses look their module up
        sys.modules["submission"] = module
        ns = module.__dict__
        try:
            exec(compile(source, "submission.py", "exec"), ns)
        except BaseException as e:  # the class may be defined before a failing top-level test
            if not isinstance(ns.get("KVCacheSchedulerSim"), type):
                raise
            _CFG["note"] = f"the file raised {error_text(e)} at import, after defining the class"
        cls = ns.get("KVCacheSchedulerSim")
        if not isinstance(cls, type):
            classes = sorted(k for k, v in ns.items() if isinstance(v, type) and not k.startswith("_"))
            raise LookupError("the file defines no class KVCacheSchedulerSim"
                              + (f" (it defines {', '.join(classes)})" if classes else ""))
        fn = inspect.getattr_static(cls, method, None)
        if fn is None:
            raise LookupError(f"KVCacheSchedulerSim has no method {method}")
    if not inspect.isfunction(fn):
        raise TypeError(f"{method} must be a plain function taking self, not {type(fn).__name__}")
    if fn is inspect.getattr_static(SchedulerSkeleton, method):
        return None
    return fn


def _no_input(*args: Any) -> str:
    raise EOFError("input() is not available while grading")


def _child(todo: str, kind: str, source: str, start: int, wfd: int) -> None:
    """Body of the forked child: never returns."""
    try:
        _confine(_CFG["budget"])
        pipe = os.fdopen(wfd, "w", encoding="utf-8")
        sink = _Sink()
        sys.stdout = sys.stderr = sink
        sys.stdin = io.StringIO()
        builtins.input = _no_input
        watch(wfd, _CFG.get("allowed_roots", []))  # before any learner code exists in this process
        try:
            fn = load_learner(todo, kind, source)
        except BaseException as e:
            pipe.write(json.dumps({"load": error_text(e)}) + "\n")
            pipe.flush()
            return
        if fn is None:
            pipe.write(json.dumps({"stub": True}) + "\n")
            pipe.flush()
            return
        if start == 0 and _CFG.get("note"):
            pipe.write(json.dumps({"note": _CFG["note"]}) + "\n")
        graded = graded_class(TODO_METHODS[todo], fn)
        cases = _CFG["cases"]
        for k in range(start, len(cases)):
            line = json.dumps({"i": k, "obs": run_case(graded, cases[k])})
            if len(line) > LINE_CAP:
                line = json.dumps({"i": k, "big": len(line)})
            pipe.write(line + "\n")
            pipe.flush()
        pipe.write(json.dumps({"done": True, "out": sink.total, "head": sink.head}) + "\n")
        pipe.flush()
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
        hint = {"SIGKILL": " (out of memory?)", "SIGXCPU": " (CPU time limit)"}.get(name, "")
        return f"the process was killed by {name}{hint}"
    return f"the process exited with status {os.WEXITSTATUS(status)} (os._exit or a crash)"


def _kill(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
            return
        except OSError:
            continue


def _run_child(todo: str, kind: str, source: str, start: int, deadline: float, result: dict) -> int:
    """Fork a child for cases `start`...; fill `result`; return the next case index to try."""
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
    nxt, buf, received, reason = start, b"", 0, None
    case_limit = _CFG["case_limit"]
    case_deadline = min(deadline, time.monotonic() + case_limit)
    finished = False
    while not finished:
        wait = case_deadline - time.monotonic()
        if wait <= 0 or not select.select([rfd], [], [], wait)[0]:
            reason = "timeout"
            break
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
            if not isinstance(rec, dict):
                reason = "big"
                break
            if "i" in rec:
                result["cases"][str(rec["i"])] = rec
                nxt = rec["i"] + 1
                case_deadline = min(deadline, time.monotonic() + case_limit)
            elif "review" in rec:
                if len(result["review"]) < MAX_REVIEW_NOTES and rec["review"] not in result["review"]:
                    result["review"].append(rec["review"])
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
    _, status = os.waitpid(pid, 0)
    os.close(rfd)
    if finished or result.get("load") or result.get("stub"):
        return len(_CFG["cases"])
    if reason is None:
        result["cases"][str(nxt)] = {"i": nxt, "died": _describe_exit(status)}
    elif reason == "big":
        result["cases"][str(nxt)] = {"i": nxt, "big": received}
    else:
        result["cases"][str(nxt)] = {"i": nxt, "timeout": True}
    return nxt + 1


def grade_todo(todo: str, kind: str, source: str) -> None:
    """Grade one TODO: run every case in forked children, write ``<nonce>.<todo>.json``.

    A case that times out, dies (``os._exit``, a signal) or floods the pipe is recorded as such and
    a new child goes on from the next case, within the TODO's time budget.
    """
    started = time.monotonic()
    deadline = started + _CFG["budget"]
    result: Dict[str, Any] = {"todo": todo, "cases": {}, "out": 0, "head": "", "review": []}
    n = len(_CFG["cases"])
    i, timeouts = 0, 0
    while i < n:
        if time.monotonic() >= deadline or timeouts >= STOP_AFTER_TIMEOUTS:
            result["stopped"] = "time budget used up" if time.monotonic() >= deadline else \
                f"{STOP_AFTER_TIMEOUTS} cases in a row timed out"
            break
        nxt = _run_child(todo, kind, source, i, deadline, result)
        last = result["cases"].get(str(nxt - 1), {})
        timeouts = timeouts + 1 if last.get("timeout") else 0
        i = nxt
    result["elapsed"] = round(time.monotonic() - started, 3)
    path = f"{_CFG['nonce']}.{todo}.json"
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f)
    print(f"{todo}: {len(result['cases'])} of {n} cases observed in {result['elapsed']} s")


def observed(result: Optional[dict], n: int) -> List[Optional[dict]]:
    """Per-case records of a kernel result, in case order (None: not run)."""
    cases = (result or {}).get("cases", {})
    return [cases.get(str(i)) for i in range(n)]
