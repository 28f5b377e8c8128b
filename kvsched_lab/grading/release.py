"""`kvsched release OUT_DIR`: the student bundle, and the checks that it gives nothing away.

The bundle holds the course notebooks, both editions (``notebooks/`` and the Chinese
``notebooks/zh/``), with outputs and run metadata cleared, ``kvsched_lab``
without this package (the grader and its hidden cases) and without the `WITHHELD_FILES`, the setup
files (a Makefile whose ``make check`` runs the notebooks, with no ``tests/`` target), and a README
for students; never ``solutions/`` or ``tests/``. It then verifies itself:

* no ``solutions``, ``kvsched_lab/grading``, ``tests`` or withheld file in it, no Makefile line
  naming ``tests``, and every notebook clean;
* the Chinese edition is complete: one ``notebooks/zh/`` notebook per English one, each with the
  English one's cells, ids and tags (building also refuses a ``notebooks/zh`` that is not what
  ``kvsched i18n build`` writes from the translation files now, where those files are present);
* no line of the reference (28+ characters, not a def/class/import/from/comment/decorator/
  docstring/``return [(`` line, nor given code the stubs also show) appears in any bundle file;
* every notebook's setup cell installs from the ``--repo-url`` given (its one ``REPO_URL = "..."``
  line is the single place substituted), never from the full repository;
* ``lab.reveal`` says the reference is withheld, in a Python that sees only the bundle;
* installed the way Colab would (the setup cell's ``pip install --no-deps git+URL``, with URL a
  ``git+file://`` repository of the bundle, into a fresh environment), ``import solutions`` and
  ``import kvsched_lab.grading`` fail and ``lab.reveal`` says the reference is withheld;
* ``pytest --nbval-lax`` on the bundle's notebooks, both editions, fails in check cells (``check:*``,
  and notebook 08's ``practice-check:*``) only.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

from kvsched_lab.grading.nbrun import run_nbval
from kvsched_lab.grading.steps import step
from kvsched_lab.grading.stubs import CHAPTER_EXERCISE, COURSE_GIVEN_LINES
from kvsched_lab.sim.scheduler import TODO_METHODS

REPO = Path(__file__).resolve().parents[2]
SETUP_FILES = ("pyproject.toml", "environment.yml")  # copied as they are; the Makefile is rewritten
ZH = "zh"  # the Chinese edition's folder, under notebooks/ (built by `kvsched i18n build`)
LEARNER_DOCS = ("docs/policy-notes.md",)  # notes the notebooks point learners to (notebooks 06 and 07)

# Files of ``kvsched_lab`` the bundle leaves out, with why. The one list: building skips them and
# verifying fails if any is there. They do not copy the reference's lines (so the line check
# below would miss them), but they implement the chapter's finished scheduler, which in effect
# answers the graded TODOs. The code degrades without them: the policy registry is built from the
# modules present (``make_policy("seed")`` says it is withheld), ``lab.my_scheduler()`` falls
# back to LRU with a labelled line, and the notebooks skip the cells that need them.
WITHHELD_FILES: Dict[str, str] = {
    "kvsched_lab/sim/policies/seed.py": "the chapter's scheduler as a library policy: its score, heap records, "
                                    "stale-record check, new entry and snapshot order (all five TODOs)",
    "kvsched_lab/sim/policies/seed_compact.py": "the same scheduler with one record per entry: the score, the new "
                                            "entry and the snapshot order (TODOs score, entry, snapshot)",
}
# The repository's `make test` runs tests/, which the bundle lacks: the student Makefile replaces
# that target with `make check` (kvsched_lab/cli/selfcheck.py: every notebook run, check cells
# reported) and a `make test` that says to run it.
_REPO_TEST_TARGET = "test: setup system-deps\n\t$(BIN)/python -m pytest tests\n"
_STUDENT_TARGETS = """check: setup
\t$(BIN)/python -m kvsched_lab.cli.selfcheck notebooks

test:
\t@echo "The student edition has no test suite. Run 'make check': it runs every notebook and lists"
\t@echo "which TODO checks pass (check cells fail until you write their TODO; that is expected)."
"""
IGNORED_STARTS = ("def ", "class ", "import ", "from ", "#", "@", '"""', "'''", 'r"""', "return [(")
MIN_LEAK = 28
KEPT_CELL_METADATA = ("tags", "editable", "deletable")
KEPT_NOTEBOOK_METADATA = ("kernelspec", "language_info")

STUDENT_README = """# kvsched-lab: KV-cache scheduling (student edition)

A hands-on course on keeping the right KV-cache blocks in memory during LLM inference. You
write the five missing pieces of a small scheduler (score, heap, stale check, new entry,
snapshot) in the notebooks, check each one as you go, then replay real request traces.

## Start

    make lab          # creates .venv, installs the course, opens JupyterLab on notebooks/
    make check        # runs every notebook top to bottom and lists which TODO checks pass

or, with your own environment (Colab, ModelScope: keep their torch):

    pip install -e ".[lab]"
    jupyter lab notebooks/

A Chinese edition of every notebook (中文版) is in `notebooks/zh/`: the same cells and checks, with
the text, check messages and hints in Chinese.

Work through `notebooks/` in order. Each TODO cell (tagged `todo:<name>`) defines one method;
the cell after it (tagged `check:<name>`) checks it. A check fails until you write the TODO:
that is expected. `lab.hint("score")` gives the next of four hint tiers at each call; the reference solutions
are not part of this edition, so `lab.reveal(...)` tells you it is withheld.

`make check` is this edition's self-test (there is no `tests/` folder; `make test` just points
to it): it runs every notebook in a fresh kernel, prints one line per TODO check (passed, not
attempted, failed) and exits non-zero only if a cell that is *not* a check cell fails.

The library's `seed` and `seed-compact` policies (the chapter's finished scheduler) are left out
of this edition, since they would answer the TODOs. Until your five TODOs pass,
`lab.my_scheduler()` gives the library's LRU policy instead and says so; cells that need the
chapter's scheduler (its priorities and heap) say they are skipped, and run once yours passes.

## Handing in

Hand in the folder with your notebooks (02-05 hold the TODOs). Only the TODO cells are graded,
each on its own with hidden tests; keep their tags, keep the method names, and keep everything
a TODO needs inside its cell (imports included). Editing or deleting check cells changes nothing.
"""


# --------------------------------------------------------------------------- building

def clean_notebook(nb: dict) -> dict:
    """`nb` without outputs, execution counts or run metadata (tags stay)."""
    out = json.loads(json.dumps(nb))
    out["metadata"] = {k: v for k, v in out.get("metadata", {}).items() if k in KEPT_NOTEBOOK_METADATA}
    for cell in out.get("cells", []):
        cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items() if k in KEPT_CELL_METADATA}
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        else:
            cell.pop("outputs", None)
    return out


def student_makefile(text: str) -> str:
    """The repository's Makefile with `make test` (it runs tests/) replaced by the student targets."""
    if _REPO_TEST_TARGET not in text:
        raise ValueError("Makefile: the `test` target changed; update _REPO_TEST_TARGET in release.py")
    text = text.replace(_REPO_TEST_TARGET, _STUDENT_TARGETS)
    text = re.sub(r"^# Two commands are the contract.*$",
                  "# Student edition: `make lab` opens the course, `make check` runs every notebook.", text,
                  count=1, flags=re.M)
    return text.replace(".PHONY: lab test setup system-deps i18n clean", ".PHONY: lab check test setup system-deps i18n clean")


# The setup cell's one line naming where Colab/ModelScope install the course from.
REPO_URL_LINE = re.compile(r'^REPO_URL = "[^"\n]*"$', re.M)
# The repository's package list names `solutions`; the bundle's must not.
_REPO_PACKAGES = 'include = ["kvsched_lab*", "solutions*"]'
_BUNDLE_PACKAGES = 'include = ["kvsched_lab*"]'


def set_repo_url(nb: dict, url: str) -> dict:
    """`nb` with every ``REPO_URL = "..."`` line (the setup cells', or a text showing one) set to `url`."""
    for cell in nb.get("cells", []):
        src = cell.get("source", "")
        text = "".join(src) if isinstance(src, list) else src
        if REPO_URL_LINE.search(text):
            cell["source"] = REPO_URL_LINE.sub(f'REPO_URL = "{url}"', text)
    return nb


def plain_url(url: str) -> str:
    """`url` if it can stand in a setup cell's string as it is; ValueError otherwise."""
    if not re.fullmatch(r"[^\s\"'\\]+", url):
        raise ValueError(f"--repo-url must be a plain URL (no spaces, quotes or backslashes): {url!r}")
    return url


def build_release(out: Path, notebooks: Path, repo_url: str, repo: Path = REPO) -> Path:
    """Write the bundle to `out`; ValueError (before anything is written) on a bad URL or a stale zh edition."""
    plain_url(repo_url)
    refuse_stale_zh(notebooks)
    out.mkdir(parents=True, exist_ok=True)
    ignore_common = shutil.ignore_patterns("grading", "__pycache__", "*.pyc", "*.egg-info")
    withheld = {(repo / rel).resolve() for rel in WITHHELD_FILES}

    def skip(folder: str, names: List[str]) -> Set[str]:
        return set(ignore_common(folder, names)) | {n for n in names if (Path(folder) / n).resolve() in withheld}

    shutil.copytree(repo / "kvsched_lab", out / "kvsched_lab", ignore=skip)
    for name in SETUP_FILES + LEARNER_DOCS:
        if (repo / name).is_file():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(repo / name, out / name)
    if (out / "pyproject.toml").is_file():
        toml = (out / "pyproject.toml").read_text(encoding="utf-8")
        (out / "pyproject.toml").write_text(toml.replace(_REPO_PACKAGES, _BUNDLE_PACKAGES), encoding="utf-8")
    if (repo / "Makefile").is_file():
        (out / "Makefile").write_text(student_makefile((repo / "Makefile").read_text(encoding="utf-8")),
                                      encoding="utf-8")
    (out / "README.md").write_text(STUDENT_README, encoding="utf-8")
    for src, dst in ((notebooks, out / "notebooks"), (notebooks / ZH, out / "notebooks" / ZH)):
        dst.mkdir(parents=True, exist_ok=True)
        for path in sorted(src.glob("*.ipynb")):
            nb = json.loads(path.read_text(encoding="utf-8"))
            (dst / path.name).write_text(
                json.dumps(set_repo_url(clean_notebook(nb), repo_url), indent=1, ensure_ascii=False) + "\n",
                encoding="utf-8")
    return out


def refuse_stale_zh(notebooks: Path) -> None:
    """ValueError when `stale_zh_edition` finds anything."""
    stale = stale_zh_edition(notebooks)
    if stale:
        raise ValueError("the Chinese edition is not what `kvsched i18n build` writes now: "
                         + "; ".join(stale) + " (run `kvsched i18n build`, translate what it lists)")


def stale_zh_edition(notebooks: Path) -> List[str]:
    """Where ``notebooks/zh`` differs from a fresh `kvsched i18n build` (or a cell is untranslated).

    Checked only where the translation files sit next to the notebooks (``../i18n/zh_CN``, the
    repository's layout); a notebooks folder without them is shipped as it is.
    """
    po_dir = notebooks.parent / "i18n" / "zh_CN"
    if not po_dir.is_dir():
        return []
    from kvsched_lab.i18n.notebooks import build_notebook

    problems = []
    with tempfile.TemporaryDirectory(prefix="kvsched-zh-") as tmp:
        for path in sorted(notebooks.glob("*.ipynb")):
            fresh = Path(tmp) / path.name
            report = build_notebook(path, po_dir / f"{path.stem}.po", fresh)
            committed = notebooks / ZH / path.name
            if report.stale:
                problems.append(f"{ZH}/{path.name}: untranslated cells {', '.join(report.stale)}")
            elif not committed.is_file() or committed.read_bytes() != fresh.read_bytes():
                problems.append(f"{ZH}/{path.name} is not the fresh build")
    return problems


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


def bundle_notebooks(bundle: Path) -> List[Path]:
    """Both editions' notebooks: ``notebooks/*.ipynb`` then ``notebooks/zh/*.ipynb``."""
    return sorted((bundle / "notebooks").glob("*.ipynb")) + sorted((bundle / "notebooks" / ZH).glob("*.ipynb"))


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
    code = _PROBE.format(launcher_dir=str(Path(__file__).parent), bundle=str(bundle), names=list(TODO_METHODS))
    proc = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120,
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
os.environ["KVSCHED_ANSWERS"] = tempfile.mkdtemp()
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


def _code_cell_tags(nb: dict) -> List[List[str]]:
    return [c.get("metadata", {}).get("tags", []) for c in nb.get("cells", []) if c.get("cell_type") == "code"]


def nbval_only_checks_fail(bundle: Path, cell_timeout: float) -> Tuple[List[str], List[str]]:
    """(problems, warnings) of running the bundle's notebooks as a student would, with stubs."""
    with tempfile.TemporaryDirectory(prefix="kvsched-release-") as tmp:
        copy = Path(tmp) / "bundle"
        shutil.copytree(bundle, copy)
        notebooks = bundle_notebooks(copy)
        if not notebooks:
            return ["the bundle has no notebooks"], []
        order = {p.relative_to(copy).as_posix(): k for k, p in enumerate(notebooks, start=1)}
        outcomes, tail = run_nbval(notebooks, copy, copy, cell_timeout=cell_timeout,
                                   wall_timeout=60 + cell_timeout * 4 * len(notebooks),
                                   on_notebook=lambda rel: print(f"  nbval: {rel} ({order.get(rel, '?')} of "
                                                                 f"{len(notebooks)})", flush=True))
        if outcomes is None:
            return [f"nbval did not run:\n{tail[-1500:]}"], []
        problems, warnings = [], []
        for path in notebooks:
            tags = _code_cell_tags(json.loads(path.read_text(encoding="utf-8")))
            rel = path.relative_to(copy).as_posix()
            for k, cell_tags in enumerate(tags):
                outcome, message = outcomes.get(f"{rel}::Cell {k}", ("missing", ""))
                # notebook 08's practice checks (not graded) fail on their stubs too
                is_check = any(t.startswith(("check:", "practice-check:")) for t in cell_tags)
                if outcome == "failed" and not is_check:
                    problems.append(f"{rel} code cell {k + 1} fails with the stubs: {message}")
                elif outcome == "passed" and is_check:
                    warnings.append(f"{rel} code cell {k + 1} ({', '.join(cell_tags)}) passes on the untouched stub")
                elif outcome == "missing":
                    problems.append(f"{rel} code cell {k + 1} was not run by nbval")
        return problems, warnings


def verify_release(bundle: Path, repo_url: str, cell_timeout: float = 300.0,
                   run_notebooks: bool = True) -> Tuple[List[str], List[str]]:
    """(problems, warnings); each check is named on stdout as it starts and ends (progress.py's `step`)."""
    problems = step("no grader, reference, tests or withheld file", forbidden_paths, bundle)
    problems += step("every notebook clean", unclean_notebooks, bundle)
    problems += step("the Chinese edition complete", incomplete_zh_edition, bundle)
    problems += step("no line of the reference", lambda: find_leaks(bundle, forbidden_lines()))
    problems += step("setup cells install from --repo-url", setup_cell_urls, bundle, repo_url)
    problems += step("lab.reveal says withheld", reveal_withheld, bundle)
    problems += step("a Colab-style install holds no reference", colab_install, bundle)
    warnings: List[str] = []
    if run_notebooks:
        p, warnings = step("nbval on both editions fails in check cells only", nbval_only_checks_fail, bundle,
                           cell_timeout)
        problems += p
    return problems, warnings


def release_main(argv: Optional[List[str]] = None) -> int:
    """``kvsched release OUT_DIR --repo-url URL [--notebooks DIR] [--force] [--timeout S] [--skip-notebook-run]``."""
    p = argparse.ArgumentParser(prog="kvsched release", description=(
        "Build the student bundle (stub notebooks, kvsched_lab without the grader, a student README; no "
        "solutions/ and no tests/) and verify it gives nothing away."))
    p.add_argument("out", metavar="OUT_DIR")
    p.add_argument("--repo-url", required=True, metavar="URL",
                   help="where students install the bundle from (its own repository, never this one): the "
                        "notebooks' setup cells install from it")
    p.add_argument("--notebooks", default=str(REPO / "notebooks"), help="course notebooks (default: notebooks/)")
    p.add_argument("--force", action="store_true", help="replace OUT_DIR if it exists")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per notebook cell in the nbval run")
    p.add_argument("--skip-notebook-run", action="store_true", help="static checks only (no nbval run)")
    args = p.parse_args(argv)
    out = Path(args.out)
    try:
        plain_url(args.repo_url)
        refuse_stale_zh(Path(args.notebooks))  # before --force removes anything
    except ValueError as e:
        print(f"kvsched release: {e}", file=sys.stderr)
        return 2
    if out.exists() and any(out.iterdir()):
        if not args.force:
            print(f"kvsched release: {out} exists and is not empty (use --force to replace it)", file=sys.stderr)
            return 2
        shutil.rmtree(out)
    try:
        build_release(out, Path(args.notebooks), args.repo_url)
    except ValueError as e:
        print(f"kvsched release: {e}", file=sys.stderr)
        return 2
    problems, warnings = verify_release(out, args.repo_url, args.timeout, run_notebooks=not args.skip_notebook_run)
    for w in warnings:
        print(f"warning: {w}")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print(f"release {'FAILED' if problems else 'ok'}: {out} ({len(problems)} problem(s), {len(warnings)} warning(s))")
    return 1 if problems else 0
