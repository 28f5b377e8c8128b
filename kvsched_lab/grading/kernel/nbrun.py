"""Run notebooks through nbval in a separate process, with limits (the release); run the grading box.

Two entry points:

* `run_nbval` (the release check): starts ``python -m kvsched_lab.grading.kernel.nbrun REPORT -- ARGS``
  with resource limits, in its own session so a runaway can be killed as a group; that process
  runs ``pytest --nbval-lax`` and writes ``{nodeid: [outcome, message]}`` to REPORT. Its kernels
  start from `kernel_launcher.py` through a kernelspec written here, so they never see the
  instructor's ``solutions``.
* `box_main` (grading): runs inside the sandbox (sandbox.py) on one submission's box: copies the
  grader's inputs in, runs the grading notebook's cells in order in one isolated kernel process
  (cells.py's runner, started through `kernel_launcher.py` too: no pytest, nbval or ipykernel in
  the box), and prints one line of JSON (marker `RESULT_MARK`): each cell's outcome in nbval's
  format, each TODO's observations file, the tail of the box's log. The grader validates that
  line; nothing in it is trusted as a verdict.
"""
from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

KERNEL_NAME = "kvsched-grading"
RESULT_MARK = "KVSCHED-BOX-RESULT "  # starts the runner's one line of results on stdout
RESULT_FILE_CAP = 2 << 20  # bytes of one TODO's observations file (honest: about 200 KiB); more is refused
BOX_INPUTS = ("grading.ipynb", "grading-config.json", "box.json")  # what the grader hands a box
Outcomes = Dict[str, Tuple[str, str]]  # pytest node id -> (outcome, message tail)
BOX_LOG = "box.log"  # the box's log: each cell's outcome, and what the kernel and its cells printed


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


def _new_lines(path: Path, seen: int, say: Optional[Callable[[str], None]]) -> int:
    """Pass the lines `path` gained since `seen` of them to `say`; the count seen now."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return seen
    for line in lines[seen:]:
        if say is not None:
            say(line)
    return max(seen, len(lines))


def run_nbval(notebooks: List[Path], workdir: Path, lib: Path, cell_timeout: float, wall_timeout: float,
              memory_mb: int = 2048, on_notebook: Optional[Callable[[str], None]] = None
              ) -> Tuple[Optional[Outcomes], str]:
    """Run `notebooks` (paths under `workdir`) through ``pytest --nbval-lax``.

    Returns per-cell outcomes (None if pytest never reported) and the tail of pytest's output.
    `on_notebook` is told each notebook's path as its first cell is reported (a long run's progress).
    """
    jupyter = write_kernelspec(workdir, lib, memory_mb)
    report = workdir / "nbval-report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JUPYTER", "IPYTHON", "PYTEST"))}
    env.update(JUPYTER_PATH=str(jupyter), JUPYTER_RUNTIME_DIR=str(workdir / "runtime"),
               JUPYTER_CONFIG_DIR=str(workdir / "jupyter-config"), IPYTHONDIR=str(workdir / "ipython"),
               JUPYTER_PLATFORM_DIRS="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1",
               # the runner is grader code and imports this package; kernels ignore it (python -I)
               PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    (workdir / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")  # no project config applies
    args = _pytest_args([str(p.relative_to(workdir)) for p in notebooks], cell_timeout) + ["--rootdir", str(workdir)]
    log_path = workdir / "pytest.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kvsched_lab.grading.kernel.nbrun", str(report), "--"] + args,
                                cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=_limits(memory_mb), start_new_session=True)
        deadline, seen = time.monotonic() + wall_timeout, 0
        while proc.poll() is None:
            if time.monotonic() >= deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.5)
            seen = _new_lines(_progress_path(report), seen, on_notebook)
        _new_lines(_progress_path(report), seen, on_notebook)
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


def _progress_path(report: Path) -> Path:
    return report.with_name(report.name + ".notebooks")


class _Recorder:
    """pytest plugin: the outcome of each test (a notebook cell), failures with their message.

    With `progress`, each notebook's path is appended to that file when its first cell is reported."""

    def __init__(self, progress: Optional[Path] = None) -> None:
        self.outcomes: Dict[str, List[str]] = {}
        self.progress, self.notebook = progress, ""

    def pytest_runtest_logreport(self, report) -> None:  # noqa: ANN001 - pytest's hook signature
        if report.when == "call" or report.outcome != "passed":
            self.outcomes[report.nodeid] = [report.outcome, cell_message(str(report.longrepr or ""))]
        notebook = report.nodeid.split("::")[0]
        if self.progress is not None and notebook != self.notebook:
            self.notebook = notebook
            with open(self.progress, "a", encoding="utf-8") as f:
                f.write(notebook + "\n")


class IpcKernels:
    """pytest plugin: nbval's kernels talk over Unix sockets in a private folder, not TCP ports.

    jupyter_client picks a kernel's five TCP ports by binding and releasing them; until the kernel
    binds them again, any other process (a parallel grading job, its kernels and their clients) can
    take one, and the kernel dies before it answers ("Kernel died before replying to kernel_info"),
    which would read as the learner's code killing it. Socket files in a folder of our own cannot be
    taken. A folder whose path is too long for a socket address keeps TCP."""

    MAX_SOCKET_PATH = 100  # bytes; Linux allows 107 in a Unix socket address, ``-N`` is appended

    def __init__(self) -> None:
        self.folder, self.replaced = "", None

    def pytest_sessionstart(self) -> None:
        import nbval.kernel
        from jupyter_client.manager import KernelManager

        self.folder = tempfile.mkdtemp(prefix="kvk-")
        ip = os.path.join(self.folder, "k")
        if len(ip.encode()) + 4 > self.MAX_SOCKET_PATH:
            return

        class IpcKernelManager(KernelManager):
            def __init__(self, **kwargs) -> None:  # noqa: ANN003 - KernelManager's traits
                super().__init__(transport="ipc", ip=ip, **kwargs)

        self.replaced, nbval.kernel.KernelManager = nbval.kernel.KernelManager, IpcKernelManager

    def pytest_sessionfinish(self) -> None:
        import nbval.kernel

        if self.replaced is not None:
            nbval.kernel.KernelManager, self.replaced = self.replaced, None
        shutil.rmtree(self.folder, ignore_errors=True)


def _pytest_args(notebooks: List[str], cell_timeout: float) -> List[str]:
    return notebooks + [
        "-p", "nbval.plugin", "-p", "no:cacheprovider", "--nbval-lax", "-q", "-rN", "--color=no",
        "--nbval-kernel-name", KERNEL_NAME, "--nbval-cell-timeout", str(cell_timeout),
        "--nbval-kernel-startup-timeout", "60", "-c", "pytest.ini"]


def _read_capped(path: Path, cap: int) -> Optional[str]:
    """A regular file's text (not following a link), None when missing, over `cap` or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = f.read(cap + 1)
    return data.decode("utf-8", "replace") if len(data) <= cap else None


def box_main(inputs: Path, box: Path, lib: Path) -> int:
    """Grade one submission's box (see the module docstring); the last stdout line is the result."""
    from kvsched_lab.grading.kernel.cells import run_cells

    result_out = os.dup(1)
    box.mkdir(parents=True, exist_ok=True)
    if inputs.resolve() != box.resolve():
        for name in BOX_INPUTS:
            shutil.copyfile(inputs / name, box / name)
    spec = json.loads((box / "box.json").read_text(encoding="utf-8"))
    launcher = box / "kernel_launcher.py"  # a script's folder leads sys.path: this one, not the kernel room
    shutil.copyfile(Path(__file__).with_name("kernel_launcher.py"), launcher)
    os.environ.update(IPYTHONDIR=str(box / "ipython"), PYTHONDONTWRITEBYTECODE="1", HOME=str(box))
    os.chdir(box)
    log_path = box / BOX_LOG
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    notebook = json.loads((box / "grading.ipynb").read_text(encoding="utf-8"))
    sources = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
               for c in notebook["cells"] if c["cell_type"] == "code"]
    kernel = [sys.executable, "-I", str(launcher), "--lib", str(lib), "--memory-mb", str(int(spec["memory_mb"])),
              "--log", str(log_path)]
    outcomes = run_cells(kernel, sources, "grading.ipynb", float(spec["cell_timeout"]), str(box))
    for node, (outcome, message) in outcomes.items():
        print(f"{node}: {outcome.upper()} {message}", flush=True)
    results = {todo: _read_capped(box / f"{spec['nonce']}.{todo}.json", RESULT_FILE_CAP) for todo in spec["todos"]}
    tail = (_read_capped(log_path, 1 << 24) or "")[-4000:]
    code = int(any(outcome != "passed" for outcome, _ in outcomes.values()))
    line = json.dumps({"outcomes": outcomes, "results": results, "tail": tail, "code": code})
    os.write(result_out, ("\n" + RESULT_MARK + line + "\n").encode())
    return 0


def main(argv: List[str]) -> int:
    report, args = argv[0], argv[argv.index("--") + 1:]
    # jsonschema's optional IRI checker costs ~1.5 s of CPU to import; nbformat works without it.
    sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]
    import pytest

    recorder = _Recorder(_progress_path(Path(report)))
    code = pytest.main(args, plugins=[recorder, IpcKernels()])
    Path(report).write_text(json.dumps(recorder.outcomes), encoding="utf-8")
    return int(code)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--box"]:  # --box INPUTS BOX LIB
        sys.exit(box_main(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])))
    sys.exit(main(sys.argv[1:]))
