"""The setup files agree with each other, and the CLI's doctor runs."""
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from kvsched_lab.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
# conda names that differ from PyPI names
CONDA_NAMES = {"pytorch": "torch", "python-build": "build"}


def _name_spec(req: str):
    m = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*(.*)", req)
    return m.group(1).lower(), m.group(2).replace(" ", "")


# Extras the conda environment leaves out: libCacheSim (GPL-3.0) is for the tests, not for learners.
NOT_IN_CONDA = {"crosscheck"}


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = {name: reqs for name, reqs in project["optional-dependencies"].items() if name not in NOT_IN_CONDA}
    wanted = {}
    for req in project["dependencies"] + [r for extra in extras.values() for r in extra]:
        name, spec = _name_spec(req)
        wanted[name] = spec
    conda = {}
    text = (ROOT / "environment.yml").read_text()
    deps = text.split("dependencies:", 1)[1]  # channel names above are not packages
    for line in deps.splitlines():
        m = re.match(r"\s*-\s+([A-Za-z][A-Za-z0-9_.\-]*)(\S*)\s*$", line)
        if m and m.group(1) not in ("pip", "python"):
            conda[CONDA_NAMES.get(m.group(1), m.group(1)).lower()] = m.group(2)
    assert conda == wanted, "environment.yml and pyproject.toml list different packages or versions"
    assert "- -e ." in (ROOT / "environment.yml").read_text()
    py = re.search(r"python([><=]+[\d.]+)", (ROOT / "environment.yml").read_text()).group(1)
    assert py == project["requires-python"]


def test_ci_runs_the_whole_suite_and_fails_when_it_fails():
    import subprocess

    script = (ROOT / ".ci" / "run").read_text()
    assert subprocess.run(["bash", "-n", str(ROOT / ".ci" / "run")]).returncode == 0  # it parses
    commands = [line.strip() for line in script.splitlines() if line.strip() and not line.strip().startswith("#")]
    # `set -e` stops at the first failing command, and `make test` is a command, not a comment.
    assert any(c.startswith("set ") and "e" in c.split()[1] for c in commands)
    assert "make test" in commands
    # What `make test` runs (a dry run): pytest over the whole tests folder, nothing deselected, on
    # xdist workers that each take whole files (so a file's module fixtures run once), in the suite's order.
    dry = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    pytest_lines = [line for line in dry.splitlines() if "-m pytest" in line]
    assert len(pytest_lines) == 1 and pytest_lines[0].split("-m pytest", 1)[1].split() == [
        "tests", "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder"]


def test_the_suite_hands_out_its_longest_files_first():
    """Before: xdist ordered files by their number of tests, so the grading attacks (7 tests) and the
    Colab simulation (6) started last and ran alone at the end. Now the long poles go first, the
    others by their number of tests, and each file's tests stay together and in order."""
    from types import SimpleNamespace

    import conftest

    assert [p for p in conftest.LONG_POLES if not (ROOT / "tests" / p).is_file()] == []  # none renamed away
    files = {"test_a.py": 1, "test_many.py": 5, conftest.LONG_POLES[1]: 2, conftest.LONG_POLES[0]: 3}
    items = [SimpleNamespace(path=ROOT / "tests" / name, k=k) for name, n in files.items() for k in range(n)]
    conftest.pytest_collection_modifyitems(None, items)
    assert [(i.path.name, i.k) for i in items] == [
        *((conftest.LONG_POLES[0], k) for k in range(3)), *((conftest.LONG_POLES[1], k) for k in range(2)),
        *(("test_many.py", k) for k in range(5)), ("test_a.py", 0)]


def test_the_crosscheck_extra_pins_the_libcachesim_the_tests_compare_with():
    """One version everywhere: the extra's pin is the one the crosscheck test and `make test` check."""
    from kvsched_lab.cli.bench_libcachesim import LIBCACHESIM_VERSION

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["crosscheck"]
    assert extra == [f"libcachesim=={LIBCACHESIM_VERSION}"]
    assert "libcachesim" not in str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    dry = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert '-e ".[crosscheck]"' in dry  # make test installs it where it can
    assert "export KVSCHED_REQUIRE_CROSSCHECK=1" in (ROOT / ".ci" / "run").read_text()  # and CI must run it


def test_doctor_reports_every_component(capsys):
    code = main(["doctor"])
    out = capsys.readouterr().out
    for word in ("python", "torch", "gpu", "jupyterlab", "ipywidgets", "matplotlib"):
        assert word in out
    assert code in (0, 1) and ("all set" in out) == (code == 0)
    import torch

    if not torch.cuda.is_available():  # the GPU advice covers both hosted platforms learners use
        assert "On Colab: Runtime > Change runtime type > GPU" in out and "On ModelScope:" in out


def test_doctor_reads_jupyterlabs_version_without_importing_it(monkeypatch):
    """The doctor runs in notebook 00's kernel: importing jupyterlab there took seconds for nothing.
    A package that is not there reads as missing (NO, with the advice)."""
    from kvsched_lab.cli import doctor

    probe = ("import sys\nfrom kvsched_lab.cli.doctor import diagnose\nrows = diagnose()\n"
             "print('jupyterlab' in sys.modules, [r[2] for r in rows if r[0] == 'jupyterlab'])")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.split(" ", 1) == ["False", f"[{importlib.metadata.version('jupyterlab')!r}]\n"]
    real = doctor._server_version
    monkeypatch.setattr(doctor, "_server_version", lambda name: real("kvsched_no_such_package"))
    row = next(r for r in doctor.diagnose() if r[0] == "jupyterlab")
    assert row[1] is False and "make lab" in row[2]


def test_doctor_shows_the_grading_sandbox_only_to_instructors_who_ask(monkeypatch, capsys):
    """A learner's `kvsched doctor` (notebook 00) has no sandbox line, not even a failing one;
    `--grading` adds it, and then a sandbox that cannot run is a problem (exit 1, "fix first")."""
    from kvsched_lab.grading.box import sandbox

    monkeypatch.setattr(sandbox, "probe", lambda: (False, "bubblewrap (bwrap) is not installed"))
    learner = main(["doctor"])
    out = capsys.readouterr().out
    assert "sandbox" not in out and "bubblewrap" not in out and "sysctl" not in out
    instructor = main(["doctor", "--grading"])
    out = capsys.readouterr().out
    assert re.search(r"^NO +grading sandbox ", out, re.M) and "apt-get install bubblewrap" in out and "fix first:" in out
    assert instructor == 1 and "grading sandbox" in out.splitlines()[-1]
    monkeypatch.setattr(sandbox, "probe", lambda: (True, "bubblewrap works: learner code runs sandboxed"))
    assert main(["doctor", "--grading"]) == learner
    assert re.search(r"^ok +grading sandbox ", capsys.readouterr().out, re.M)


# --------------------------------------------------------------------------- the package index
def test_the_distributions_pass_twine_check_and_hold_no_reference_or_tests(tmp_path):
    """What `.github/workflows/publish.yml` uploads on a tag: built here the same way and checked
    as PyPI checks it. Before, the sdist held tests/ (the chapter's answer lines) and the licence
    was a deprecated table."""
    import tarfile
    import zipfile

    import pytest

    pytest.importorskip("build")
    pytest.importorskip("twine")
    import kvsched_lab

    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "-o", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True, timeout=600)
    wheel, = tmp_path.glob("kvsched_lab-*.whl")
    sdist, = tmp_path.glob("kvsched_lab-*.tar.gz")
    assert wheel.name == f"kvsched_lab-{kvsched_lab.__version__}-py3-none-any.whl"
    check = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)],
                           capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.count("PASSED") == 2, check.stdout + check.stderr
    names = zipfile.ZipFile(wheel).namelist()
    with tarfile.open(sdist) as tar:
        sdist_names = [n.split("/", 1)[1] for n in tar.getnames() if "/" in n]
    for listing in (names, sdist_names):
        assert not [n for n in listing if n.startswith(("solutions/", "tests/", "notebooks/"))]
    assert "kvsched_lab/data/traces/mooncake_conversation_trace.jsonl.xz" in names
    assert "kvsched_lab/data/traces/mooncake_synthetic_trace.jsonl.xz" in sdist_names
    meta = zipfile.ZipFile(wheel).read(f"kvsched_lab-{kvsched_lab.__version__}.dist-info/METADATA").decode()
    for field in ("Name: kvsched-lab", f"Version: {kvsched_lab.__version__}", "License-Expression: Apache-2.0",
                  "Description-Content-Type: text/markdown", "Project-URL: Source,", "Requires-Python: >=3.10",
                  "Classifier: Natural Language :: Chinese (Simplified)"):
        assert field in meta, field
    assert "# kvsched-lab" in meta.split("\n\n", 1)[1][:2000]  # the README is the long description


def test_a_tag_publishes_by_trusted_publishing_after_the_same_checks():
    yaml = __import__("pytest").importorskip("yaml")
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "publish.yml").read_text())
    assert flow[True] == {"push": {"tags": ["v*"]}}  # YAML reads the key `on` as True; tags only
    build, publish = flow["jobs"]["build"], flow["jobs"]["publish"]
    script = "\n".join(step.get("run", "") for step in build["steps"])
    assert "twine check --strict" in script and "python -m build" in script
    assert "__version__" in script and "GITHUB_REF_NAME" in script  # the tag must be the pinned version
    assert publish["needs"] == "build" and publish["permissions"] == {"id-token": "write"}
    assert any(step.get("uses", "").startswith("pypa/gh-action-pypi-publish@") for step in publish["steps"])
    assert not any("password" in str(step) or "token" in str(step.get("with", {})) for step in publish["steps"])
