"""The setup cell: one canonical text in every notebook, a rewriter for new notebooks, and what it says."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kvsched_lab

from kvsched_lab.course.setup_cell import (PUBLIC_REPO_URL, SETUP_CELL, main, repo_url_of, rewrite_setup_cells,
                                           setup_cell)
from kvsched_lab.notebook_files import cell_source, read_notebook, write_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
OLD_CELL = ('# Setup: the old cell\nREPO_URL = "https://github.com/some-class/kvsched-lab"\n'
            'import kvsched_lab.course as lab\nprint("kvsched_lab loaded from", lab.__file__)')


def first_code_cell(nb):
    return next(c for c in nb["cells"] if c["cell_type"] == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_opens_with_the_canonical_setup_cell(path):
    assert cell_source(first_code_cell(read_notebook(path))) == SETUP_CELL, \
        f"{path.name}: run `python -m kvsched_lab.course.setup_cell notebooks/*.ipynb`"


def test_the_cell_is_short_names_its_url_once_and_never_touches_torch():
    code = [line for line in SETUP_CELL.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    # 15 lines before the install path, 17 with it, 22 with the package-index route for learners
    # who cannot reach GitHub (mainland China): that route is tests/test_colab_sim.py's last test.
    assert len(code) <= 22, "the setup cell should stay short"
    assert f'installed_from = "kvsched-lab=={kvsched_lab.__version__}"' in SETUP_CELL  # the pinned release
    assert repo_url_of(SETUP_CELL) == PUBLIC_REPO_URL
    assert "--no-deps" in SETUP_CELL and "torch" not in SETUP_CELL.replace("runtime's torch", "")
    assert "KVSCHED_REPO_URL" in SETUP_CELL and "ANSWERS_ON_DRIVE = False" in SETUP_CELL
    compile(SETUP_CELL, "<setup>", "exec")
    assert repo_url_of(setup_cell("https://example.org/x/y")) == "https://example.org/x/y"
    with pytest.raises(ValueError):
        setup_cell('https://x"; import os')


def _notebook(tmp_path: Path, first: str, name="n.ipynb") -> Path:
    nb = {"cells": [{"cell_type": "markdown", "id": "m1", "metadata": {}, "source": ["# Title"]},
                    {"cell_type": "code", "id": "keep-id", "metadata": {"tags": ["setup"]}, "execution_count": 3,
                     "outputs": [{"output_type": "stream", "name": "stdout", "text": "old\n"}], "source": first},
                    {"cell_type": "code", "id": "c2", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": "x = 1"}],
          "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    write_notebook(nb, tmp_path / name)
    return tmp_path / name


def test_rewrite_replaces_only_the_setup_cell_and_keeps_id_metadata_and_url(tmp_path):
    path = _notebook(tmp_path, OLD_CELL)
    before = read_notebook(path)
    assert rewrite_setup_cells([path]) == [path]
    after = read_notebook(path)
    cell = first_code_cell(after)
    assert cell_source(cell) == setup_cell("https://github.com/some-class/kvsched-lab")
    assert cell["id"] == "keep-id" and cell["metadata"] == {"tags": ["setup"]}
    assert cell["outputs"] == [] and cell["execution_count"] is None
    assert after["cells"][0] == before["cells"][0] and after["cells"][2] == before["cells"][2]
    assert path.read_text().endswith("}\n")
    assert rewrite_setup_cells([path]) == []  # already canonical: not written again


def test_rewrite_of_a_cell_without_url_uses_the_public_one_and_checks_all_first(tmp_path):
    good = _notebook(tmp_path, "import kvsched_lab.course as lab", "a.ipynb")
    bad = tmp_path / "b.ipynb"
    write_notebook({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, bad)
    text = good.read_text()
    with pytest.raises(ValueError, match="no code cell"):
        rewrite_setup_cells([good, bad])
    assert good.read_text() == text  # nothing written before every notebook was checked
    assert main([str(good)]) == 0
    assert cell_source(first_code_cell(read_notebook(good))) == SETUP_CELL


def _run_cell(cwd: Path, env_extra=None) -> subprocess.CompletedProcess:
    """The cell's code in a fresh Python with `cwd` as its folder (the install branch: test_colab_sim.py)."""
    env = {k: v for k, v in os.environ.items() if k not in ("KVSCHED_REPO_URL", "COLAB_RELEASE_TAG")}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", SETUP_CELL], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_cell_in_a_clone_says_where_it_loaded_from():
    proc = _run_cell(ROOT / "notebooks")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvsched_lab ") and str(ROOT) in lines[0], lines


def test_cell_on_colab_offers_drive_in_one_line(tmp_path):
    proc = _run_cell(ROOT / "notebooks", {"COLAB_RELEASE_TAG": "test", "KVSCHED_ANSWERS": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and "ANSWERS_ON_DRIVE = True" in lines[1] and "lab.download_answers()" in lines[1]
