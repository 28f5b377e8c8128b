"""The sandbox bounds itself as a whole, keeps its uids to its own batch, and works from /tmp.

Issue 19, items 6, 7 and 8 (each test says what happened before its fix): limits.py caps all
processes of one sandbox together (memory, CPU), leases.py gives each running batch uids no other
batch holds, and sandbox.py mounts its private /tmp before binding the environment, so a clone
or a virtual environment under /tmp still grades. Skipped where bubblewrap cannot run.
"""
from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kvsched_lab.grading.box import sandbox
from kvsched_lab.grading.box.leases import BLOCK, lease_uids
from kvsched_lab.grading.box.limits import CPU_CORES, CPU_PERIOD, POLL_SECONDS, BoxWatch

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
import variants as v  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
works, why = sandbox.probe()
needs_sandbox = pytest.mark.skipif(not works, reason=f"the grading sandbox cannot run here: {why}")


def test_two_running_batches_never_share_uids():
    """Before: every batch ran job k as uid 61000 + k, so two batches at once shared uids, process
    limits and reaping. Now each holds a lease; a second lease (another batch) gets another block,
    and a released block can be leased again."""
    with lease_uids() as a, lease_uids() as b:
        assert a.block != b.block
        assert set(range(a.first_uid, a.first_uid + BLOCK)).isdisjoint(range(b.first_uid, b.first_uid + BLOCK))
        held = a.block
        # another process (another instructor's batch) cannot take a held block either
        code = ("import sys; sys.path.insert(0, %r)\nfrom kvsched_lab.grading.box.leases import lease_uids\n"
                "l = lease_uids(0); print(l.block)") % str(ROOT)
        other = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                   timeout=60).stdout)
        assert other not in (a.block, b.block)
    with pytest.raises(ValueError):
        a.uid(BLOCK)
    again = [lease_uids() for _ in range(3)]
    assert held in {lease.block for lease in again} or all(lease.block != b.block for lease in again)
    for lease in again:
        lease.release()


def _box(tmp: Path, code: str) -> subprocess.Popen:
    """A bare sandbox (the grader's bwrap options) running `code` in Python."""
    os.chmod(tmp, 0o755)
    lease = lease_uids()
    cmd = sandbox.bwrap_args(tmp, tmp, lease.uid(0)) + [sys.executable, "-I", "-c", code]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    proc.lease = lease  # type: ignore[attr-defined]  # held while the box runs
    return proc


HOGS = """
import os, time
for _ in range(3):
    if os.fork() == 0:
        os.setsid()
        hog = b"x" * (200 << 20)
        time.sleep(30)
        os._exit(0)
time.sleep(30)
"""

BURNERS = """
import os, time
for _ in range(6):
    if os.fork() == 0:
        while True:
            pass
time.sleep(30)
"""


@needs_sandbox
def test_the_memory_of_all_processes_together_is_capped(tmp_path):
    """Before: limits were per process: 4 detached processes of 1 GiB took one sandbox to 2.27 GB over
    --memory-mb 2048. Three of 200 MiB each are over a 400 MiB sandbox: the watch says so."""
    proc = _box(tmp_path, HOGS)
    watch = BoxWatch(proc.pid, 400 << 20)
    try:
        deadline, reason = time.monotonic() + 30, None
        while reason is None and time.monotonic() < deadline:
            reason = watch.check()
            time.sleep(0.05)
        assert reason and "over its 400 MiB" in reason, (reason, watch.peak_bytes)
        assert len(watch.processes()) >= 4
    finally:
        watch.kill_all()
        proc.wait(timeout=30)
        proc.lease.release()
    assert watch.processes() == [], "killing the sandbox ends every process in it"


@needs_sandbox
def test_cpu_of_all_processes_together_is_throttled(tmp_path):
    """Before: 40 detached CPU burners slowed the batch from 58 s to 87 s. Six burners in one sandbox
    are stopped whenever they pass their share in a period (a twentieth of a core here, so that even a loaded
    2-core machine shows it; the grader's share is CPU_CORES)."""
    proc = _box(tmp_path, BURNERS)
    share = 0.05
    watch = BoxWatch(proc.pid, 4 << 30, cpu_cores=share)
    stopped_seen, started = False, time.monotonic()
    try:
        while time.monotonic() - started < 4:
            assert watch.check() is None
            stopped_seen = stopped_seen or bool(watch.stopped)
            time.sleep(0.05)
        pids = watch.processes()
        cpu = 0.0
        for pid in pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    finally:
        watch.kill_all()
        proc.wait(timeout=30)
        proc.lease.release()
    elapsed = time.monotonic() - started
    assert stopped_seen, "the burners were stopped at least once"
    # Each period the burners run until the first poll that sees them over their share: at most one
    # poll interval on every core they can use. Unthrottled they would use `parallel * elapsed`.
    parallel = min(6, os.cpu_count() or 1)
    overshoot = math.ceil(elapsed / CPU_PERIOD) * parallel * POLL_SECONDS
    assert cpu <= share * elapsed + overshoot < 0.5 * parallel * elapsed, (cpu, share * elapsed + overshoot)
    assert CPU_CORES >= 1.0, "a sandbox's kernel and its forked child may each use a core"


@needs_sandbox
def test_grading_from_a_virtual_environment_under_tmp(tmp_path):
    """Before: the sandbox's /tmp was mounted after the environment was bound, hiding a venv or a
    clone under /tmp: ``setpriv: failed to execute <clone>/.venv/bin/python``, `kvsched grade` refused
    and a fresh clone under /tmp failed 10 tests. Here the grader runs from a venv under /tmp."""
    with tempfile.TemporaryDirectory(prefix="kvsched-tmp-venv-", dir="/tmp") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        python = venv / "bin" / "python"
        purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                 capture_output=True, text=True, check=True, timeout=60).stdout.strip()
        import site

        # the test environment's packages (pytest, nbval, ipykernel) through a path entry: no download
        Path(purelib, "borrowed.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
        (tmp_path / "class").mkdir()
        (tmp_path / "class" / "ref.py").write_text(v.py_submission({}))
        out = tmp_path / "out"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT), "HOME": tmp}
        proc = subprocess.run([str(python), "-m", "kvsched_lab", "grade", str(tmp_path / "class"), "--out", str(out)],
                              capture_output=True, text=True, timeout=300, env=env, cwd=tmp)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        row = next(csv.DictReader(open(out / "grades.csv", encoding="utf-8")))
        assert row["total"] == "100" and row["status"] == "ok", row
