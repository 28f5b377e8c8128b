"""The lab where students run it: a built wheel, and notebooks on a simulated Colab runtime.

One runtime per module (see colab_env.py): a fresh venv whose system layer already has torch,
Jupyter's kernel and matplotlib, plus Colab's ipywidgets 7.7.1. Then, with no network (where
``unshare`` may cut it), an empty HOME and pip told to use no index:

* the wheel built from this tree holds the package and the traces, never ``solutions``; installed
  alone, ``kvsched replay --trace conversation`` runs from an empty folder;
* the widgets, the answers upload and `report_setup` work on ipywidgets 7.7.1;
* notebook 00 and the capstone, each copied alone into an empty folder, run top to bottom, each
  once: the capstone with ``KVSCHED_REPO_URL=git+file://<a clone>`` (GitHub reachable), 00 with
  GitHub unreachable, from a package index on the loopback holding the wheel (the pinned
  release, the route from mainland China). Either way the setup cell installs the lab into the
  venv's site-packages and leaves torch's version and location as they were.

Each installed copy is removed afterwards, so every notebook starts from a bare runtime.
"""
from __future__ import annotations

import json
import shutil
import time
import zipfile
from pathlib import Path

import pytest

from colab_env import IPYWIDGETS_7, ROOT, SIM_NOTEBOOKS, make_venv, network_cut, runtime_site, working_tree_clone

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git (pip installs git+file:// URLs)")

DRIVER = Path(__file__).with_name("colab_driver.py")
TORCH_PROBE = "import json, torch; print(json.dumps([torch.__version__, str(torch.__file__)]))"


class Runtime:
    def __init__(self, base: Path):
        self.base = base
        self.venv = make_venv(base / "venv", runtime_site(base / "system-site"))
        online = self.venv.env(machine_pip=True)  # what the runtime's image was built with
        self.venv.run(["-m", "pip", "install", "-q", "--no-deps", *IPYWIDGETS_7], cwd=base, env=online)
        self.wheelhouse = base / "wheelhouse"  # pip's build backend, as an index would serve it
        self.venv.run(["-m", "pip", "download", "-q", "--no-deps", "setuptools>=77", "-d", str(self.wheelhouse)],
                      cwd=base, env=online)
        self.clone = working_tree_clone(base / "clone")
        self.torch = json.loads(self.venv.run(["-c", TORCH_PROBE], cwd=base).stdout)
        self.offline = network_cut() or []
        self.timings = {}

    def empty_dir(self, name: str) -> Path:
        path = self.base / name
        path.mkdir()
        return path

    def offline_env(self, home: Path, **extra: str):
        return self.venv.env(home=home, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(self.wheelhouse), **extra)

    def run_offline(self, args, cwd: Path, env, timeout: float = 600):
        """`args` of the venv's Python with the network cut where this machine allows it."""
        import subprocess

        proc = subprocess.run([*self.offline, str(self.venv.python), *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, f"{args} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        return proc

    def uninstall_lab(self) -> None:
        self.venv.run(["-m", "pip", "uninstall", "-q", "-y", "kvsched-lab"], cwd=self.base, check=False)


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    started = time.perf_counter()
    rt = Runtime(tmp_path_factory.mktemp("colab"))
    rt.timings["runtime setup"] = time.perf_counter() - started
    yield rt
    print("\nColab simulation" + ("" if rt.offline else " (network NOT cut: unshare not allowed here)") + ": "
          + ", ".join(f"{k} {v:.1f} s" for k, v in rt.timings.items()))


@pytest.fixture(scope="module")
def wheel(runtime):
    out = runtime.base / "dist"
    runtime.venv.run(["-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--find-links",
                      str(runtime.wheelhouse), "-w", str(out), str(runtime.clone)],
                     cwd=runtime.base, env=runtime.venv.env())
    (path,) = out.glob("kvsched_lab-*.whl")
    return path


def test_wheel_holds_the_package_and_traces_never_solutions(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    print(f"\nwheel {wheel.name}: {wheel.stat().st_size / 1024:.0f} KiB, {len(names)} files")
    assert not [n for n in names if n.startswith(("solutions/", "tests/", "notebooks/"))]
    for name in ("mooncake_conversation_trace.jsonl.xz", "mooncake_synthetic_trace.jsonl.xz", "SOURCE.txt",
                 "LICENSE-Apache-2.0.txt"):
        assert f"kvsched_lab/data/traces/{name}" in names
    assert "kvsched_lab/course/setup_cell.py" in names
    assert wheel.stat().st_size < 1_500_000


def test_wheel_installs_and_replays_offline_from_an_empty_folder(runtime, wheel):
    home, work = runtime.empty_dir("wheel-home"), runtime.empty_dir("wheel-work")
    env = runtime.offline_env(home)
    try:
        runtime.run_offline(["-m", "pip", "install", "-q", "--no-deps", str(wheel)], work, env)
        assert (runtime.venv.python.parent / "kvsched").is_file()  # the console script is installed
        proc = runtime.run_offline(["-m", "kvsched_lab", "replay", "--trace", "conversation", "--policy", "lru",
                                    "--capacity-blocks", "8000", "--json", "--quiet"], work, env)
        result = json.loads(proc.stdout)
        # docs/policy-notes.md's anchor: LRU at 8k blocks on the conversation trace, 17.8%.
        assert result["block_refs"] == 288500 and round(result["prefix_hit_rate"], 3) == 0.178, result
        where = runtime.run_offline(["-c", "import kvsched_lab, importlib.util; print(kvsched_lab.__file__); "
                                     "print(importlib.util.find_spec('solutions'))"], work, env).stdout.split()
        assert where == [str(runtime.venv.site_packages / "kvsched_lab" / "__init__.py"), "None"]
        assert sorted(p.name for p in work.iterdir()) == [] and not (home / ".cache" / "kvsched-lab").exists()
    finally:
        runtime.uninstall_lab()


WIDGETS_7_PROBE = r'''
import json, os
import ipywidgets
assert ipywidgets.__version__ == "7.7.1", ipywidgets.__version__
import matplotlib
matplotlib.use("Agg")
from kvsched_lab.course import plots, widgets
import kvsched_lab.course as lab
from kvsched_lab.course import answers_io

drawn = []  # weights of every explorer figure drawn (outside a kernel the Output widget captures nothing)
draw = plots.plot_explorer_state
plots.plot_explorer_state = lambda state, *a, **k: (drawn.append(state["weights"]), draw(state, *a, **k))[1]
box = widgets.score_explorer()
box.children[0].children[0].value = 2.0  # the reuse-weight slider
viewer = widgets.heap_viewer()
before = viewer.children[-1].value
viewer.children[0].children[2].click()  # next
def _score(self, hits, size, last_used):
    return 0.0
lab.save_answer("score", _score, source="def _score(self, hits, size, last_used):\n    return 0.0\n")
bundle = answers_io.export_answers()
os.remove(os.path.join(os.environ["KVSCHED_ANSWERS"], "score.json"))
picker_box = lab.upload_answers()
picker = picker_box.children[1]
# What Colab's ipywidgets 7 front end sends for one chosen file: metadata, data, then the counter.
picker.metadata = [{"name": bundle.name, "type": "application/json", "size": bundle.stat().st_size}]
picker.data = [bundle.read_bytes()]
picker._counter += 1
print(json.dumps({"drawn": drawn, "heap_changed": viewer.children[-1].value != before,
                  "restored": json.loads(open(os.path.join(os.environ["KVSCHED_ANSWERS"], "score.json")).read())["status"],
                  "picker": type(picker).__name__}))
'''


def test_widgets_and_answers_upload_work_on_ipywidgets_7(runtime, wheel):
    home, work = runtime.empty_dir("w7-home"), runtime.empty_dir("w7-work")
    env = runtime.offline_env(home, KVSCHED_ANSWERS=str(work / "answers"))
    try:
        runtime.run_offline(["-m", "pip", "install", "-q", "--no-deps", str(wheel)], work, env)
        seen = json.loads(runtime.run_offline(["-c", WIDGETS_7_PROBE], work, env).stdout.splitlines()[-1])
    finally:
        runtime.uninstall_lab()
    assert [w[0] for w in seen["drawn"]] == [1.0, 2.0], seen  # drawn at once, and again when the slider moved
    assert seen["heap_changed"] and seen["picker"] == "FileUpload"
    assert seen["restored"] == "failed", seen  # the uploaded (wrong) answer is back, re-checked


# How each notebook's setup cell reaches the lab: 06 from a git URL (Colab, GitHub reachable), 00
# from the package index (GitHub unreachable, tested below). Every notebook opens with the same
# setup cell (tests/test_notebooks.py), so one notebook per route shows both; each runs once.
SIM_ROUTES = {"00_setup_and_tour.ipynb": "index", "06_capstone.ipynb": "git"}
assert set(SIM_ROUTES) == set(SIM_NOTEBOOKS)


@pytest.mark.parametrize("name", SIM_NOTEBOOKS, ids=lambda name: f"{name}-via-{SIM_ROUTES[name]}")
def test_notebook_runs_alone_on_a_simulated_colab(runtime, wheel, replay_cache, name):
    """Copied alone into an empty folder, with an empty HOME, the notebook runs top to bottom; its
    setup cell installs the lab into the venv's site-packages and leaves torch as it was."""
    import kvsched_lab

    folder, home = runtime.empty_dir(f"colab-{name[:2]}"), runtime.empty_dir(f"home-{name[:2]}")
    route = SIM_ROUTES[name]
    if route == "git":
        shutil.copy(ROOT / "notebooks" / name, folder / name)
        source = f"git+file://{runtime.clone}"
        command = [str(DRIVER), str(folder / name), str(folder / "summary.json")]
        env = runtime.offline_env(home, KVSCHED_REPO_URL=source)
    else:
        source = f"kvsched-lab=={kvsched_lab.__version__}"
        command, env = index_route(runtime, wheel, name, folder, home)
    # The library policies' replays that nbval's runs of the same notebook computed (tests/conftest.py).
    env["KVSCHED_REPLAY_CACHE"] = str(replay_cache)
    try:
        runtime.run_offline(command, folder, env)
        summary = json.loads((folder / "summary.json").read_text())
        version = runtime.venv.run(["-c", "import importlib.metadata as m; print(m.version('kvsched-lab'))"],
                                   cwd=folder).stdout.strip()
    finally:
        runtime.uninstall_lab()
    runtime.timings[name] = summary["wall_seconds"]
    runtime.timings[f"{name[:2]} setup cell"] = summary["cell_seconds"][0]
    assert summary["errors"] == [], summary["errors"]
    site = str(runtime.venv.site_packages)
    assert f"installed from {source} into {site}" in summary["setup_output"], summary["setup_output"]
    assert version == kvsched_lab.__version__
    assert summary["kvsched_lab"] == f"{site}/kvsched_lab/__init__.py"
    assert summary["torch"] == runtime.torch, "the setup cell must leave torch as it was"
    assert not (runtime.venv.site_packages / "torch").exists()
    assert not (folder.parent / "shared").exists() and not (home / ".cache" / "kvsched-lab").exists()


# A package index on the loopback: pip's configured index (a mirror, ModelScope's default) as the
# setup cell meets it when GitHub cannot be reached.
SERVE_AND_RUN = r'''
import os, socket, subprocess, sys, time
index, driver, notebook, summary = sys.argv[1:5]
with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", index],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    env = dict(os.environ, PIP_INDEX_URL=f"http://127.0.0.1:{port}/simple/")
    sys.exit(subprocess.run([sys.executable, driver, notebook, summary], env=env).returncode)
finally:
    server.terminate()
    server.wait()
'''


def simple_index(folder: Path, wheel: Path) -> Path:
    """A PEP 503 index holding one project, kvsched-lab, with `wheel` (and its sha256, as PyPI gives it)."""
    import hashlib

    (folder / "files").mkdir(parents=True)
    shutil.copy(wheel, folder / "files" / wheel.name)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (folder / "simple" / "kvsched-lab").mkdir(parents=True)
    (folder / "simple" / "index.html").write_text('<a href="kvsched-lab/">kvsched-lab</a>\n')
    (folder / "simple" / "kvsched-lab" / "index.html").write_text(
        f'<a href="../../files/{wheel.name}#sha256={digest}">{wheel.name}</a>\n')
    return folder


def index_route(runtime, wheel, name: str, folder: Path, home: Path):
    """The route from mainland China: no GitHub, the package index pip is configured with (a loopback
    index holding the wheel). Writes `name` into `folder`; gives the command and its environment."""
    from kvsched_lab.course.setup_cell import setup_cell
    from kvsched_lab.notebook_files import cell_source, read_notebook, write_notebook

    nb = read_notebook(ROOT / "notebooks" / name)
    if not runtime.offline:  # the network is not cut here: make "GitHub" a port that refuses at once
        first = next(c for c in nb["cells"] if c["cell_type"] == "code")
        assert "github.com" in cell_source(first)
        first["source"] = setup_cell("https://127.0.0.1:9/kvsched-lab/kvsched-lab")
    write_notebook(nb, folder / name)
    index = simple_index(runtime.base / "index", wheel)
    launcher = runtime.base / "serve_and_run.py"
    launcher.write_text(SERVE_AND_RUN)
    # no KVSCHED_REPO_URL, no --no-index: pip's own configuration
    return [str(launcher), str(index), str(DRIVER), str(folder / name), str(folder / "summary.json")], \
        runtime.venv.env(home=home)
