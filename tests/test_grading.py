"""The grader is right: wrong answers lose points in their own TODO only, right ones keep every
point, and misbehaving code gets a clear status without crashing the batch or earning a grade.

All graded submissions go through one `kvsched grade` run (``--jobs 2``, sandboxed where
bubblewrap works, else ``--no-sandbox``), built here as .py files and as tagged notebooks
(tests/grading_cases/variants.py, whose wrong and alternative answers the public checks' tests
use too), so the suite pays for kernels once. Attacks are in test_grading_attacks.py.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional, Tuple

import nbformat
import pytest
from english_prose import english_prose

from kvsched_lab.grading import grade_main
from kvsched_lab.grading.judging.compare import same
from kvsched_lab.grading.learner.intake import discover
from kvsched_lab.grading.box.sandbox import probe
from kvsched_lab.grading.judging.submissions import UNTAGGED, load
from kvsched_lab.grading.judging.stubs import known_stubs
from kvsched_lab.sim.scheduler import TODO_METHODS
from kvsched_lab.course.todos import fill_todos, reference_sources, tagged_cells
from kvsched_lab.notebook_files import read_notebook, write_notebook

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
import variants as v  # noqa: E402

TODOS = list(TODO_METHODS)
ROOT = Path(__file__).resolve().parents[1]
FULL = {t: (20, "passed") for t in TODOS}
LESS = -1  # expected points: fewer than 20 (partial credit by case family), more than none only if it says so
MIXED = v.mixed_rounds()
NOTEBOOK_ROUNDS = 5  # rounds of MIXED graded as notebook series; the rest as .py files
# Sandboxed where bubblewrap can run; elsewhere the same batch runs unsandboxed (rows then say so).
SANDBOX_ARGS = [] if probe()[0] else ["--no-sandbox"]

# Misbehaving TODO code (cell sources); each is graded inside a submission that is otherwise right.
LOOP = """
def _refresh_queue(self, prefix):
    while True:  # swallows the interrupt a notebook timeout would send
        try:
            sum(range(10 ** 9))
        except BaseException:
            pass
"""
RAISES = "def _evict_until_fit(self, needed):\n    raise ValueError('boom')\n"
SYNTAX = "def touch(self, prefix, bytes_):\n    return (\n"
RENAMED = "def snap(self):\n    return []\n"
NOISY = v.REF["score"].replace("    recency =", "    print('x' * 100_000)\n    recency =")
EXITS = "def touch(self, prefix, bytes_):\n    raise SystemExit(3)\n"
DIES = "def snapshot(self):\n    import os\n    os._exit(7)\n"
KILLS_KERNEL = "def snapshot(self):\n    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n"
HOG = "def _score(self, hits, size, last_used):\n    return len(bytearray(16 << 30))\n"
CHEATS = {
    "score": "def _score(self, hits, size, last_used):\n"
             "    from solutions import KVCacheSchedulerSim as R\n"
             "    return R._score(self, hits, size, last_used)\n",
    "heap": "def _refresh_queue(self, prefix):\n"
            "    import kvsched_lab, pathlib\n"
            "    src = (pathlib.Path(kvsched_lab.__file__).parents[1] / 'solutions' / 'scheduler.py').read_text()\n"
            "    ns = {}\n    exec(src, ns)\n    return ns['KVCacheSchedulerSim']._refresh_queue(self, prefix)\n",
    "stale": "def _evict_until_fit(self, needed):\n"
             "    return super(type(self), self)._evict_until_fit(needed)\n",
    "entry": "def touch(self, prefix, bytes_):\n"
             "    import kvsched_lab.grading.judging.compare as c\n    c.same = lambda *a, **k: True\n",
    "snapshot": "def snapshot(self):\n"
                "    import kvsched_lab.grading.kernel.observe as h\n    h.plain = lambda x, depth=0: 'patched'\n    return []\n",
}


def _wrong(w: v.Wrong) -> Tuple[int, Optional[str]]:
    """A wrong answer's expected (points, status). One that raises (variants' "error") may raise only in
    some cases among the grader's stand-ins: then it is "failed" rather than "error" (status None: either)."""
    return (LESS, "failed") if w.grader == "failed" else (LESS, None)


def _mixed(r: int) -> str:
    """The submission that holds round `r` of MIXED."""
    return f"nb-mixed-{r}" if r < NOTEBOOK_ROUNDS else f"mixed-{r}.py"


def _py(root: Path, name: str, methods: Dict[str, str]) -> Path:
    path = root / name
    path.write_text(v.py_submission(methods), encoding="utf-8")
    return path


def _build(root: Path) -> Dict[str, Dict[str, Tuple[int, str]]]:
    """Write every submission under `root`; return the expected (points, status) per TODO."""
    want: Dict[str, Dict[str, Tuple[int, str]]] = {}
    _py(root, "ref.py", {})
    want["ref.py"] = FULL
    (root / "chapter-answered.py").write_text(v.chapter_file(answered=True), encoding="utf-8")
    want["chapter-answered.py"] = FULL
    (root / "chapter-stub.py").write_text(v.chapter_file(answered=False), encoding="utf-8")
    want["chapter-stub.py"] = {t: (0, "not attempted") for t in TODOS}
    (root / "skeleton.py").write_text(v.PY_HEADER + "    pass\n", encoding="utf-8")
    want["skeleton.py"] = {t: (0, "not attempted") for t in TODOS}
    # Every wrong answer and every alternative of tests/grading_cases/variants.py (the public checks'
    # tests use the same ones), a few TODOs per submission: wrong ones fail, the others keep their points.
    # The first rounds are notebook series (wrong and right answers mixed across the notebooks),
    # the others .py files.
    for r, sources in enumerate(MIXED):
        code = {t: src for t, (src, _) in sources.items()}
        if r < NOTEBOOK_ROUNDS:
            v.write_series(root / _mixed(r), code)
        else:
            _py(root, _mixed(r), code)
        want[_mixed(r)] = {t: (20, "passed") if w is None else _wrong(w) for t, (_, w) in sources.items()}
    for k in range(2):
        _py(root, f"alt-{k}.py", {t: alts[k] for t, alts in v.ALTERNATIVES.items()})
        want[f"alt-{k}.py"] = FULL

    # Notebooks: the reference, with check cells edited or deleted (they must not matter).
    ref_dir = v.write_series(root / "nb-ref", v.REF)
    nb = read_notebook(ref_dir / "02_score.ipynb")
    nb["cells"] = [c for c in nb["cells"] if "check:score" not in c.get("metadata", {}).get("tags", [])]
    write_notebook(nb, ref_dir / "02_score.ipynb")
    nb = read_notebook(ref_dir / "03_heap.ipynb")
    for c in nb["cells"]:
        if "check:heap" in c.get("metadata", {}).get("tags", []):
            c["source"] = "raise SystemExit('edited check')"
    write_notebook(nb, ref_dir / "03_heap.ipynb")
    want["nb-ref"] = FULL
    v.write_series(root / "nb-stubs", {})
    want["nb-stubs"] = {t: (0, "not attempted") for t in TODOS}
    # One notebook holding all five; a later untouched copy of a TODO cell does not override the work.
    v.write_series(root / "single", v.REF, layout={"all.ipynb": TODOS + ["score"]})
    nb = read_notebook(root / "single" / "all.ipynb")
    last = tagged_cells(nb, "todo")["score"][-1]
    nb["cells"][last]["source"] = v.stub("score")
    write_notebook(nb, root / "single" / "all.ipynb")
    # A class folder with a notebook directly inside would be one learner's folder: keep it out.
    (root / "single" / "all.ipynb").rename(root.parent / "single.ipynb")
    (root / "single").rmdir()
    want["single.ipynb"] = FULL

    # Misbehaviour.
    broken = v.write_series(root / "nb-broken", {"heap": LOOP, "stale": RAISES, "entry": SYNTAX, "snapshot": RENAMED,
                                                 "score": v.REF["score"]})
    nb = read_notebook(broken / "02_score.ipynb")
    for c in nb["cells"]:
        c.get("metadata", {}).pop("tags", None)  # the learner lost the tag
    write_notebook(nb, broken / "02_score.ipynb")
    want["nb-broken"] = {"score": (0, UNTAGGED), "heap": (0, "timed out"), "stale": (0, "error"),
                         "entry": (0, "error"), "snapshot": (0, "error")}
    noisy = root / "noisy.py"
    noisy.write_text("print('y' * 5_000_000)\n" + v.py_submission({"score": NOISY}), encoding="utf-8")
    want["noisy.py"] = FULL
    _py(root, "exits.py", {"entry": EXITS, "snapshot": DIES})
    want["exits.py"] = {**FULL, "entry": (0, "error"), "snapshot": (0, "error")}
    _py(root, "killer.py", {"snapshot": KILLS_KERNEL})
    want["killer.py"] = {**FULL, "snapshot": (0, "error")}
    _py(root, "hog.py", {"score": HOG})
    want["hog.py"] = {**FULL, "score": (0, "error")}
    _py(root, "cheats.py", CHEATS)
    # super() reaches the grader's stand-in, which is not the answer: no case that counts passes
    want["cheats.py"] = {"score": (0, "error"), "heap": (0, "error"), "stale": (0, "failed"),
                         "entry": (0, "error"), "snapshot": (LESS, "failed")}
    (root / "renamed.py").write_text(v.py_submission({}).replace("class KVCacheSchedulerSim", "class KVSim"))
    want["renamed.py"] = {t: (0, "error") for t in TODOS}
    (root / "syntax.py").write_text("class KVCacheSchedulerSim(:\n    pass\n")
    want["syntax.py"] = {t: (0, "error") for t in TODOS}
    return want


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    root = tmp_path_factory.mktemp("submissions")
    want = _build(root)
    out = tmp_path_factory.mktemp("grades")
    # The class folder itself is the argument: each entry in it is one submission.
    args = [str(root), str(root.parent / "single.ipynb"), "--jobs", "2", "--timeout", "5", *SANDBOX_ARGS]
    code = grade_main(args[:2] + ["--out", str(out)] + args[2:])
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return {"code": code, "rows": {Path(r["submission"]).name: r for r in rows}, "want": want, "out": out,
            "header": rows and list(rows[0]), "args": args}


def _feedback(batch, name: str) -> str:
    return (batch["out"] / "feedback" / (next(p.name for p in (batch["out"] / "feedback").iterdir()
                                              if p.name.endswith(name + ".md")))).read_text()


def test_batch_runs_and_writes_the_documented_columns(batch):
    assert batch["code"] == 0
    assert batch["header"] == ["submission", "score", "heap", "stale", "entry", "snapshot", "total", "status",
                               "graded_total", "overrides"]
    assert set(batch["rows"]) == set(batch["want"]), "every submission is one row, the folders included"


def _check(batch, name: str) -> None:
    row, want = batch["rows"][name], batch["want"][name]
    got = {t: int(row[t]) for t in TODOS}
    assert all(0 <= got[t] < 20 if p == LESS else got[t] == p for t, (p, _) in want.items()), (name, got, row["status"])
    assert int(row["total"]) == sum(got.values())
    text = _feedback(batch, name)
    for t, (_, status) in want.items():
        assert any(f"## {t} ({TODO_METHODS[t]}): {s}," in text for s in ([status] if status else ["error", "failed"])), \
            (name, t, text)


@pytest.mark.parametrize("name", ["ref.py", "chapter-answered.py", "nb-ref", "single.ipynb", "alt-0.py", "alt-1.py"])
def test_reference_and_correct_variants_get_full_marks(batch, name):
    _check(batch, name)
    assert batch["rows"][name]["status"] == "ok"


@pytest.mark.parametrize("name", ["chapter-stub.py", "skeleton.py", "nb-stubs"])
def test_untouched_stubs_get_zero_marked_not_attempted(batch, name):
    _check(batch, name)


@pytest.mark.parametrize("r", range(len(MIXED)))
def test_each_wrong_answer_loses_points_in_its_own_todo_only(batch, r):
    """Each wrong answer scores under 20 on its TODO, naming the failing families and the first
    difference; the correct TODOs beside it keep 20."""
    name = _mixed(r)
    _check(batch, name)
    text = _feedback(batch, name)
    for t, (_, wrong) in MIXED[r].items():
        if wrong is not None and wrong.grader == "failed":  # an "error" shows the exception instead
            section = text.split(f"## {t} (")[1].split("\n## ")[0]
            assert "observed" in section and "its value is not shown" in section, (wrong.name, section)
            assert not any(line.lstrip().startswith("expected ") for line in section.splitlines()), \
                "the reference's value is kept back (no --reveal-expected)"
            assert "Failing: " in section and "By family: " in section, (wrong.name, section)


def test_every_graded_variant_is_in_the_batch():
    graded = [w for t in TODOS for w in v.graded_wrong(t)]
    assert sorted(w for sources in MIXED for _, w in sources.values() if w is not None) == sorted(graded)
    for t in TODOS:
        assert {src for sources in MIXED for src, w in [sources[t]] if w is None} == set(v.ALTERNATIVES[t])


@pytest.mark.parametrize("k", range(NOTEBOOK_ROUNDS))
def test_notebook_series_mixing_wrong_and_right_answers(batch, k):
    """Wrong answers mixed with right ones across a series of notebooks: each TODO is graded alone."""
    assert (batch["want"][f"nb-mixed-{k}"].keys() == set(TODOS)
            and any(w is not None for _, w in MIXED[k].values()) and any(w is None for _, w in MIXED[k].values()))
    _check(batch, f"nb-mixed-{k}")


@pytest.mark.parametrize("name", ["nb-broken", "noisy.py", "exits.py", "killer.py", "hog.py", "cheats.py",
                                  "renamed.py", "syntax.py"])
def test_misbehaving_code_gets_a_clear_status_and_no_unearned_points(batch, name):
    _check(batch, name)


def test_statuses_and_feedback_say_what_happened(batch):
    rows = batch["rows"]
    assert rows["nb-broken"]["status"] == \
        f"score: {UNTAGGED}; heap: timed out; stale: error; entry: error; snapshot: error"
    broken = _feedback(batch, "nb-broken")
    assert "02_score.ipynb, cell 3 defines _score but is not tagged todo:score" in broken
    assert "ran out of time" in broken and "ValueError: boom" in broken
    assert "SyntaxError" in broken and "defines no function named ` snapshot ` (it defines ` snap `)" in broken
    exits = _feedback(batch, "exits.py")
    assert "SystemExit: 3" in exits and "exited with status 7" in exits
    assert "MemoryError" in _feedback(batch, "hog.py")
    assert "printed" in _feedback(batch, "noisy.py")
    assert "defines no class KVCacheSchedulerSim (it defines KVSim)" in _feedback(batch, "renamed.py")
    cheats = rows["cheats.py"]["status"]
    assert "review:" in cheats and "imports solutions" in cheats
    assert "imports kvsched_lab.grading.judging.compare" in cheats
    assert "solutions/scheduler.py" in cheats, "the audit hook reports the open outside the learner's paths"
    text = _feedback(batch, "cheats.py")
    # the box holds no room of grading/ but kernel/: the import fails at the room
    assert "No module named 'solutions'" in text and "No module named 'kvsched_lab.grading.judging'" in text
    assert "No such file" in text  # the reference is not next to the kernel's kvsched_lab
    assert all(r["status"].endswith("unsandboxed") == bool(SANDBOX_ARGS) for r in rows.values())


def test_feedback_shows_no_hidden_code(batch):
    hidden = ((ROOT / "kvsched_lab" / "grading" / "judging" / "cases.py").read_text()
              + (ROOT / "solutions" / "scheduler.py").read_text())
    lines = {ln.strip() for ln in hidden.splitlines() if len(ln.strip()) >= 28 and not ln.strip().startswith("#")}
    for path in (batch["out"] / "feedback").iterdir():
        text = path.read_text()
        leaked = [ln for ln in lines if ln in text]
        # the learner's own code is never echoed either, so the reference's lines cannot appear
        assert not leaked, (path.name, leaked[:3])


def test_class_folder_expansion_and_folder_merging(tmp_path):
    v.write_series(tmp_path / "alice", v.REF)
    (tmp_path / "bob.py").write_text(v.py_submission({}))
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "notes.txt").write_text("not a submission")
    # notebooks directly in the class folder: each is its own learner, never merged
    v.write_series(tmp_path / "tmp", v.REF, layout={"carol.ipynb": ["score"], "dave.ipynb": ["heap"]})
    for p in (tmp_path / "tmp").iterdir():
        p.rename(tmp_path / p.name)
    (tmp_path / "tmp").rmdir()
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "a.py").write_text("x = 1\n")
    (tmp_path / "mixed" / "b.ipynb").write_text("{}")
    (tmp_path / "empty").mkdir()
    learners = {Path(x.name).name: x.error for x in discover([str(tmp_path)])}
    assert list(learners) == ["alice", "bob.py", "carol.ipynb", "dave.ipynb", "empty", "mixed"]
    assert learners["alice"] == learners["bob.py"] == learners["carol.ipynb"] == ""
    assert learners["mixed"].startswith("ambiguous") and "no notebooks" in learners["empty"]
    sub = load("alice", tmp_path / "alice", known_stubs())
    assert {t: s.status for t, s in sub.todos.items()} == {t: "run" for t in TODOS}
    assert sub.todos["stale"].origin == "04_evict.ipynb, cell 3"


def test_float_tolerance_is_relative():
    assert same([1.0, [2.0]], [1.0 + 1e-12, [2.0]])
    assert not same(1.0, 1.0 + 1e-6)
    assert not same(True, 1) and same(3, 3.0)


def test_the_real_course_notebooks(tmp_path):
    """The real notebooks/ filled with the reference get 100; untouched they get 0, not attempted."""
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if not any(tagged_cells(read_notebook(p), "todo") for p in notebooks):
        pytest.skip("notebooks/ has no todo:* cells yet")
    filled, untouched = tmp_path / "class" / "filled", tmp_path / "class" / "untouched"
    for d in (filled, untouched):
        d.mkdir(parents=True)
    for p in notebooks:
        nb = read_notebook(p)
        # The optional aging TODO filled too: it must not add a point (the total stays 100).
        write_notebook(fill_todos(nb, reference_sources(optional=True)), filled / p.name)
        write_notebook(nb, untouched / p.name)
    out = tmp_path / "out"
    assert grade_main([str(tmp_path / "class"), "--out", str(out), "--jobs", "2", *SANDBOX_ARGS]) == 0
    rows = {Path(r["submission"]).name: r for r in csv.DictReader(open(out / "grades.csv"))}
    assert rows["filled"]["total"] == "100" and rows["filled"]["status"] == "ok"
    assert rows["untouched"]["total"] == "0"
    assert "not attempted" in (out / "feedback" / next(p.name for p in (out / "feedback").iterdir()
                                                       if "untouched" in p.name)).read_text()


def test_grading_notebook_is_valid_nbformat(tmp_path):
    from kvsched_lab.grading.batch.grade import _grading_notebook

    nb = _grading_notebook(["score", "heap"], "grading-config.json")
    nbformat.validate(nbformat.reads(json.dumps(nb), as_version=4))


# --------------------------------------------------------------------------- kvsched release

FULL_REPO_URL = "https://github.com/kvsched-lab/kvsched-lab"  # the full repository: never in a bundle
BUNDLE_URL = "https://github.com/kvsched-lab/kvsched-lab-student"


def _course(tmp_path: Path) -> Path:
    """A small course: the series with stub TODO cells and their checks, one cell run with output."""
    nbs = v.write_series(tmp_path / "course", {})
    nb = read_notebook(nbs / "02_score.ipynb")
    nb["cells"][1]["source"] = f'REPO_URL = "{FULL_REPO_URL}"\n' + "".join(nb["cells"][1]["source"])
    nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "setup\n"}]
    nb["cells"][1]["execution_count"] = 3
    nb["cells"][1]["metadata"]["scrolled"] = True
    write_notebook(nb, nbs / "02_score.ipynb")
    (nbs / "zh").mkdir()
    for path in sorted(nbs.glob("*.ipynb")):  # its Chinese edition: the same cells, one string translated
        zh = read_notebook(path)
        zh["cells"][1]["source"] = "".join(zh["cells"][1]["source"]).replace("print('setup')", "print('初始化')")
        write_notebook(zh, nbs / "zh" / path.name)
    return nbs


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """One `kvsched release` (with its nbval verification) shared by the tests below: it is slow."""
    from kvsched_lab.grading import release_main

    base = tmp_path_factory.mktemp("release")
    out = base / "bundle"
    with open(base / "release.log", "w", encoding="utf-8") as log, contextlib.redirect_stdout(log):
        code = release_main([str(out), "--repo-url", BUNDLE_URL, "--notebooks", str(_course(base)), "--timeout", "60"])
    return out, code, base


def test_release_builds_a_bundle_that_verifies_itself(release):
    from kvsched_lab.grading import release_main
    from kvsched_lab.grading.release.release_build import WITHHELD_FILES

    out, code, base = release
    assert code == 0
    assert (out / "kvsched_lab" / "sim" / "scheduler.py").is_file() and (out / "README.md").is_file()
    for doc in ("docs/policy-notes.md", "README.zh.md", "docs/glossary.md"):  # the zh edition's guide and terms too
        assert (out / doc).read_text() == (ROOT / doc).read_text(), doc
    for gone in ("solutions", "tests", "kvsched_lab/grading", *WITHHELD_FILES):
        assert not (out / gone).exists(), gone
    assert set(WITHHELD_FILES) == {"kvsched_lab/sim/policies/seed.py", "kvsched_lab/sim/policies/seed_compact.py"}
    nb = read_notebook(out / "notebooks" / "02_score.ipynb")
    assert all(c.get("outputs", []) == [] and c.get("execution_count") is None for c in nb["cells"]
               if c["cell_type"] == "code")
    assert tagged_cells(nb, "todo") == {"score": [2]}, "tags survive the cleaning"
    assert "".join(nb["cells"][1]["source"]).startswith(f'REPO_URL = "{BUNDLE_URL}"\n'), "setup installs the bundle"
    # The Chinese edition ships too, cleaned and installing from the bundle (and nbval ran it: code 0).
    assert sorted(p.name for p in (out / "notebooks" / "zh").glob("*.ipynb")) == \
        sorted(p.name for p in (out / "notebooks").glob("*.ipynb"))
    zh = read_notebook(out / "notebooks" / "zh" / "02_score.ipynb")
    assert all(c.get("outputs", []) == [] and c.get("execution_count") is None for c in zh["cells"]
               if c["cell_type"] == "code")
    setup = "".join(zh["cells"][1]["source"])
    assert setup.startswith(f'REPO_URL = "{BUNDLE_URL}"\n') and "初始化" in setup and tagged_cells(zh, "todo") == {"score": [2]}
    assert 'include = ["kvsched_lab*"]' in (out / "pyproject.toml").read_text()
    # Each check is named as it starts and as it ends (the Colab-style install runs beside the nbval
    # run, so its end may come among the notebooks'); the nbval run names each notebook as it starts
    # and as it ends, with its verdict and wall time; the last line gives wall and CPU seconds.
    log = (base / "release.log").read_text(encoding="utf-8").splitlines()
    started = [line[len("checking: "):-len(" ...")] for line in log if line.startswith("checking: ")]
    ended = [line[len("checked:  "):].rsplit(": ", 1)[0] for line in log if line.startswith("checked:  ")]
    assert len(started) == 8 and sorted(started) == sorted(ended) and len(set(started)) == 8
    assert "nbval on both editions fails in check cells only" in started
    notebooks = sorted(p.relative_to(out).as_posix() for p in out.glob("notebooks/**/*.ipynb"))
    lines = [line for line in log if line.startswith("  nbval: ")]
    runs = [re.fullmatch(r"  nbval: (\S+) \((\d+) of (\d+)\) (started|ok in (\d+\.\d) s, \d+\.\d s CPU "
                         r"\[(\d+) of \3 done, (?:\d+ min )?[\d.]+ s in\])", line) for line in lines]
    assert all(runs) and len(runs) == 2 * len(notebooks), lines
    assert sorted(m[1] for m in runs if m[4] == "started") == notebooks
    assert sorted(m[1] for m in runs if m[4] != "started") == notebooks
    assert sorted(int(m[6]) for m in runs if m[5]) == list(range(1, len(notebooks) + 1)), "a running count of those done"
    assert "/zh/" not in next(m[1] for m in runs if m[4] == "started"), "the English edition is queued first"
    assert log.index("checking: nbval on both editions fails in check cells only ...") < \
        min(k for k, line in enumerate(log) if line.startswith("  nbval: "))
    assert re.fullmatch(r"took \d+\.\d s wall, \d+\.\d s CPU \(this process and the ones it waited for\), "
                        r"load average \S+ at the start, \S+ at the end", log[-1]), log[-1]
    # Before, the probe of lab.reveal ran in the bundle and left 62 bytecode files in what is shipped.
    assert not list(out.rglob("__pycache__")) and not list(out.rglob("*.pyc")), "no bytecode in the bundle"
    assert release_main([str(out), "--repo-url", BUNDLE_URL, "--notebooks", str(_course(base / "again"))]) == 2, \
        "no silent overwrite"
    assert release_main([str(base / "x"), "--repo-url", 'a" + b', "--notebooks", str(_course(base / "x2"))]) == 2


def test_release_checks_setup_urls_and_the_colab_style_install(release, tmp_path):
    """The checks fail on a setup cell pointing at the full repository and on a bundle that installs
    `solutions` (shown here by putting it back); the real bundle passed both (release code 0)."""
    from kvsched_lab.grading.release.release_checks import colab_install, setup_cell_urls

    out, code, _ = release
    assert code == 0 and setup_cell_urls(out, BUNDLE_URL) == []
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    path = bad / "notebooks" / "02_score.ipynb"
    path.write_text(path.read_text().replace(BUNDLE_URL, FULL_REPO_URL))
    assert any(FULL_REPO_URL in p for p in setup_cell_urls(bad, BUNDLE_URL))
    shutil.copytree(ROOT / "solutions", bad / "solutions", ignore=shutil.ignore_patterns("__pycache__"))
    toml = bad / "pyproject.toml"
    toml.write_text(toml.read_text().replace('include = ["kvsched_lab*"]', 'include = ["kvsched_lab*", "solutions*"]'))
    assert colab_install(bad) == ["`import solutions` works in the Colab-style install",
                                  "lab.reveal does not say the reference is withheld in the Colab-style install"]


def test_release_makefile_has_check_and_no_tests_target(release):
    from kvsched_lab.grading.release.release_checks import forbidden_paths

    out, _, _ = release
    makefile = (out / "Makefile").read_text()
    assert "pytest tests" not in makefile and "\ncheck: setup\n\t$(BIN)/python -m kvsched_lab.cli.selfcheck notebooks" in makefile
    assert "crosscheck" not in makefile and "libcachesim" not in makefile  # a test tool, gone with the tests
    assert "\nlab: setup\n" in makefile, "make lab is kept as it is"
    assert "make check" in (out / "README.md").read_text()
    if shutil.which("make"):
        proc = subprocess.run(["make", "-s", "test"], cwd=out, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and "make check" in proc.stdout, proc.stdout + proc.stderr
        dry = subprocess.run(["make", "-n", "check"], cwd=out, capture_output=True, text=True, timeout=60)
        assert dry.returncode == 0 and "kvsched_lab.cli.selfcheck notebooks" in dry.stdout, dry.stderr
    # the verification catches a withheld file or a tests/ target put back
    shutil.copyfile(ROOT / "kvsched_lab" / "sim" / "policies" / "seed.py", out / "kvsched_lab" / "sim" / "policies" / "seed.py")
    with open(out / "Makefile", "a") as f:
        f.write("\nunit:\n\tpytest tests\n")
    try:
        problems = forbidden_paths(out)
        assert any("kvsched_lab/sim/policies/seed.py is in the bundle (withheld" in p for p in problems), problems
        assert any("Makefile line" in p and "tests/" in p for p in problems), problems
    finally:
        (out / "kvsched_lab" / "sim" / "policies" / "seed.py").unlink()
        (out / "Makefile").write_text(makefile)


_BUNDLE_PROBE = """
import contextlib, io, json, os, sys, tempfile
sys.path.insert(0, {launcher_dir!r})
import kernel_launcher
sys.path.pop(0)
kernel_launcher.isolate({bundle!r})
_answers = tempfile.TemporaryDirectory()  # removed when the probe exits
os.environ["KVSCHED_ANSWERS"] = _answers.name
import kvsched_lab.course as lab
from kvsched_lab.cli import bench_policies
from kvsched_lab.course import leaderboard, plots, widgets
from kvsched_lab.sim.policies import POLICIES, make_policy
from kvsched_lab.sim.traces import synthetic_trace
out = {{"file": lab.__file__, "policies": list(POLICIES), "default": leaderboard.default_policies()}}
try:
    make_policy("seed", 64)
except ValueError as e:
    out["seed_error"] = str(e)
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    cls = lab.my_scheduler()
    out["growth"] = plots.record_heap_growth([[1, 2, 1, 3]], 2)
    out["needs"] = lab.needs_chapter(cls, "a demo")
    out["viewer"] = widgets.heap_viewer() is None
out["fallback"] = [cls is POLICIES["lru"], buf.getvalue()]
speed, heap = bench_policies.bench_speed(synthetic_trace(30, seed=0), 50, 1)
out["bench"] = [sorted(speed["policies"]), sorted(heap["policies"])]
print(json.dumps(out))
"""


def test_bundle_runs_without_the_withheld_seed_policies(release):
    """In a Python that sees only the bundle: no seed, clear errors, an LRU fallback that says so."""
    out, _, _ = release
    code = _BUNDLE_PROBE.format(launcher_dir=str(ROOT / "kvsched_lab" / "grading" / "kernel"), bundle=str(out))
    proc = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=300, cwd=out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["file"].startswith(str(out))
    assert "seed" not in got["policies"] and "seed-compact" not in got["policies"] and "lru" in got["policies"]
    assert "seed" not in got["default"] and "seed-compact" not in got["default"] and "lru" in got["default"]
    assert "withheld in the student release" in got["seed_error"] and "lab.my_scheduler()" in got["seed_error"]
    is_lru, printed = got["fallback"]
    assert is_lru and "FALLBACK" in printed and "'lru'" in printed and "NOT the chapter's scheduler" in printed
    assert got["growth"] == {} and got["needs"] is False and got["viewer"] is True
    assert "skipped seed, seed-compact: withheld" in printed and "skipped a demo" in printed
    speed_rows, heap_rows = got["bench"]
    assert "reference" not in speed_rows and "seed" not in speed_rows and "lru" in speed_rows
    assert set(heap_rows) == {"lfu", "gdsf", "belady"}


def test_release_checks_catch_leaks_dirt_and_failing_cells(tmp_path):
    from kvsched_lab.grading.release.release_build import build_release
    from kvsched_lab.grading.release.release_checks import find_leaks, forbidden_lines, unclean_notebooks
    from kvsched_lab.grading.release.release_nbval import nbval_only_checks_fail

    forbidden = forbidden_lines()
    assert "is_stale = (priority, last_used) != (entry.priority, entry.last_used)" in forbidden
    assert not any("_check_touch" in line or "heappop" in line for line in forbidden), "given code is no leak"
    nbs = _course(tmp_path)
    bundle = build_release(tmp_path / "bundle", nbs, BUNDLE_URL)
    assert find_leaks(bundle, forbidden) == [] and unclean_notebooks(bundle) == []
    # an answer pasted into the package, a run notebook, a failing cell that is not a check
    with open(bundle / "kvsched_lab" / "course" / "__init__.py", "a") as f:
        f.write("\n#    score = reuse_bonus + 0.5 * recency - 0.25 * size_penalty  # oops\n")
    assert any("kvsched_lab/course/__init__.py" in leak for leak in find_leaks(bundle, forbidden))
    shutil.copyfile(nbs / "02_score.ipynb", bundle / "notebooks" / "02_score.ipynb")
    assert unclean_notebooks(bundle) == ["notebooks/02_score.ipynb has outputs, execution counts or run metadata"]
    for p in (bundle / "notebooks").glob("*.ipynb"):
        p.unlink()
    write_notebook(v.notebook([("x = 1", []), ("raise RuntimeError('broken demo')", []),
                               ("assert False", ["check:score"])]), bundle / "notebooks" / "01.ipynb")
    for p in (bundle / "notebooks" / "zh").glob("*.ipynb"):
        p.unlink()
    write_notebook(v.notebook([("x = 1", []), ("raise RuntimeError('broken demo')", []),
                               ("assert False", ["check:score"])]), bundle / "notebooks" / "01.ipynb")
    progress = io.StringIO()
    problems, warnings = nbval_only_checks_fail(bundle, cell_timeout=60, stream=progress)
    assert len(problems) == 1 and "code cell 2 fails with the stubs" in problems[0], problems
    assert warnings == []
    shown = progress.getvalue()
    assert re.search(r"^  nbval: notebooks/01\.ipynb \(1 of 1\) 1 problem\(s\) in \d+\.\d s, \d+\.\d s CPU \[", shown, re.M), shown


def test_release_nbval_names_what_a_notebook_leaves_for_the_next(tmp_path):
    """Each notebook runs in a fresh copy of the bundle, so a file it leaves in the course folder (an
    answer saved from a stub) would reach the next notebooks only in a Run All in order: it is a
    problem, named with the notebook; one that leaves nothing passes, and so does every copy."""
    from kvsched_lab.grading.release.release_build import build_release
    from kvsched_lab.grading.release.release_nbval import nbval_only_checks_fail

    bundle = build_release(tmp_path / "bundle", _course(tmp_path), BUNDLE_URL)
    for p in list((bundle / "notebooks").glob("*.ipynb")) + list((bundle / "notebooks" / "zh").glob("*.ipynb")):
        p.unlink()
    leaves = ("import pathlib\npathlib.Path('kvsched_answers').mkdir()\n"
              "pathlib.Path('kvsched_answers/score.json').write_text('{}')")
    write_notebook(v.notebook([("x = 1", [])]), bundle / "notebooks" / "01.ipynb")
    write_notebook(v.notebook([(leaves, [])]), bundle / "notebooks" / "02.ipynb")
    write_notebook(v.notebook([("x = 1", [])]), bundle / "notebooks" / "zh" / "01.ipynb")
    problems, warnings = nbval_only_checks_fail(bundle, cell_timeout=60, jobs=2, stream=io.StringIO())
    assert problems == ["notebooks/kvsched_answers/score.json was left by the run: a later notebook of a Run All in "
                        "order would read it (a saved answer: the untouched stubs must not save one)"], problems
    assert warnings == [] and not (bundle / "notebooks" / "kvsched_answers").exists(), "the bundle itself is untouched"
    with pytest.raises(ValueError, match="jobs must be at least 1"):
        nbval_only_checks_fail(bundle, cell_timeout=60, jobs=0)


def test_release_nbval_replays_a_library_policy_once_for_both_editions(tmp_path, monkeypatch):
    """All of a release's notebooks share one fresh replay cache: the Chinese notebook's replay of
    a library policy (run after the English one, here one job at a time) loads what the English one
    computed, a learner-style class is computed in both, and a cache the caller had set is neither
    read nor written (a cache folder from elsewhere is never trusted)."""
    pytest.importorskip("kvsched_lab.sim.replay_cache", reason="the replay cache (KVSCHED_REPLAY_CACHE) is not merged")
    from kvsched_lab.grading.release.release_build import build_release
    from kvsched_lab.grading.release.release_nbval import REPLAY_CACHE_ENV, nbval_only_checks_fail

    bundle = build_release(tmp_path / "bundle", _course(tmp_path), BUNDLE_URL)
    for p in list((bundle / "notebooks").glob("*.ipynb")) + list((bundle / "notebooks" / "zh").glob("*.ipynb")):
        p.unlink()
    replays = ("from kvsched_lab.sim.replay import replay\nfrom kvsched_lab.sim.policies import POLICIES\n"
               "from kvsched_lab.sim.traces import synthetic_trace\nreqs = synthetic_trace(60, seed=3)\n"
               "lib = replay(reqs, 'lru', 40)\nmine = replay(reqs, type('Mine', (POLICIES['lru'],), {}), 40)\n"
               "assert (lib.from_cache, mine.from_cache) == (CACHED, False), (lib.from_cache, mine.from_cache)\n"
               "assert lib.prefix_hits == mine.prefix_hits")
    write_notebook(v.notebook([(replays.replace("CACHED", "False"), [])]), bundle / "notebooks" / "01.ipynb")
    write_notebook(v.notebook([(replays.replace("CACHED", "True"), [])]), bundle / "notebooks" / "zh" / "01.ipynb")
    monkeypatch.setenv(REPLAY_CACHE_ENV, str(tmp_path / "callers-cache"))
    problems, warnings = nbval_only_checks_fail(bundle, cell_timeout=60, jobs=1, stream=io.StringIO())
    assert problems == [] and warnings == []
    assert os.environ[REPLAY_CACHE_ENV] == str(tmp_path / "callers-cache") and not (tmp_path / "callers-cache").exists()


def test_release_runs_the_two_editions_side_by_side(tmp_path):
    """Before: one nbval run took the English notebooks, then the Chinese ones. Now the notebooks
    run several at once (here two): each edition's notebook waits for the other's to have started;
    run one after the other, the first would wait in vain and fail; side by side, both pass, and
    every cell of both is reported."""
    from kvsched_lab.grading.release.release_build import build_release
    from kvsched_lab.grading.release.release_nbval import nbval_only_checks_fail

    bundle = build_release(tmp_path / "bundle", _course(tmp_path), BUNDLE_URL)
    for p in list((bundle / "notebooks").glob("*.ipynb")) + list((bundle / "notebooks" / "zh").glob("*.ipynb")):
        p.unlink()
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    for mine, other, folder in (("en", "zh", bundle / "notebooks"), ("zh", "en", bundle / "notebooks" / "zh")):
        wait = (f"import pathlib, time\nhere = pathlib.Path({str(meeting)!r})\n(here / {mine!r}).touch()\n"
                f"deadline = time.time() + 50\nwhile not (here / {other!r}).exists() and time.time() < deadline:\n"
                f"    time.sleep(0.2)\nassert (here / {other!r}).exists(), 'the other edition never started'")
        write_notebook(v.notebook([(wait, []), ("x = 1", [])]), folder / "01.ipynb")
    problems, warnings = nbval_only_checks_fail(bundle, cell_timeout=60, jobs=2)
    assert problems == [] and warnings == []
    assert {p.name for p in meeting.iterdir()} == {"en", "zh"}


def _bundle_with(tmp_path, notebooks):
    """A built bundle whose notebooks (both editions) are exactly `notebooks`: {relative path: cells}."""
    from kvsched_lab.grading.release.release_build import build_release

    bundle = build_release(tmp_path / "bundle", _course(tmp_path), BUNDLE_URL)
    for p in list((bundle / "notebooks").glob("*.ipynb")) + list((bundle / "notebooks" / "zh").glob("*.ipynb")):
        p.unlink()
    for rel, cells in notebooks.items():
        write_notebook(v.notebook(cells), bundle / rel)
    return bundle


def test_release_queue_runs_the_long_notebooks_first():
    """The heavy notebooks first, each Chinese twin after its English one (06's replays load the
    English ones'), the short ones of both editions last; the bundle's order among equals."""
    from kvsched_lab.grading.release.release_build import bundle_notebooks
    from kvsched_lab.grading.release.release_nbval import run_order

    rels = [p.relative_to(ROOT).as_posix() for p in bundle_notebooks(ROOT)]
    order = [rel.replace("notebooks/", "").split("_")[0] for rel in run_order(rels)]
    short = ["00", "01", "02", "03", "04", "05"]
    assert order == ["07", "zh/07", "09", "zh/09", "06", "08", "zh/08", "10", "zh/10", "zh/06", *short,
                     *(f"zh/{n}" for n in short)], order


def test_release_progress_rounds_before_splitting_minutes():
    """Before, 599.96 s showed as "9 min 60.0 s" (a full release's progress line did)."""
    from kvsched_lab.grading.release.release_nbval import minutes

    assert [minutes(s) for s in (0.04, 59.94, 59.96, 61.25, 599.96, 3600.0)] == \
        ["0.0 s", "59.9 s", "1 min 00.0 s", "1 min 01.2 s", "10 min 00.0 s", "60 min 00.0 s"]


def test_release_worker_runs_notebooks_in_turn_each_fresh(tmp_path):
    """Before, every notebook had a pytest process and a copy of the bundle of its own. Now one
    worker (here the only one) runs them in turn, longest first (06 before 01), in one copy: each in
    a new kernel, and after each the copy is put back as the bundle was, so the next notebook finds
    no variable, no file and no edit of the one before; only what a notebook added to the course
    folder is a problem, named in the bundle's order."""
    from kvsched_lab.grading.release.release_nbval import nbval_only_checks_fail

    seen = tmp_path / "seen"
    seen.mkdir()
    record = (f"import os, pathlib\nhere = pathlib.Path({str(seen)!r})\n"
              "(here / NAME).write_text(f'{os.getpid()} {os.getppid()}')")
    meddles = ("import pathlib\nroot = pathlib.Path.cwd().parent\nsecret = 42\n"
               "(root / 'kvsched_lab' / 'course' / '__init__.py').write_text('raise SystemExit')\n"
               "(root / 'README.md').unlink()\n(root / 'extra.txt').write_text('x')\n"
               "(root / 'kvsched_lab' / 'new').mkdir()\n(root / 'notebooks' / 'note.txt').write_text('x')")
    looks = ("import pathlib\nroot = next(p for p in pathlib.Path.cwd().parents if (p / 'kvsched_lab').is_dir())\n"
             "assert 'secret' not in globals()\n"
             "assert (root / 'README.md').is_file() and not (root / 'extra.txt').exists()\n"
             "assert not (root / 'kvsched_lab' / 'new').exists() and not (root / 'notebooks' / 'note.txt').exists()\n"
             "import kvsched_lab.course")
    bundle = _bundle_with(tmp_path, {
        "notebooks/01_looks.ipynb": [(record.replace("NAME", "'01'"), []), (looks, []),
                                     ("pathlib.Path('late.txt').write_text('x')", [])],
        "notebooks/06_meddles.ipynb": [(record.replace("NAME", "'06'"), []), (meddles, [])],
        "notebooks/zh/01_looks.ipynb": [(record.replace("NAME", "'zh01'"), []), (looks, [])]})
    progress = io.StringIO()
    problems, warnings = nbval_only_checks_fail(bundle, cell_timeout=60, jobs=1, stream=progress)
    assert problems == [f"notebooks/{name} was left by the run: a later notebook of a Run All in order would read it"
                        for name in ("late.txt", "note.txt")], problems
    assert warnings == []
    started = re.findall(r"^  nbval: (\S+) \(\d of 3\) started$", progress.getvalue(), re.M)
    assert started == ["notebooks/06_meddles.ipynb", "notebooks/01_looks.ipynb", "notebooks/zh/01_looks.ipynb"]
    pids = {p.name: p.read_text().split() for p in seen.iterdir()}
    assert len({kernel for kernel, _ in pids.values()}) == 3, "a new kernel for every notebook"
    assert len({worker for _, worker in pids.values()}) == 1, "one worker process ran all three"
    assert (bundle / "README.md").is_file() and not (bundle / "extra.txt").exists(), "the bundle itself is untouched"


def test_release_worker_skips_into_another_folder(tmp_path):
    """Two workers: the one that ran zh/07 skips zh/09 (the other took it) and goes on to 00 in the
    English folder. Before, pytest refused to set 00 up there ("previous item was not torn down
    properly": notebooks/zh was still set up), so 00's first cell failed unrun."""
    from kvsched_lab.grading.release.release_nbval import nbval_only_checks_fail

    # Events, not sleeps, order the two workers: zh/07 waits until zh/09 has started (so 09 is taken
    # when 07 ends), and zh/09 until 00 has run (so only 07's worker can take 00).
    seen = tmp_path / "seen"
    seen.mkdir()
    mark = (f"import os, pathlib, time\nhere = pathlib.Path({str(seen)!r})\n"
            "(here / NAME).write_text(str(os.getppid()))\n")
    wait = "deadline = time.monotonic() + 50\nwhile not (here / OTHER).exists() and time.monotonic() < deadline:\n" \
           "    time.sleep(0.05)\nassert (here / OTHER).exists(), 'the other worker never got there'"
    bundle = _bundle_with(tmp_path, {
        "notebooks/zh/07_first.ipynb": [((mark + wait).replace("NAME", "'07'").replace("OTHER", "'09'"), [])],
        "notebooks/zh/09_taken.ipynb": [((mark + wait).replace("NAME", "'09'").replace("OTHER", "'00'"), [])],
        "notebooks/00_after.ipynb": [(mark.replace("NAME", "'00'") + "x = 1", []), ("assert x == 1", [])]})
    progress = io.StringIO()
    assert nbval_only_checks_fail(bundle, cell_timeout=60, jobs=2, stream=progress) == ([], []), progress.getvalue()
    worker = {p.name: p.read_text() for p in seen.iterdir()}
    assert worker["00"] == worker["07"] != worker["09"], "07's worker skipped 09 and ran 00"


def test_release_stops_a_notebook_past_its_time_and_runs_the_rest(tmp_path, monkeypatch):
    """A notebook that runs past its time (each cell within the cell limit) is stopped with its
    worker and named; a new worker runs the notebooks still queued."""
    from kvsched_lab.grading.release import release_nbval

    # With 2 s cells: 16 s for a notebook (the slow one needs 20 s), still room for the quick one's kernel.
    monkeypatch.setattr(release_nbval, "KERNEL_START_S", 8.0)
    bundle = _bundle_with(tmp_path, {"notebooks/06_slow.ipynb": [("import time\ntime.sleep(0.5)", [])] * 40,
                                     "notebooks/zh/06_slow.ipynb": [("x = 1", [])]})
    progress = io.StringIO()
    problems, _ = release_nbval.nbval_only_checks_fail(bundle, cell_timeout=2, jobs=1, stream=progress)
    assert len(problems) == 1 and problems[0].startswith("nbval did not finish notebooks/06_slow.ipynb within 16 s"), \
        problems
    assert re.search(r"^  nbval: notebooks/zh/06_slow\.ipynb \(2 of 2\) ok in ", progress.getvalue(), re.M), \
        progress.getvalue()


def test_release_ships_a_complete_and_current_chinese_edition(tmp_path):
    from kvsched_lab.grading.release.release import release_main
    from kvsched_lab.grading.release.release_build import build_release, stale_zh_edition
    from kvsched_lab.grading.release.release_checks import incomplete_zh_edition

    bundle = build_release(tmp_path / "bundle", _course(tmp_path), BUNDLE_URL)
    assert incomplete_zh_edition(bundle) == []
    zh = bundle / "notebooks" / "zh"
    (zh / "02_score.ipynb").unlink()
    problems = incomplete_zh_edition(bundle)
    assert problems[0] == "notebooks/zh/02_score.ipynb is missing (the Chinese edition)", problems
    first = sorted(zh.glob("*.ipynb"))[0]
    nb = read_notebook(first)
    nb["cells"][-1]["metadata"]["tags"] = []  # a check cell that lost its tag in the Chinese edition
    write_notebook(nb, first)
    assert f"notebooks/zh/{first.name} does not have the English notebook's cells, ids and tags" in \
        incomplete_zh_edition(bundle)
    # The repository's notebooks/zh is what `kvsched i18n build` writes now; an English edit makes it stale.
    assert stale_zh_edition(ROOT / "notebooks") == []
    course = tmp_path / "repo"
    shutil.copytree(ROOT / "notebooks", course / "notebooks")
    shutil.copytree(ROOT / "i18n", course / "i18n")
    path = course / "notebooks" / "08_pinning_free_queue_radix_preemption.ipynb"
    nb = read_notebook(path)
    nb["cells"][3]["source"] = "".join(nb["cells"][3]["source"]) + "\n\nOne more English sentence."
    write_notebook(nb, path)
    assert stale_zh_edition(course / "notebooks") == [
        f"zh/{path.name}: untranslated cells {nb['cells'][3]['id']}: stale"], "a changed cell is untranslated"
    hand_edited = course / "notebooks" / "zh" / "00_setup_and_tour.ipynb"
    hand_edited.write_text(hand_edited.read_text(encoding="utf-8").replace("初始化", "设置"), encoding="utf-8")
    assert "zh/00_setup_and_tour.ipynb is not the fresh build" in stale_zh_edition(course / "notebooks")
    with pytest.raises(ValueError, match="not what `kvsched i18n build` writes now"):
        build_release(tmp_path / "refused", course / "notebooks", BUNDLE_URL)
    assert not (tmp_path / "refused").exists(), "nothing is written"
    assert release_main([str(tmp_path / "refused"), "--repo-url", BUNDLE_URL, "--notebooks",
                         str(course / "notebooks")]) == 2 and not (tmp_path / "refused").exists()


def test_grade_refuses_without_a_sandbox_unless_told(monkeypatch, tmp_path, capsys):
    """Where bubblewrap cannot run, `kvsched grade` stops and says how to enable it or go without;
    `kvsched doctor --grading` says the same. (A probe that fails is simulated: here it may well work.)"""
    from kvsched_lab.cli.doctor import _grading_sandbox
    from kvsched_lab.grading.box import sandbox

    monkeypatch.setattr(sandbox, "probe", lambda: (False, "bubblewrap (bwrap) is not installed"))
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "ref.py").write_text(v.py_submission({}))
    assert grade_main([str(tmp_path / "class"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "bubblewrap (bwrap) is not installed" in err and "apt-get install bubblewrap" in err and "--no-sandbox" in err
    assert not (tmp_path / "out").exists()
    # Its sandbox row alone (the whole diagnosis imports torch; test_packaging.py runs it end to end).
    row = next(r for r in _grading_sandbox() if r[0] == "grading sandbox")
    assert row[1] is False and "--no-sandbox" in row[2] and "apt-get install bubblewrap" in row[2]


def test_no_sandbox_grades_the_same_and_says_unsandboxed(tmp_path):
    """`--no-sandbox` (where bubblewrap cannot run) grades as the sandbox does, every row marked."""
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "ref.py").write_text(v.py_submission({}))
    (tmp_path / "class" / "stub.py").write_text(v.py_submission({t: v.stub(t) for t in TODOS}))
    out = tmp_path / "out"
    assert grade_main([str(tmp_path / "class"), "--out", str(out), "--jobs", "2", "--no-sandbox"]) == 0
    rows = {Path(r["submission"]).name: r for r in csv.DictReader(open(out / "grades.csv"))}
    assert rows["ref.py"]["total"] == "100" and rows["ref.py"]["status"] == "unsandboxed"
    assert rows["stub.py"]["total"] == "0" and rows["stub.py"]["status"] == "unsandboxed"


def test_the_sandbox_library_holds_no_reference_and_no_grader(tmp_path):
    """What the sandbox may read of the course: no reference line, no withheld file, no cases or grader."""
    from kvsched_lab.grading.batch.grade import SANDBOX_ROOM, build_library
    from kvsched_lab.grading.release.release_build import WITHHELD_FILES
    from kvsched_lab.grading.release.release_checks import find_leaks, forbidden_lines

    lib = build_library(tmp_path / "lib")
    assert find_leaks(lib, forbidden_lines()) == []
    assert sorted(p.name for p in (lib / "kvsched_lab" / "grading").iterdir()) == ["__init__.py", SANDBOX_ROOM.name]
    assert not any((lib / rel).exists() for rel in WITHHELD_FILES) and not (lib / "solutions").exists()


def test_feedback_language_changes_the_feedback_only(batch, tmp_path):
    """`kvsched grade --lang zh`: the same submissions give byte-identical grades.csv, Chinese feedback.

    The batch above, graded in English, is written again in Chinese: `--resume` on a copy of its
    output takes every grade from its journal (the sandboxes never see the language: a journal
    line holds the feedback untranslated, which a Chinese rendering of an English line would show)."""
    zh = tmp_path / "zh"
    shutil.copytree(batch["out"], zh)
    for p in [zh / "grades.csv", zh / "manifest.json", *(zh / "feedback").iterdir()]:
        p.unlink()
    args = batch["args"]
    assert grade_main(args[:2] + ["--out", str(zh), "--resume", "--lang", "zh"] + args[2:]) == 0
    feedback = {}
    for lang, out in (("en", batch["out"]), ("zh", zh)):
        feedback[lang] = {p.name: p.read_text(encoding="utf-8") for p in (out / "feedback").glob("*.md")}
        assert sorted(p.stem for p in (out / "feedback").glob("*.html")) == sorted(Path(n).stem for n in feedback[lang])
    assert (batch["out"] / "grades.csv").read_bytes() == (zh / "grades.csv").read_bytes()
    assert set(feedback["en"]) == set(feedback["zh"]) and len(feedback["en"]) == len(batch["want"])
    cjk = re.compile(r"[\u4e00-\u9fff]")
    for name, en in feedback["en"].items():
        zh_text = feedback["zh"][name]
        assert not cjk.search(en) and cjk.search(zh_text) and zh_text != en, name
        # grades.csv keeps its English statuses; the feedback's headings read in Chinese, with the
        # same TODO, method and points.
        heads = [[line for line in text.splitlines() if line.startswith("## ")][:len(TODOS)] for text in (en, zh_text)]
        for e, z in zip(*heads):
            todo, method, points = re.fullmatch(r"## (\w+) \((\w+)\): [a-z ()]+, (\d+/\d+)", e).groups()
            assert re.fullmatch(rf"## {todo}（{method}）：[\u4e00-\u9fff（）]+，{points} 分", z), (e, z)

    def zh_of(name: str) -> str:
        return next(t for n, t in feedback["zh"].items() if n.endswith(name + ".md"))

    failing = next(_mixed(r) for r in range(NOTEBOOK_ROUNDS, len(MIXED))
                   if any(w is not None and w.grader == "failed" for _, w in MIXED[r].values()))
    # A passed, a failed, a not attempted and an ungradable submission: nothing in their Chinese
    # feedback is English prose, outside the fenced code and the values it quotes (other rows quote
    # Python's own English, a SyntaxError's message, inline).
    for name in ("ref.py", failing, "skeleton.py", "renamed.py"):
        fenced = re.sub(r"```.*?```", "", zh_of(name), flags=re.S)
        assert [line for line in fenced.splitlines() if english_prose(line)] == [], name
    wrong = zh_of(failing)
    assert "总分：" in wrong and "未通过的用例族：" in wrong and "与参考实现的第一处差异" in wrong
    assert "全部" in zh_of("ref.py")
    assert "文件中没有定义类 KVCacheSchedulerSim（它定义的是 KVSim）" in zh_of("renamed.py")
    assert "占位实现" in zh_of("skeleton.py")
    with pytest.raises(SystemExit):
        grade_main([str(tmp_path / "class"), "--out", str(tmp_path / "fr"), "--lang", "fr"])
