"""One learner, one identity, from intake to export (issue 28, first section).

Each test says what happened before its fix. A small class of two sections that both hold
``alice.py`` (and a learner with an oversized notebook that is skipped) is graded once; every
other route (shards merged, ``--resume``, ``--learner``, overrides) must give the same bytes,
whatever was done to the journals in between. No learner code runs in that class (stubs and a file
that does not parse), so it grades in seconds; intake, overrides and the journal's checks are
also tested in-process.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from kvsched_lab.grading import grade_main
from kvsched_lab.grading.batch.batch import _read_learner
from kvsched_lab.grading.batch.grade import Grade, write_reports
from kvsched_lab.grading.batch.journal import Entry, Header, read_journal, write_journal
from kvsched_lab.grading.batch.journal_key import KEY_FILE, journal_key
from kvsched_lab.grading.batch.manifest import read_manifest
from kvsched_lab.grading.batch.stamp import Stamp
from kvsched_lab.grading.box.sandbox import probe
from kvsched_lab.grading.classroom.export import read_grades
from kvsched_lab.grading.classroom.overrides import OverridesError, parse_overrides, resolve
from kvsched_lab.grading.judging.stubs import known_stubs
from kvsched_lab.grading.judging.verdict import Reference, TodoGrade
from kvsched_lab.grading.learner.intake import MAX_FILE_BYTES, discover
from kvsched_lab.sim.scheduler import TODO_METHODS

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
import variants as v  # noqa: E402
from small_class import outputs  # noqa: E402

TODOS = list(TODO_METHODS)
ARGS = ["--timeout", "5", *([] if probe()[0] else ["--no-sandbox"])]
HEAD = "submission,todo,points,reason\n"
OPTIONS = {"timeout": 5.0, "memory_mb": 2048, "sandboxed": True}


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    """The grader's own state folder (the journal key), outside every output folder."""
    folder = tmp_path_factory.mktemp("state")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KVSCHED_STATE_DIR", str(folder))
        yield folder


def _sections(base: Path) -> list:
    """Two section folders that both hold alice.py; ann's folder has a 1 GiB sparse notebook without a TODO."""
    (base / "sec1").mkdir(parents=True)
    (base / "sec2").mkdir()
    (base / "sec1" / "alice.py").write_text(v.py_submission({t: v.stub(t) for t in TODOS}))
    (base / "sec2" / "alice.py").write_text("class KVCacheSchedulerSim(:\n    pass\n")
    ann = v.write_series(base / "sec1" / "ann", {})
    with open(ann / "06_plots.ipynb", "wb") as f:
        f.truncate(1 << 30)
    return [str(base / "sec1"), str(base / "sec2")]


@pytest.fixture(scope="module")
def single(state, tmp_path_factory):
    base = tmp_path_factory.mktemp("identity")
    args = _sections(base / "class")
    out = base / "single"
    assert grade_main([*args, "--out", str(out), *ARGS]) == 0
    return {"args": args, "out": out, "files": outputs(out), "base": base}


def _rows(out: Path) -> dict:
    return {name: row for name, row in read_grades(out).items()}


# --------------------------------------------------------------------------- 1. one learner, one name

def test_two_sections_give_two_learners_named_by_their_paths(single):
    """Before: ``kvsched grade sec1 sec2`` gave two rows both named alice.py; merged, both took one grade."""
    rows = _rows(single["out"])
    assert list(rows) == ["sec1/alice.py", "sec1/ann", "sec2/alice.py"]
    assert rows["sec1/alice.py"]["status"] == "ok" and rows["sec2/alice.py"]["status"].startswith("score: error")
    assert read_manifest(single["out"]).learners == list(rows)
    assert sorted(p.name for p in (single["out"] / "feedback").glob("*.md")) == [
        "sec1%2Falice.py.md", "sec1%2Fann.md", "sec2%2Falice.py.md"]
    # The same names however the arguments are spelled (absolute, relative, ./), so shards agree.
    here = os.getcwd()
    try:
        os.chdir(Path(single["args"][0]).parent)
        assert [x.name for x in discover(["./sec1", "sec2/"])] == [x.name for x in discover(single["args"])]
    finally:
        os.chdir(here)
    assert [x.name for x in discover([single["args"][0]])] == ["alice.py", "ann"], "one class folder: as before"


@pytest.fixture(scope="module")
def shards(single):
    folders = [single["base"] / f"shard-{k}" for k in range(2)]
    for k, folder in enumerate(folders):
        assert grade_main([*single["args"], "--shard", f"{k}/2", "--out", str(folder), *ARGS]) == 0
    return folders


def test_sharded_and_merged_equals_one_run_and_an_override_names_one_learner(single, shards, capsys):
    base = single["base"]
    assert grade_main(["merge", *map(str, shards), "--out", str(base / "merged")]) == 0
    assert outputs(base / "merged") == single["files"]
    # An override for the bare file name is ambiguous now, and refused naming both learners.
    (base / "ov.csv").write_text(HEAD + "alice.py,score,20,regraded by hand\n")
    capsys.readouterr()
    assert grade_main(["merge", *map(str, shards), "--out", str(base / "refused"), "--overrides",
                       str(base / "ov.csv")]) == 2
    assert "several submissions end with 'alice.py' (sec1/alice.py, sec2/alice.py)" in capsys.readouterr().err
    assert not (base / "refused").exists()
    (base / "ov.csv").write_text(HEAD + "sec2/alice.py,score,20,regraded by hand\n")
    assert grade_main(["merge", *map(str, shards), "--out", str(base / "merged-ov"), "--overrides",
                       str(base / "ov.csv")]) == 0
    rows = _rows(base / "merged-ov")
    assert [n for n, r in rows.items() if r["overrides"]] == ["sec2/alice.py"] and rows["sec2/alice.py"]["score"] == "20"


def test_names_that_differ_only_by_invisible_characters_stay_apart(tmp_path):
    """Before: ``a<TAB>b.py`` and ``a b.py`` were both the row ``a b.py`` (zero-width and ``?`` alike), and the
    export kept one of them."""
    klass = tmp_path / "class"
    klass.mkdir()
    for name in ("a\tb.py", "a b.py", "a\u200bb.py", "a?b.py", "a\\tb.py"):
        (klass / name).write_text("x = 1\n")
    names = [x.name for x in discover([str(klass)])]
    assert names == ["a\\tb.py", "a b.py", "a?b.py", "a\\\\tb.py", "a\\u200bb.py"]
    write_reports([Grade(n, {t: TodoGrade("not attempted") for t in TODOS}) for n in names], tmp_path / "out")
    assert list(read_grades(tmp_path / "out")) == names and len(list((tmp_path / "out" / "feedback").glob("*.md"))) == 5
    # A grades.csv with one name twice (an older grader's) is refused by the export, never half kept.
    write_reports([Grade("a b.py", {t: TodoGrade("passed", 20 - k) for t in TODOS}) for k in range(2)], tmp_path / "old")
    with pytest.raises(ValueError, match="several rows named a b.py"):
        read_grades(tmp_path / "old")


def test_learners_that_would_still_show_alike_are_refused_before_any_work(tmp_path, capsys):
    """Before: ``=a.py`` (written ``'=a.py``, spreadsheet-safe) and ``'=a.py`` shared one row and one export line;
    a folder given twice graded everyone twice."""
    klass = tmp_path / "class"
    klass.mkdir()
    for name in ("=a.py", "'=a.py", "ok.py"):
        (klass / name).write_text("x = 1\n")
    out = tmp_path / "out"
    assert grade_main([str(klass), "--out", str(out), *ARGS]) == 2
    err = capsys.readouterr().err
    assert "=a.py" in err and "'=a.py" in err and "would show as the same name" in err and "ok.py" not in err
    (klass / "=a.py").unlink()
    assert grade_main([str(klass), str(klass), "--out", str(out), *ARGS]) == 2
    assert "is given 2 times" in capsys.readouterr().err
    assert not out.exists(), "nothing graded, nothing written"


# --------------------------------------------------------------------------- 2. overrides, exactly

def test_override_names_are_exact_and_every_bad_line_is_named():
    """Before: `` alice.py`` was stripped and hit alice.py, ``#x.py`` was a comment, and ``٢٠``, ``2_0``, ``+20``
    were 20 points; only the first bad line was reported."""
    names = ["alice.py", " alice.py", "#x.py", "sec1/bob.py", "sec2/bob.py"]
    good = parse_overrides(HEAD + " alice.py,score,20,spaced\n#x.py,heap,3,hash\nalice.py,heap,20,plain\n")
    assert [(o.submission, o.todo) for o in good] == [(" alice.py", "score"), ("#x.py", "heap"), ("alice.py", "heap")]
    assert {k: [o.line for o in os_] for k, os_ in resolve(good, names).items()} == {
        " alice.py": [2], "#x.py": [3], "alice.py": [4]}
    text = HEAD + "".join(f"alice.py,score,{p},why\n" for p in ("٢٠", "2_0", "+20", "２０", "20.0")) + "alice.py,scor,3,x\n"
    with pytest.raises(OverridesError) as e:
        parse_overrides(text)
    message = str(e.value)
    assert message.startswith("6 lines of the overrides file are wrong")
    assert all(f"line {n}:" in message for n in range(2, 8)) and "ASCII digits" in message
    bad = parse_overrides(HEAD + "bob.py,score,3,which\nnobody.py,score,3,who\n  alice.py,heap,1,spaces\n"
                          "sec1/bob.py,score,4,fine\nsec1/bob.py,score,5,again\n")
    with pytest.raises(OverridesError) as e:
        resolve(bad, names)
    message = str(e.value)
    assert "line 2: several submissions end with 'bob.py' (sec1/bob.py, sec2/bob.py)" in message
    assert "line 3: no submission is named 'nobody.py'" in message and "line 4: no submission is named '  alice.py'" in message
    assert "line 6: sec1/bob.py score is already set on line 5" in message


# --------------------------------------------------------------------------- 3. a journal that is checked

def _edit_journal(path: Path, learner: str, change) -> None:
    lines = path.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines[1:], start=1):
        data = json.loads(line)
        if data["learner"] == learner:
            change(data)
            lines[i] = json.dumps(data) + "\n"
    path.write_text("".join(lines))


def _raise_points(data: dict) -> None:
    data["grade"]["todos"]["score"].update(points=20, status="passed")


def test_an_edited_or_malformed_journal_entry_is_graded_again_never_trusted(single, capfd):
    """Before: an entry edited 0 -> 20 was taken as it was on --resume, and one missing a TODO crashed the
    resumed run at its end (KeyError)."""
    out = single["base"] / "tampered"
    shutil.copytree(single["out"], out)
    _edit_journal(out / "journal.jsonl", "sec1/ann", _raise_points)
    _edit_journal(out / "journal.jsonl", "sec1/alice.py", lambda d: d["grade"]["todos"].pop("heap"))
    with open(out / "journal.jsonl", "a") as f:
        f.write("[1, 2]\n")  # a line that is no entry at all
    capfd.readouterr()
    assert grade_main([*single["args"], "--out", str(out), "--resume", *ARGS]) == 0
    err = capfd.readouterr().err
    assert "journal: 3 entry(ies) did not check and are graded again: " in err
    assert "sec1/ann (its signature does not check" in err and "sec1/alice.py (" in err and "line 5 (" in err
    assert "graded 2 learner(s)" in err and outputs(out) == single["files"]
    # A malformed entry that is signed (the grader's own writer never makes one) is still refused.
    read = read_journal(out / "journal.jsonl")
    bad = Entry("0" * 64, Grade("sec1/ann", {t: TodoGrade("passed", 20) for t in TODOS[:4]}))
    write_journal(single["base"] / "signed", read.header, {**read.entries, "sec1/ann": bad})
    again = read_journal(single["base"] / "signed" / "journal.jsonl")
    assert "sec1/ann" not in again.entries and "the five" in again.rejected["sec1/ann"]


def test_merge_refuses_a_tampered_shard_entry_until_the_shard_is_resumed(single, shards, capsys):
    copies = [single["base"] / f"copy-{f.name}" for f in shards]
    for f, c in zip(shards, copies):
        shutil.copytree(f, c)
    victim = next(c for c in copies if "sec1/ann" in read_manifest(c).rows)
    _edit_journal(victim / "journal.jsonl", "sec1/ann", _raise_points)
    capsys.readouterr()
    assert grade_main(["merge", *map(str, copies), "--out", str(single["base"] / "m2")]) == 2
    err = capsys.readouterr().err
    assert "the entries of sec1/ann do not check" in err and "rerun that shard with --resume" in err
    assert not (single["base"] / "m2").exists()
    k = read_manifest(victim).shard[0]
    assert grade_main([*single["args"], "--shard", f"{k}/2", "--out", str(victim), "--resume", *ARGS]) == 0
    assert grade_main(["merge", *map(str, copies), "--out", str(single["base"] / "m2")]) == 0
    assert outputs(single["base"] / "m2") == single["files"]


def test_the_key_lives_outside_the_output_private_and_another_key_trusts_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("KVSCHED_STATE_DIR", str(tmp_path / "state"))
    key = journal_key()
    path = tmp_path / "state" / KEY_FILE
    assert len(key) == 32 and journal_key() == key and oct(path.stat().st_mode & 0o777) == "0o600"
    header = Header(Stamp("0", "g" * 64, "c" * 64), OPTIONS, None)
    g = Grade("ann", {t: TodoGrade("passed", 20) for t in TODOS}, skipped=["06.ipynb"])
    write_journal(tmp_path / "out", header, {"ann": Entry("d" * 64, g)})
    assert read_journal(tmp_path / "out" / "journal.jsonl").entries["ann"].grade == g, "skipped files kept"
    assert KEY_FILE not in os.listdir(tmp_path / "out")
    other = read_journal(tmp_path / "out" / "journal.jsonl", b"k" * 32)
    assert other.entries == {} and "another journal key" in other.rejected["ann"]
    path.chmod(0o644)
    with pytest.raises(ValueError, match="chmod 600"):
        journal_key()


# --------------------------------------------------------------------------- 4. feedback by every route

def test_every_route_writes_the_feedback_of_one_plain_run(single):
    """Before: merge, --resume, --learner and overrides wrote feedback from the journal, which had lost the
    "Not read: ... (larger than 4 MiB ...)" line of a learner's oversized notebook."""
    ann = single["files"]["feedback/sec1%2Fann.md"].decode()
    assert "Not read: ` 06_plots.ipynb ` (larger than 4 MiB, with no todo: tag in its first 4 MiB)." in ann
    base = single["base"]
    resumed = base / "resumed"
    shutil.copytree(single["out"], resumed)
    lines = (resumed / "journal.jsonl").read_text().splitlines(keepends=True)
    (resumed / "journal.jsonl").write_text("".join(x for x in lines if '"learner": "sec2/alice.py"' not in x))
    assert grade_main([*single["args"], "--out", str(resumed), "--resume", *ARGS]) == 0
    assert outputs(resumed) == single["files"], "--resume"
    regraded = base / "regraded"
    shutil.copytree(single["out"], regraded)
    assert grade_main(["--learner", str(Path(single["args"][1]) / "alice.py"), "--out", str(regraded), *ARGS]) == 0
    assert outputs(regraded) == single["files"], "--learner"
    # Overrides: a plain run with them, and the same overrides applied by --learner to a graded class.
    (base / "fix.csv").write_text(HEAD + "sec2/alice.py,heap,5,the syntax slip is a typo\n")
    plain = base / "plain-ov"
    assert grade_main([*single["args"], "--out", str(plain), "--overrides", str(base / "fix.csv"), *ARGS]) == 0
    assert outputs(plain)["feedback/sec1%2Fann.md"] == single["files"]["feedback/sec1%2Fann.md"]
    later = base / "later-ov"
    shutil.copytree(single["out"], later)
    assert grade_main(["--learner", str(Path(single["args"][0]) / "alice.py"), "--out", str(later),
                       "--overrides", str(base / "fix.csv"), *ARGS]) == 0
    assert outputs(later) == outputs(plain), "overrides"


# --------------------------------------------------------------------------- 5. intake bounded by size

def _bytes_read() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux's /proc/self/io to count bytes read")
def test_intake_cost_does_not_depend_on_junk_bytes(tmp_path):
    """Before: a 1 GiB sparse notebook without a TODO made its learner's row an error (it was searched 256 MiB
    deep, then taken as holding one), and a folder of 39 such notebooks read 39 x 256 MiB of zeros before any
    grading started (minutes). Now a file's size comes from fstat and at most 4 MiB + 1 byte of it is read."""
    ref = Reference([], {}, {}, known_stubs())
    read, took = {}, {}
    for size in (64 << 20, 8 << 30):
        folder = v.write_series(tmp_path / f"s{size}" / "ann", dict(v.REF))
        for k in range(40 - len(list(folder.iterdir()))):
            with open(folder / f"junk-{k:02d}.ipynb", "wb") as f:
                f.truncate(size)
        [learner] = discover([str(folder.parent)])
        before, started = _bytes_read(), time.monotonic()
        sub = _read_learner(learner, tmp_path / f"copy-{size}", ref)
        read[size], took[size] = _bytes_read() - before, time.monotonic() - started
        assert not sub.error and len(learner.skipped) == 40 - len(v.LAYOUT), (sub.error, learner.skipped)
        assert all(t.status == "run" for t in sub.todos.values())
    print(f"intake of one learner with 36 sparse notebooks: {took[64 << 20]:.2f} s at 64 MiB each, "
          f"{took[8 << 30]:.2f} s at 8 GiB each; {read[8 << 30] >> 20} MiB read")
    assert read[8 << 30] <= 40 * (MAX_FILE_BYTES + 1) + (8 << 20), read
    assert abs(read[8 << 30] - read[64 << 20]) < (1 << 20), "the bytes read do not grow with the junk"


# --------------------------------------------------------------------------- 6. the reference's values kept back

def test_feedback_keeps_the_reference_value_back_unless_the_instructor_reveals_it(tmp_path, capsys):
    """Before: every failed TODO's feedback showed the reference's value at the first difference."""
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "wrong.py").write_text(v.py_submission({"score": v.WRONG["score"][0].source}))
    hidden, shown = tmp_path / "hidden", tmp_path / "shown"
    assert grade_main([str(klass), "--out", str(hidden), *ARGS]) == 0
    assert grade_main([str(klass), "--out", str(shown), "--reveal-expected", "--lang", "zh", *ARGS]) == 0
    text = (hidden / "feedback" / "wrong.py.md").read_text()
    score = text.split("## score (")[1].split("\n## ")[0]
    assert "observed" in score and "its value is not shown" in score
    assert not any(line.lstrip().startswith("expected ") for line in score.splitlines())
    zh = (shown / "feedback" / "wrong.py.md").read_text()
    assert "期望" in zh and "不显示参考实现的值" not in zh
    assert read_manifest(shown).options.get("reveal_expected") is True
    assert "reveal_expected" not in read_manifest(hidden).options, "an ordinary run's manifest is as before"
    capsys.readouterr()
    assert grade_main([str(klass), "--out", str(shown), "--resume", *ARGS]) == 2
    assert "reveal_expected True then, None now" in capsys.readouterr().err
