"""The coordinating process's own CPU per learner: what it reads and walks while a sandbox runs.

Issue 28 (throughput): the coordinator spent 0.15-0.19 s of CPU per learner, which caps a 16-core
machine. Profiled here (cProfile, 6 bench submissions, one worker): most of it was the fallback
watch (limits.py), which every 0.25 s scanned every process of the machine for the sandbox's PID
namespace and read each sandbox process's ``smaps_rollup`` (the kernel walks its page tables),
and the comparison of every case's observations, walked value by value in Python even when they
match. Now the watch walks the sandbox's own process tree and reads the PSS only when resident
sizes pass the budget, and a matching case is decided by one JSON comparison. Each test below
failed before its change; the comparison keeps its meaning (``true`` is still not ``1``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvsched_lab.grading.box import limits, sandbox
from kvsched_lab.grading.box.leases import lease_uids
from kvsched_lab.grading.box.limits import BoxWatch
from kvsched_lab.grading.judging import compare
from kvsched_lab.grading.judging.cases import hidden_cases
from kvsched_lab.grading.kernel import observe

works, why = sandbox.probe()
needs_sandbox = pytest.mark.skipif(not works, reason=f"the grading sandbox cannot run here: {why}")

FORKS = """
import os, time
for _ in range(2):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:  # detached: re-parented to the namespace's init
            time.sleep(30)
        os._exit(0)
time.sleep(30)
"""


@needs_sandbox
def test_the_watch_reads_only_the_sandboxs_own_processes(tmp_path, monkeypatch):
    os.chmod(tmp_path, 0o755)
    with lease_uids() if os.geteuid() == 0 else _no_lease() as lease:
        uid = lease.uid(0) if lease is not None else 0
        cmd = sandbox.bwrap_args(tmp_path, tmp_path, uid) + [sys.executable, "-I", "-c", FORKS]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        watch = BoxWatch(proc.pid, 4 << 30)
        try:
            deadline = time.monotonic() + 30
            while len(watch.processes()) < 4 and time.monotonic() < deadline:  # init, python, 2 detached
                time.sleep(0.1)
            scanned, pss = [], []
            real_scandir, real_pss = os.scandir, limits._pss
            monkeypatch.setattr(limits.os, "scandir", lambda p=".": scanned.append(p) or real_scandir(p))
            monkeypatch.setattr(limits, "_pss", lambda pid: pss.append(pid) or real_pss(pid))
            found = watch.processes()
            assert len(found) >= 4, found
            watch.last_poll = 0.0
            assert watch.check() is None
            assert "/proc" not in scanned, "before: every poll scanned the whole machine's /proc"
            assert pss == [], "before: every poll read each process's smaps_rollup, well within budget"
            small = BoxWatch(proc.pid, 1 << 20)  # 1 MiB: resident sizes pass it, so the PSS decides
            assert "over its 1 MiB" in (small.check() or "") and len(pss) >= 4
        finally:
            watch.kill_all()
            proc.wait(timeout=30)
        assert watch.processes() == []


class _no_lease:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_a_matching_case_is_not_walked_and_a_type_difference_is_still_found(monkeypatch):
    case = hidden_cases()[0]
    from solutions import KVCacheSchedulerSim

    want = json.loads(json.dumps(observe.run_case(KVCacheSchedulerSim, case, catch=False)))
    got = json.loads(json.dumps(want))
    calls = []
    real = compare.same
    monkeypatch.setattr(compare, "same", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert compare.first_mismatch(case, got, want) is None
    assert calls == [], "before: a matching case was compared value by value in Python"
    # The fast path holds only for the very same data: `true` where the reference has 1 still differs.
    step = next(s for s in got[0]["steps"] if isinstance(s, list) and any(type(x) is int for x in s[1:]))
    k = next(i for i, x in enumerate(step) if i and type(x) is int)
    step[k] = bool(step[k]) if step[k] in (0, 1) else float(step[k]) + 0.5
    assert compare.first_mismatch(case, got, want) is not None
