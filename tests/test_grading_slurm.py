"""docs/grading.md's cluster scripts, run for real: a single-node Slurm grades a class in shards.

The test starts munge, slurmctld and slurmd (Debian's ``slurm-wlm`` and ``munge``; ``.ci/run``
installs them as root) configured in a temporary folder, runs the documented ``grade-class.sh``
(an array of two shards, then the dependent merge job) over a small class, waits for the merge,
and compares every output with one single-machine run. It skips, saying why, where Slurm is not
installed or cannot start (not root, no daemons). The Kubernetes manifests of the same page are
checked for what can be checked without a cluster: one shard per index, commands that parse.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvsched_lab.grading import grade_main
from kvsched_lab.grading.box.sandbox import probe
from kvsched_lab.grading.batch.shards import parse_shard

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
from small_class import outputs, write_class  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--timeout", "5", *([] if probe()[0] else ["--no-sandbox"])]
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo")
DONE_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED")


def documented_files() -> dict:
    """The code blocks of docs/grading.md that open with ``# NAME: ...``, by NAME."""
    text = (ROOT / "docs" / "grading.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```(?:bash|yaml)\n(.*?)```", text, flags=re.S)
    files = {}
    for block in blocks:
        m = re.match(r"(?:#!/bin/bash\n)?# ([\w.-]+): ", block)
        if m:
            files[m.group(1)] = block
    return files


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 1500) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else f"({path.name}: none)"


class Cluster:
    """munged, slurmctld and slurmd in the foreground, all files under `root`; `stop` ends them."""

    def __init__(self, root: Path) -> None:
        self.root, self.procs = root, []
        self.node = socket.gethostname().split(".")[0]
        for d in ("state", "spool", "munge"):
            (root / d).mkdir(parents=True)
        os.chmod(root / "munge", 0o700)
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        self.socket = root / "munge" / "munge.socket"
        cpus = min(2, len(os.sched_getaffinity(0)))
        conf = f"""ClusterName=kvsched-test
SlurmctldHost={self.node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.socket}
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SchedulerParameters=sched_interval=1
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=test Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
"""
        (root / "slurm.conf").write_text(conf, encoding="utf-8")
        self.env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf"),
                    "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}:/usr/sbin:/usr/bin"}

    def start(self) -> None:
        r = self.root
        self._spawn(["munged", "-F", "--force", f"--key-file={r}/munge/munge.key", f"--socket={self.socket}",
                     f"--pid-file={r}/munge/munged.pid", f"--log-file={r}/munge/munged.log",
                     f"--seed-file={r}/munge/seed"])
        self._wait(lambda: self.socket.exists(), 20, "munged did not open its socket")
        self._spawn(["slurmctld", "-D", "-i"])
        self._spawn(["slurmd", "-D", "-N", self.node])
        self._wait(lambda: self.run(["sinfo", "-h", "-o", "%t"]).stdout.strip() == "idle", 60,
                   "the node did not become idle")

    def _spawn(self, argv: list) -> None:
        log = open(self.root / f"{argv[0]}.out", "wb")
        self.procs.append(subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL))

    def _wait(self, ready, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if ready():
                return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.3)
        logs = "\n".join(f"{n}: {_tail(self.root / n, 600)}" for n in
                         ("munged.out", "slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out"))
        raise RuntimeError(f"{what}:\n{logs}")

    def run(self, argv: list, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60, **kwargs)

    def job_state(self, job: str) -> tuple:
        out = self.run(["scontrol", "-o", "show", "job", job]).stdout
        state = re.search(r"JobState=(\S+)", out)
        reason = re.search(r"Reason=(\S+)", out)
        return (state.group(1) if state else "UNKNOWN", reason.group(1) if reason else "")

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def cluster(tmp_path):
    missing = [d for d in DAEMONS if shutil.which(d) is None and not Path("/usr/sbin", d).exists()]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing): `.ci/run` installs Debian's "
                    "slurm-wlm and munge as root")
    if os.geteuid() != 0:
        pytest.skip("starting slurmctld and slurmd needs root (CI runs as root)")
    c = Cluster(tmp_path / "slurm")
    try:
        c.start()
    except (RuntimeError, OSError) as e:
        c.stop()
        pytest.skip(f"Slurm could not be started here: {e}")
    yield c
    c.stop()


def test_a_real_slurm_array_then_merge_gives_the_single_machine_bytes(cluster, tmp_path):
    klass = write_class(tmp_path / "class")
    single = tmp_path / "single"
    assert grade_main([str(klass), "--out", str(single), "--jobs", "2", *ARGS]) == 0
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for name, text in documented_files().items():
        if name.endswith((".sh", ".sbatch")):
            (scripts / name).write_text(text, encoding="utf-8")
    assert sorted(p.name for p in scripts.iterdir()) == ["grade-class.sh", "grade-merge.sbatch", "grade-shard.sbatch"]
    out = tmp_path / "grades"
    submitted = cluster.run(["bash", str(scripts / "grade-class.sh"), str(klass), str(out), "2", "1", *ARGS],
                            cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    m = re.search(r"array job (\d+) \(2 shards\), merge job (\d+)", submitted.stdout)
    assert m, submitted.stdout
    array, merge = m.groups()
    deadline = time.monotonic() + 300
    state, reason = cluster.job_state(merge)
    while state not in DONE_STATES and reason != "DependencyNeverSatisfied" and time.monotonic() < deadline:
        time.sleep(1)
        state, reason = cluster.job_state(merge)
    logs = "\n".join(f"--- {p.name}\n{_tail(p)}" for p in sorted((out / "logs").glob("*.log")))
    assert state == "COMPLETED", f"merge job {merge}: {state} ({reason})\n{logs}\n{_tail(cluster.root / 'slurmd.log')}"
    for k in range(2):
        log = (out / "logs" / f"shard-{k}.log").read_text()
        assert re.search(r"^\[\d/\d\] ", log, flags=re.M), "the shard's log shows one line per learner"
    assert outputs(out / "class") == outputs(single)
    print(f"slurm: array job {array} (2 shards) and merge job {merge} COMPLETED; "
          f"{len(outputs(single)) - 2} feedback files, grades.csv and manifest.json identical to the "
          f"single-machine run")


def test_the_kubernetes_indexed_job_runs_one_shard_per_index(tmp_path, capsys):
    yaml = pytest.importorskip("yaml", reason="PyYAML (installed with the lab extra's Jupyter) reads the manifests")
    from kvsched_lab.grading.command import grade_parser

    files = documented_files()
    grade, merge = yaml.safe_load(files["kvsched-grade.yaml"]), yaml.safe_load(files["kvsched-merge.yaml"])
    spec = grade["spec"]
    assert grade["kind"] == "Job" and spec["completionMode"] == "Indexed"
    container = spec["template"]["spec"]["containers"][0]
    assert container["command"] == ["sh", "-c"]
    for index in (0, spec["completions"] - 1):
        argv = shlex.split(container["args"][0].replace("$JOB_COMPLETION_INDEX", str(index)))
        assert argv[:3] == ["exec", "kvsched", "grade"]
        args = grade_parser().parse_args(argv[3:])
        assert parse_shard(args.shard) == (index, spec["completions"]) == (index, spec["parallelism"])
        assert args.out.endswith(f"shard-{index}") and args.resume
    argv = shlex.split(merge["spec"]["template"]["spec"]["containers"][0]["args"][0])
    assert argv[:4] == ["exec", "kvsched", "grade", "merge"]
    # The merge's command line parses: on folders that are no shards, it refuses for that reason.
    assert grade_main(["merge", str(tmp_path / "shard-0"), "--out", str(tmp_path / "class")]) == 2
    assert "holds no manifest.json" in capsys.readouterr().err
