"""The cluster helpers of test_grading_cluster.py: a private network, a munge key, slurmctld and two slurmd.

`Network` makes network namespaces of the test's own joined by a bridge in one of them (one veth
pair per daemon, made straight in the namespaces: no name or address in the host's own).
`Cluster` starts munged, slurmctld and ``slurmd -N n1`` / ``-N n2``, each slurmd in its own
namespace, every file under one folder, and runs client commands as the test's unprivileged user.
Where the venv's Python sits under a folder only root may enter (/root), each node's mount
namespace shows the user just that Python on a 0755 tmpfs (`view_script`), the way a cluster
shares its software; nothing on the host changes.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import List

from second_user import User

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo", "setpriv", "ip", "nsenter", "unshare")
DONE_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED")
NET = "10.254.0"  # the test's private network: the controller is .1, node k is .1k
NODES = ("n1", "n2")
NEEDED = (ROOT, VENV, Path(sys.base_prefix))  # what the cluster's user must reach


def tail(path: Path, n: int = 1500) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else f"({path.name}: none)"


def _ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True, text=True, timeout=30)


class Network:
    """Network namespaces of the test's own joined by a bridge: `ns(role)` names one, `remove` ends all."""

    def __init__(self) -> None:
        self.prefix = f"kvsched-{os.getpid()}-"
        self.made: List[str] = []

    def ns(self, role: str) -> str:
        return self.prefix + role

    def build(self, hosts: dict) -> None:
        switch = self.ns("switch")
        self._add(switch)
        _ip("-n", switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", switch, "link", "set", "br0", "up")
        for k, (role, addr) in enumerate(hosts.items()):
            ns = self.ns(role)
            self._add(ns)
            port = f"port{k}"  # made straight in the namespaces: no name in the host's own
            _ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", switch)
            _ip("-n", switch, "link", "set", port, "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def _add(self, name: str) -> None:
        _ip("netns", "add", name)
        self.made.append(name)

    def remove(self) -> None:
        for name in reversed(self.made):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30)


def blocked_ancestors(paths: List[Path]) -> dict:
    """Folders on the way to `paths` that only their owner may enter (e.g. /root, 0700, holding the
    Python a venv was made with) -> the children under them the paths need."""
    needed: dict = {}
    for path in paths:
        parts = path.resolve().parts
        for k in range(1, len(parts) - 1):
            folder = Path(*parts[: k + 1])
            if not os.stat(folder).st_mode & 0o001:
                needed.setdefault(folder, set()).add(parts[k + 1])
                break
    return needed


def view_script(base: Path, blocked: dict) -> str:
    """Shell lines that, in a mount namespace of the node's own, show the needed children of each
    blocked folder on a 0755 tmpfs in its place (the way a cluster shares its software), then exec."""
    lines, k = ["set -e"], 0
    for folder, children in sorted(blocked.items()):
        binds = []
        for child in sorted(children):
            keep = base / "views" / str(k)
            k += 1
            lines += [f"mkdir -p {keep}", f"mount --bind {folder / child} {keep}"]
            binds.append((child, keep))
        lines.append(f"mount -t tmpfs -o mode=0755 kvsched-view {folder}")
        for child, keep in binds:
            lines += [f"mkdir {folder / child}", f"mount --bind {keep} {folder / child}"]
    return "\n".join(lines + ['exec "$@"'])


class Cluster:
    """munged, slurmctld and two slurmd in the foreground, all files under `root`; `stop` ends them."""

    def __init__(self, root: Path, net: Network, user: User) -> None:
        self.root, self.net, self.user, self.procs = root, net, user, []
        for d in ("state", "munge", "munge-run", *(f"spool/{n}" for n in NODES)):
            (root / d).mkdir(parents=True)
        os.chmod(root / "munge", 0o700)
        os.chmod(root / "munge-run", 0o755)  # the user's commands reach munged's socket
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        self.socket = root / "munge-run" / "munge.socket"
        nodes = "\n".join(f"NodeName={n} NodeAddr={NET}.1{k + 1} CPUs=1 RealMemory=4096 State=UNKNOWN"
                          for k, n in enumerate(NODES))
        conf = f"""ClusterName=kvsched-test
SlurmctldHost={socket.gethostname().split(".")[0]}({NET}.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={root}/jobcomp.txt
MinJobAge=600
ReturnToService=2
SchedulerParameters=sched_interval=1
{nodes}
PartitionName=test Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP
"""
        (root / "slurm.conf").write_text(conf, encoding="utf-8")
        os.chmod(root, 0o755)
        self.view = view_script(root, blocked_ancestors(list(NEEDED)))
        self.env = {"SLURM_CONF": str(root / "slurm.conf"), "PATH": "/usr/sbin:/usr/bin:/bin", "LANG": "C.UTF-8"}

    def start(self) -> None:
        r = self.root
        self._spawn(None, "munged", ["munged", "-F", "--force", f"--key-file={r}/munge/munge.key",
                                     f"--socket={self.socket}", f"--pid-file={r}/munge/munged.pid",
                                     f"--log-file={r}/munge/munged.log", f"--seed-file={r}/munge/seed"])
        self._wait(lambda: self.socket.exists(), 20, "munged did not open its socket")
        self._spawn("ctl", "slurmctld", ["slurmctld", "-D", "-i"])
        for node in NODES:
            self._spawn(node, f"slurmd-{node}", ["slurmd", "-D", "-N", node])
        self._wait(lambda: self.user_run(["sinfo", "-h", "-o", "%t"]).stdout.split() == ["idle"], 60,
                   "the nodes did not become idle")

    def _in_node(self, ns: str, argv: list) -> list:
        """`argv` in namespace `ns`, in a mount namespace that shows the user the software it needs."""
        # nsenter, not `ip netns exec`: that mounts a sysfs of the namespace's over /sys, hiding the cgroups
        return ["nsenter", f"--net=/run/netns/{self.net.ns(ns)}", "--", "unshare", "--mount", "--propagation",
                "private", "sh", "-c", self.view, "view", *argv]

    def _spawn(self, ns, name: str, argv: list) -> None:
        log = open(self.root / f"{name}.out", "wb")
        prefix = self._in_node(ns, []) if ns else []
        self.procs.append(subprocess.Popen(prefix + argv, env={**self.env}, stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL))

    def _wait(self, ready, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if ready():
                return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.3)
        logs = "\n".join(f"{p.name}: {tail(p, 600)}" for p in sorted(self.root.glob("*.log")) +
                         sorted(self.root.glob("*.out")))
        raise RuntimeError(f"{what}:\n{logs}")

    def user_run(self, argv: list, **env: str) -> subprocess.CompletedProcess:
        """`argv` as the cluster's unprivileged user, in the controller's network namespace."""
        u = self.user
        cmd = self._in_node("ctl", ["setpriv", f"--reuid={u.uid}", f"--regid={u.gid}", "--clear-groups", "--", *argv])
        return subprocess.run(cmd, env={**u.as_user(**self.env, **env)["env"]}, capture_output=True, text=True,
                              timeout=60, cwd=self.root)

    def job(self, job: str) -> dict:
        out = self.user_run(["scontrol", "-o", "show", "job", job]).stdout
        return dict(re.findall(r"(\w+)=(\S+)", out))

    def wait_done(self, job: str, seconds: float = 300) -> dict:
        deadline = time.monotonic() + seconds
        info = self.job(job)
        while (info.get("JobState") not in DONE_STATES and info.get("Reason") != "DependencyNeverSatisfied"
               and time.monotonic() < deadline):
            time.sleep(1)
            info = self.job(job)
        return info

    def completed_on(self) -> dict:
        """Job id -> the node it ran on, from Slurm's job completion record (jobcomp/filetxt)."""
        text = (self.root / "jobcomp.txt").read_text() if (self.root / "jobcomp.txt").exists() else ""
        return {m.group(1): m.group(2) for m in re.finditer(r"JobId=(\d+) .*?NodeList=(\S+)", text)}

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
