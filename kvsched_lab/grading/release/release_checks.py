"""The checks that a student bundle (release_build.py) gives nothing away; `verify_release` runs them all.

* no ``solutions``, ``kvsched_lab/grading``, ``tests`` or withheld file in it, no Makefile line
  naming ``tests``, and every notebook clean;
* the Chinese edition is complete: one ``notebooks/zh/`` notebook per English one, each with the
  English one's cells, ids and tags;
* no line of the reference (28+ characters, not a def/class/import/from/comment/decorator/
  docstring/``return [(`` line, nor given code the stubs also show) appears in any bundle file;
* every notebook's setup cell installs from the ``--repo-url`` given, never from the full repository;
* ``lab.reveal`` says the reference is withheld, in a Python that sees only the bundle;
* installed the way Colab would (the setup cell's ``pip install --no-deps git+URL``, with URL a
  ``git+file://`` repository of the bundle, into a fresh environment), ``import solutions`` and
  ``import kvsched_lab.grading`` fail and ``lab.reveal`` says the reference is withheld;
* ``pytest --nbval-lax`` on every notebook of both editions fails in check cells (``check:*``, and
  notebook 08's ``practice-check:*``) only (release_nbval.py: each notebook in a fresh kernel in a
  copy that is exactly the bundle, several at once, longest first).
"""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import site
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator, List, Optional, Set, Tuple

from kvsched_lab.grading.kernel import kernel_launcher
from kvsched_lab.grading.release.release_build import (REPO, REPO_URL_LINE, WITHHELD_FILES, ZH, bundle_notebooks,
                                               clean_notebook)
from kvsched_lab.grading.release.release_nbval import nbval_only_checks_fail
from kvsched_lab.grading.release.steps import step
from kvsched_lab.grading.judging.stubs import CHAPTER_EXERCISE, COURSE_GIVEN_LINES
from kvsched_lab.sim.scheduler import TODO_METHODS

IGNORED_STARTS = ("def ", "class ", "import ", "from ", "#", "@", '"""', "'''", 'r"""', "return [(")
MIN_LEAK = 28


# --------------------------------------------------------------------------- static checks

def _docstring_lines(tree: ast.AST) -> Set[int]:
    lines: Set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) \
                    and isinstance(first.value.value, str):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def _code(line: str) -> str:
    """A line without indentation or a trailing comment."""
    return re.sub(r"\s+#[^\"']*$", "", line.strip())


def forbidden_lines(solutions: Path = REPO / "solutions") -> Set[str]:
    """The reference's lines a bundle must not contain (given code shown by the stubs excepted)."""
    given = {_code(ln) for ln in CHAPTER_EXERCISE.splitlines()} | set(COURSE_GIVEN_LINES)
    found: Set[str] = set()
    for path in sorted(solutions.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        skip = _docstring_lines(ast.parse(text))
        for k, raw in enumerate(text.splitlines(), start=1):
            line = _code(raw)
            if k not in skip and len(line) >= MIN_LEAK and not line.startswith(IGNORED_STARTS) and line not in given:
                found.add(line)
    return found


def _texts(bundle: Path) -> Iterator[Tuple[str, str]]:
    """(relative path, text) of every text file; a notebook's cells as their sources."""
    for path in sorted(p for p in bundle.rglob("*") if p.is_file()):
        rel = str(path.relative_to(bundle))
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if path.suffix == ".ipynb":
            try:
                cells = json.loads(text).get("cells", [])
            except ValueError:
                yield rel, text
                continue
            for i, cell in enumerate(cells, start=1):
                src = cell.get("source", "")
                yield f"{rel} cell {i}", "".join(src) if isinstance(src, list) else src
        else:
            yield rel, text


def find_leaks(bundle: Path, forbidden: Set[str]) -> List[str]:
    leaks = []
    for where, text in _texts(bundle):
        normalized = "\n".join(_code(ln) for ln in text.splitlines())
        leaks += [f"{where}: {line}" for line in sorted(forbidden) if line in normalized]
    return leaks


def unclean_notebooks(bundle: Path) -> List[str]:
    problems = []
    for path in bundle_notebooks(bundle):
        nb = json.loads(path.read_text(encoding="utf-8"))
        if nb != clean_notebook(nb):
            problems.append(f"{path.relative_to(bundle).as_posix()} has outputs, execution counts or run metadata")
    return problems


def incomplete_zh_edition(bundle: Path) -> List[str]:
    """Problems unless every English notebook has its Chinese one, with the same cells, ids and tags."""
    problems = []
    english = sorted((bundle / "notebooks").glob("*.ipynb"))
    chinese = {p.name for p in (bundle / "notebooks" / ZH).glob("*.ipynb")}
    for path in english:
        zh = bundle / "notebooks" / ZH / path.name
        if not zh.is_file():
            problems.append(f"notebooks/{ZH}/{path.name} is missing (the Chinese edition)")
            continue
        cells = [[(c.get("cell_type"), c.get("id"), c.get("metadata", {}).get("tags", []))
                  for c in json.loads(p.read_text(encoding="utf-8")).get("cells", [])] for p in (path, zh)]
        if cells[0] != cells[1]:
            problems.append(f"notebooks/{ZH}/{path.name} does not have the English notebook's cells, ids and tags")
    problems += [f"notebooks/{ZH}/{name} has no English notebook" for name in sorted(chinese - {p.name for p in english})]
    return problems


def forbidden_paths(bundle: Path) -> List[str]:
    problems = [f"{rel} is in the bundle" for rel in ("solutions", "kvsched_lab/grading", "tests")
                if (bundle / rel).exists()]
    problems += [f"{rel} is in the bundle (withheld: {why})" for rel, why in WITHHELD_FILES.items()
                 if (bundle / rel).exists()]
    makefile = bundle / "Makefile"
    if makefile.is_file():
        problems += [f"Makefile line {k} refers to tests/, which the bundle lacks: {line.strip()}"
                     for k, line in enumerate(makefile.read_text(encoding="utf-8").splitlines(), start=1)
                     if re.search(r"\btests\b", line) and not line.lstrip().startswith(("#", "@echo"))]
    return problems


# --------------------------------------------------------------------------- running checks

_PROBE = """
import io, contextlib, sys
sys.path.insert(0, {launcher_dir!r})
import kernel_launcher
sys.path.pop(0)
kernel_launcher.isolate({bundle!r})
import kvsched_lab.course as lab
out = {{}}
for name in {names!r}:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        lab.reveal(name)
    out[name] = buf.getvalue()
print(__import__("json").dumps(out))
"""


def reveal_withheld(bundle: Path) -> List[str]:
    """Problems unless ``lab.reveal`` says, for every TODO, that the reference is withheld."""
    code = _PROBE.format(launcher_dir=str(Path(kernel_launcher.__file__).parent), bundle=str(bundle), names=list(TODO_METHODS))
    proc = subprocess.run([sys.executable, "-I", "-B", "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=bundle)
    if proc.returncode != 0:
        return [f"lab.reveal could not run in the bundle: {proc.stderr.strip().splitlines()[-1:]}"]
    shown = json.loads(proc.stdout.strip().splitlines()[-1])
    return [f"lab.reveal({name!r}) does not say the reference is withheld" for name, text in shown.items()
            if "withheld" not in text.lower()]


def setup_cell_urls(bundle: Path, repo_url: str) -> List[str]:
    """Problems unless every ``REPO_URL = "..."`` line of the bundle's notebooks names `repo_url`."""
    return [f"{where} installs from elsewhere: {line}" for where, text in _texts(bundle) if where.startswith("notebooks/")
            for line in REPO_URL_LINE.findall(text) if line != f'REPO_URL = "{repo_url}"']


_INSTALLED_PROBE = """
import contextlib, io, json, os, tempfile
_answers = tempfile.TemporaryDirectory()  # removed when the probe exits
os.environ["KVSCHED_ANSWERS"] = _answers.name
out = {}
for name in ("solutions", "kvsched_lab.grading"):
    try:
        __import__(name)
        out[name] = "importable"
    except ImportError as e:
        out[name] = "refused"
import kvsched_lab
import kvsched_lab.course as lab
out["file"] = kvsched_lab.__file__
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    for todo in %r:
        lab.reveal(todo)
out["reveal"] = buf.getvalue()
print(json.dumps(out))
"""


def colab_install(bundle: Path) -> List[str]:
    """Problems unless the bundle, installed as its setup cell does it from a ``git+file://`` copy into a
    fresh environment, holds no reference and no grader (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="kvsched-colab-") as tmp:
        repo, venv = Path(tmp) / "bundle.git", Path(tmp) / "venv"
        shutil.copytree(bundle, repo)
        git = ["git", "-c", "user.name=kvsched", "-c", "user.email=kvsched@localhost", "-c", "init.defaultBranch=main"]
        for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "student bundle"]):
            proc = subprocess.run(git + cmd, cwd=repo, capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                return [f"git {cmd[0]} failed on the bundle: {proc.stderr.strip()[-300:]}"]
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        # The fresh environment borrows this one's packages (torch, numpy, pip, setuptools: no download)
        # through a path entry; that folder's own .pth files (the editable install) are not processed.
        purelib = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                 capture_output=True, text=True, check=True, timeout=60).stdout.strip()
        Path(purelib, "borrowed.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
        url = f"git+file://{repo}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
        install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                                  "--no-build-isolation", "--no-index", url], capture_output=True, text=True,
                                 timeout=600, cwd=tmp, env=env)
        if install.returncode != 0:
            return [f"pip install {url} failed: {install.stderr.strip()[-500:]}"]
        probe = subprocess.run([str(venv / "bin" / "python"), "-I", "-c", _INSTALLED_PROBE % (list(TODO_METHODS),)],
                               capture_output=True, text=True, timeout=300, cwd=tmp, env=env)
        if probe.returncode != 0:
            return [f"the installed bundle does not import: {probe.stderr.strip()[-500:]}"]
        got = json.loads(probe.stdout.strip().splitlines()[-1])
    problems = [f"`import {name}` works in the Colab-style install" for name in ("solutions", "kvsched_lab.grading")
                if got[name] != "refused"]
    if not got["file"].startswith(purelib):
        problems.append(f"the Colab-style install imports kvsched_lab from {got['file']}, not the installed bundle")
    if got["reveal"].lower().count("withheld") < len(TODO_METHODS):
        problems.append("lab.reveal does not say the reference is withheld in the Colab-style install")
    return problems


def verify_release(bundle: Path, repo_url: str, cell_timeout: float = 300.0, run_notebooks: bool = True,
                   jobs: Optional[int] = None) -> Tuple[List[str], List[str]]:
    """(problems, warnings); each check is named on stdout as it starts and ends (steps.py's `step`).

    The Colab-style install (a git commit, a venv, pip: mostly waiting) runs beside the notebooks'
    nbval run, `jobs` notebooks at once (release_nbval.py); the other checks take a second or less."""
    problems = step("no grader, reference, tests or withheld file", forbidden_paths, bundle)
    problems += step("every notebook clean", unclean_notebooks, bundle)
    problems += step("the Chinese edition complete", incomplete_zh_edition, bundle)
    problems += step("no line of the reference", lambda: find_leaks(bundle, forbidden_lines()))
    problems += step("setup cells install from --repo-url", setup_cell_urls, bundle, repo_url)
    problems += step("lab.reveal says withheld", reveal_withheld, bundle)
    warnings: List[str] = []
    with ThreadPoolExecutor(max_workers=1) as beside:
        install = beside.submit(step, "a Colab-style install holds no reference", colab_install, bundle)
        ran: List[str] = []
        if run_notebooks:
            ran, warnings = step("nbval on both editions fails in check cells only", nbval_only_checks_fail, bundle,
                                 cell_timeout, jobs)
        problems += install.result() + ran
    return problems, warnings
