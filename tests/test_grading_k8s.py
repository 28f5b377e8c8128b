"""docs/grading.md's Kubernetes manifests, checked for all that can be checked without a cluster.

Issue 28: the grading Job had no ``securityContext`` (bubblewrap's root path needs capabilities a
default pod lacks) and only a Job-wide ``backoffLimit``. These tests parse both manifests and
check the shard arithmetic, every index's command (with ``kvsched grade``'s own parser), bounded
retries, resources matched to ``--jobs``, and a ``securityContext`` that grants exactly what
``kvsched-podman.sh`` grants (that route runs for real in test_grading_cluster.py).
"""
from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from kvsched_lab.grading import grade_main
from kvsched_lab.grading.command import grade_parser
from kvsched_lab.grading.batch.shards import parse_shard

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
from documented import documented_files  # noqa: E402

yaml = pytest.importorskip("yaml", reason="PyYAML (installed with the lab extra's Jupyter) reads the manifests")


def _mebibytes(quantity: str) -> float:
    m = re.fullmatch(r"(\d+)(Mi|Gi)", quantity)
    assert m, f"memory {quantity!r}: give it in Mi or Gi"
    return int(m.group(1)) * (1024 if m.group(2) == "Gi" else 1)


@pytest.fixture(scope="module")
def grade_job() -> dict:
    return yaml.safe_load(documented_files()["kvsched-grade.yaml"])


def test_the_indexed_job_runs_one_shard_per_index(grade_job):
    spec = grade_job["spec"]
    assert grade_job["kind"] == "Job" and spec["completionMode"] == "Indexed"
    container = spec["template"]["spec"]["containers"][0]
    assert container["command"] == ["sh", "-c"]
    for index in (0, spec["completions"] - 1):
        argv = shlex.split(container["args"][0].replace("$JOB_COMPLETION_INDEX", str(index)))
        assert argv[:3] == ["exec", "kvsched", "grade"]
        args = grade_parser().parse_args(argv[3:])
        assert parse_shard(args.shard) == (index, spec["completions"]) == (index, spec["parallelism"])
        assert args.out.endswith(f"shard-{index}") and args.resume


def test_retries_and_time_are_bounded_and_resources_match_the_jobs(grade_job):
    spec = grade_job["spec"]
    assert 1 <= spec["backoffLimitPerIndex"] <= 3 and spec["maxFailedIndexes"] == 0
    assert spec["backoffLimit"] <= 2 * spec["completions"] and 0 < spec["activeDeadlineSeconds"] <= 24 * 3600
    assert spec["template"]["spec"]["restartPolicy"] == "Never"  # required with backoffLimitPerIndex
    container = spec["template"]["spec"]["containers"][0]
    args = grade_parser().parse_args(shlex.split(container["args"][0])[3:])
    for kind in ("requests", "limits"):
        res = container["resources"][kind]
        assert int(res["cpu"]) == args.jobs
        assert _mebibytes(res["memory"]) >= args.jobs * args.memory_mb + 1024


def test_the_security_context_grants_what_the_tested_podman_route_grants(grade_job):
    ctx = grade_job["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    podman = documented_files()["kvsched-podman.sh"]
    m = re.search(r"--cap-drop ALL --cap-add ([A-Z_,]+)", podman)
    assert m, "kvsched-podman.sh drops every capability, then adds the ones the sandbox needs"
    assert ctx["capabilities"] == {"drop": ["ALL"], "add": m.group(1).split(",")}
    assert ctx["runAsUser"] == 0 and ctx["privileged"] is False  # bubblewrap's root path, not a privileged pod
    # The API server refuses allowPrivilegeEscalation: false beside CAP_SYS_ADMIN.
    assert ctx["allowPrivilegeEscalation"] is True and "SYS_ADMIN" in ctx["capabilities"]["add"]
    assert ctx["seccompProfile"] == {"type": "Unconfined"} and ctx["appArmorProfile"] == {"type": "Unconfined"}


def test_the_merge_job_parses_and_refuses_what_is_no_shard(tmp_path, capsys):
    merge = yaml.safe_load(documented_files()["kvsched-merge.yaml"])
    assert merge["spec"]["backoffLimit"] <= 3
    argv = shlex.split(merge["spec"]["template"]["spec"]["containers"][0]["args"][0])
    assert argv[:4] == ["exec", "kvsched", "grade", "merge"]
    # The merge's command line parses: on folders that are no shards, it refuses for that reason.
    assert grade_main(["merge", str(tmp_path / "shard-0"), "--out", str(tmp_path / "class")]) == 2
    assert "holds no manifest.json" in capsys.readouterr().err


def test_every_pod_signs_and_checks_the_journal_with_one_key(grade_job):
    """Issue 28: the journal key lives outside OUT; a pod's own home is gone with the pod, so without
    one shared key every shard's entries would fail to check at the merge."""
    merge = yaml.safe_load(documented_files()["kvsched-merge.yaml"])
    seen = []
    for job in (grade_job, merge):
        pod = job["spec"]["template"]["spec"]
        container = pod["containers"][0]
        state = {e["name"]: e["value"] for e in container["env"]}["KVSCHED_STATE_DIR"]
        (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == f"{state}/journal.key"]
        # one file (subPath), not the Secret's folder of symbolic links, which the grader will not follow
        assert mount["subPath"] == "journal.key" and mount["readOnly"] is True
        (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        assert volume["secret"]["defaultMode"] & 0o077 == 0, "a key others can read is refused"
        seen.append(volume["secret"]["secretName"])
    assert seen[0] == seen[1], "the shards and the merge must share one key"
