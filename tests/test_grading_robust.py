"""One learner's file can never take the batch down, and an instructor's mistake fails before any work.

Issue 19, items 1, 2, 5, 9 and 10, tested without a sandbox (each test says what happened before
its fix): reading learner files as untrusted data (learner_files.py, submissions.py, intake.py),
writing learner text anywhere (writers.py, reports.py), the grading notebook made of grader
constants only, and ``kvsched grade``'s checks of its own arguments (command.py). The sandboxed
side of the same items is in tests/test_grading_attacks.py.
"""
from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import pytest

from kvsched_lab.grading import grade_main
from kvsched_lab.grading.batch.batch import _read_learner
from kvsched_lab.grading.batch.grade import Grade, _grading_notebook, feedback_text, write_reports
from kvsched_lab.grading.learner.intake import MAX_FILE_BYTES, discover
from kvsched_lab.grading.learner.learner_files import MAX_CELLS
from kvsched_lab.grading.judging.stubs import known_stubs
from kvsched_lab.grading.judging.submissions import UNTAGGED, load
from kvsched_lab.grading.judging.verdict import Reference, TodoGrade
from kvsched_lab.grading.learner.writers import csv_cell, display_name, feedback_file_name, inline
from kvsched_lab.sim.scheduler import TODO_METHODS

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
import variants as v  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TODOS = list(TODO_METHODS)
STUBS = known_stubs()
# Notebooks of the shapes a careless export or a hostile student produces (before: AttributeError/TypeError).
MALFORMED = {
    "string-cell": {"cells": ["x"]},
    "null-cell": {"cells": [None]},
    "metadata-list": {"cells": [{"cell_type": "code", "source": "", "metadata": []}]},
    "int-tag": {"cells": [{"cell_type": "code", "source": "", "metadata": {"tags": [3]}}]},
    "source-ints": {"cells": [{"cell_type": "code", "source": [1, 2], "metadata": {}}]},
    "top-level-list": [{"cell_type": "code", "source": ""}],
    "cells-a-dict": {"cells": {"0": {}}},
}


def _grade(name: str, error: str = "", line: str = "") -> Grade:
    todos = {t: TodoGrade("failed", lines=[line] if line else []) for t in TODOS}
    return Grade(name, todos, error=error)


# --------------------------------------------------------------------------- item 1: one file, one row

@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_notebooks_are_that_learners_error(tmp_path, name):
    path = tmp_path / f"{name}.ipynb"
    path.write_text(json.dumps(MALFORMED[name]))
    sub = load(path.name, path, STUBS)
    assert sub.error and sub.todos == {}, (name, sub)


def test_null_tags_are_no_tags(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "source": v.REF["score"], "metadata": {"tags": None}}]}))
    sub = load(path.name, path, STUBS)
    assert not sub.error and sub.todos["score"].status == UNTAGGED


def test_deep_json_and_a_parser_overflow_are_errors_not_crashes(tmp_path):
    deep = tmp_path / "deep.ipynb"
    deep.write_text("[" * 100_000 + "]" * 100_000)  # before: RecursionError out of load()
    assert "nested too deeply" in load(deep.name, deep, STUBS).error
    chain = tmp_path / "chain.py"
    chain.write_text("x = " + "+".join(["1"] * 100_000) + "\n")  # before: RecursionError before any grading
    assert "nested too deeply to parse" in load(chain.name, chain, STUBS).error
    minus = tmp_path / "minus.py"
    minus.write_text("x = " + "-" * 200_000 + "1\n")  # before: MemoryError
    assert load(minus.name, minus, STUBS).error
    cell = tmp_path / "cell.ipynb"
    cell.write_text(json.dumps(v.notebook([("def _score(self, h, s, l):\n    return " + "+".join(["1"] * 100_000),
                                            ["todo:score"])])))
    sub = load(cell.name, cell, STUBS)
    assert sub.todos["score"].status == "error" and "nested too deeply" in sub.todos["score"].detail


def test_a_reader_failure_no_check_foresaw_is_still_one_row(tmp_path, monkeypatch):
    from kvsched_lab.grading.batch import batch

    (tmp_path / "ok.py").write_text(v.py_submission({}))
    learner = discover([str(tmp_path / "ok.py")])[0]
    monkeypatch.setattr(batch, "load", lambda *a: (_ for _ in ()).throw(RecursionError("deep")))
    sub = _read_learner(learner, tmp_path / "copy", Reference([], {}, {}, STUBS))
    assert sub.error == "the submission could not be read (RecursionError)"


def test_writers_survive_surrogates_and_controls(tmp_path):
    """Before: a lone surrogate in an exception message (``ValueError("bad \\udcff")``) or a file name
    that is not UTF-8 crashed the batch after every sandbox ran (UnicodeEncodeError, no grades.csv)."""
    grades = [_grade("caf\udce9.py", line="ValueError: bad \udcff"), _grade("x\x1b[31m.py", error="bad \udcff\u202e")]
    digest = write_reports(grades, tmp_path)
    data = (tmp_path / "grades.csv").read_bytes()
    assert len(digest) == 64 and data.decode("utf-8")
    assert "\udcff" not in data.decode("utf-8") and "\u202e" not in data.decode("utf-8") and "\x1b" not in data.decode()
    assert len(list((tmp_path / "feedback").glob("*.md"))) == 2
    assert display_name(os.fsdecode(b"caf\xe9.py")) == "caf\\xe9.py"


# --------------------------------------------------------------------------- item 2: learner text is data

def test_the_grading_notebook_holds_grader_constants_only():
    """Before: the origin (a file name) went into a comment of the generated cell; a name with
    U+2028 ended the comment in IPython and ran code in the grading kernel."""
    nb = _grading_notebook(["score", "snapshot"], "grading-config.json")
    sources = [c["source"] for c in nb["cells"]]
    assert sources[1:] == ["# Grader cell for TODO score\n_kvh.grade_todo('score')",
                           "# Grader cell for TODO snapshot\n_kvh.grade_todo('snapshot')"]
    with pytest.raises(ValueError):
        _grading_notebook(["x\u2028_kvh.watch=None#"], "grading-config.json")


# --------------------------------------------------------------------------- item 5: spoofing

def test_feedback_shows_learner_text_and_renders_none_of_it():
    """Before: exception text reached the feedback outside code fences (HTML, a fake "Total: 100/100"
    heading, links) in the "could not be loaded" and "N cases raised" lines."""
    from kvsched_lab.grading.judging.verdict import judge

    ref = Reference([{"name": "c", "family": "f", "phases": []}], {t: [[]] for t in TODOS}, {t: [0] for t in TODOS}, STUBS)
    spoof = "x\n\n# Total: 100 / 100\n<img src=x onerror=alert(1)> [link](http://evil)"
    g = Grade("## Total: 100 / 100", {t: judge(t, {"load": spoof}, ref) for t in TODOS}, review=[spoof])
    text = feedback_text(g)
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings[0].startswith("# Feedback: `") and all(h.startswith(("# Feedback", "## ")) for h in headings)
    assert not any("Total: 100 / 100" in h and not h.startswith("# Feedback: `") for h in headings), headings
    for line in text.splitlines():
        if "<img" in line or "[link]" in line:
            assert line.count("`") >= 2, line  # inside a code span
    assert inline("a`b") == "`` a`b ``"


def test_feedback_file_names_are_injective_and_csv_cells_are_inert():
    """Before: ``a b.py`` took the feedback file of ``a_b.py`` (the honest one got ``-2.md``);
    U+202E stayed in grades.csv; a name starting with a newline, a space or ``＝`` was a formula."""
    names = ["a b.py", "a_b.py", "a%20b.py", "caf\udce9.py", "caf\\xe9.py", ".hidden", "%2Ehidden", "学生.ipynb",
             "x\u2028y.py", "x?y.py", "a" * 400, "a" * 399 + "b"]
    assert len({feedback_file_name(n, set()) for n in names}) == len(names)
    for cell in ("=1+1", "\n=1+1", " =1+1", "\uff1d1+1", "+1", "-1", "@SUM(A1)", "\t=1"):
        assert csv_cell(cell).startswith("'"), cell
    assert csv_cell("\u202eabc") == "?abc" and csv_cell("ok") == "ok"


# --------------------------------------------------------------------------- item 9: intake rules

def test_an_oversized_notebook_without_a_todo_is_skipped_and_named(tmp_path):
    """Before: notebook 06 with its plots (over 4 MiB) gave the whole learner 0, error."""
    learner_dir = v.write_series(tmp_path / "class" / "ann", v.REF)
    plots = v.notebook([("print('plots')", [])])
    plots["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x" * (MAX_FILE_BYTES + 10)}]
    (learner_dir / "06_plots.ipynb").write_text(json.dumps(plots))
    big_todo = v.notebook([(v.REF["score"] + "#" * (MAX_FILE_BYTES + 10), ["todo:score"])])
    (v.write_series(tmp_path / "class" / "bob", v.REF) / "07_big.ipynb").write_text(json.dumps(big_todo))
    learners = {x.name: x for x in discover([str(tmp_path / "class")])}
    ref = Reference([], {}, {}, STUBS)
    ann = _read_learner(learners["ann"], tmp_path / "copy-ann", ref)
    assert not ann.error and learners["ann"].skipped == ["06_plots.ipynb"]
    assert all(t.status == "run" for t in ann.todos.values())
    bob = _read_learner(learners["bob"], tmp_path / "copy-bob", ref)
    assert bob.error == "07_big.ipynb is larger than 4 MiB", "a big notebook holding a TODO is never skipped"
    text = feedback_text(Grade("ann", {t: TodoGrade("passed", 20) for t in TODOS}, skipped=["06_plots.ipynb"]))
    assert "Not read: ` 06_plots.ipynb ` (larger than 4 MiB, with no todo: tag in its first 4 MiB)." in text


def test_two_different_attempts_at_one_todo_are_a_review_naming_both(tmp_path):
    """Before: ``05.ipynb`` (wrong) and ``05 (copy).ipynb`` (fixed): the wrong one graded, status ok."""
    folder = tmp_path / "eve"
    folder.mkdir()
    wrong = v.graded_wrong("snapshot")[0].source
    (folder / "05.ipynb").write_text(json.dumps(v.notebook([(wrong, ["todo:snapshot"])])))
    (folder / "05 (copy).ipynb").write_text(json.dumps(v.notebook([(v.REF["snapshot"], ["todo:snapshot"])])))
    sub = load("eve", folder, STUBS)
    assert sub.review == ["snapshot has 2 different attempts (05 (copy).ipynb, cell 2; 05.ipynb, cell 2): "
                          "graded the last, 05.ipynb, cell 2"]  # v.notebook puts a setup cell first
    same = tmp_path / "fay"
    same.mkdir()
    for name in ("05.ipynb", "05 (copy).ipynb"):  # the same code twice is no ambiguity
        (same / name).write_text(json.dumps(v.notebook([(v.REF["snapshot"], ["todo:snapshot"])])))
    assert load("fay", same, STUBS).review == []


def test_a_deleted_tag_shows_in_the_status(tmp_path):
    """Before: a ``todo:entry`` tag deleted, the code right: 80 and status ``ok``."""
    folder = v.write_series(tmp_path / "gus", v.REF)
    nb = json.loads((folder / "04_evict.ipynb").read_text())
    for cell in nb["cells"]:
        if "todo:entry" in cell["metadata"].get("tags", []):
            cell["metadata"]["tags"] = []
    (folder / "04_evict.ipynb").write_text(json.dumps(nb))
    sub = load("gus", folder, STUBS)
    g = Grade("gus", {t: TodoGrade(sub.todos[t].status if sub.todos[t].status != "run" else "passed") for t in TODOS})
    assert g.status == f"entry: {UNTAGGED}"


def test_cells_and_files_per_learner_are_bounded(tmp_path):
    """Before: a 22,000-cell notebook cost 11 s of serial intake before grading started."""
    path = tmp_path / "many.ipynb"
    path.write_text(json.dumps(v.notebook([("x = 1", [])] * (MAX_CELLS + 1))))
    assert load(path.name, path, STUBS).error == f"many.ipynb has {MAX_CELLS + 2} cells (at most {MAX_CELLS} are read)"
    folder = tmp_path / "hoarder"
    folder.mkdir()
    for k in range(41):
        (folder / f"{k:02d}.ipynb").write_text("{}")
    assert discover([str(folder.parent)])[0].error.startswith("the folder holds 41 notebooks and .py files")


# --------------------------------------------------------------------------- item 10: instructor mistakes

@pytest.mark.parametrize("mistake", ["missing", "empty", "out-is-file", "out-not-empty", "jobs-0", "jobs-99"])
def test_instructor_mistakes_fail_before_any_grading(tmp_path, capsys, mistake):
    """Before: each exited 0 (a typo became a student scoring 0), crashed after grading, or
    silently overwrote an earlier run."""
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "ref.py").write_text(v.py_submission({}))
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "grades.csv").write_text("old")
    args = {"missing": [str(tmp_path / "clas"), "--out", str(tmp_path / "o")],
            "empty": [str(tmp_path / "empty"), "--out", str(tmp_path / "o")],
            "out-is-file": [str(tmp_path / "class"), "--out", str(tmp_path / "file")],
            "out-not-empty": [str(tmp_path / "class"), "--out", str(tmp_path / "old")],
            "jobs-0": [str(tmp_path / "class"), "--out", str(tmp_path / "o"), "--jobs", "0"],
            "jobs-99": [str(tmp_path / "class"), "--out", str(tmp_path / "o"), "--jobs", "99"]}[mistake]
    assert grade_main(args + ["--no-sandbox"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvsched grade: ") and "Traceback" not in err, err
    assert not (tmp_path / "o").exists() and (tmp_path / "old" / "grades.csv").read_text() == "old"


def test_force_replaces_an_earlier_run_and_names_are_relative(tmp_path, capsys):
    """`--force` removes the earlier grades.csv and feedback (no stale file left); rows, feedback names
    and the feedback header name the submission relative to its class folder."""
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "stub.py").write_text(v.py_submission({t: v.stub(t) for t in TODOS}))
    out = tmp_path / "out"
    (out / "feedback").mkdir(parents=True)
    (out / "feedback" / "gone-student.md").write_text("stale")
    (out / "grades.csv").write_text("stale")
    assert grade_main([str(tmp_path / "class"), "--out", str(out), "--force", "--no-sandbox", "--timeout", "5"]) == 0
    assert sorted(p.name for p in (out / "feedback").iterdir()) == ["stub.py.html", "stub.py.md"], "the stale one is gone"
    rows = list(csv.DictReader(open(out / "grades.csv", encoding="utf-8")))
    assert [r["submission"] for r in rows] == ["stub.py"]
    assert str(tmp_path) not in (out / "grades.csv").read_text() + (out / "feedback" / "stub.py.md").read_text()
    (out / "notes.txt").write_text("mine")
    assert grade_main([str(tmp_path / "class"), "--out", str(out), "--force", "--no-sandbox"]) == 2, \
        "--force never removes files it did not write"


# ------------------------------------------------------------------ kernels side by side
KERNEL_TRANSPORT_CELL = """import json, os
from ipykernel import get_connection_info
info = json.loads(get_connection_info())
open("transport.json", "w").write(json.dumps(info))
assert info["transport"] == "ipc" and os.path.isabs(info["ip"]), info
"""


def test_grading_kernels_talk_over_unix_sockets_of_their_own(tmp_path):
    """Before: nbval's kernels took TCP ports that jupyter_client had bound and released; a job
    running beside it took one in between and the kernel died before replying (CI: "Kernel died
    before replying to kernel_info"), which the grader reads as the learner's code killing it."""
    import nbformat

    from kvsched_lab.grading.kernel.nbrun import run_nbval

    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(KERNEL_TRANSPORT_CELL)]),
                   str(tmp_path / "t.ipynb"))
    outcomes, tail = run_nbval([tmp_path / "t.ipynb"], tmp_path, ROOT, cell_timeout=60, wall_timeout=120)
    assert outcomes == {"t.ipynb::Cell 0": ("passed", "")}, tail
    ip = json.loads((tmp_path / "transport.json").read_text())["ip"]
    assert not Path(ip).parent.exists(), "the sockets' folder outlives the run"


def test_a_socket_folder_too_long_for_an_address_keeps_tcp(monkeypatch, tmp_path):
    import tempfile

    import nbval.kernel

    from kvsched_lab.grading.kernel.nbrun import IpcKernels

    original = nbval.kernel.KernelManager
    for parent, ipc in ((tmp_path / ("x" * 120), False), (tmp_path, True)):
        parent.mkdir(exist_ok=True)
        monkeypatch.setattr(tempfile, "tempdir", str(parent))
        plugin = IpcKernels()
        plugin.pytest_sessionstart()
        try:
            assert (nbval.kernel.KernelManager is not original) == ipc, parent
        finally:
            plugin.pytest_sessionfinish()
        assert nbval.kernel.KernelManager is original and not Path(plugin.folder).exists()


def test_a_release_warns_when_the_queues_cpu_table_no_longer_describes_a_notebook(tmp_path):
    """`kvsched release` queues its notebooks by a fixed table of CPU seconds (NOTEBOOK_CPU_S): a new
    long notebook, counted as short, would queue last and end the run on it. Its measured time,
    far past the expected, is a warning naming the table; a time within the table's is none."""
    import io

    from kvsched_lab.grading.release.release_nbval import _Pool, _Progress

    rels = ["notebooks/07_beat_lru_challenge.ipynb", "notebooks/11_new.ipynb", "notebooks/zh/11_new.ipynb"]
    for rel in rels:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": "1"}]}))
    pool = _Pool(tmp_path, tmp_path, tmp_path / "runs", rels, 10.0, 1, _Progress(len(rels), io.StringIO()))
    for rel, cpu in zip(rels, (44.0, 31.5, 9.0)):  # 07 as slow as a loaded run makes it; 11 long; its twin short
        pool._ended(rel, {"outcomes": {f"{rel}::Cell 0": ["passed", ""]}, "kernel_cpu": cpu - 0.5,
                          "nbval_cpu": 0.5, "seconds": cpu})
    warnings = {rel: pool.results[rel][1] for rel in rels}
    assert warnings[rels[0]] == [] and warnings[rels[2]] == [], warnings
    assert len(warnings[rels[1]]) == 1 and "31.5 s of CPU" in warnings[rels[1]][0] \
        and "expected 5.0 s" in warnings[rels[1]][0] and "NOTEBOOK_CPU_S" in warnings[rels[1]][0], warnings
