"""Building the student bundle of `kvsched release` (release.py); release_checks.py verifies it.

The bundle holds the course notebooks, both editions (``notebooks/`` and the Chinese
``notebooks/zh/``), with outputs and run metadata cleared and every setup cell's ``REPO_URL``
set to the bundle's own repository; ``kvsched_lab`` without this package (the grader and its
hidden cases) and without the `WITHHELD_FILES`; the setup files (a Makefile whose ``make check``
runs the notebooks, with no ``tests/`` target); the notes the notebooks point to; and a README
for students. Never ``solutions/`` or ``tests/``. Building refuses a ``notebooks/zh`` that is not
what ``kvsched i18n build`` writes from the translation files now.
"""
from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Dict, List, Set

REPO = Path(__file__).resolve().parents[3]
SETUP_FILES = ("pyproject.toml", "environment.yml")  # copied as they are; the Makefile is rewritten
ZH = "zh"  # the Chinese edition's folder, under notebooks/ (built by `kvsched i18n build`)
# What learners read beside the notebooks: the notes notebooks 06 and 07 point to, and for the
# Chinese edition its README (install routes from mainland China) and the glossary of its terms.
LEARNER_DOCS = ("docs/policy-notes.md", "README.zh.md", "docs/glossary.md")

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
# (The block replaced starts with the libCacheSim crosscheck's install, which only the tests need.)
_REPO_TEST_TARGET = (
    '# libCacheSim for tests/test_crosscheck_libcachesim.py: the optional `crosscheck` extra (GPL-3.0,\n'
    '# tests only). Installed once where pip reaches PyPI (pinned in pyproject.toml); elsewhere the test\n'
    '# is skipped, with this note. CI (.ci/run) sets KVSCHED_REQUIRE_CROSSCHECK=1, so there it must run.\n'
    '# (`kvsched release` drops this block with the test target: the student edition has no tests.)\n'
    '.PHONY: crosscheck-deps\n'
    'crosscheck-deps: setup\n'
    '\t@$(BIN)/python -c "import libcachesim as l, kvsched_lab.cli.bench_libcachesim as b; \\\n'
    '\t  raise SystemExit(l.__version__ != b.LIBCACHESIM_VERSION)" >/dev/null 2>&1 \\\n'
    '\t  || { export PIP_TIMEOUT=30 UV_HTTP_TIMEOUT=30; $(INSTALL) -e ".[crosscheck]"; } >/dev/null 2>&1 \\\n'
    '\t  || echo "note: libcachesim not installed (tests/test_crosscheck_libcachesim.py is skipped)"\n'
    '\n'
    '# Two workers, each taking whole test files (a file\'s module fixtures run once). Run alone, the\n'
    '# grading tests leave a third of two cores idle while sandboxes start and stop; the other fills it.\n'
    "# Files are handed out in the suite's own order, longest first (tests/conftest.py), not xdist's.\n"
    'TEST_WORKERS ?= 2\n'
    'test: setup system-deps crosscheck-deps\n'
    '\t$(BIN)/python -m pytest tests -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder\n'
)
_STUDENT_TARGETS = """check: setup
\t$(BIN)/python -m kvsched_lab.cli.selfcheck notebooks

test:
\t@echo "The student edition has no test suite. Run 'make check': it runs every notebook and lists"
\t@echo "which TODO checks pass (check cells fail until you write their TODO; that is expected)."
"""
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
the text, check messages and hints in Chinese. `README.zh.md` is its guide (中文说明, with the
install routes that need no GitHub) and `docs/glossary.md` lists the Chinese terms it uses.

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


def bundle_notebooks(bundle: Path) -> List[Path]:
    """Both editions' notebooks: ``notebooks/*.ipynb`` then ``notebooks/zh/*.ipynb``."""
    return sorted((bundle / "notebooks").glob("*.ipynb")) + sorted((bundle / "notebooks" / ZH).glob("*.ipynb"))
