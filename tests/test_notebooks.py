"""The notebook series: clean, well-formed, and runs top to bottom (nbval, like `nbgrader validate`).

Every ``notebooks/*.ipynb`` and its Chinese edition ``notebooks/zh/*.ipynb`` are picked up. Three
nbval runs, each a pytest subprocess in its own temporary folder with its own ``KVSCHED_ANSWERS``,
run side by side (the two cores share them; their total is about even):

- **filled** and **filled_zh**: every TODO cell holds the reference method (and the practice cells
  the reference of `solutions.practice`): every cell passes, in each edition;
- **stub**: the notebooks with TODOs (graded or practice) as shipped, in both editions: exactly the
  graded check cells fail (``validate --invert``), nothing else, with the "not attempted" message
  in the notebook's language (the zh setup cell selects it); the optional ``aging`` check and the
  practice checks say "not attempted" without failing, so Run All goes on. A notebook without
  TODOs runs the same code as in the filled run, except where it reads saved answers (notebook
  00's tour, the capstone's ``lab.my_scheduler()``): run as shipped, with no answers, those are
  tests/test_colab_sim.py's notebooks (``SIM_NOTEBOOKS``), each copied alone onto a simulated
  Colab, and a test below keeps it so;
- then, in the stub run, copies with the chapter's answer line pasted into ONE TODO stub, each
  ending at that TODO's check cell: exactly that check turns green. (What follows the check runs
  the same code as the stub copy's cells, which the stub run already checks.)

The three runs share one ``KVSCHED_REPLAY_CACHE`` folder (tests/conftest.py, with the simulated
Colab's notebooks): a replay, a tier replay or a serving run of library policies (never a
learner's class, and never real KV blocks) that two kernels ask for is computed once
(kvsched_lab/sim/replay.py, kv/tiers/replay.py, sim/serving/server.py, course/challenge.py).

The optional ``aging`` TODO (notebook 05, beyond the chapter) takes part in all three like the
five, with its reference kept in ``solutions/aging.py``; the grader never sees it. The filled run
also logs, kernel by kernel, which cells drew a figure and whether it was shown
(tests/notebook_figures.py).
"""
from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

import notebook_figures
from english_prose import english_prose, output_lines
from kvsched_lab.course.checks import grade
from kvsched_lab.course.hints import HINTS_FILENAME
from kvsched_lab.course.practice import check_practice
from kvsched_lab.sim.scheduler import ALL_TODO_METHODS, OPTIONAL_TODO_METHODS, TODO_METHODS
from kvsched_lab.course.todos import (
    PRACTICE_FUNCTIONS, fill_todos, load_method, load_practice, practice_reference_sources, reference_sources,
    tagged_cells, todo_sources,
)
from kvsched_lab.notebook_files import NOTEBOOK_METADATA, cell_source, notebook_text, read_notebook, write_notebook

ROOT = Path(__file__).resolve().parents[1]
# Exception text of the chapter's given code, shown as is in both editions (see the zh-output test).
KEPT_ENGLISH_ERRORS = ("single cache entry exceeds capacity",)
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
ZH_NOTEBOOKS = sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))


def has_todos(nb) -> bool:
    """A notebook with a TODO cell: graded (``todo:*``) or practice (``practice:*``, notebook 08)."""
    return bool(tagged_cells(nb, "todo") or tagged_cells(nb, "practice"))


EXERCISE_NOTEBOOKS = [p for p in NOTEBOOKS if has_todos(read_notebook(p))]
# A call that reads the learner's saved answers: a notebook with one runs differently as shipped.
READS_ANSWERS = re.compile(r"lab\.(my_scheduler|load_answers|show_scheduler|status|answer_status)\(")
ZH_PREFIX = "zh__"  # a zh notebook's name in the nbval folders
# What an untouched check cell says, per edition (kvsched_lab/i18n/zh_CN.po has the Chinese).
NOT_ATTEMPTED = {"en": "not attempted", "zh": "尚未作答"}
CELL_TIMEOUT_S = 120
RUN_TIMEOUT_S = 1800  # one nbval run, all its notebooks

# The chapter's own answer line for each TODO, as a learner would paste it.
CHAPTER_ANSWERS = {
    "score": "score = reuse_bonus + 0.5 * recency - 0.25 * size_penalty",
    "heap": "queue_item = (entry.priority, entry.last_used, prefix)",
    "stale": "is_stale = (priority, last_used) != (entry.priority, entry.last_used)",
    "entry": "entry = CacheEntry(priority=0.0, last_used=self.time, prefix=prefix, hits=1, bytes=bytes_)",
    "snapshot": "ordered_entries = sorted(self.entries.values(), key=lambda e: (-e.priority, e.last_used, e.prefix))",
    "aging": "score = self.inflation + chapter_score",  # optional, beyond the chapter
}

# Records every cell's outcome and duration (more robust than parsing junit names) and, for the
# zh notebooks, what each cell showed (nbval keeps a cell's outputs in `item.test_outputs`).
_RECORDER = '''
import json
from pathlib import Path

import pytest

from kvsched_lab.grading.kernel.nbrun import IpcKernels

OUT = Path(__file__).parent / "nbval_results.jsonl"
OUTPUTS = Path(__file__).parent / "zh_outputs.jsonl"


def pytest_configure(config):
    config.pluginmanager.register(IpcKernels())  # three runs side by side: no TCP port races


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        with OUT.open("a") as f:
            f.write(json.dumps({"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
                                "duration": report.duration,
                                "text": str(report.longrepr)[-3000:] if report.failed else ""}) + "\\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield
    outputs = getattr(item, "test_outputs", None)
    if outputs and item.nodeid.startswith("%s"):
        with OUTPUTS.open("a") as f:
            f.write(json.dumps({"nodeid": item.nodeid, "outputs": outputs}) + "\\n")
''' % ZH_PREFIX


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def cell_tags(cell):
    return cell.get("metadata", {}).get("tags", [])


def paste(source: str, line: str) -> str:
    """The stub source with its `raise NotImplementedError(...)` line replaced by `line`."""
    out, done = [], False
    for src_line in source.splitlines():
        if not done and src_line.strip().startswith("raise NotImplementedError("):
            out.append(src_line[: len(src_line) - len(src_line.lstrip())] + line)
            done = True
        else:
            out.append(src_line)
    assert done, "a TODO stub must have one `raise NotImplementedError(...)` line to replace"
    return "\n".join(out)


def up_to_check(nb, todo: str):
    """`nb` cut after the check cell of `todo` (a pasted copy only has to show that check turn green)."""
    cells = nb["cells"]
    (last,) = [i for i, c in enumerate(cells) if f"check:{todo}" in c.get("metadata", {}).get("tags", [])]
    return {**nb, "cells": cells[: last + 1]}


class Run:
    """One nbval subprocess over some notebooks in a fresh folder with fresh answers."""

    def __init__(self, folder: Path, notebooks: dict, log_figures: bool = False, replay_cache: Path = None):
        self.folder = folder
        self.answers = folder / "answers"
        folder.mkdir(parents=True)
        (folder / "pytest.ini").write_text("[pytest]\n")
        (folder / "conftest.py").write_text(_RECORDER)
        self.names = []
        self.notebooks = notebooks
        for name, nb in notebooks.items():
            write_notebook(nb, folder / name)
            self.names.append(name)
        # Two runs share the 2 CI cores; one torch thread each avoids spin-wait contention
        # that slows a tiny model's prefill several-fold.
        env = dict(os.environ, KVSCHED_ANSWERS=str(self.answers), PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        if replay_cache is not None:
            env["KVSCHED_REPLAY_CACHE"] = str(replay_cache)
        if log_figures:
            notebook_figures.install(folder, env)
        cmd = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env",
               f"--nbval-cell-timeout={CELL_TIMEOUT_S}", "-p", "no:cacheprovider", "-q",
               "-c", str(folder / "pytest.ini"), "--rootdir", str(folder), *self.names]
        self.start = time.perf_counter()
        # The output goes to a file, not a pipe: `wait_all` polls the runs, and a pipe nobody reads
        # would stall a run that prints more than the pipe holds.
        with (folder / "nbval.log").open("w") as log:
            self.proc = subprocess.Popen(cmd, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
        self.output = ""
        self.wall = self.cpu = 0.0
        self.returncode = None

    def poll(self) -> bool:
        """True once the run has ended; then `wall` is its own wall time, `cpu` the user + system
        seconds of its whole process tree (pytest and every kernel it reaped), `returncode` its status."""
        pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
        if pid == 0:
            return False
        self.wall = time.perf_counter() - self.start
        self.cpu = usage.ru_utime + usage.ru_stime
        self.returncode = self.proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        self.output = (self.folder / "nbval.log").read_text()
        results = self.folder / "nbval_results.jsonl"
        self.records = [json.loads(l) for l in results.read_text().splitlines()] if results.exists() else []
        return True

    def wait(self):
        wait_all([self])
        return self

    def failed_cells(self):
        """``{notebook: {code cell index: failure text}}``."""
        out = defaultdict(dict)
        for r in self.records:
            if r["outcome"] == "failed":
                nb, _, cell = r["nodeid"].partition("::")
                m = re.fullmatch(r"Cell (\d+)", cell)
                out[nb][int(m.group(1)) if m else cell] = r["text"]
        return dict(out)

    def zh_outputs(self):
        """``{zh notebook: {code cell index: [nbformat outputs]}}`` of the cells that showed something."""
        path = self.folder / "zh_outputs.jsonl"
        out = defaultdict(dict)
        for line in (path.read_text().splitlines() if path.exists() else []):
            r = json.loads(line)
            nb, _, cell = r["nodeid"].partition("::")
            m = re.fullmatch(r"Cell (\d+)", cell)
            out[nb][int(m.group(1)) if m else cell] = r["outputs"]
        return dict(out)

    def seconds_per_notebook(self):
        out = defaultdict(float)
        for r in self.records:
            out[r["nodeid"].partition("::")[0]] += r["duration"]
        return dict(out)


def wait_all(runs, poll_s: float = 0.2):
    """Wait for every run, noting each one's end as it comes (before: the runs were waited for in
    turn, so a run that ended first was timed as ending with the one before it, and the printed
    balance between the three was wrong). Only a hung run should stop here: each cell has its own
    limit (CELL_TIMEOUT_S), and on a loaded machine the filled run once took past 600 s."""
    pending = list(runs)
    while pending:
        pending = [r for r in pending if not r.poll()]
        if pending and max(time.perf_counter() - r.start for r in pending) > RUN_TIMEOUT_S:
            for r in pending:
                r.proc.kill()
                r.proc.wait()
            raise TimeoutError(f"nbval runs past {RUN_TIMEOUT_S} s: {[r.folder.name for r in pending]}")
        time.sleep(poll_s if pending else 0)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, replay_cache):
    base = tmp_path_factory.mktemp("nbval")
    nbs = {p.name: read_notebook(p) for p in NOTEBOOKS}
    zh = {ZH_PREFIX + p.name: read_notebook(p) for p in ZH_NOTEBOOKS}
    refs, practice = reference_sources(optional=True), practice_reference_sources()

    def filled(notebooks):
        return {name: fill_todos(fill_todos(nb, refs), practice, kind="practice") for name, nb in notebooks.items()}

    stubs = {name: nb for name, nb in {**nbs, **zh}.items() if has_todos(nb)}
    pasted = {}
    for name, nb in nbs.items():
        for todo, idx in tagged_cells(nb, "todo").items():
            src = paste(cell_source(nb["cells"][idx[-1]]), CHAPTER_ANSWERS[todo])
            pasted[f"paste_{todo}__{name}"] = up_to_check(fill_todos(nb, {todo: src}), todo)
    # Three subprocesses on the two cores. The pasted copies run after the stubs in the same
    # kernel-per-notebook run: the stubs start from an empty answers folder and save nothing.
    started = {"filled": Run(base / "filled", filled(nbs), log_figures=True, replay_cache=replay_cache),
               "filled_zh": Run(base / "filled_zh", filled(zh), log_figures=True, replay_cache=replay_cache),
               "stub": Run(base / "stub", {**stubs, **pasted}, replay_cache=replay_cache)}
    wait_all(started.values())
    for k, r in started.items():
        print(f"nbval {k}: {len(r.names)} notebooks in {r.wall:.1f} s wall, {r.cpu:.1f} CPU s")
        for nb, secs in sorted(r.seconds_per_notebook().items()):
            print(f"    {nb}: {secs:.1f} s")
    return started


def _check_cell_indices(nb, kind="check"):
    """``{code cell index: TODO name}`` for the check cells of `nb` (``practice-check``: notebook 08's)."""
    out = {}
    for i, cell in enumerate(code_cells(nb)):
        for tag in cell_tags(cell):
            k, _, name = tag.partition(":")
            if k == kind:
                out[i] = name
    return out


def _graded_check_cells(nb):
    """The check cells that stop Run All on a stub: all but the optional TODOs' (those only say
    "not attempted", tests/test_course_checks.py)."""
    return {i: n for i, n in _check_cell_indices(nb).items() if n not in OPTIONAL_TODO_METHODS}


# --------------------------------------------------------------------------- executed


def test_the_runs_kernels_use_unix_sockets_and_each_run_is_timed_alone(tmp_path):
    """Before: three runs side by side started kernels on TCP ports, and one died on a port another
    run had taken ("Kernel died before replying to kernel_info", a CI failure). Two runs side by
    side here, the slower one (4 s more) waited for first: each is timed to its own end (before,
    the quick one was timed as ending with the slow one)."""
    import nbformat

    transport = ("import json\nfrom ipykernel import get_connection_info\n"
                 "assert json.loads(get_connection_info())['transport'] == 'ipc'")
    slow = Run(tmp_path / "slow", {"slow.ipynb": nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(transport), nbformat.v4.new_code_cell("import time\ntime.sleep(4)")])})
    quick = Run(tmp_path / "quick", {"quick.ipynb": nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(transport)])})
    wait_all([slow, quick])
    for run in (slow, quick):
        assert run.returncode == 0 and not run.failed_cells(), run.output[-2000:]
    assert quick.wall < slow.wall - 1, (quick.wall, slow.wall)


@pytest.mark.parametrize("edition", ["filled", "filled_zh"])
def test_filled_notebooks_pass_every_cell(runs, edition):
    run = runs[edition]
    assert run.returncode == 0 and not run.failed_cells(), run.output[-6000:]
    ran = {r["nodeid"].partition("::")[0] for r in run.records}
    assert ran == set(run.names), "some notebook did not run"


def test_filled_zh_notebooks_show_no_english_prose(runs):
    # Everything a zh learner reads below a cell (printed lines, tables, rich reprs, progress
    # text) is Chinese, up to code words (tests/english_prose.py). One exception, kept English on
    # purpose: the chapter's given code raises in English, and the grader compares exception
    # text between its own process and the learner's kernel, which may run in different languages.
    outputs = runs["filled_zh"].zh_outputs()
    assert set(outputs) == {ZH_PREFIX + p.name for p in ZH_NOTEBOOKS}, "a zh notebook showed nothing"
    english = []
    for nb, cells in sorted(outputs.items()):
        for i, shown in sorted(cells.items(), key=lambda kv: str(kv[0])):
            for line in output_lines(shown):
                if english_prose(line) and not any(ok in line for ok in KEPT_ENGLISH_ERRORS):
                    english.append(f"{nb} cell {i}: {line.strip()[:160]}")
    assert english == [], "\n".join(english)


def answer_files(folder):
    """The saved answers in `folder` (hint progress lives there too, in its own file)."""
    return {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json") if p.name != HINTS_FILENAME}


# Cells that plainly draw (the library's plots, or a figure of their own); each must be seen drawing.
DRAWS = re.compile(r"plots\.plot_\w+\(|plt\.subplots\(")


def test_every_plotting_cell_shows_its_figure_in_a_fresh_kernel(runs):
    """Each notebook runs in its own fresh kernel; a cell that creates a figure must display it
    (Run All, as a learner does), and no figure may be left open and unshown after any cell."""
    log = notebook_figures.read(runs["filled"].folder) + notebook_figures.read(runs["filled_zh"].folder)
    drew = [r for r in log if r["figures"]]
    # Shown as an image, or inside a widget the cell displays (the score explorer draws its
    # figure into an Image widget and closes it).
    assert not [r["source"][:200] for r in drew if not r["images"] and not r["widgets"]], "figures never shown"
    assert not [(r["source"][:200], r["open"]) for r in log if r["open"]], "figures left open, unshown"
    assert all(r["interactive"] for r in drew), "a figure turned matplotlib's interactive mode off"
    # The log sees every cell that plainly draws, in both editions (so the checks above are not empty).
    drawn = {r["source"] for r in drew}
    for name, nb in {**runs["filled"].notebooks, **runs["filled_zh"].notebooks}.items():
        for cell in code_cells(nb):
            if DRAWS.search(cell_source(cell)):
                assert cell_source(cell) in drawn, (name, cell_source(cell)[:200])


@pytest.mark.parametrize("edition", ["filled", "filled_zh"])
def test_filled_run_saved_all_five_answers_from_the_kernel(runs, edition):
    # inspect.getsource works on functions defined in notebook cells, and answers carry over.
    saved = answer_files(runs[edition].answers)
    assert set(saved) == set(ALL_TODO_METHODS)
    assert all(r["status"] == "passed" and r["source"].startswith("def ") for r in saved.values())


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_stub_notebooks_fail_exactly_their_check_cells(runs, lang):
    run = runs["stub"]
    failed = run.failed_cells()
    ran = {r["nodeid"].partition("::")[0] for r in run.records}
    assert ran == set(run.names), "some notebook did not run"
    prefix = "" if lang == "en" else ZH_PREFIX  # the notebooks with TODOs (see the module docstring)
    paths = {prefix + p.name: p for p in (NOTEBOOKS if lang == "en" else ZH_NOTEBOOKS) if has_todos(read_notebook(p))}
    assert len(paths) == len(EXERCISE_NOTEBOOKS)
    for name, path in paths.items():
        checks = _graded_check_cells(read_notebook(path))
        practice = _check_cell_indices(read_notebook(path), "practice-check")
        got = failed.get(name, {})
        # A practice check left alone only says "not attempted" (like 05's optional aging), so Run All
        # goes on (before: it raised, and notebook 08's last 14 cells never ran in a browser).
        assert set(got) == set(checks), (name, sorted(got), sorted(checks), run.output[-4000:])
        for i, text in got.items():
            assert NOT_ATTEMPTED[lang] in text and f"lab.hint('{checks[i]}')" in text, (name, i, text[-800:])
        if lang == "zh":  # the stub run keeps the zh cells' outputs: the line is there, in Chinese
            shown = run.zh_outputs().get(name, {})
            for i in practice:
                text = "".join(o.get("text", "") for o in shown.get(i, []))
                assert NOT_ATTEMPTED[lang] in text and "不影响后面" in text, (name, i, shown.get(i))


def test_pasting_the_chapters_answer_turns_exactly_its_check_green(runs):
    run = runs["stub"]
    failed = run.failed_cells()
    pasted = [name for name in run.names if name.startswith("paste_")]
    assert len(pasted) == len(ALL_TODO_METHODS)
    passed = {r["nodeid"] for r in run.records if r["when"] == "call" and r["outcome"] == "passed"}
    for name in pasted:
        todo = re.match(r"paste_(\w+?)__", name).group(1)
        nb = read_notebook(run.folder / name)
        should_fail = {i for i, n in _graded_check_cells(nb).items() if n != todo}
        assert set(failed.get(name, {})) == should_fail, (name, failed.get(name), run.output[-4000:])
        # The copy ends at its own check cell, and that cell ran and passed.
        (check,) = [i for i, n in _check_cell_indices(nb).items() if n == todo]
        assert check == len(code_cells(nb)) - 1 and f"{name}::Cell {check}" in passed, (name, check)
    # Only the pasted answers were saved (untouched stubs never save), and each of them passes.
    saved = {name: record["status"] for name, record in answer_files(run.answers).items()}
    assert saved == {todo: "passed" for todo in ALL_TODO_METHODS}


# --------------------------------------------------------------------------- static


def test_each_notebook_that_reads_saved_answers_runs_as_shipped_somewhere():
    """The stub run holds only the notebooks with TODOs; one without that reads saved answers
    behaves differently without them, and must then be among test_colab_sim.py's notebooks."""
    from colab_env import SIM_NOTEBOOKS

    reading = {p.name for p in NOTEBOOKS if not has_todos(read_notebook(p))
               and any(READS_ANSWERS.search(cell_source(c)) for c in code_cells(read_notebook(p)))}
    assert "06_capstone.ipynb" in reading  # the pattern sees lab.my_scheduler()
    assert reading <= set(SIM_NOTEBOOKS), sorted(reading - set(SIM_NOTEBOOKS))


@pytest.mark.parametrize("path", NOTEBOOKS + ZH_NOTEBOOKS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_notebook_is_committed_clean(path):
    nb = read_notebook(path)
    assert nb["nbformat"] == 4 and nb["metadata"]["kernelspec"]["name"] == "python3"
    # Before: kernelspec "Python 3" and language_info {"name": "python"}, which JupyterLab rewrites
    # as the kernel starts, so every notebook showed as modified the moment it opened.
    assert {k: nb["metadata"].get(k) for k in NOTEBOOK_METADATA} == NOTEBOOK_METADATA
    assert path.read_text(encoding="utf-8") == notebook_text(nb), "not laid out as JupyterLab saves it"
    for cell in code_cells(nb):
        assert cell.get("outputs") == [] and cell.get("execution_count") is None, cell_source(cell)[:80]


def _stub_not_attempted(name, source):
    return grade(name, load_method(name, source)).status == "not attempted"


def _practice_not_attempted(name, source):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check_practice(name, load_practice(name, source))
    return out.getvalue().startswith(f"⬜ {name}")


# TODO kind -> (its check cells' kind, name -> function, the check call, "the stub is not attempted")
TODO_KINDS = {
    "todo": ("check", ALL_TODO_METHODS, 'lab.check("{name}", {fn})', _stub_not_attempted),
    "practice": ("practice-check", PRACTICE_FUNCTIONS, 'check_practice("{name}", {fn})', _practice_not_attempted),
}


@pytest.mark.parametrize("path", NOTEBOOKS + ZH_NOTEBOOKS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
@pytest.mark.parametrize("kind", TODO_KINDS)
def test_every_todo_cell_is_followed_by_its_check_cell(path, kind):
    check_kind, functions, call, not_attempted = TODO_KINDS[kind]
    nb = read_notebook(path)
    cells = nb["cells"]
    for name, idx in tagged_cells(nb, kind).items():
        assert name in functions and len(idx) == 1, (name, idx)
        nxt = cells[idx[0] + 1]
        assert nxt["cell_type"] == "code" and cell_tags(nxt) == [f"{check_kind}:{name}"], (name, cell_tags(nxt))
        assert cell_source(nxt).strip() == call.format(name=name, fn=functions[name])
        assert not_attempted(name, cell_source(cells[idx[0]]))
    assert set(tagged_cells(nb, check_kind)) == set(tagged_cells(nb, kind))


def test_the_capstone_stays_a_capstone():
    """Notebook 06's prose had grown to 10,700 characters; reference material goes to docs/
    (policy-notes.md), and the notebook keeps what its own cells show."""
    prose = sum(len(cell_source(c)) for c in read_notebook(ROOT / "notebooks" / "06_capstone.ipynb")["cells"]
                if c["cell_type"] == "markdown")
    assert prose <= 10_000, f"06_capstone.ipynb has {prose:,} characters of prose (at most 10,000)"


def test_the_series_has_each_of_the_five_todos_exactly_once():
    seen = []
    for path in NOTEBOOKS:
        for name, idx in tagged_cells(read_notebook(path), "todo").items():
            seen += [name] * len(idx)
    assert sorted(seen) == sorted(ALL_TODO_METHODS)


def test_optional_todos_stay_out_of_what_the_grader_reads():
    # The grader reads `todo_sources` and the five-method reference: the optional TODO adds no points.
    for path in NOTEBOOKS:
        assert set(todo_sources(read_notebook(path))) <= set(TODO_METHODS)
    assert set(reference_sources()) == set(TODO_METHODS)
    assert set(reference_sources(optional=True)) == set(ALL_TODO_METHODS)
    assert not set(OPTIONAL_TODO_METHODS) & set(TODO_METHODS)


def test_every_notebook_opens_with_the_same_setup_cell():
    first = {p.name: cell_source(code_cells(read_notebook(p))[0]) for p in NOTEBOOKS}
    setup = first["00_setup_and_tour.ipynb"]
    assert len(re.findall(r'^REPO_URL = "https://github\.com/[\w.-]+/[\w.-]+"$', setup, re.M)) == 1
    assert "--no-deps" in setup and "import kvsched_lab.course as lab" in setup
    assert {name for name, src in first.items() if src != setup} == set()


def test_every_zh_notebook_opens_with_the_same_setup_cell_selecting_chinese():
    first = {p.name: cell_source(code_cells(read_notebook(p))[0]) for p in ZH_NOTEBOOKS}
    assert set(first) == {p.name for p in NOTEBOOKS}
    setup = first["00_setup_and_tour.ipynb"]
    # The language is set before the report line, so that line is Chinese too.
    assert setup.endswith('\nlab.set_language("zh")\nlab.report_setup(installed_from, answers_on_drive=ANSWERS_ON_DRIVE)')
    assert "import kvsched_lab.course as lab" in setup
    assert {name for name, src in first.items() if src != setup} == set()


def _solution_lines():
    """The before-stop hook's rule: a 28+ character code line of solutions/ must not be in a notebook."""
    out = set()
    for p in (ROOT / "solutions").rglob("*.py"):
        for line in p.read_text().splitlines():
            s = line.strip()
            if len(s) < 28 or s.startswith(("#", "import ", "from ", "def ", "class ", '"""', "'''", "@",
                                            "return [(")):
                continue
            out.add(re.sub(r"\s+", " ", s))
    return out


@pytest.mark.parametrize("path", NOTEBOOKS + ZH_NOTEBOOKS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_notebook_holds_no_reference_solution_line(path):
    sol = _solution_lines()
    leaked = {re.sub(r"\s+", " ", line.strip()) for cell in code_cells(read_notebook(path))
              for line in cell_source(cell).splitlines()} & sol
    assert not leaked, leaked


# Closing punctuation (ASCII and full-width) that print's separator would put a space before.
CLOSING_PUNCTUATION = tuple(")],.;:!?）】，。；：！？、")


def spaced_punctuation(source: str):
    """The print() calls in `source` that pass a string starting with closing punctuation after
    another argument: print("says:", ok, ")") shows "says: True )", the separator before the ")"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
            for arg in node.args[1:]:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith(CLOSING_PUNCTUATION):
                    found.append(ast.get_source_segment(source, node))
    return found


def test_spaced_punctuation_finds_a_separator_before_a_closing_bracket():
    assert spaced_punctuation('print("(same:", ok, ")")') == ['print("(same:", ok, ")")']
    assert spaced_punctuation('print(f"(same: {ok})")\nprint("a", "| b")\nprint(").")') == []


@pytest.mark.parametrize("path", NOTEBOOKS + ZH_NOTEBOOKS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_no_print_puts_a_space_before_closing_punctuation(path):
    found = [call for cell in code_cells(read_notebook(path))
             for call in spaced_punctuation("\n".join(l for l in cell_source(cell).splitlines() if not l.startswith(("%", "!"))))]
    assert not found, found


@pytest.mark.parametrize("folder", ["notebooks", "notebooks/zh"])
def test_notebook_09_breakeven_table_is_shown_as_a_table(folder):
    """Notebook 09's break-even table (cell nb09-19, pure arithmetic) is displayed as a real table
    (HTML in Jupyter and Colab, where padded text drifts under Chinese glyphs): a row per model,
    as many cells as headers, the numbers right-aligned; its plain text still lines up."""
    import contextlib
    import io

    import kvsched_lab.course as lab
    from kvsched_lab.i18n.width import display_width
    from kvsched_lab.kv.tiers.breakeven import LINKS, breakeven_table

    nb = read_notebook(next((ROOT / folder).glob("09_*.ipynb")))
    source = next(cell_source(c) for c in nb["cells"] if c.get("id") == "nb09-19")
    shown = []
    with contextlib.redirect_stdout(io.StringIO()):
        exec(source, {"lab": lab, "display": shown.append})
    tables = [t for t in shown if isinstance(t, lab.Table)]
    assert len(tables) == 1, shown
    table = tables[0]
    assert len(table.headers) == 4 + len(LINKS) and len(table.rows) == len(breakeven_table("H100 SXM"))
    assert table.numeric == (False,) + (True,) * (3 + len(LINKS))  # model names left, every number right
    html = table._repr_html_()
    assert html.count("<tr>") == 1 + len(table.rows) and 'style="text-align:right">' in html
    header, *rows = table.to_text().splitlines()
    assert {display_width(r) for r in rows} == {display_width(header)}, [header] + rows
