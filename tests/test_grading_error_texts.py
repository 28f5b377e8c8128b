"""Why a submission could not be graded, in the feedback's language (judging/error_texts.py).

The errors are English texts written by the intake, the readers and the batch, and stay so in
grades.csv; a learner graded in Chinese read "This submission could not be graded" in Chinese and the
reason in English. Each error the grading writes is made here by the real code, from a real file
where one can be, and must read in Chinese with only the learner's names and the system's words as
data; any other text stays data."""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path

import pytest
from english_prose import CJK, english_prose

from kvsched_lab.grading.batch import batch
from kvsched_lab.grading.batch.batch import _read_learner
from kvsched_lab.grading.batch.grade import Grade, feedback_text
from kvsched_lab.grading.judging.error_texts import FIXED_ERRORS, GRADER_FAILURE, KIND_WORDS, SAID, submission_error
from kvsched_lab.grading.judging.stubs import known_stubs
from kvsched_lab.grading.judging.submissions import load
from kvsched_lab.grading.judging.verdict import Reference, TodoGrade
from kvsched_lab.grading.learner.intake import MAX_FILE_BYTES, MAX_FILES, copy_in, discover
from kvsched_lab.grading.learner.learner_files import MAX_CELLS, MAX_NOTEBOOKS
from kvsched_lab.i18n.messages import Deferred
from kvsched_lab.sim.scheduler import TODO_METHODS

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
import variants as v  # noqa: E402

STUBS = known_stubs()
CELL = {"cell_type": "code", "source": "", "metadata": {}}
NOTEBOOKS = {  # file name -> bytes: each one a reader refuses
    "not-utf8.ipynb": b"\xff\xfe{}", "not-json.ipynb": b"{", "deep.ipynb": b"[" * 100_000 + b"]" * 100_000,
    "no-cells.ipynb": b"[]", "cells.ipynb": json.dumps({"cells": [CELL] * (MAX_CELLS + 1)}).encode(),
    "not-a-cell.ipynb": json.dumps({"cells": [3]}).encode(),
    "no-type.ipynb": json.dumps({"cells": [{"source": ""}]}).encode(),
    "metadata.ipynb": json.dumps({"cells": [{**CELL, "metadata": []}]}).encode(),
    "tags.ipynb": json.dumps({"cells": [{**CELL, "metadata": {"tags": [3]}}]}).encode(),
    "source.ipynb": json.dumps({"cells": [{**CELL, "source": [1, 2]}]}).encode(),
    "deep.py": b"x = " + b"+".join([b"1"] * 100_000) + b"\n", "not-utf8.py": b"\xff\n",
}


def intake_errors(tmp_path: Path, args: list) -> list:
    """What discover and copy_in (the intake) say of each learner `args` name, read as the batch reads them."""
    ref = Reference([], {}, {}, STUBS)
    return [_read_learner(learner, Path(tempfile.mkdtemp(dir=tmp_path)) / "copy", ref).error
            for learner in discover([str(a) for a in args], check=False)]


def real_errors(tmp_path: Path, monkeypatch) -> list:
    """One error of every kind a submission can end with, each from the code that writes it."""
    files = tmp_path / "files"
    files.mkdir()
    errors = []
    for name, data in NOTEBOOKS.items():
        (files / name).write_bytes(data)
        errors.append(load(name, files / name, STUBS).error)
    made = tmp_path / "made"
    made.mkdir()
    os.mkfifo(made / "fifo.ipynb")
    os.symlink("/dev/null", made / "link.ipynb")
    (made / "big.py").write_bytes(b"#" * (MAX_FILE_BYTES + 1))
    (made / "notes.txt").write_text("hi")
    errors += intake_errors(tmp_path, [made / n for n in ("fifo.ipynb", "link.ipynb", "big.py", "notes.txt", "gone.py")])
    folders = tmp_path / "class"  # a class folder: each folder in it is one learner's
    for folder, names in {"both": ["a.ipynb", "b.py"], "pys": ["a.py", "b.py"], "empty": [], "holds-a-class": ["ann/"],
                          "many": [f"{k}.py" for k in range(MAX_FILES + 1)], "dir-inside": ["x.ipynb/", "y.ipynb"],
                          "notebooks": [f"{k}.ipynb" for k in range(MAX_NOTEBOOKS + 1)]}.items():
        (folders / folder).mkdir(parents=True)
        for name in names:
            if name.endswith("/"):
                (folders / folder / name).mkdir()
            else:
                (folders / folder / name).write_text(json.dumps(v.notebook([])) if name.endswith(".ipynb") else "x = 1\n")
    errors += intake_errors(tmp_path, [folders])
    errors.append(load("x", folders / "notebooks", STUBS).error)  # the intake refuses it first; load, too
    errors += [load("x", made / "missing", STUBS).error, load("x", made / "notes.txt", STUBS).error]
    real_open = os.open
    denied = made / "denied.py"
    denied.write_text("x = 1\n")
    with pytest.MonkeyPatch.context() as patch:  # a file the grader may not open (as root, chmod cannot make one)
        patch.setattr(os, "open", lambda path, *a, **k: (_ for _ in ()).throw(PermissionError(13, "Permission denied"))
                      if Path(path) == denied else real_open(path, *a, **k))
        errors += intake_errors(tmp_path, [denied])
    monkeypatch.setattr(batch, "load", lambda *a: (_ for _ in ()).throw(RecursionError("deep")))
    errors += intake_errors(tmp_path, [files / "deep.py"])  # a reader failure no check foresaw
    errors.append(GRADER_FAILURE.format(error="KeyError('x')"))  # the batch's own, around a grader bug
    return errors


def matches(template: str, text: str) -> bool:
    return re.fullmatch(re.sub(r"\\\{\w+\\\}", ".*", re.escape(template)), text, flags=re.S) is not None


def test_every_error_a_submission_ends_with_reads_in_chinese(tmp_path, monkeypatch):
    errors = real_errors(tmp_path, monkeypatch)
    assert all(errors), errors  # each case did end with an error
    for error in errors:
        said = submission_error(error)
        assert isinstance(said, Deferred), f"no template read {error!r}"
        zh = said.render("zh")
        assert CJK.search(zh) and english_prose(zh) == [], (error, zh)
    templates = [t for t, _ in SAID] + list(FIXED_ERRORS)
    assert [t for t in templates if not any(matches(t, e) for e in errors)] == []  # real code made every one


def test_a_folder_named_like_a_notebook_is_refused_by_name(tmp_path):
    """Before: the intake opened it, and fdopen raised: "the submission could not be read (IsADirectoryError)"."""
    (tmp_path / "class" / "ann" / "05.ipynb").mkdir(parents=True)
    (tmp_path / "class" / "ann" / "06.ipynb").write_text(json.dumps(v.notebook([])))
    assert intake_errors(tmp_path, [tmp_path / "class"]) == ["05.ipynb is a folder, not a regular file"]


def test_each_kind_of_file_has_words_and_a_text_of_no_template_stays_data():
    assert submission_error("x.ipynb is a FIFO, not a regular file").render("zh") == "` x.ipynb ` 是命名管道（FIFO），不是普通文件"
    assert submission_error("x is a folder, not a regular file").render("zh") == "` x ` 是文件夹，不是普通文件"
    assert set(KIND_WORDS) == {"folder", "FIFO", "device", "socket", "special file"}
    assert "` spaceship `" in submission_error("x is a spaceship, not a regular file").render("zh")  # a kind of none: data
    for odd in ["weird", "`x` **bold**", "cannot read"]:
        assert submission_error(odd) == f"`` {odd} ``" if "`" in odd else f"` {odd} `"


def test_a_chinese_feedback_file_says_why_its_submission_could_not_be_graded(tmp_path):
    (tmp_path / "nb.ipynb").write_bytes(b"{")
    error = load("nb.ipynb", tmp_path / "nb.ipynb", STUBS).error
    grade = Grade("nb.ipynb", {t: TodoGrade("error") for t in TODO_METHODS}, error=error)
    zh = next(x for x in feedback_text(grade, "zh").splitlines() if "` nb.ipynb ` 不是有效的 JSON" in x)
    assert english_prose(zh) == [] and "is not valid" not in zh, zh
    assert "This submission could not be graded: ` nb.ipynb ` is not valid JSON (` " in feedback_text(grade, "en")
