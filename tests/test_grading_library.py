"""The library a learner can import while graded answers none of the five TODOs (issue 19, item 3).

Every public and private callable of the learner-side library (what the sandbox's library and the
student release hold: ``kvsched_lab`` without the grader side of ``kvsched_lab.grading`` and without
the withheld files) is tried as each TODO's answer, in every form a student would wire it in:
called with the method's arguments (with or without ``self``, with ``age``/``capacity`` derived the
way the score needs them), and for the snapshot as a sort key or as a "comes before" comparator.
A candidate that matches the reference on the chapter's example case is then graded on every
hidden case, and compared with the same form around a function that knows nothing (a snapshot
left in insertion order scores a few cases by itself): the test fails if a library callable earns
half a TODO's points or more beyond that. Before the fix, ``widgets.weighted_score`` (as
``_score``, 20 points) and ``checks._beats`` (ordering the snapshot, 20 points) failed it.

The probe runs in a child process with a private HOME and answers folder, each call under a
one-second alarm, so a library function with side effects (saving answers, plotting, a CLI entry
point) cannot touch this machine or hang the test.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r'''
import functools, importlib, inspect, itertools, json, math, os, pkgutil, signal, sys, time, warnings
warnings.simplefilter("ignore")
import kvsched_lab
from kvsched_lab.grading.batch.grade import SANDBOX_ROOM
from kvsched_lab.grading.release.release_build import WITHHELD_FILES
from kvsched_lab.grading.judging.compare import first_mismatch
from kvsched_lab.grading.kernel.fakes import FakeScheduler
from kvsched_lab.grading.kernel.observe import graded_class, run_case
from kvsched_lab.grading.judging.verdict import Reference, judge
from kvsched_lab.sim.scheduler import TODO_METHODS

withheld = {p[:-3].replace("/", ".") for p in WITHHELD_FILES}
kernel_side = "kvsched_lab.grading." + SANDBOX_ROOM.name
grader_side = {info.name for info in pkgutil.walk_packages(kvsched_lab.grading.__path__, "kvsched_lab.grading.")
               if info.name != kernel_side and not info.name.startswith(kernel_side + ".")}
modules = []
for info in pkgutil.walk_packages(kvsched_lab.__path__, "kvsched_lab."):
    if info.name in withheld or info.name in grader_side or info.name.endswith("__main__"):
        continue
    try:
        modules.append(importlib.import_module(info.name))
    except Exception:
        pass

callables = {}
for m in modules:
    for name, obj in list(vars(m).items()):
        if getattr(obj, "__module__", None) != m.__name__:
            continue  # defined elsewhere: tried where it is defined
        if inspect.isclass(obj):
            for attr, val in list(vars(obj).items()):
                fn = val.__func__ if isinstance(val, (staticmethod, classmethod)) else val
                if callable(fn) and not inspect.isclass(fn):
                    callables[f"{m.__name__}.{name}.{attr}"] = getattr(obj, attr, fn)
            callables[f"{m.__name__}.{name}"] = obj
        elif callable(obj):
            callables[f"{m.__name__}.{name}"] = obj

ref = Reference.build()
chapter = next(i for i, c in enumerate(ref.cases) if c["family"] == "chapter example")


class Alarm(BaseException):  # not Exception: library code that catches those must not swallow it
    pass


def on_alarm(*a):
    raise Alarm()


signal.signal(signal.SIGALRM, on_alarm)


slow = set()  # callables that used up their time: an answer runs in microseconds per call
spent = {}


def guarded(f, qual):
    def call(*a):
        if qual in slow:
            raise Alarm()
        started = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        try:
            return f(*a)
        except Alarm:
            slow.add(qual)
            raise
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            spent[qual] = spent.get(qual, 0.0) + time.monotonic() - started
            if spent[qual] > 0.5:  # half a second in all: far more than an answer needs for these cases
                slow.add(qual)
    return call


def quick_look(todo, method):
    """One cheap use of the candidate as the TODO's method, among the stand-ins: does it even work?"""
    try:
        if todo == "score":
            probe_self = FakeScheduler(1000)  # fresh each time: a candidate may change what it is given
            probe_self.time = 7
            value = method(probe_self, 3, 100, 5)
            return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
                and abs(value - (3 + 0.5 / 3 - 0.025)) <= 1e-9
        sim = graded_class(TODO_METHODS[todo], method)(64)
        for key in ("a", "b", "a", "c", "d"):
            sim.touch(key, 16)
        if todo == "snapshot":
            rows = sim.snapshot()
            return isinstance(rows, list) and len(rows) == len(sim.entries)
        return bool(sim.entries)
    except BaseException:
        return False


def arities(f):
    """Positional argument counts `f` accepts (1..5 when its signature cannot be read)."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return range(1, 6)
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return range(1, 6)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    return range(len(required), len(positional) + 1)


def score_forms(f, accepted):
    pool = {"self": lambda s, h, z, l: s, "hits": lambda s, h, z, l: h, "size": lambda s, h, z, l: z,
            "last_used": lambda s, h, z, l: l, "age": lambda s, h, z, l: s.time - l,
            "capacity": lambda s, h, z, l: s.capacity_bytes}
    for k in accepted:
        if not 1 <= k <= 5:
            continue
        for names in itertools.permutations(pool, k):
            getters = [pool[n] for n in names]
            yield lambda s, h, z, l, g=getters: f(*(x(s, h, z, l) for x in g))


def method_forms(f, arity):
    yield lambda self, *a: f(self, *a)
    yield lambda self, *a: f(*a)


def snapshot_forms(f):
    rows = lambda ordered: [(e.prefix, e.bytes, round(e.priority, 4), e.hits) for e in ordered]
    yield lambda self: rows(sorted(self.entries.values(), key=f))
    yield lambda self: rows(sorted(self.entries.values(), key=f, reverse=True))

    def cmp(a, b):
        return -1 if f(a, b) else (1 if f(b, a) else 0)
    yield lambda self: rows(sorted(self.entries.values(), key=functools.cmp_to_key(cmp)))
    yield lambda self: rows(sorted(self.entries.values(), key=functools.cmp_to_key(lambda a, b: -cmp(a, b))))


def passes_chapter(todo, method):
    cls = graded_class(TODO_METHODS[todo], method)
    try:
        obs = json.loads(json.dumps(run_case(cls, ref.cases[chapter])))
    except BaseException:
        return False
    return first_mismatch(ref.cases[chapter], obs, ref.expected[todo][chapter], todo == "score") is None


def points(todo, method):
    cls = graded_class(TODO_METHODS[todo], method)
    cases = {}
    for i, case in enumerate(ref.cases):
        try:
            cases[str(i)] = {"obs": json.loads(json.dumps(run_case(cls, case)))}
        except BaseException:
            cases[str(i)] = {"died": "raised"}
    result = {"cases": cases, "out": 0, "head": "", "review": [], "by_harness": True}
    return judge(todo, result, ref).points


# The sandbox side's process plumbing: these exit, fork, set limits on or hook this very process, and
# none takes or returns scheduler data; calling them would end the probe, not answer a TODO.
PLUMBING = ("kvsched_lab.grading.kernel.harness._child", "kvsched_lab.grading.kernel.harness._confine",
            "kvsched_lab.grading.kernel.harness._run_child", "kvsched_lab.grading.kernel.harness.grade_todo",
            "kvsched_lab.grading.kernel.harness.setup", "kvsched_lab.grading.kernel.audit.watch",
            "kvsched_lab.grading.kernel.audit.guard_channel", "kvsched_lab.grading.kernel.kernel_launcher.",
            "kvsched_lab.grading.kernel.nbrun.box_main", "kvsched_lab.grading.kernel.nbrun.main", "kvsched_lab.grading.kernel.nbrun.run_nbval",
            "kvsched_lab.grading.kernel.nbrun.IpcKernels", "kvsched_lab.grading.kernel.cells.")
callables = {q: f for q, f in callables.items() if not q.startswith(PLUMBING)}


def forms_of(g, accepted):
    forms = {"score": list(score_forms(g, accepted)), "snapshot": list(snapshot_forms(g))}  # same indices for all
    for todo in ("heap", "stale", "entry", "snapshot"):
        forms.setdefault(todo, []).extend(method_forms(g, 1))
    return forms


# What each form earns around a function that knows nothing (a snapshot in insertion order scores
# some cases by itself): a library callable answers a TODO only if it earns more than that.
TRIVIAL = (lambda *a: 0, lambda *a: True, lambda *a: None, lambda *a: a[0] if a else None, lambda *a: -1)
baseline = {}
for trivial in TRIVIAL:
    for todo, candidates in forms_of(trivial, range(1, 6)).items():
        for k, method in enumerate(candidates):
            if quick_look(todo, method) and passes_chapter(todo, method):
                baseline[(todo, k)] = max(baseline.get((todo, k), 0), points(todo, method))
ANSWERS = 10  # points beyond the form's own: half a TODO. (Sorting the snapshot by bytes, say, earns 2 by chance.)
scoring, tried = [], 0
for qual, f in sorted(callables.items()):
    g = guarded(f, qual)
    for todo, candidates in forms_of(g, arities(f)).items():
        for k, method in enumerate(candidates):
            if qual in slow:
                break
            tried += 1
            if quick_look(todo, method) and passes_chapter(todo, method):
                p = points(todo, method)
                if p - baseline.get((todo, k), 0) >= ANSWERS:
                    scoring.append([qual, todo, k, p, baseline.get((todo, k), 0)])
print(json.dumps({"callables": len(callables), "modules": len(modules), "tried": tried, "slow": len(slow),
                  "scoring": scoring}))
'''


def test_no_library_callable_answers_a_todo():
    with tempfile.TemporaryDirectory(prefix="kvsched-library-probe-") as tmp:
        # TMPDIR: whatever a callable makes in the temporary folder goes away with the probe's
        # (before: the folders of nbval's socket plugin stayed in /tmp, eleven per run).
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "KVSCHED_ANSWERS": tmp, "MPLBACKEND": "Agg",
               "PYTHONPATH": str(ROOT), "TMPDIR": tmp}
        proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, cwd=tmp,
                              env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["modules"] > 40 and got["callables"] > 300, got  # the probe saw the whole library
    assert got["scoring"] == [], got["scoring"]
