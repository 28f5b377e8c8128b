"""The setup cell that opens every notebook: its one canonical text, what it reports, and a rewriter.

The cell finds the lab (already installed, or a local clone next to ``notebooks/``) or installs
it with pip from ``$KVSCHED_REPO_URL`` (any pip spec: ``git+https://...``, ``git+file://...``,
a wheel path) or else from the course's public repository. Where that fails (GitHub blocked or
too slow, as it often is from mainland China), it installs the pinned release ``kvsched-lab==``
`__version__` from the package index pip is configured with: PyPI, a mirror set with ``pip
config``, or ModelScope's default mirror. ``--no-deps`` keeps the runtime's torch (Colab,
ModelScope) exactly as it was. It ends with `report_setup`, which says in one line
what was loaded from where and, on Colab, where answers are kept (Drive on opt-in).

`SETUP_CELL` is the only copy of the cell's text: a test checks that every notebook's first code
cell equals it (up to the ``REPO_URL`` line, which ``kvsched release --repo-url`` rewrites), and
``python -m kvsched_lab.course.setup_cell notebooks/*.ipynb`` rewrites notebooks to it.
"""
from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path
from typing import List, Optional, Sequence

from kvsched_lab import __version__
from kvsched_lab.i18n import _
from kvsched_lab.notebook_files import cell_source, read_notebook, write_notebook

PUBLIC_REPO_URL = "https://github.com/kvsched-lab/kvsched-lab"
REPO_URL_ENV = "KVSCHED_REPO_URL"
# The one line `kvsched release --repo-url` substitutes; exactly one such line is in the cell.
REPO_URL_LINE = re.compile(r'^REPO_URL = "([^"\n]*)"$', re.M)
GIT_TIMEOUT_S = 180  # a clone from GitHub that takes longer is given up for the package index

SETUP_CELL = f'''# NBVAL_IGNORE_OUTPUT
# Setup: the same cell opens every notebook (Colab, ModelScope or a local clone). Safe to re-run.
REPO_URL = "{PUBLIC_REPO_URL}"
ANSWERS_ON_DRIVE = False  # Colab: set True to keep your answers on your Google Drive for the next notebooks
import importlib, os, subprocess, sys
from pathlib import Path

installed_from = None
try:
    import kvsched_lab.course as lab
except ImportError:
    clone = next((p for p in (Path.cwd(), *Path.cwd().parents[:2]) if (p / "kvsched_lab").is_dir()), None)
    if clone is not None:  # a local clone: notebooks/ (or notebooks/zh/) sits below kvsched_lab/'s folder
        sys.path.insert(0, str(clone))
    else:  # Colab / ModelScope: --no-deps never installs or upgrades the runtime's torch
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "numpy>=1.24", "tqdm>=4.60"]
        installed_from = os.environ.get("{REPO_URL_ENV}") or f"git+{{REPO_URL}}"
        try:
            subprocess.run(pip + [installed_from], check=True, timeout={GIT_TIMEOUT_S})
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):  # no GitHub: pip's own index or mirror
            installed_from = "kvsched-lab=={__version__}"
            subprocess.run(pip + [installed_from], check=True)
        importlib.invalidate_caches()
    import kvsched_lab.course as lab
lab.report_setup(installed_from, answers_on_drive=ANSWERS_ON_DRIVE)'''


def setup_cell(repo_url: str = PUBLIC_REPO_URL) -> str:
    """`SETUP_CELL` with its ``REPO_URL`` line set to `repo_url`."""
    if '"' in repo_url or "\n" in repo_url:
        raise ValueError(f"a repository URL cannot hold quotes or newlines: {repo_url!r}")
    return REPO_URL_LINE.sub(f'REPO_URL = "{repo_url}"', SETUP_CELL)


def repo_url_of(source: str) -> Optional[str]:
    """The ``REPO_URL`` a setup cell's `source` names, or None when it has not exactly one such line."""
    found = REPO_URL_LINE.findall(source)
    return found[0] if len(found) == 1 else None


def first_code_cell(nb: dict) -> Optional[dict]:
    return next((c for c in nb.get("cells", []) if c.get("cell_type") == "code"), None)


def rewrite_setup_cells(paths: Sequence[Path]) -> List[Path]:
    """Make each notebook's first code cell the canonical setup cell; return the notebooks changed.

    The cell keeps its id, metadata and the ``REPO_URL`` it already names (a released notebook
    keeps its class's URL); its outputs are cleared. Nothing else in the notebook changes.
    A notebook without a code cell is a ValueError (and no file is written before that check).
    """
    plans = []
    for path in map(Path, paths):
        nb = read_notebook(path)
        cell = first_code_cell(nb)
        if cell is None:
            raise ValueError(f"{path}: no code cell to make the setup cell")
        new = setup_cell(repo_url_of(cell_source(cell)) or PUBLIC_REPO_URL)
        if cell_source(cell) != new or cell.get("outputs") or cell.get("execution_count") is not None:
            plans.append((path, nb, cell, new))
    for path, nb, cell, new in plans:
        cell["source"] = new.splitlines(keepends=True)
        cell["outputs"], cell["execution_count"] = [], None
        write_notebook(nb, path)
    return [path for path, *_ in plans]


def report_setup(installed_from: Optional[str] = None, answers_on_drive: bool = False) -> None:
    """The setup cell's last line: what was loaded from where; on Colab, where answers are kept."""
    from kvsched_lab.course import answers_io

    package_dir = Path(__file__).resolve().parents[1]
    try:
        version = metadata.version("kvsched-lab")
    except metadata.PackageNotFoundError:  # a clone on sys.path, not installed
        version = _("(not installed)")
    if installed_from:
        print(_("kvsched_lab {version} installed from {source} into {folder} (torch left as it was)",
                version=version, source=installed_from, folder=package_dir.parent))
    else:
        print(_("kvsched_lab {version} loaded from {folder}", version=version, folder=package_dir.parent))
    if answers_on_drive or answers_io.on_colab():
        answers_io.announce_answers_home(answers_on_drive)


def main(argv: Optional[Sequence[str]] = None) -> int:
    paths = list(sys.argv[1:] if argv is None else argv)
    if not paths:
        print("usage: python -m kvsched_lab.course.setup_cell NOTEBOOK.ipynb ...", file=sys.stderr)
        return 2
    changed = rewrite_setup_cells([Path(p) for p in paths])
    print(f"setup cell rewritten in {len(changed)} of {len(paths)} notebooks"
          + (": " + ", ".join(p.name for p in changed) if changed else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
