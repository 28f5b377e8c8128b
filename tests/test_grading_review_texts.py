"""A grade's review notes in the feedback's language (judging/review_texts.py).

The notes are written in English where they happen (the audit in the learner's process, the harness,
the sandbox's memory watch, the intake, the grader) and stored so; a feedback file in Chinese read
them in English. Each note of a known template now reads in the feedback's language, with what it
quotes as data; any other text stays data, as it came."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from english_prose import CJK, english_prose

from kvsched_lab.grading.batch.grade import Grade, feedback_text
from kvsched_lab.grading.box import limits
from kvsched_lab.grading.judging.review_texts import FIXED_NOTES, NOT_WRITTEN, review_note
from kvsched_lab.grading.judging.stubs import known_stubs
from kvsched_lab.grading.judging.submissions import ATTEMPTS, load
from kvsched_lab.grading.judging.verdict import TodoGrade
from kvsched_lab.grading.kernel import audit, harness
from kvsched_lab.i18n.messages import Deferred
from kvsched_lab.sim.scheduler import TODO_METHODS

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
import variants as v  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STUBS = known_stubs()

# What the audit reports of a learner's process, done for real in a child with the hook on.
AUDITED = textwrap.dedent("""
    import gc, os, socket, subprocess, sys
    from kvsched_lab.grading.kernel.audit import Channel, guard_channel, watch
    read, write = os.pipe()
    channel = Channel(write)
    note = watch(channel, [sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(__import__("kvsched_lab").__file__))])
    guard_channel(channel, note)
    open("/etc/hostname").close()
    socket.socket().close()
    subprocess.run(["true"], check=True)
    os.kill(os.getpid(), 0)
    gc.get_objects()
    sys._current_frames()
    import kvsched_lab.sim.policies.seed
    try:
        os.close(write)
    except OSError:
        pass
    os.write(1, os.read(read, 1 << 16))
""")


def audited_notes() -> list:
    done = subprocess.run([sys.executable, "-c", AUDITED], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return [json.loads(line)["review"] for line in done.stdout.splitlines()]


def every_note() -> list:
    """One note of every kind the grading writes: the audit's real ones, then each template filled in."""
    notes = audited_notes()
    notes += list(FIXED_NOTES)
    notes += [audit.OPENED_MEMORY.format(path=repr("/proc/1/mem")), audit.IMPORTS.format(module="solutions"),
              harness.TAMPERED.format(names="kvsched_lab.grading.kernel.observe.run_case"),
              limits.MEMORY_TOGETHER.format(used=2100, budget=2048), limits.OUT_OF_MEMORY.format(budget=2048),
              NOT_WRITTEN.format(todo="heap"),
              ATTEMPTS.format(todo="snapshot", count=2, cells="05 (copy).ipynb, cell 2; 05.ipynb, cell 2",
                              origin="05.ipynb, cell 2")]
    return notes


@pytest.mark.skipif(not Path("/etc/hostname").exists(), reason="the child opens /etc/hostname")
def test_every_review_note_reads_in_chinese_with_only_its_data_in_code_spans():
    notes = every_note()
    seen = {n.split(" (")[0] for n in notes}
    for words in ("opened", "used a socket", "started a process", "sent a signal", "searched the heap",
                  "read other threads' frames", "imports kvsched_lab.sim.policies.seed",
                  "tried to close or redirect the results channel"):
        assert any(s.startswith(words) for s in seen), (words, notes)  # the child did report it
    for note in notes:
        said = review_note(note)
        assert isinstance(said, Deferred), f"no template read {note!r}"
        zh = said.render("zh")
        assert CJK.search(zh) and english_prose(zh) == [], (note, zh)
        assert str(said).replace("` ", "").replace(" `", "") == note  # English: the note, its data in code spans
    assert set(audit.WATCHED_EVENTS.values()) <= FIXED_NOTES.keys()  # every event the audit names has words


def test_what_no_template_wrote_stays_data_as_it_came():
    odd = ["opened", "imports", "tampered with the grading harness", "x" * 200, "`rm -rf` **bold** <b>"]
    cells = "; ".join(f"{'n' * 60}.ipynb, cell {k}" for k in range(3))
    cut = ATTEMPTS.format(todo="heap", count=3, cells=cells, origin="x.ipynb, cell 2")[:200]  # notes are bounded so
    for note in [*odd, cut]:
        said = review_note(note)
        assert not isinstance(said, Deferred) and said.startswith("`") and note in said
    quoted = review_note(audit.OPENED.format(path=repr("/tmp/`x` **y**")))
    assert quoted.render("zh") == "打开了 `` '/tmp/`x` **y**' ``"  # a quoted path that holds backticks stays a span


def test_a_chinese_feedback_file_says_its_review_notes_in_chinese(tmp_path):
    """The two-attempts note comes from the real intake, the others as the audit and harness write them."""
    folder = tmp_path / "eve"
    folder.mkdir()
    (folder / "05.ipynb").write_text(json.dumps(v.notebook([(v.graded_wrong("snapshot")[0].source, ["todo:snapshot"])])))
    (folder / "05 (copy).ipynb").write_text(json.dumps(v.notebook([(v.REF["snapshot"], ["todo:snapshot"])])))
    review = [*load("eve", folder, STUBS).review, audit.OPENED.format(path=repr("/home/eve/x")), harness.CHANNEL_GAP]
    grade = Grade("eve", {t: TodoGrade("passed", 20) for t in TODO_METHODS}, review=review)
    zh = feedback_text(grade, "zh")
    line = next(x for x in zh.splitlines() if x.startswith("运行时审计的复查记录"))
    assert english_prose(line) == [] and "different attempts" not in line and "tampered" not in line, line
    assert "` 05 (copy).ipynb `，第 2 个单元格；` 05.ipynb `，第 2 个单元格" in line and "` '/home/eve/x' `" in line
    en = feedback_text(grade, "en")
    assert ("(they do not change the grade): ` snapshot ` has 2 different attempts (` 05 (copy).ipynb `, cell 2; "
            "` 05.ipynb `, cell 2): graded the last, ` 05.ipynb `, cell 2; opened ` '/home/eve/x' `; tampered with") in en
