"""The LMS exports, the late rule's extensions, and what an export refuses (kvsched grade export).

The gradebook files are checked against the importers' documented formats (docs/grading.md names
the canvas-lms and Moodle code): ONE grade column, the final total after the late rule; per-TODO
points and late days only in points-by-todo.csv, which is no import.
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from kvsched_lab.grading.classroom import export, extensions, late
from kvsched_lab.grading.batch.grade import write_reports

sys.path.insert(0, str(Path(__file__).parent))
from test_class_tools import _grade, _roster  # noqa: E402

ROSTER = "id,name,email,file\ns1,Ann Li,ann@x.edu,ann*\ns2,Bo 王,bo@x.edu,bo*\ns3,Cy,cy@x.edu,cy*\n"


def _class(tmp_path: Path) -> Path:
    write_reports([_grade("c/ann.py", {}), _grade("c/bo.py", {"stale": 6}, ["stale records"]),
                   _grade("c/=cmd.py", {})], tmp_path / "out")
    return tmp_path / "out"


def _rows(path: Path) -> list:
    return list(csv.reader(open(path, encoding="utf-8", newline="")))


def test_each_import_has_one_grade_column_the_final_total(tmp_path, capsys):
    out = _class(tmp_path)
    roster = _roster(tmp_path, ROSTER)
    (tmp_path / "times.csv").write_text("id,submitted\ns1,2026-12-01T10:00:00Z\ns2,2026-12-02T10:00:00Z\n")
    args = [str(out), "--roster", str(roster), "--due", "2026-12-01T12:00:00Z", "--times", str(tmp_path / "times.csv")]
    assert export.export_main(args) == 0
    printed = capsys.readouterr().out
    assert "c/=cmd.py" in printed and "no submission for s3 (Cy)" in printed
    canvas = _rows(out / "export" / "canvas.csv")
    # canvas-lms GradebookImporter: row 0 begins Student, ID; SIS User ID then SIS Login ID; the last student
    # column is Section; every later column is an assignment; a row starting "Points Possible" sets its points.
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "kvsched-lab"]
    assert canvas[1] == ["Points Possible", "", "", "", "", "100"]
    assert canvas[2:] == [["", "", "s1", "ann@x.edu", "", "100"], ["", "", "s2", "bo@x.edu", "", "77"]], (
        "86 less 10% for one started day; s3 has no grade and is left out (an empty cell would erase one)")
    moodle = _rows(out / "export" / "moodle.csv")
    assert moodle == [["ID number", "Email address", "kvsched-lab"], ["s1", "ann@x.edu", "100"],
                      ["s2", "bo@x.edu", "77"]]
    detail = list(csv.DictReader(open(out / "export" / "points-by-todo.csv", encoding="utf-8")))
    assert [(r["id"], r["stale"], r["total"], r["late_days"], r["final"], r["note"]) for r in detail] == [
        ("s1", "20", "100", "0", "100", ""), ("s2", "6", "86", "1", "77", ""), ("s3", "", "", "", "", "no submission")]
    (tmp_path / "times.csv").write_text("id,submitted\ns9,2026-12-01T10:00:00Z\n")
    assert export.export_main(args) == 2 and "s9" in capsys.readouterr().err


def test_canvas_id_targets_an_existing_assignment_and_bad_names_are_refused(tmp_path, capsys):
    out = _class(tmp_path)
    roster = _roster(tmp_path, ROSTER)
    assert export.export_main([str(out), "--roster", str(roster), "--assignment", "Lab 3", "--canvas-id", "4711"]) == 0
    assert _rows(out / "export" / "canvas.csv")[0][-1] == "Lab 3 (4711)"
    assert _rows(out / "export" / "moodle.csv")[0][-1] == "Lab 3"
    for bad in (["--canvas-id", "47a"], ["--assignment", "Lab (12)"], ["--assignment", "Final Score"],
                ["--assignment", "=1+1"], ["--assignment", "Section"]):
        assert export.export_main([str(out), "--roster", str(roster), *bad]) == 2, bad
        assert bad[1] in capsys.readouterr().err


def test_an_export_with_no_grade_to_import_fails_and_keeps_the_earlier_one(tmp_path, capsys):
    out = _class(tmp_path)
    assert export.export_main([str(out), "--roster", str(_roster(tmp_path, ROSTER))]) == 0
    before = {p.name: p.read_bytes() for p in (out / "export").iterdir()}
    everyone = _roster(tmp_path, "id,name,email,file\ns1,Ann,a@x,*\ns2,Bo,b@x,*.py\n")  # every pattern ambiguous
    assert export.export_main([str(out), "--roster", str(everyone)]) == 1
    err = capsys.readouterr()
    assert "nothing to import" in err.err and "ambiguous for s1" in err.out
    assert {p.name: p.read_bytes() for p in (out / "export").iterdir()} == before, "the good export is kept"


def test_extensions_move_one_students_due_date(tmp_path):
    out = _class(tmp_path)
    roster = _roster(tmp_path, ROSTER)
    (tmp_path / "times.csv").write_text("id,submitted\ns1,2026-12-03T10:00:00Z\ns2,2026-12-03T10:00:00Z\n")
    (tmp_path / "ext.csv").write_text("id,due,extra_days,reason\ns1,,3,accessibility plan\n"
                                      "s2,2026-12-02T12:00:00Z,,medical\n")
    args = [str(out), "--roster", str(roster), "--due", "2026-12-01T12:00:00Z", "--times", str(tmp_path / "times.csv")]
    assert export.export_main(args) == 0
    plain = {r[2]: r[5] for r in _rows(out / "export" / "canvas.csv")[2:]}
    assert plain == {"s1": "80", "s2": "68"}, "two started days late without the extensions"
    assert export.export_main(args + ["--extensions", str(tmp_path / "ext.csv")]) == 0
    canvas = {r[2]: r[5] for r in _rows(out / "export" / "canvas.csv")[2:]}
    assert canvas == {"s1": "100", "s2": "77"}, "s1 on time with 3 more days; s2 one day past its own date"
    detail = {r["id"]: r for r in csv.DictReader(open(out / "export" / "points-by-todo.csv", encoding="utf-8"))}
    assert detail["s1"]["due"] == "2026-12-04T12:00:00+00:00" and detail["s1"]["extension"].endswith(
        "accessibility plan") and detail["s2"]["late_days"] == "1"


def test_every_bad_extension_row_is_reported_before_any_work(tmp_path, capsys):
    due = late.parse_time("2026-12-01T12:00:00Z", "t")
    path = tmp_path / "ext.csv"
    path.write_text("id,due,extra_days\n"
                    "s1,,３\n"  # full-width digit
                    "s2,,+2\n"
                    "s3,,2_0\n"
                    "s1,,1.5\n"
                    "s9,,2\n"  # not in the roster
                    "s2,2026-12-05T12:00:00Z,3\n"  # both
                    "s3,2026-11-30T12:00:00Z,\n"  # earlier
                    "s4,2026-12-05T12:00:00,\n"  # no UTC offset
                    "s5,,400\n"
                    "s6,,2\ns6,,3\n")
    with pytest.raises(late.LateError) as e:
        extensions.read_extensions(path, due, ["s1", "s2", "s3", "s4", "s5", "s6"])
    lines = str(e.value).split("\n")
    for n, needle in [(2, "'３'"), (3, "'+2'"), (4, "'2_0'"), (5, "'1.5'"), (6, "'s9' is not in the roster"),
                      (7, "not both"), (8, "before --due"), (9, "UTC offset"), (10, "'400'"),
                      (12, "'s6' is already on line 11")]:
        assert any(f"line {n}:" in x and needle in x for x in lines), (n, needle, lines)
    assert len(lines) == 10
    with pytest.raises(late.LateError, match="line 1: the header"):
        path.write_text("id,extra days\ns1,2\n")
        extensions.read_extensions(path, due, ["s1"])
    out = _class(tmp_path)
    (tmp_path / "times.csv").write_text("id,submitted\ns1,soon\ns2,later\n")
    path.write_text("id,extra_days\ns1,x\n")
    args = [str(out), "--roster", str(_roster(tmp_path, ROSTER)), "--due", "2026-12-01T12:00:00Z",
            "--times", str(tmp_path / "times.csv"), "--extensions", str(path)]
    assert export.export_main(args) == 2
    err = capsys.readouterr().err
    assert "times.csv, line 2" in err and "times.csv, line 3" in err and "ext.csv, line 2" in err, err
    assert not (out / "export").exists(), "nothing written"
