"""What an instructor sees around the grades: the report's rows to look at and grouped mistakes, an
override's badge, the warning for one learner's folder passed alone, and the outputs' file modes."""
from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

from kvsched_lab.grading import grade_main
from kvsched_lab.grading.classroom import export
from kvsched_lab.grading.classroom.feedback_html import render
from kvsched_lab.grading.batch.grade import feedback_text, write_reports
from kvsched_lab.grading.classroom.overrides import parse_overrides
from kvsched_lab.grading.classroom.report import write_report
from kvsched_lab.grading.judging.submissions import UNTAGGED
from kvsched_lab.grading.judging.verdict import REPO, TodoGrade

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
sys.path.insert(0, str(Path(__file__).parent))
import variants as v  # noqa: E402
from test_class_tools import HEAD, TODOS, _grade, _roster  # noqa: E402


def _class_with_trouble():
    ok = [_grade(f"c/s{k}.py", {"score": 12} if k % 2 else {}, ["precision"]) for k in range(6)]
    broken = _grade("c/broken.py", {})
    broken.error, broken.todos = "not a notebook", {t: TodoGrade("error") for t in TODOS}
    slow = _grade("c/slow.py", {"heap": 0}, ["ties"])
    slow.todos["heap"].status = "timed out"
    untagged = _grade("c/untagged", {"stale": 0})
    untagged.todos["stale"] = TodoGrade(UNTAGGED, 0, 0, 40)
    twice = _grade("c/twice", {})
    twice.review.append("snapshot has 2 different attempts (05 (copy).ipynb, cell 3; 05.ipynb, cell 3): graded the "
                        "last, 05.ipynb, cell 3")
    fixed = _grade("c/fixed.py", {"score": 18}, ["precision"])
    return ok + [broken, slow, untagged, twice, fixed]


def test_report_names_every_row_to_look_at_with_a_link_to_its_feedback(tmp_path):
    out = tmp_path / "out"
    overrides = parse_overrides(HEAD + "fixed.py,score,20,the notebook's hint was wrong\n")
    write_reports(_class_with_trouble(), out, overrides=overrides)
    page = write_report(out).read_text()
    section = page.split("Rows that need attention (5)</h2>")[1].split("</table>")[0]
    rows = re.findall(r'<tr><td><a href="([^"]+)">([^<]+)</a></td><td>\d+</td><td>(.*?)</td></tr>', section)
    why = {name: reasons for _, name, reasons in rows}
    assert set(why) == {"c/broken.py", "c/slow.py", "c/untagged", "c/twice", "c/fixed.py"}, why
    assert "could not be graded: not a notebook" in why["c/broken.py"]
    assert "heap: timed out" in why["c/slow.py"] and "stale: lost its todo:stale tag" in why["c/untagged"]
    assert "two attempts: snapshot has 2 different attempts" in why["c/twice"]
    assert "override: score 18-&gt;20: the notebook&#x27;s hint was wrong" in why["c/fixed.py"]
    for href, name, _ in rows:
        target = (out / "report" / unquote(href)).resolve()
        assert target.is_file() and target.parent == (out / "feedback").resolve(), href
        assert name in target.read_text(), "the link opens that learner's feedback"
    mistakes = page.split("Most common mistakes</h2>")[1].split("</table>")[0]
    # as graded: the overridden row made the mistake too (its override is named above)
    assert re.search(r"<td>score</td><td>fails precision</td><td>4</td><td>(<a href=[^>]+>c/(s\d|fixed)\.py</a>(, )?){4}"
                     "</td>", mistakes), mistakes
    assert "<td>heap</td><td>timed out (fails ties)</td><td>1</td>" in mistakes
    assert "broken" not in mistakes and "```" not in mistakes and "First difference" not in mistakes


def test_a_mistake_failing_many_families_is_summed_up_and_lists_them_on_request(tmp_path):
    many = ["chapter example", "random sequences", "ties in priority", "precision", "tiny capacities"]
    grades = [_grade(f"c/s{k}.py", {"heap": 0}, many) for k in range(2)] + [_grade("c/t.py", {"heap": 5}, many[:2])]
    write_reports(grades, tmp_path / "out")
    mistakes = write_report(tmp_path / "out").read_text().split("Most common mistakes</h2>")[1].split("</table>")[0]
    assert ("<td>heap</td><td><details><summary>fails 5 families</summary>chapter example; random sequences; ties in "
            "priority; precision; tiny capacities</details></td><td>2</td>") in mistakes, mistakes
    assert "<td>heap</td><td>fails chapter example; random sequences</td><td>1</td>" in mistakes


def test_an_overridden_todo_shows_its_final_points_and_a_corrected_badge():
    g = _grade("c/ann.py", {"score": 18, "heap": 12}, ["precision"])
    overrides = parse_overrides(HEAD + "ann.py,score,20,the precision case contradicts the notebook\n")
    for lang, corrected, failed in (("en", "corrected", "failed"), ("zh", "已更正", "未通过")):
        text = feedback_text(g, lang, corrections=overrides)
        page = render(text, lang)
        score = page.split('<h2 id="todo-score">')[1].split("</h2>")[0]
        assert f'style="background:#0969da">{corrected}</span>' in score, (lang, score)
        assert "20 / 20" in score and "18 / 20" not in score, (lang, score)
        heap = page.split('<h2 id="todo-heap">')[1].split("</h2>")[0]
        assert f">{failed}</span>" in heap and "12 / 20" in heap, "a TODO without an override keeps its verdict"
    assert "As graded: failed, 18/20" in feedback_text(g, "en", corrections=overrides)
    assert "评分结果：未通过，18/20 分" in feedback_text(g, "zh", corrections=overrides)


def test_one_learners_folder_passed_alone_is_warned_about(tmp_path, capsys):
    course = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    layout = dict(zip(course[2:6], v.LAYOUT.values()))
    alice = v.write_series(tmp_path / "alice", dict(v.REF), layout=layout)
    (tmp_path / "ov.csv").write_text(HEAD + "nobody.py,score,20,stops the run before grading\n")
    assert grade_main([str(alice), "--out", str(tmp_path / "out"), "--no-sandbox",
                       "--overrides", str(tmp_path / "ov.csv")]) == 2
    err = capsys.readouterr().err
    assert f"warning: {alice} holds 4 of the course's notebooks ({course[2]}, {course[3]}, {course[4]}, ...)" in err
    assert "ONE learner's folder" in err and "--learner" in err
    classroom = tmp_path / "class"
    classroom.mkdir()
    alice.rename(classroom / "alice")
    assert grade_main([str(classroom), "--out", str(tmp_path / "out"), "--no-sandbox",
                       "--overrides", str(tmp_path / "ov.csv")]) == 2
    assert "warning" not in capsys.readouterr().err, "a class folder holding her folder is what was meant"


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_class_outputs_are_readable_per_the_umask_like_the_figures(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        out = tmp_path / "out"
        write_reports([_grade("c/ann.py", {}), _grade("c/bo.py", {"heap": 3}, ["ties"])], out)
        write_report(out)
        assert export.export_main([str(out), "--roster", str(_roster(tmp_path, "id,name,email,file\ns1,A,a@x,ann*\n"))]) == 0
    finally:
        os.umask(old)
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {p.suffix for p in files} >= {".csv", ".html", ".md", ".png", ".json", ".txt"}
    modes = {str(p.relative_to(out)): oct(stat.S_IMODE(p.stat().st_mode)) for p in files}
    assert set(modes.values()) == {oct(mode)}, modes


def test_report_on_an_older_details_file_says_regrade_instead_of_crashing(tmp_path, capsys):
    import json

    from kvsched_lab.grading.classroom.report import report_main

    out = tmp_path / "out"
    write_reports([_grade("c/ann.py", {})], out)
    data = json.loads((out / "details.json").read_text())
    del data["rows"][0]["feedback"]  # as kvsched wrote it before rows named their feedback file
    (out / "details.json").write_text(json.dumps(data))
    assert report_main([str(out)]) == 2
    assert "regrade the class" in capsys.readouterr().err


def test_the_two_attempts_reason_matches_the_note_the_loader_writes(tmp_path):
    """attention.py recognises the loader's own review note (not a hand-written copy of its words)."""
    from kvsched_lab.grading.classroom.attention import TWO_ATTEMPTS
    from kvsched_lab.grading.judging.stubs import known_stubs
    from kvsched_lab.grading.judging.submissions import load

    layout = {**v.LAYOUT, "05_snapshot (copy).ipynb": ["snapshot"]}
    folder = v.write_series(tmp_path / "ann", dict(v.REF), layout=layout)
    other = v.ALTERNATIVES["snapshot"][0]
    v.write_series(tmp_path / "ann", {**v.REF, "snapshot": other}, layout={"05_snapshot.ipynb": ["snapshot"]})
    sub = load("ann", folder, known_stubs(REPO / "notebooks"))
    assert [r for r in sub.review if TWO_ATTEMPTS in r], sub.review
