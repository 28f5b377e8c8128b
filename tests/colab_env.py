"""Fresh Python environments that look like a Colab / ModelScope runtime, for the wheel and Colab tests.

A hosted runtime has torch, Jupyter's kernel, matplotlib and friends in its *system* site-packages
and nothing of ours. `runtime_site` builds that system layer without copying gigabytes: a folder
of symbolic links to the distributions this test process already has (torch and its needs,
ipykernel, matplotlib, nbclient, ...), found through their metadata, kvsched-lab and the
ipywidgets 8 family left out. `make_venv` makes a fresh venv whose only link to it is one
``.pth`` line placed after its own site-packages: exactly what ``--system-site-packages`` does.
pip in the venv sees those packages as installed and installs nothing over them; what it installs
lands in the venv's own site-packages, where the tests look for it.
"""
from __future__ import annotations

import importlib.metadata as md
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
# What a hosted runtime brings (Colab's image has all of these); their requirements come along.
RUNTIME_DISTS = ("torch", "numpy", "tqdm", "ipykernel", "matplotlib", "nbclient", "nbformat", "setuptools")
# Never in the runtime layer: ours, and the ipywidgets 8 family (the Colab test pins 7.7.1).
LEFT_OUT = {"kvsched-lab", "ipywidgets", "jupyterlab-widgets", "widgetsnbextension"}
# The notebooks run as shipped (no saved answers) on the simulated Colab: the tour and the
# capstone, the two without TODOs that read saved answers (tests/test_notebooks.py relies on it).
SIM_NOTEBOOKS = ("00_setup_and_tour.ipynb", "06_capstone.ipynb")
# Colab's ipywidgets and the companions it needs, installed with --no-deps.
IPYWIDGETS_7 = ("ipywidgets==7.7.1", "widgetsnbextension==3.6.10", "jupyterlab-widgets==1.1.11",
                "ipython-genutils==0.2.0")


def _closure(names: Iterable[str]) -> Dict[str, md.Distribution]:
    """The distributions `names` and everything they require (extras and other platforms skipped)."""
    found: Dict[str, md.Distribution] = {}
    todo = [canonicalize_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in found or name in LEFT_OUT:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue  # an optional need this machine does not have
        found[name] = dist
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return found


def runtime_site(folder: Path, names: Iterable[str] = RUNTIME_DISTS) -> Path:
    """A site folder of links to `names` and their requirements, as this process has them."""
    folder.mkdir(parents=True, exist_ok=True)
    for dist in _closure(names).values():
        for file in dist.files or []:
            top = file.parts[0]
            if top in ("..", "__pycache__") or (folder / top).exists() or (folder / top).is_symlink():
                continue
            source = Path(dist.locate_file(top))
            if source.exists():
                (folder / top).symlink_to(source)
    return folder


@dataclass(frozen=True)
class Venv:
    root: Path
    python: Path
    site_packages: Path  # the venv's own: what pip installs goes here

    def run(self, args: List[str], cwd: Path, env: Optional[Dict[str, str]] = None, timeout: float = 300,
            check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(self.python), *args], cwd=cwd, env=env if env is not None else self.env(),
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{args} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc

    def env(self, home: Optional[Path] = None, machine_pip: bool = False, **extra: str) -> Dict[str, str]:
        """A clean environment: this venv first on PATH, no inherited Python settings, and no pip
        settings either unless `machine_pip` (to fetch what the runtime's image would hold)."""
        drop = ("PYTHON", "VIRTUAL_ENV", "KVSCHED_", "JUPYTER", "XDG_") + (() if machine_pip else ("PIP_",))
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        env["PATH"] = os.pathsep.join([str(self.python.parent), "/usr/local/bin", "/usr/bin", "/bin"])
        if not machine_pip:
            env["PIP_CONFIG_FILE"] = os.devnull  # this machine's pip.conf is no part of the runtime
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if home is not None:
            env["HOME"] = str(home)
        env.update(extra)
        return env


def make_venv(root: Path, system_site: Path) -> Venv:
    """A fresh venv whose system layer is `system_site` (one .pth line after its own site-packages)."""
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, capture_output=True, timeout=300)
    python = root / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # A .pth line is appended to sys.path after the venv's own site-packages, as a system site is.
    (site / "runtime_system_site.pth").write_text(str(system_site) + "\n")
    return Venv(root, python, site)


def working_tree_clone(dest: Path) -> Path:
    """A git repository holding this working tree's files (tracked and untracked, not ignored),
    committed: what ``pip install git+file://`` of a clone of this branch sees."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(src.read_bytes())
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "init.defaultBranch=main"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "working tree"]):
        subprocess.run(git + args, cwd=dest, check=True, capture_output=True)
    return dest


def network_cut() -> Optional[List[str]]:
    """A command prefix that runs a program without network (loopback kept), or None if not allowed here."""
    prefix = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]
    try:
        ok = subprocess.run(prefix + ["true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return None
    return prefix if ok else None
