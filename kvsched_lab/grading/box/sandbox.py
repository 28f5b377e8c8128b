"""The sandbox learner code runs in: bubblewrap (``bwrap``) namespaces, read-only binds, limits.

One sandbox per submission runs ``nbrun --box`` (the cell runner, its kernel, the forked children
that run learner code). What it sees:

* read-only: the system's ``/usr``, ``/lib*``, ``/bin``, the Python environment (``sys.prefix``
  and ``sys.base_prefix``, with any installed ``solutions``/``kvsched_lab`` in them masked), the
  batch's `library` (``kvsched_lab`` without the withheld files and with only the kernel side of
  ``kvsched_lab.grading``) and that submission's grading inputs (the cases' inputs, its own code);
* a private, size-limited tmpfs as its working folder; a private ``/proc`` and a minimal ``/dev``;
* not: ``solutions/``, the repository, other submissions, the class folder, the output folder,
  the grader's files, the expected results, the network, the host's processes or IPC.

Namespaces: PID (when the sandbox ends, every process in it has ended), network, IPC, UTS,
mount, and a user namespace for an unprivileged instructor; as root, the processes inside run
as an unprivileged uid of their own, leased for the batch (leases.py: no other running batch
holds it), with no capabilities, which makes the process-count limit hold. ``--die-with-parent``
ends it with the grader. Limits: per process, address space, CPU time, file size, process count,
open files; per sandbox, all its processes' memory, processes and CPU together (limits.py);
the tmpfs sizes and the output the grader reads back.

The private ``/tmp`` is mounted before the environment is bound, so a clone or a virtual
environment under ``/tmp`` is bound on top of it rather than hidden by it.
"""
from __future__ import annotations

import functools
import itertools
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from kvsched_lab.grading.box.leases import PROBE_UID
from kvsched_lab.grading.box.limits import MAX_PROCESSES, POLL_SECONDS, BoxWatch, cgroup_v2_parent
from kvsched_lab.i18n import N_, _

BOX = "/box"  # the sandbox's working folder (tmpfs)
INPUTS = "/box-in"  # the submission's grading inputs (read-only)
LIBRARY = "/opt/kvsched"  # the sandbox's kvsched_lab (read-only)
BOX_TMPFS_BYTES = 256 << 20  # the working folder's size: logs, runtime files, observations
MAX_OPEN_FILES = 1024
MAX_FILE_BYTES = 64 << 20  # one file written in the sandbox
OUTPUT_CAP = 16 << 20  # sandbox stdout the grader reads (five TODOs at RESULT_FILE_CAP, escaped, fit)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/etc/nsswitch.conf")
HOW_TO_ENABLE = N_("install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install "
                 "bubblewrap`) and allow unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1`"
                 " on older Debian; on Ubuntu 24.04+ an AppArmor profile for bwrap), or grade as root in a "
                 "container started with --privileged or CAP_SYS_ADMIN")


@dataclass
class BoxRun:
    """What came back from one sandbox: its stdout (capped), how it ended, how long it took."""

    stdout: bytes
    returncode: Optional[int]
    timed_out: bool
    too_much_output: bool
    seconds: float
    over_budget: str = ""  # why limits.py ended it (all its processes' memory), else ""


def _is_root() -> bool:
    return os.geteuid() == 0


def _ancestors(path: str) -> List[str]:
    parts = Path(path).parts
    return [str(Path(*parts[: k + 1])) for k in range(1, len(parts) - 1)]


def _masked_installs(prefixes: List[str]) -> List[str]:
    """Installed (non-editable) copies of `solutions`/`kvsched_lab` inside the bound environment."""
    import site

    found = []
    for sp in set(site.getsitepackages() + [site.getusersitepackages()]):
        for name in ("solutions", "kvsched_lab"):
            p = Path(sp) / name
            if p.is_dir() and any(str(p).startswith(pre.rstrip("/") + "/") for pre in prefixes):
                found.append(str(p))
    return sorted(found)


@functools.lru_cache(maxsize=1)
def _environment_paths() -> Tuple[str, ...]:
    """Folders the sandbox's Python needs: its prefixes, and any site folder outside them that
    its ``sys.path`` names (a ``.pth`` pointing at another environment's packages)."""
    prefixes = sorted({sys.prefix, sys.base_prefix})
    probe = subprocess.run([sys.executable, "-I", "-c", "import sys; print('\\n'.join(sys.path))"],
                           capture_output=True, text=True, timeout=60)
    extra = []
    for entry in probe.stdout.splitlines():
        entry = os.path.abspath(entry) if entry else ""
        inside = any(entry == pre or entry.startswith(pre.rstrip("/") + "/") for pre in prefixes + extra)
        holds_course = any(os.path.isdir(os.path.join(entry, n)) for n in ("solutions", "kvsched_lab"))
        if entry and os.path.isdir(entry) and not inside and not entry.startswith(SYSTEM_DIRS) and not holds_course:
            extra.append(entry)  # a checkout, or an install of the course, is never bound: the library is
    return tuple(prefixes + extra)


def bwrap_args(inputs: Path, library: Path, uid: int) -> List[str]:
    """The ``bwrap`` command line, up to the command run inside (`uid`: the leased uid, as root)."""
    prefixes = list(_environment_paths())
    args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try"]
    if not _is_root():
        args += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    for d in SYSTEM_DIRS:
        args += ["--ro-bind-try", d, d]
    for f in SYSTEM_FILES:
        args += ["--ro-bind-try", f, f]
    # /tmp first: what is bound below it afterwards (a venv under /tmp) stays visible.
    args += ["--size", str(16 << 20), "--perms", "1777", "--tmpfs", "/tmp"]
    made = {"/tmp"}
    for target in prefixes + [LIBRARY, INPUTS]:
        for parent in _ancestors(target):
            if parent not in made and not any(parent == d or parent.startswith(d + "/") for d in SYSTEM_DIRS):
                made.add(parent)
                args += ["--perms", "0755", "--dir", parent]
    for pre in prefixes:
        args += ["--ro-bind", pre, pre]
    for masked in _masked_installs(prefixes):
        args += ["--tmpfs", masked]
    args += ["--ro-bind", str(library), LIBRARY, "--ro-bind", str(inputs), INPUTS,
             "--proc", "/proc", "--dev", "/dev",
             "--size", str(BOX_TMPFS_BYTES), "--perms", "1777", "--tmpfs", BOX,
             "--remount-ro", "/", "--chdir", BOX, "--clearenv",
             "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", BOX,
             "--setenv", "LANG", "C.UTF-8", "--setenv", "USER", "learner", "--"]
    if _is_root():
        args += ["setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups", "--inh-caps=-all",
                 "--bounding-set=-all", "--no-new-privs"]
    return args


def runner_command(inputs: str, box: str, library: str) -> List[str]:
    """``nbrun --box`` on `library`'s kvsched_lab, whatever the environment's own finders say."""
    boot = (f"import runpy, sys; sys.path.insert(0, {library!r}); "
            "runpy.run_module('kvsched_lab.grading.kernel.nbrun', run_name='__main__', alter_sys=True)")
    return [sys.executable, "-I", "-B", "-c", boot, "--box", inputs, box, library]


def _user_processes() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                count += entry.stat().st_uid == uid
            except OSError:
                pass
    return count


def _limits(memory_mb: int, cpu_seconds: int, nproc: int, cgroup: Optional[Path] = None):
    def apply() -> None:
        os.umask(0o022)
        if cgroup is not None:  # join the sandbox's own cgroup before anything else starts
            with open(cgroup / "cgroup.procs", "w") as f:
                f.write(str(os.getpid()))
        for what, value in ((resource.RLIMIT_AS, memory_mb << 20), (resource.RLIMIT_CORE, 0),
                            (resource.RLIMIT_CPU, cpu_seconds), (resource.RLIMIT_FSIZE, MAX_FILE_BYTES),
                            (resource.RLIMIT_NOFILE, MAX_OPEN_FILES), (resource.RLIMIT_NPROC, nproc)):
            try:
                resource.setrlimit(what, (value, value))
            except (ValueError, OSError):  # a lower hard limit is already in place: keep it
                pass
    return apply


_boxes = itertools.count()  # names this process's sandbox cgroups apart


def run(inputs: Path, library: Path, uid: int, memory_mb: int, wall_seconds: float, sandboxed: bool,
        workdir: Optional[Path] = None) -> BoxRun:
    """Run ``nbrun --box`` on `inputs`, in the sandbox or (``sandboxed=False``) directly in `workdir`.

    Sandboxed, `uid` is the leased uid it runs as (as root) and all its processes together stay
    within `memory_mb`, `MAX_PROCESSES` and the CPU share of limits.py."""
    cgroup = None
    if sandboxed:
        cmd = bwrap_args(inputs, library, uid) + runner_command(INPUTS, BOX, LIBRARY)
        nproc = MAX_PROCESSES if _is_root() else _user_processes() + MAX_PROCESSES
        cwd = "/"
        parent = cgroup_v2_parent()
        if parent is not None:
            cgroup = BoxWatch.make_cgroup(parent, f"box-{os.getpid()}-{next(_boxes)}", memory_mb << 20)
    else:
        assert workdir is not None
        workdir.mkdir(parents=True, exist_ok=True)
        cmd = runner_command(str(inputs), str(workdir), str(library))
        nproc = resource.RLIM_INFINITY
        cwd = str(workdir)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": str(workdir or BOX)}
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=_limits(memory_mb, int(wall_seconds) * 2 + 30, nproc, cgroup))
    watch = BoxWatch(proc.pid, memory_mb << 20, cgroup) if sandboxed else None
    chunks: List[bytes] = []
    size, timed_out, too_much, over = 0, False, False, ""
    deadline = started + wall_seconds
    fd = proc.stdout.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        over = watch.check() if watch is not None else None
        if over:
            break
        ready, _, _ = select.select([fd], [], [], min(left, POLL_SECONDS))
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        size += len(chunk)
        if size > OUTPUT_CAP:
            too_much = True
            break
        chunks.append(chunk)
    if watch is not None:
        watch.resume()
        if timed_out or too_much or over:
            watch.kill_all()
    if timed_out or too_much or over:
        _kill_group(proc.pid)
    proc.stdout.close()
    try:
        code = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        code = proc.wait()
    if not sandboxed:
        _kill_group(proc.pid)  # unsandboxed: what the run left in its session, at least
    if watch is not None:
        watch.close()
    return BoxRun(b"".join(chunks), code, timed_out, too_much, time.monotonic() - started, over or "")


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


@functools.lru_cache(maxsize=1)
def probe() -> Tuple[bool, str]:
    """(works, why not) for the sandbox on this machine: a real run of ``bwrap`` with our options."""
    if not sys.platform.startswith("linux"):
        return False, _("the sandbox needs Linux (this is {platform})", platform=sys.platform)
    if shutil.which("bwrap") is None:
        return False, _("bubblewrap (bwrap) is not installed")
    if _is_root() and shutil.which("setpriv") is None:
        return False, _("setpriv (util-linux) is not installed")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kvsched-probe-") as tmp:
        os.chmod(tmp, 0o755)
        try:  # as root, PROBE_UID: a batch's leased uids are its own, and the probe needs no lease
            cmd = bwrap_args(Path(tmp), Path(tmp), PROBE_UID) + [sys.executable, "-I", "-c",
                                                                 "import os; print(os.getpid())"]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                                  preexec_fn=_limits(2048, 60, 4096))
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, _("bwrap could not start: {error}", error=e)
    if proc.returncode != 0 or proc.stdout.strip() == "":
        detail = (proc.stderr.strip().splitlines() or [_("no output")])[-1]
        return False, _("bwrap fails here: {detail}", detail=detail)
    if not proc.stdout.strip().isdigit() or int(proc.stdout.strip()) > 10:  # a new PID namespace numbers from 1
        return False, _("bwrap ran without a PID namespace (pid {pid})", pid=proc.stdout.strip()[:20])
    return True, _("bubblewrap works: learner code runs sandboxed")
