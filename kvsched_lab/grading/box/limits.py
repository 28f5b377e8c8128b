"""Total caps on one sandbox: memory, processes and CPU of all its processes together.

Per-process limits (``RLIMIT_AS``, ``RLIMIT_CPU``) bound each process, not their sum: 4 detached
processes of 1 GiB each took one sandbox over its budget, 40 detached CPU burners slowed the whole
batch. A `BoxWatch` bounds the sandbox as a whole, whatever the machine offers:

* with cgroup v2 (``/sys/fs/cgroup`` with the ``memory``, ``pids`` and ``cpu`` controllers, and
  writable: root in CI, a delegated subtree elsewhere) the kernel enforces it: each sandbox gets
  its own cgroup with ``memory.max`` = the budget (swap off), ``pids.max`` = `MAX_PROCESSES`, and
  ``cpu.max`` = `CPU_CORES` cores; the sandbox is killed through ``cgroup.kill`` when it ends;
* otherwise (cgroup v1 machines, containers without delegation) the grader polls every process
  of the sandbox's PID namespace (the tree under its init) every `POLL_SECONDS`: when their
  memory together (PSS: a page shared by a forked child and its parent counts once; read only
  once their resident sizes, an upper bound one ``stat`` read gives, pass the budget) passes
  the budget the sandbox is killed (the row says so); when their CPU time in a period passes
  `CPU_CORES` cores' worth they are stopped (SIGSTOP) until the period ends, as ``cpu.max``
  would throttle them. The process count is bounded by ``RLIMIT_NPROC`` on the sandbox's own
  leased uid (leases.py), which counts every process and thread of that uid. Between two polls a
  process can grow only to its own ``RLIMIT_AS`` (the same budget), so the worst case is one poll
  of overshoot, never the budget times the process count.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpu")
MAX_PROCESSES = 64  # processes and threads of one sandbox (nbval, its kernel, forked children, their threads)
CPU_CORES = 1.5  # CPU one sandbox may use at once, averaged over a period (a kernel and its child)
CPU_PERIOD = 1.0  # seconds over which CPU use is measured before throttling
POLL_SECONDS = 0.25  # how often the fallback looks at the sandbox's processes
# Why the sandbox was ended for memory, in a grade's review notes (judging/review_texts.py reads them back).
MEMORY_TOGETHER = ("the sandbox's processes used {used} MiB together, over its {budget} MiB "
                   "(detached processes or children count too)")
OUT_OF_MEMORY = "the sandbox ran out of its {budget} MiB (all its processes together)"
_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICK = os.sysconf("SC_CLK_TCK")


def cgroup_v2_parent() -> Optional[Path]:
    """A cgroup v2 folder this process may create sandbox cgroups in, with the controllers on; else None."""
    try:
        if not _has_controllers(CGROUP_ROOT / "cgroup.controllers"):
            return None
        own = Path("/proc/self/cgroup").read_text().splitlines()
        rel = next(line.split("::", 1)[1] for line in own if line.startswith("0::"))
    except (OSError, StopIteration):
        return None
    parent = CGROUP_ROOT / rel.lstrip("/") / "kvsched-sandboxes"
    try:
        parent.mkdir(exist_ok=True)
        (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in CONTROLLERS))
    except OSError:
        return None
    return parent


def _has_controllers(path: Path) -> bool:
    try:
        have = set(path.read_text().split())
    except OSError:
        return False
    return set(CONTROLLERS) <= have


def _ns(pid: int) -> Optional[str]:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _children(pid: int) -> List[int]:
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            text = Path(f"/proc/{pid}/task/{task}/children").read_text()
            out += [int(x) for x in text.split()]
    except OSError:
        pass
    return out


def _pss(pid: int) -> int:
    """Bytes `pid` holds as its proportional share of resident pages (PSS): the pages a forked child
    still shares with its parent count once between them. Costly (the kernel walks the process's
    page tables), so it is read only when the resident sizes together pass the budget."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _usage(pid: int) -> Optional[Tuple[int, float]]:
    """(resident bytes, CPU seconds of the process and its reaped children) of `pid`, or None: one
    read of ``/proc/PID/stat``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # after the command name, which may hold spaces
    try:
        ticks = sum(int(fields[k]) for k in (11, 12, 13, 14))  # utime, stime, cutime, cstime
        return int(fields[21]) * _PAGE, ticks / _TICK  # rss (pages)
    except (ValueError, IndexError):
        return None


class BoxWatch:
    """Caps one running sandbox (see the module docstring); `check` is called while it runs."""

    def __init__(self, root_pid: int, memory_bytes: int, cgroup: Optional[Path] = None,
                 cpu_cores: float = CPU_CORES) -> None:
        self.root_pid = root_pid  # bwrap, in the grader's PID namespace
        self.memory_bytes = memory_bytes
        self.cpu_cores = cpu_cores  # CPU the sandbox may use at once, averaged over CPU_PERIOD
        self.cgroup = cgroup
        self.namespace: Optional[str] = None
        self.init: Optional[int] = None  # the sandbox's PID namespace's process 1
        self.stopped: List[int] = []
        self.period_start = time.monotonic()
        self.cpu_at_period_start: Optional[float] = None
        self.last_poll = 0.0
        self.peak_bytes = 0

    # -- the cgroup v2 path: the kernel enforces, this only reads
    @staticmethod
    def make_cgroup(parent: Path, name: str, memory_bytes: int) -> Path:
        group = parent / name
        group.mkdir()
        (group / "memory.max").write_text(str(memory_bytes))
        (group / "memory.swap.max").write_text("0")
        (group / "pids.max").write_text(str(MAX_PROCESSES))
        period_us = int(CPU_PERIOD * 1_000_000)
        (group / "cpu.max").write_text(f"{int(CPU_CORES * period_us)} {period_us}")
        return group

    def processes(self) -> List[int]:
        """Every process of the sandbox: its PID namespace's init (bwrap's child) and all below it.

        An orphan in a PID namespace is re-parented to that namespace's init, so the tree under the
        init holds every process of the namespace, detached ones included; walking it reads only
        the sandbox's own ``/proc`` entries, not every process of the machine."""
        if self.init is None:
            outer = _ns(self.root_pid)
            for child in _children(self.root_pid):
                ns = _ns(child)
                if ns is not None and ns != outer:
                    self.namespace, self.init = ns, child
                    break
            if self.init is None:
                return []
        found, todo = [], [self.init]
        while todo:
            pid = todo.pop()
            if _ns(pid) == self.namespace:  # still the sandbox's (not a pid reused since)
                found.append(pid)
                todo += _children(pid)
        return found

    def check(self) -> Optional[str]:
        """Why the sandbox must be ended now (its memory), or None; throttles its CPU on the way."""
        now = time.monotonic()
        if now - self.last_poll < POLL_SECONDS:
            return None
        self.last_poll = now
        if self.cgroup is not None:
            return self._cgroup_events()
        pids = self.processes()
        usage = [(p, u) for p, u in ((p, _usage(p)) for p in pids) if u is not None]
        rss = sum(u[0] for _, u in usage)  # resident sizes: at least the PSS, so within them is within budget
        cpu = sum(u[1] for _, u in usage)
        if rss > self.memory_bytes:
            rss = sum(_pss(p) or u[0] for p, u in usage)
        self.peak_bytes = max(self.peak_bytes, rss)
        if rss > self.memory_bytes:
            return MEMORY_TOGETHER.format(used=rss >> 20, budget=self.memory_bytes >> 20)
        self._throttle(now, cpu, pids)
        return None

    def _throttle(self, now: float, cpu: float, pids: List[int]) -> None:
        if self.stopped and now - self.period_start >= CPU_PERIOD:
            self.resume()
        if now - self.period_start >= CPU_PERIOD:
            self.period_start, self.cpu_at_period_start = now, cpu
            return
        if self.cpu_at_period_start is None:
            self.cpu_at_period_start = cpu
            return
        if not self.stopped and cpu - self.cpu_at_period_start > self.cpu_cores * CPU_PERIOD:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGSTOP)
                    self.stopped.append(pid)
                except OSError:
                    pass

    def resume(self) -> None:
        """Let stopped processes run again (before the period ends, and before the sandbox is killed)."""
        for pid in self.stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        self.stopped = []

    def _cgroup_events(self) -> Optional[str]:
        try:
            events: Dict[str, int] = dict((k, int(v)) for k, v in (
                line.split() for line in (self.cgroup / "memory.events").read_text().splitlines()))
        except (OSError, ValueError):
            return None
        if events.get("oom_kill", 0) > 0:
            return OUT_OF_MEMORY.format(budget=self.memory_bytes >> 20)
        return None

    def kill_all(self) -> None:
        """End every process of the sandbox (cgroup.kill, or each process of its namespace)."""
        self.resume()
        if self.cgroup is not None:
            try:
                (self.cgroup / "cgroup.kill").write_text("1")
            except OSError:
                pass
            return
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def close(self) -> None:
        if self.cgroup is not None:
            for _ in range(50):  # rmdir works once the kernel has reaped every process
                try:
                    self.cgroup.rmdir()
                    return
                except OSError:
                    time.sleep(0.1)
