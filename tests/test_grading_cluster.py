"""docs/grading.md's cluster routes, run for real: a two-node Slurm cluster on one machine, and podman.

**Slurm.** The test builds a small cluster of its own (slurm_cluster.py): a private network (a
bridge in a network namespace of the test's, one veth pair per daemon, addresses 10.254.0.0/24
that exist nowhere else), a munge key it makes, slurmctld in one namespace and two slurmd
(``slurmd -N n1``, ``-N n2``) in two others, each node with one CPU. A real second, unprivileged
user (useradd) submits the documented ``grade-class.sh`` (an array of two shards, then the
dependent merge job); each shard runs as that user and starts its sandboxes as that user
(bubblewrap in unprivileged user namespaces). It asserts that the shards ran on different nodes
(Slurm's job completion record and each job's own log line), that the merge completed and equals
one single-machine run, and that a failed shard resubmitted with ``sbatch --array=K`` (one task:
``SLURM_ARRAY_TASK_COUNT`` is 1) grades shard K of N.

**Podman.** The documented ``kvsched-image.sh`` builds the grader's image from this machine's own
files (``podman import``: no registry, no pull) and ``kvsched-podman.sh`` grades half the class
(``--shard 0/2``, to keep the test short) in it, bubblewrap inside the container, with the
capabilities the Kubernetes manifest asks for too (test_grading_k8s.py checks that they agree);
every row and feedback file equals the single-machine run's.

Both compare with one single-machine run of the same class (made once for the module). Each
skips, saying why, where it cannot run: not root, Slurm/munge/podman missing, no network
namespaces, a container runtime that cannot start here.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from kvsched_lab.grading import grade_main
from kvsched_lab.grading.batch.journal import read_journal
from kvsched_lab.grading.batch.journal_key import journal_key
from kvsched_lab.grading.box.leases import BLOCKS, lease_uids
from kvsched_lab.grading.box.sandbox import probe

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
from documented import documented_files  # noqa: E402
from second_user import unprivileged_user  # noqa: E402
from slurm_cluster import DAEMONS, NEEDED, NODES, VENV, Cluster, Network, NET, blocked_ancestors, tail  # noqa: E402
from small_class import outputs, write_class  # noqa: E402

ARGS = ["--timeout", "5"]


@pytest.fixture(scope="module")
def graded() -> Iterator[tuple]:
    """(base folder, the class, its single-machine outputs): a 0755 folder other users can read."""
    if os.geteuid() != 0:
        pytest.skip("the cluster routes start daemons, namespaces and containers as root (CI runs as root)")
    if not probe()[0]:
        pytest.skip(f"the grading sandbox cannot run here: {probe()[1]}")
    base = Path(tempfile.mkdtemp(prefix="kvsched-cluster-"))
    try:
        os.chmod(base, 0o755)
        klass = write_class(base / "class")
        single = base / "single"
        assert grade_main([str(klass), "--out", str(single), "--jobs", "2", *ARGS]) == 0
        yield base, klass, outputs(single)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _scripts(folder: Path, *names: str) -> Path:
    """The documented scripts `names`, written into `folder`."""
    folder.mkdir()
    files = documented_files()
    for name in names:
        (folder / name).write_text(files[name], encoding="utf-8")
    return folder


@pytest.fixture
def cluster(graded) -> Iterator[Cluster]:
    missing = [d for d in DAEMONS if shutil.which(d) is None and not Path("/usr/sbin", d).exists()]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing): `.ci/run` installs Debian's "
                    "slurm-wlm and munge as root")
    base = graded[0]
    with unprivileged_user("slurm") as user:
        blocked = blocked_ancestors(list(NEEDED))
        deeper = [str(Path(*p.resolve().parts[: k + 1])) for p in NEEDED for k in range(1, len(p.resolve().parts))
                  if not os.stat(Path(*p.resolve().parts[: k + 1])).st_mode & 0o001
                  and Path(*p.resolve().parts[: k + 1]) not in blocked]
        if deeper:
            pytest.skip(f"the cluster's user cannot enter {', '.join(deeper)}: clone where others can read")
        net = Network()
        c = None
        try:
            try:
                net.build({"ctl": f"{NET}.1", **{n: f"{NET}.1{k + 1}" for k, n in enumerate(NODES)}})
            except subprocess.CalledProcessError as e:
                pytest.skip(f"network namespaces cannot be made here ({' '.join(e.cmd[:4])}: {e.stderr.strip()})")
            c = Cluster(base / "slurm", net, user)
            try:
                c.start()
            except (RuntimeError, OSError) as e:
                pytest.skip(f"Slurm could not be started here: {e}")
            yield c
        finally:
            if c is not None:
                c.stop()
            net.remove()


def test_a_two_node_slurm_array_then_merge_gives_the_single_machine_bytes(graded, cluster):
    base, klass, single = graded
    user = cluster.user
    scripts = _scripts(base / "scripts", "grade-class.sh", "grade-shard.sbatch", "grade-merge.sbatch")
    out = base / "grades"
    out.mkdir()
    os.chown(out, user.uid, user.gid)
    # The user has no home: its journal key lives in a private folder every node sees, as a cluster's
    # shared home would hold it (docs/grading.md: every task and the merge must see one key).
    state = base / "state"
    state.mkdir(mode=0o700)
    os.chown(state, user.uid, user.gid)
    submitted = cluster.user_run(["bash", str(scripts / "grade-class.sh"), str(klass), str(out), "2", "1", *ARGS],
                                 KVSCHED_VENV=str(VENV), KVSCHED_STATE_DIR=str(state))
    assert submitted.returncode == 0, submitted.stderr
    m = re.search(r"array job (\d+) \(2 shards\), merge job (\d+)", submitted.stdout)
    assert m, submitted.stdout
    array, merge = m.groups()
    info = cluster.wait_done(merge)
    logs = "\n".join(f"--- {p.name}\n{tail(p)}" for p in sorted((out / "logs").glob("*.log")))
    daemon_logs = "\n".join(tail(p, 800) for p in sorted(cluster.root.glob("slurmd-*.log")))
    assert info.get("JobState") == "COMPLETED", f"merge job {merge}: {info}\n{logs}\n{daemon_logs}"
    on = cluster.completed_on()
    shard_nodes = []
    for k in range(2):
        log = (out / "logs" / f"shard-{k}.log").read_text()
        said = re.search(rf"^shard {k}/2 on node (\w+) \(job (\d+), 1 CPUs\)$", log, flags=re.M)
        assert said, log
        assert on[said.group(2)] == said.group(1), (on, said.groups())  # Slurm's record agrees with the job
        shard_nodes.append(said.group(1))
        assert re.search(r"^\[\d/\d\] ", log, flags=re.M), "the shard's log shows one line per learner"
        assert "sandbox uids" not in log, "the shard ran as the user, so its sandboxes lease no root uids"
    assert sorted(shard_nodes) == sorted(NODES), f"both shards on different nodes: {shard_nodes}"
    assert all(os.stat(p).st_uid == user.uid for p in (out / "class" / "grades.csv", out / "shard-0" / "grades.csv"))
    assert outputs(out / "class") == single
    before_redo = (outputs(out / "shard-1"), (out / "shard-1" / "journal.jsonl").read_bytes())

    # The documented recovery of a failed shard: resubmitted alone, it is an array of one task, so
    # SLURM_ARRAY_TASK_COUNT is 1 (before, the script built `--shard 1/1`, refused: the job FAILED).
    # It resumes from shard 1's journal, so it grades nothing again and leaves the outputs as they are.
    again = re.search(r"to grade shard K again: sbatch --array=K (.*)$", submitted.stdout, flags=re.M)
    assert again, submitted.stdout
    redo = cluster.user_run(["bash", "-c", f"sbatch --parsable --array=1 {again.group(1)}"], KVSCHED_VENV=str(VENV),
                            KVSCHED_STATE_DIR=str(state))
    assert redo.returncode == 0, redo.stderr
    job = redo.stdout.strip().split(";")[0]
    log = out / "logs" / "shard-1.log"
    assert cluster.wait_done(job).get("JobState") == "COMPLETED", tail(log)
    assert re.search(r"^shard 1/2 on node", log.read_text(), flags=re.M)
    assert (outputs(out / "shard-1"), (out / "shard-1" / "journal.jsonl").read_bytes()) == before_redo
    print(f"slurm: array job {array} on nodes {shard_nodes}, merge job {merge} COMPLETED as {user.name}, outputs "
          f"identical to the single-machine run; shard 1 resubmitted by `sbatch --array=1` (job {job}) resumed")


def _podman(store: Path) -> list:
    """podman with a store of the test's own (nothing in the host's), on a runtime that can start here:
    runc where installed (crun refuses a host with cgroup v1 and v2 controllers both in use)."""
    runtime = ["--runtime", shutil.which("runc")] if shutil.which("runc") else []
    return ["podman", "--root", str(store / "root"), "--runroot", str(store / "run"), "--storage-driver", "overlay",
            "--cgroup-manager", "cgroupfs", *runtime]


def test_the_podman_route_grades_in_a_locally_built_image_with_the_sandbox_inside(graded, monkeypatch):
    """Where bubblewrap cannot run on the nodes: the grader's image, made here, bubblewrap inside it."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (`.ci/run` installs Debian's podman and runc as root)")
    base, klass, single = graded
    scripts = _scripts(base / "podman-scripts", "kvsched-image.sh", "kvsched-podman.sh")
    store = base / "podman"
    podman = _podman(store)
    state = base / "podman-state"  # the host's journal key, as the merge on the host will read it
    env = {**os.environ, "KVSCHED_VENV": str(VENV), "PODMAN": " ".join(podman), "KVSCHED_STATE_DIR": str(state)}
    try:
        built = subprocess.run(["bash", str(scripts / "kvsched-image.sh"), "localhost/kvsched-grader:test"], env=env,
                               capture_output=True, text=True, timeout=600)
        assert built.returncode == 0, built.stderr[-3000:]
        tried = subprocess.run([*podman, "run", "--rm", "--network", "none", "--ulimit", "nofile=4096:4096",
                                "--ulimit", "nproc=4096:4096", "localhost/kvsched-grader:test", "/bin/sh", "-c", "true"],
                               capture_output=True, text=True, timeout=300)
        if tried.returncode != 0:
            pytest.skip(f"podman cannot start a container here: {tried.stderr.strip()[-400:]}")
        # The node's leases reach into the container: with every block but one held on the host,
        # the batch in the container leases that one (two containers on a node never share uids).
        leases = base / "leases"
        leases.mkdir(mode=0o700)
        held = [lease_uids(0, leases) for _ in range(BLOCKS)]
        free = held.pop(5)
        free.release()
        out = base / "podman-out"
        ran = subprocess.run(["bash", str(scripts / "kvsched-podman.sh"), "localhost/kvsched-grader:test", str(klass),
                              str(out), "--shard", "0/2", "--jobs", "2", *ARGS],  # half the class: time
                             env={**env, "KVSCHED_LEASES": str(leases)},
                             capture_output=True, text=True, timeout=600)
        for lease in held:
            lease.release()
        assert ran.returncode == 0, (ran.stdout[-2000:], ran.stderr[-2000:])
        assert f"sandbox uids {free.first_uid}-{free.first_uid + 1} (leased for this batch)" in ran.stdout, ran.stdout
        mine = outputs(out)
        rows = mine.pop("grades.csv").splitlines()
        del mine["manifest.json"]  # a shard's manifest names its shard
        assert rows[0] == single["grades.csv"].splitlines()[0] and len(rows) > 1
        assert set(rows[1:]) <= set(single["grades.csv"].splitlines()[1:]), "each row as the single run wrote it"
        assert mine and all(single[name] == text for name, text in mine.items()), "each feedback file too"
        # Signed in the container with the host's key: the host trusts every entry (before, the
        # container made a key of its own that was gone with it, and a merge refused the shard).
        monkeypatch.setenv("KVSCHED_STATE_DIR", str(state))
        back = read_journal(out / "journal.jsonl", journal_key())
        assert back.entries and not back.rejected, back.rejected
        print(f"podman: {built.stdout.strip()}; graded shard 0/2 in it, sandboxed (block {free.block} leased "
              f"through the host's lease folder): {len(rows) - 1} rows and their feedback identical to the "
              "single-machine run's")
    finally:
        subprocess.run([*podman, "rmi", "--all", "--force"], capture_output=True, timeout=120)
        subprocess.run(["umount", "-R", str(store / "root" / "overlay")], capture_output=True, timeout=60)
