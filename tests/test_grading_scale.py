"""Grading at class scale: progress, a journal that survives a kill, shards and their merge.

One small class (right, wrong, untouched and broken submissions, a notebook learner) is graded
once on one machine (`single`); a run killed midway and resumed, and three shards merged, must
give the same bytes: grades.csv, every feedback file, the manifest. The real Slurm cluster run
of the same class is in test_grading_cluster.py.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvsched_lab.grading import grade_main
from kvsched_lab.grading.judging.cases import hidden_cases
from kvsched_lab.grading.batch.grade import Grade
from kvsched_lab.grading.batch.journal import Header, decode_grade, encode_grade, open_journal, read_journal
from kvsched_lab.grading.batch.manifest import read_manifest
from kvsched_lab.grading.batch.merge import merge
from kvsched_lab.grading.batch.progress import BatchProgress
from kvsched_lab.grading.box.sandbox import probe
from kvsched_lab.grading.batch.shards import parse_shard, shard_members, split
from kvsched_lab.grading.batch.stamp import cases_digest, current_stamp
from kvsched_lab.grading.judging.verdict import TodoGrade
from kvsched_lab.grading.learner.writers import fenced
from kvsched_lab.i18n.messages import Deferred, Joined
from kvsched_lab.sim.scheduler import TODO_METHODS

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
from small_class import SIZE, outputs, write_class  # noqa: E402

TODOS = list(TODO_METHODS)
ROOT = Path(__file__).resolve().parents[1]
SANDBOX_ARGS = [] if probe()[0] else ["--no-sandbox"]
ARGS = ["--timeout", "5", *SANDBOX_ARGS]


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """The class graded in one uninterrupted run on this machine."""
    base = tmp_path_factory.mktemp("scale")
    klass = write_class(base / "class")
    out = base / "single"
    assert grade_main([str(klass), "--out", str(out), "--jobs", "2", *ARGS]) == 0
    return {"class": klass, "out": out, "files": outputs(out), "base": base}


# --------------------------------------------------------------------------- shards

def test_shard_spec_is_checked_before_any_work():
    assert parse_shard("0/1") == (0, 1) and parse_shard(" 3 / 4 ") == (3, 4)
    for bad in ("4/4", "1/0", "-1/3", "a/b", "2", ""):
        with pytest.raises(ValueError, match="K"):
            parse_shard(bad)
    with pytest.raises(SystemExit):  # argparse's usage error, before the reference is even built
        grade_main(["nowhere", "--shard", "2/2"])


def test_shards_are_balanced_deterministic_and_ignore_listing_order():
    names = [f"class/student{i:03d}.py" for i in range(101)]
    parts = split(names, 4)
    assert sorted(len(p) for p in parts) == [25, 25, 25, 26]
    assert set().union(*parts) == set(names) and sum(map(len, parts)) == len(names)  # each learner once
    shuffled = list(reversed(names))
    assert split(shuffled, 4) == parts and split(names + names[:3], 4) == parts  # order and repeats change nothing
    assert parts[0] != {n for i, n in enumerate(names) if i % 4 == 0}, "not the listing's order"
    assert shard_members(names, (1, 4)) == parts[1] and shard_members(names, None) == set(names)


# --------------------------------------------------------------------------- journal and stamp

def _grade() -> Grade:
    lines = [Deferred("Passed {passed} of {n} hidden cases. By family: {families}.", passed=3, n=4,
                      families="ties 1/2"), "plain text", Deferred("Failing: {families}.", families="ties"),
             # messages that are no template: a list joined per language, a fence around text with braces
             Deferred("Failing: {families}.", families=Joined([Deferred("ties in priority"), "precision"])),
             Deferred("First difference from the reference:\n\n{difference}",
                      difference=fenced(Deferred("observed {x}", x="{'repr': 'CacheEntry(...)'}"))),
             Joined(["a", Deferred("error")])]
    todos = {t: TodoGrade("failed", 7, 3, 4, origin="02_score.ipynb cell 3", lines=list(lines)) for t in TODOS}
    return Grade("class/alice", todos, review=["opened '/etc/passwd'"], sandboxed=False)


def test_a_grade_survives_the_journal_in_every_language(tmp_path):
    from kvsched_lab.grading.batch.grade import feedback_text

    g = _grade()
    back = decode_grade(json.loads(json.dumps(encode_grade(g))))
    assert back == g and back.status == g.status and back.total == g.total
    for lang in ("en", "zh"):
        assert feedback_text(back, lang) == feedback_text(g, lang)
    # The lines stay messages, not their English text: they are still rendered in Chinese.
    zh = feedback_text(back, "zh")
    assert zh != feedback_text(back, "en") and "Passed 3 of 4" not in zh and "plain text" in zh


def test_the_journal_ignores_a_line_cut_short_and_refuses_another_run(tmp_path):
    stamp = current_stamp(hidden_cases())
    header = Header(stamp, {"timeout": 5.0, "memory_mb": 2048, "sandboxed": True}, None)
    journal = open_journal(tmp_path, header, resume=False)
    journal.record("class/alice", "d1", _grade())
    with open(journal.path, "a", encoding="utf-8") as f:
        f.write('{"learner": "class/bob", "files_sha256": "d2", "gra')  # the kill came mid-line
    read = read_journal(journal.path)
    assert read.header == header and list(read.entries) == ["class/alice"] and read.rejected == {}
    resumed = open_journal(tmp_path, header, resume=True)
    assert resumed.done("class/alice", "d1") == _grade() and resumed.done("class/alice", "changed") is None
    assert resumed.done("class/bob", "d2") is None
    before = journal.path.read_bytes()
    for other in (Header(stamp, {**header.options, "timeout": 10.0}, None), Header(stamp, header.options, (0, 2))):
        with pytest.raises(ValueError, match="cannot resume"):
            open_journal(tmp_path, other, resume=True)
    assert journal.path.read_bytes() == before, "a refused resume changes nothing"


def test_every_output_carries_the_version_stamp(single):
    manifest = read_manifest(single["out"])
    assert manifest.stamp.cases_sha256 == cases_digest(hidden_cases()) and len(manifest.stamp.grader_sha256) == 64
    assert manifest.stamp.grader_version[0].isdigit()
    assert manifest.shard is None and manifest.rows == manifest.learners and len(manifest.rows) == SIZE
    import hashlib
    assert manifest.grades_sha256 == hashlib.sha256(single["files"]["grades.csv"]).hexdigest()
    feedback = [text.decode() for name, text in single["files"].items() if name.startswith("feedback/")
                and name.endswith(".md")]
    pages = [text.decode() for name, text in single["files"].items() if name.endswith(".html")]
    assert len(feedback) == SIZE and len(pages) == SIZE  # each as Markdown and as an HTML page
    line = (f"Graded by kvsched-lab {manifest.stamp.grader_version} (grader {manifest.stamp.grader_sha256[:12]}), "
            f"hidden cases sha256 {manifest.stamp.cases_sha256}.")
    for text in feedback:
        assert text.rstrip().splitlines()[-1] == line
    assert all(line in page for page in pages)


# --------------------------------------------------------------------------- progress

def test_progress_is_one_line_per_learner_off_a_terminal(tmp_path):
    import io

    stream = io.StringIO()
    shown = BatchProgress(4, resumed=1, stream=stream)
    broken = Grade("class/bob", {t: TodoGrade("error") for t in TODOS}, error="not a notebook")
    shown.update(_grade())
    shown.update(broken)
    shown.close()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "resuming: 1 of 4 learner(s) already graded (journal; 0 failure(s)), 3 to go"
    # review notes and unsandboxed are not failures: every TODO got a verdict
    assert lines[1].startswith("[2/4] class/alice: 35/100 review: opened '/etc/passwd'; unsandboxed "
                               "| failures so far 0 | ETA ")
    assert lines[2].startswith("[3/4] class/bob: 0/100 error: not a notebook | failures so far 1 | ETA 0:00:")
    assert lines[3].startswith("graded 2 learner(s) in ") and lines[3].endswith("; 1 failure(s) among the 3 graded")


def test_progress_is_a_bar_with_failures_and_eta_on_a_terminal(monkeypatch):
    import io

    monkeypatch.setenv("COLUMNS", "100")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    shown = BatchProgress(3, stream=stream)
    shown.update(_grade())
    shown.update(Grade("class/bob", {t: TodoGrade("error") for t in TODOS}, error="not a notebook"))
    shown.close()
    screen = stream.getvalue()
    assert "\r" in screen and "class/alice" not in screen, "a bar redrawn in place, not one line per learner"
    last = screen.split("\r")[-1]
    assert "2/3" in last and "failures 1" in last and "<" in last, last  # tqdm's "elapsed<remaining"
    assert screen.rstrip().endswith("graded 2 learner(s) in 0:00:00; 1 failure(s) among the 2 graded")


@pytest.mark.parametrize("columns", [None, "0", "12"])
def test_progress_on_a_terminal_too_narrow_for_a_bar_is_one_line_per_learner(monkeypatch, columns):
    """A terminal that reports no width (a container's 0x0 pty, COLUMNS=0) made tqdm print nothing at all."""
    import fcntl
    import pty
    import struct
    import termios

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
    with os.fdopen(slave, "w") as stream:
        shown = BatchProgress(2, stream=stream)
        shown.update(_grade())
        shown.close()
    os.set_blocking(master, False)
    screen = b""
    try:
        while chunk := os.read(master, 65536):
            screen += chunk
    except OSError:  # EIO once the other end is closed and everything is read
        pass
    os.close(master)
    lines = screen.decode().splitlines()
    assert lines[0].startswith("[1/2] class/alice: 35/100"), lines
    assert lines[-1].startswith("graded 1 learner(s) in "), lines


def test_progress_on_resume_counts_the_journals_failures():
    """--resume: done starts from the journal, and so must failures (it started from 0)."""
    import io

    from kvsched_lab.grading.batch.progress import is_failure

    broken = Grade("class/bob", {t: TodoGrade("error") for t in TODOS}, error="not a notebook")
    resumed = [broken, _grade()]
    stream = io.StringIO()
    shown = BatchProgress(3, resumed=len(resumed), stream=stream, resumed_failures=sum(map(is_failure, resumed)))
    shown.update(Grade("class/cy", {t: TodoGrade("timed out") for t in TODOS}))
    shown.close()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "resuming: 2 of 3 learner(s) already graded (journal; 1 failure(s)), 1 to go"
    assert "[3/3] class/cy" in lines[1] and "failures so far 2" in lines[1], lines[1]
    assert lines[2].endswith("; 2 failure(s) among the 3 graded")


# --------------------------------------------------------------------------- kill, resume; shards, merge

def test_a_killed_batch_resumes_to_the_same_bytes(single, capfd):
    """A batch killed (SIGKILL) midway keeps what it journalled; --resume grades only the rest and writes
    the same grades.csv, feedback and manifest as the uninterrupted run."""
    out = single["base"] / "killed"
    # A killed batch cannot remove its work folder: it goes to a temporary folder of this test's.
    (single["base"] / "killed-tmp").mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(single["base"] / "killed-tmp")}
    proc = subprocess.Popen([sys.executable, "-m", "kvsched_lab", "grade", str(single["class"]), "--out", str(out),
                             "--jobs", "1", *ARGS], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=env, cwd=ROOT)
    journal, deadline = out / "journal.jsonl", time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and len(journal.read_bytes().splitlines()) >= 2:  # the header and one learner
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    log = proc.stderr.read().decode()
    assert proc.returncode == -signal.SIGKILL, f"the batch ended before it was killed:\n{log[-2000:]}"
    assert not (out / "grades.csv").exists() and not (out / "manifest.json").exists()
    done = len(read_journal(journal).entries)
    assert 1 <= done < SIZE, log[-2000:]
    capfd.readouterr()
    assert grade_main([str(single["class"]), "--out", str(out), "--jobs", "1", "--resume", *ARGS]) == 0
    err = capfd.readouterr().err
    assert re.search(rf"resuming: {done} of {SIZE} learner\(s\) already graded \(journal; \d+ failure\(s\)\), "
                     rf"{SIZE - done} to go", err), err[-2000:]
    assert f"graded {SIZE - done} learner(s) in " in err, "only the missing learners are graded"
    assert outputs(out) == single["files"]
    # A resume with nothing missing grades nothing and still writes the same bytes.
    assert grade_main([str(single["class"]), "--out", str(out), "--resume", *ARGS]) == 0
    assert "graded 0 learner(s)" in capfd.readouterr().err and outputs(out) == single["files"]


def test_a_resume_with_other_options_is_refused_before_any_work(single, tmp_path, capsys):
    out = tmp_path / "copy"
    shutil.copytree(single["out"], out)
    before = outputs(out)
    assert grade_main([str(single["class"]), "--out", str(out), "--resume", "--timeout", "9", *SANDBOX_ARGS]) == 2
    err = capsys.readouterr().err
    assert "cannot resume" in err and "timeout 5.0 then, 9.0 now" in err
    assert outputs(out) == before


@pytest.fixture(scope="module")
def shards(single):
    folders = [single["base"] / f"shard-{k}" for k in range(3)]
    for k, folder in enumerate(folders):
        assert grade_main([str(single["class"]), "--shard", f"{k}/3", "--out", str(folder), "--jobs", "2", *ARGS]) == 0
    return folders


def test_shards_merge_to_the_bytes_of_one_run(single, shards, capsys):
    rows = [read_manifest(f).rows for f in shards]
    assert sorted(sum(rows, [])) == sorted(read_manifest(single["out"]).rows) and all(rows)
    out = single["base"] / "merged"
    assert grade_main(["merge", *map(str, reversed(shards)), "--out", str(out)]) == 0  # any order of folders
    assert outputs(out) == single["files"]
    assert f"grades.csv sha256 {read_manifest(out).grades_sha256}" in capsys.readouterr().out
    # The merged folder is an unsharded run's output: resuming it grades nothing.
    assert grade_main([str(single["class"]), "--out", str(out), "--resume", *ARGS]) == 0
    assert "graded 0 learner(s)" in capsys.readouterr().err and outputs(out) == single["files"]


def _edit_manifest(folder: Path, **changes) -> None:
    path = folder / "manifest.json"
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if key in data["stamp"]:
            data["stamp"][key] = value
        else:
            data[key] = value
    path.write_text(json.dumps(data))


def test_merge_refuses_mixed_missing_or_repeated_shards(shards, tmp_path):
    copies = [tmp_path / f.name for f in shards]
    for f, c in zip(shards, copies):
        shutil.copytree(f, c)
    out = tmp_path / "merged"
    refusals = [
        (copies[:2], "shard(s) 2 of 3 missing"),
        ([copies[0], copies[1], copies[1]], "shard 1/3 is given twice"),
        ([copies[0], copies[1], out], "holds no manifest.json"),
        ([copies[0], copies[1], copies[2]], None),  # sanity: the untouched copies merge
    ]
    for folders, why in refusals:
        if why is None:
            merge(folders, out)
            continue
        with pytest.raises(ValueError, match=why.replace("(", r"\(").replace(")", r"\)")):
            merge(folders, tmp_path / "refused")
    assert not (tmp_path / "refused").exists(), "a refused merge writes nothing"
    edits = [({"cases_sha256": "0" * 64}, "different graders or cases"),
             ({"options": {"timeout": 9.0, "memory_mb": 2048, "sandboxed": True}}, "different options"),
             ({"learners": ["class/ghost.py"]}, "graded different classes"),
             ({"shard": [1, 3]}, "given twice"),
             ({"shard": None}, "is not a shard")]
    for change, why in edits:
        shutil.rmtree(copies[2])
        shutil.copytree(shards[2], copies[2])
        _edit_manifest(copies[2], **change)
        with pytest.raises(ValueError, match=why):
            merge(copies, tmp_path / "refused")
    # A learner of shard 0 claimed by shard 2 too (graded twice), or lost from its shard.
    shutil.rmtree(copies[2])
    shutil.copytree(shards[2], copies[2])
    stolen = read_manifest(copies[0]).rows[0]
    _edit_manifest(copies[2], rows=read_manifest(copies[2]).rows + [stolen])
    with pytest.raises(ValueError, match="belong to another shard: graded twice"):
        merge(copies, tmp_path / "refused")
    _edit_manifest(copies[2], rows=[])
    with pytest.raises(ValueError, match="lacks"):
        merge(copies, tmp_path / "refused")
    with pytest.raises(ValueError, match="is one of the shards"):
        merge(copies, copies[0])
    (copies[1] / "journal.jsonl").unlink()
    with pytest.raises(ValueError, match="cannot read the journal"):
        merge(copies[:2] + [shards[2]], tmp_path / "refused")
