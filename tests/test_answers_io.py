"""Answers across Colab machines: the download/upload file, ipywidgets 7 and 8 uploads, Drive (faked)."""
from __future__ import annotations

import json
from datetime import datetime, timezone
import sys
import types
from pathlib import Path

import pytest

import kvsched_lab.course as lab
from kvsched_lab.course import answers_io
from kvsched_lab.course.answers import saved_records
from kvsched_lab.i18n import LANG_ENV

RIGHT = ("def _score(self, hits, size, last_used):\n"
         "    recency = 1.0 / (1.0 + max(self.time - last_used, 0))\n"
         "    return hits + 0.5 * recency - 0.25 * size / max(self.capacity_bytes, 1)\n")
WRONG = "def _score(self, hits, size, last_used):\n    return 0.0\n"


def save(source: str, name: str = "score") -> None:
    ns: dict = {}
    exec(source, ns)
    lab.save_answer(name, ns["_score"], source=source)


@pytest.fixture
def answers(tmp_path, monkeypatch):
    folder = tmp_path / "answers"
    monkeypatch.setenv(lab.ANSWERS_ENV, str(folder))
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.chdir(tmp_path)
    return folder


def test_download_then_restore_brings_every_answer_back(answers, capsys):
    save(RIGHT)
    path = lab.download_answers()
    assert path == Path.cwd() / "kvsched_answers.json" and "lab.upload_answers()" in capsys.readouterr().out
    (answers / "score.json").unlink()
    assert answers_io.restore_answers(path.read_bytes()) == {"score": "restored (passed)"}
    assert saved_records()["score"]["source"] == RIGHT and lab.load_answers()["score"]


def test_the_check_itself_decides_status_not_the_file(answers):
    save(WRONG)
    bundle = json.loads(answers_io.export_answers().read_text())
    bundle["answers"]["score"]["status"] = "passed"  # edited by hand
    (answers / "score.json").unlink()
    outcome = answers_io.restore_answers(json.dumps(bundle).encode())
    assert outcome == {"score": "restored (failed)"} and saved_records()["score"]["status"] == "failed"


def test_a_passing_answer_here_is_not_replaced_by_a_failing_upload(answers):
    save(WRONG)
    data = answers_io.export_answers().read_bytes()
    save(RIGHT)
    assert "kept the passing answer" in answers_io.restore_answers(data)["score"]
    assert saved_records()["score"]["source"] == RIGHT


@pytest.mark.parametrize("data, words", [
    (b"\xff\xfe not text", "not JSON"),
    (b'{"answers": {}}', "not a kvsched answers file"),
    (json.dumps({"format": answers_io.BUNDLE_FORMAT, "answers": {"score": {"source": WRONG},
                                                                 "bogus": {"source": "x"}}}).encode(), "unknown TODO"),
    (json.dumps({"format": answers_io.BUNDLE_FORMAT, "answers": {"score": {"status": "passed"}}}).encode(), "no source"),
])
def test_a_bad_file_is_refused_and_changes_nothing(answers, data, words):
    save(RIGHT)
    before = (answers / "score.json").read_text()
    with pytest.raises(ValueError, match=words):
        answers_io.restore_answers(data, "mine.json")
    assert (answers / "score.json").read_text() == before and sorted(p.name for p in answers.iterdir()) == ["score.json"]


def test_export_without_answers_says_what_to_do(answers):
    with pytest.raises(FileNotFoundError, match="check cell"):
        answers_io.export_answers()


def test_uploaded_files_reads_ipywidgets_7_and_8_values():
    v7 = {"a.json": {"metadata": {"name": "a.json", "size": 2}, "content": b"{}"}}
    v8 = ({"name": "a.json", "type": "application/json", "size": 2, "content": memoryview(b"{}"),
           "last_modified": 0},)
    assert answers_io.uploaded_files(v7) == answers_io.uploaded_files(v8) == [("a.json", b"{}")]
    assert answers_io.uploaded_files({}) == answers_io.uploaded_files(()) == []


def test_upload_widget_restores_a_chosen_file_on_ipywidgets_8(answers):
    ipywidgets = pytest.importorskip("ipywidgets")
    save(RIGHT)
    data = answers_io.export_answers().read_bytes()
    (answers / "score.json").unlink()
    box = lab.upload_answers()
    picker = box.children[1]
    assert isinstance(picker, ipywidgets.FileUpload) and picker.accept == ".json"
    if int(ipywidgets.__version__.split(".")[0]) < 8:
        pytest.skip("ipywidgets 7 is covered by test_colab_sim.py")
    picker.value = ({"name": "kvsched_answers.json", "type": "application/json", "size": len(data),
                     "content": memoryview(data), "last_modified": datetime.now(timezone.utc)},)
    assert saved_records()["score"]["source"] == RIGHT


class FakeColab:
    """A stand-in for the `google.colab` module: Drive mounts into a temporary folder."""

    def __init__(self, monkeypatch, root: Path):
        self.mounted, self.downloaded = [], []
        google, colab = types.ModuleType("google"), types.ModuleType("google.colab")
        colab.drive = types.SimpleNamespace(mount=self.mount)
        colab.files = types.SimpleNamespace(download=self.downloaded.append)
        google.colab = colab
        monkeypatch.setitem(sys.modules, "google", google)
        monkeypatch.setitem(sys.modules, "google.colab", colab)
        monkeypatch.setattr(answers_io, "DRIVE_MOUNTPOINT", str(root / "content" / "drive"))

    def mount(self, mountpoint: str) -> None:
        (Path(mountpoint) / "MyDrive").mkdir(parents=True, exist_ok=True)
        self.mounted.append(mountpoint)


def test_drive_keeps_answers_and_copies_those_made_here_without_overwriting(answers, tmp_path, monkeypatch, capsys):
    save(RIGHT)
    colab = FakeColab(monkeypatch, tmp_path)
    drive_answers = tmp_path / "content" / "drive" / "MyDrive" / "kvsched_answers"
    drive_answers.mkdir(parents=True)
    (drive_answers / "heap.json").write_text('{"kept": true}')
    lab.report_setup(None, answers_on_drive=True)
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"answers kept on your Google Drive: {drive_answers}"
    assert colab.mounted == [str(tmp_path / "content" / "drive")]
    assert lab.answers_dir() == drive_answers
    assert json.loads((drive_answers / "score.json").read_text())["source"] == RIGHT
    assert (drive_answers / "heap.json").read_text() == '{"kept": true}'


def test_on_colab_without_drive_one_line_offers_it_and_download_hands_the_file_over(answers, tmp_path, monkeypatch,
                                                                                  capsys):
    colab = FakeColab(monkeypatch, tmp_path)
    lab.report_setup("git+https://example.org/lab", answers_on_drive=False)
    first, second = capsys.readouterr().out.splitlines()
    assert "installed from git+https://example.org/lab" in first
    assert "ANSWERS_ON_DRIVE = True" in second and colab.mounted == []
    save(RIGHT)
    path = lab.download_answers()
    assert colab.downloaded == [str(path)]


def test_drive_outside_colab_is_refused_with_a_reason(answers, capsys):
    with pytest.raises(RuntimeError, match="only be mounted from Colab"):
        lab.use_drive()
    lab.report_setup(None, answers_on_drive=True)
    assert "applies on Colab only" in capsys.readouterr().out


def test_answer_messages_speak_the_learners_language(answers, monkeypatch, capsys):
    # Outcomes and refusals in Chinese under KVSCHED_LANG=zh; the statuses inside stay English.
    monkeypatch.setenv(LANG_ENV, "zh")
    save(RIGHT)
    path = lab.download_answers()
    assert "lab.upload_answers()" in capsys.readouterr().out
    (answers / "score.json").unlink()
    assert answers_io.restore_answers(path.read_bytes()) == {"score": "已恢复（passed）"}
    with pytest.raises(ValueError, match="mine.json 不是 kvsched 答案文件（不是 JSON）"):
        answers_io.restore_answers(b"\xff\xfe not text", "mine.json")
    answers_io.announce_answers_home(False)
    assert "答案保存在" in capsys.readouterr().out
