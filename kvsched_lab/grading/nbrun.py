"""Run notebooks through nbval in a separate process, with limits, and report each cell's outcome.

The grader and the release check call `run_nbval`; it starts
``python -m kvsched_lab.grading.nbrun REPORT -- PYTEST_ARGS`` with resource limits, in its own
session so a runaway can be killed as a group. That process runs ``pytest --nbval-lax`` and writes
``{nodeid: [outcome, message]}`` to REPORT. Kernels start from `kernel_launcher.py` through a
kernelspec written here, so they never see the instructor's ``solutions``.
"""
from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

KERNEL_NAME = "kvsched-grading"
Outcomes = Dict[str, Tuple[str, str]]  # pytest node id -> (outcome, message tail)


def write_kernelspec(root: Path, lib: Path, memory_mb: int) -> Path:
    """A kernelspec under ``root/jupyter`` whose kernel imports kvsched_lab from `lib` only."""
    launcher = root / "kernel_launcher.py"
    shutil.copyfile(Path(__file__).with_name("kernel_launcher.py"), launcher)
    spec_dir = root / "jupyter" / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-I", str(launcher), "--lib", str(lib), "--memory-mb", str(memory_mb),
            "--log", str(root / "kernel.log"), "-f", "{connection_file}"]
    (spec_dir / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "kvsched grading", "language": "python"}), encoding="utf-8")
    return root / "jupyter"


def _limits(memory_mb: int):
    def apply() -> None:
        mem = memory_mb << 20
        for what, value in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_CORE, 0)):
            try:
                resource.setrlimit(what, (value, value))
            except (ValueError, OSError):
                pass
    return apply


def run_nbval(notebooks: List[Path], workdir: Path, lib: Path, cell_timeout: float, wall_timeout: float,
              memory_mb: int = 2048) -> Tuple[Optional[Outcomes], str]:
    """Run `notebooks` (paths under `workdir`) through ``pytest --nbval-lax``.

    Returns per-cell outcomes (None if pytest never reported) and the tail of pytest's output.
    """
    jupyter = write_kernelspec(workdir, lib, memory_mb)
    report = workdir / "nbval-report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JUPYTER", "IPYTHON", "PYTEST"))}
    env.update(JUPYTER_PATH=str(jupyter), JUPYTER_RUNTIME_DIR=str(workdir / "runtime"),
               JUPYTER_CONFIG_DIR=str(workdir / "jupyter-config"), IPYTHONDIR=str(workdir / "ipython"),
               JUPYTER_PLATFORM_DIRS="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1",
               # the runner is grader code and imports this package; kernels ignore it (python -I)
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    (workdir / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # no project config applies
    args = [str(p.relative_to(workdir)) for p in notebooks] + [
        "-p", "nbval.plugin", "-p", "no:cacheprovider", "--nbval-lax", "-q", "-rN", "--color=no",
        "--nbval-kernel-name", KERNEL_NAME, "--nbval-cell-timeout", str(cell_timeout),
        "--nbval-kernel-startup-timeout", "60", "-c", "pytest.ini", "--rootdir", str(workdir)]
    log_path = workdir / "pytest.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kvsched_lab.grading.nbrun", str(report), "--"] + args,
                                cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=_limits(memory_mb), start_new_session=True)
        try:
            proc.wait(timeout=wall_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    with open(log_path, "rb") as f:
        f.seek(max(0, log_path.stat().st_size - 4000))
        tail = f.read().decode("utf-8", "replace")
    try:
        outcomes = {k: tuple(v) for k, v in json.loads(report.read_text(encoding="utf-8")).items()}
    except (OSError, ValueError):
        outcomes = None
    return outcomes, tail


def cell_message(longrepr: str) -> str:
    """nbval's one-line reason for a failed cell (its report goes on to echo the cell's source)."""
    for line in longrepr.splitlines():
        m = re.match(r"\s*Cell \d+: (.+)", line)
        if m:
            return m.group(1).strip()
    return longrepr.strip().splitlines()[0][:300] if longrepr.strip() else ""


class _Recorder:
    """pytest plugin: the outcome of each test (a notebook cell), failures with their message."""

    def __init__(self) -> None:
        self.outcomes: Dict[str, List[str]] = {}

    def pytest_runtest_logreport(self, report) -> None:  # noqa: ANN001 - pytest's hook signature
        if report.when == "call" or report.outcome != "passed":
            self.outcomes[report.nodeid] = [report.outcome, cell_message(str(report.longrepr or ""))]


def main(argv: List[str]) -> int:
    report, args = argv[0], argv[argv.index("--") + 1:]
    # jsonschema's optional IRI checker costs ~1.5 s of CPU to import; nbformat works without it.
    sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]
    import pytest

    recorder = _Recorder()
    code = pytest.main(args, plugins=[recorder])
    Path(report).write_text(json.dumps(recorder.outcomes), encoding="utf-8")
    return int(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
