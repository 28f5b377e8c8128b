"""A class generated from the course's own wrong and right answers, through everything an instructor does:
grade (in shards and merged, where ``kvsched grade merge`` exists), overrides, a one-learner regrade,
roster, Canvas and Moodle exports with late work, the class report, and both pages in Chromium.

The class has ``$KVSCHED_CLASS_SIZE`` learners (default 6, so the suite stays fast; the issue's
100-learner run is ``KVSCHED_CLASS_SIZE=100``, see docs/grading.md): .py files and notebook folders
(some with a ``kvsched_answers/`` folder), each TODO drawn from the reference, the correct
alternatives and the graded wrong answers of tests/grading_cases/variants.py, plus one disguised
copy of another learner. Screenshots go to ``build/browser-screenshots/`` (or ``$KVSCHED_SCREENSHOTS``).
"""
from __future__ import annotations

import csv
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvsched_lab.grading import grade_main
from kvsched_lab.grading.box.sandbox import probe
from kvsched_lab.sim.scheduler import TODO_METHODS

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
sys.path.insert(0, str(Path(__file__).parent))
import variants as v  # noqa: E402
from test_class_tools import disguised  # noqa: E402

TODOS = list(TODO_METHODS)
ROOT = Path(__file__).resolve().parents[1]
SIZE = int(os.environ.get("KVSCHED_CLASS_SIZE", "6"))
JOBS = str(max(2, min(16, (os.cpu_count() or 2))))
SANDBOX_ARGS = [] if probe()[0] else ["--no-sandbox"]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = Path(os.environ.get("KVSCHED_SCREENSHOTS") or ROOT / "build" / "browser-screenshots")


def _has(command: str) -> bool:
    """Whether this checkout's ``kvsched grade`` has `command` (a subcommand, or an option)."""
    args = [command, "--help"] if not command.startswith("--") else ["--help"]
    run = subprocess.run([sys.executable, "-m", "kvsched_lab", "grade", *args], capture_output=True, text=True)
    return (f"usage: kvsched grade {command}" in run.stdout) if not command.startswith("--") else command in run.stdout


def generate(folder: Path, size: int, seed: int = 20):
    """`size` learners; returns name -> TODO -> whether its answer is right, and the copied pair."""
    rng = random.Random(seed)
    right = {t: [v.REF[t]] + v.ALTERNATIVES[t] for t in TODOS}
    want = {}
    for k in range(size - 1):
        sources, ok = {}, {}
        for t in TODOS:
            good = rng.random() < 0.6
            sources[t] = rng.choice(right[t]) if good else rng.choice(v.graded_wrong(t)).source
            ok[t] = good
        name = f"s{k:03d}"
        if k % 2:
            (folder / f"{name}.py").write_text(v.py_submission(sources), encoding="utf-8")
            name += ".py"
        else:
            v.write_series(folder / name, sources)
            (folder / name / "kvsched_answers").mkdir()
            (folder / name / "kvsched_answers" / "answers.json").write_text("{}")
        want[name] = (ok, sources)
    original = next(n for n, (ok, _) in want.items() if n.endswith(".py") and sum(ok.values()) < 5)
    ok, sources = want[original]
    (folder / "copy.py").write_text(v.py_submission({t: disguised(s) for t, s in sources.items()}), encoding="utf-8")
    want["copy.py"] = (ok, sources)
    return want, (original, "copy.py")


def _shot(page: Path, png: Path, height: int) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size=1280,{height}", f"--screenshot={png}", page.as_uri()],
                   check=True, capture_output=True, timeout=120)


def _spread(png: Path) -> int:
    """Distinct colours in the screenshot: a blank page has one or two."""
    from PIL import Image

    return len(Image.open(png).convert("RGB").resize((200, 300)).getcolors(maxcolors=1 << 16) or [])


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    (root / "class").mkdir()
    want, copied = generate(root / "class", SIZE)
    names = sorted(want)
    fixed = [n for n in names if n not in copied][:2]  # the two learners the overrides correct
    overrides = root / "overrides.csv"
    overrides.write_text("submission,todo,points,reason\n"
                         f"{fixed[0]},score,20,regraded by hand: the notebook's hint was misleading\n"
                         f"{fixed[1]},heap,0,\"the heap was copied from a classmate, see the similarity report\"\n")
    out = root / "out"
    common = ["--timeout", "5", "--jobs", JOBS, *SANDBOX_ARGS]
    used_shards = _has("merge") and _has("--shard")
    if used_shards:
        for k in (0, 1):
            assert grade_main([str(root / "class"), "--shard", f"{k}/2", "--out", str(root / f"shard{k}"),
                               *common]) == 0
        assert grade_main(["merge", str(root / "shard0"), str(root / "shard1"), "--out", str(out),
                           "--overrides", str(overrides)]) == 0
    else:
        assert grade_main([str(root / "class"), "--out", str(out), "--overrides", str(overrides), *common]) == 0
    rows = {Path(r["submission"]).name: r for r in csv.DictReader(open(out / "grades.csv", encoding="utf-8"))}
    return {"root": root, "out": out, "want": want, "rows": rows, "names": names, "copied": copied, "fixed": fixed,
            "shards": used_shards, "common": common}


def test_every_learner_is_one_row_graded_right(graded):
    rows, want = graded["rows"], graded["want"]
    assert set(rows) == set(want), "each .py and each folder is one learner; kvsched_answers/ is no learner"
    for name, (ok, _) in want.items():
        if name in graded["fixed"]:
            continue  # overridden below
        for t in TODOS:
            points = int(rows[name][t])
            assert (points == 20) if ok[t] else (points < 20), (name, t, points)
    a, b = graded["copied"]
    assert [rows[a][t] for t in TODOS] == [rows[b][t] for t in TODOS], "the disguised copy still works alike"
    print(f"class of {len(rows)} graded{' in 2 shards, merged' if graded['shards'] else ' (no shard/merge here)'}")


def test_overrides_apply_and_keep_the_graded_points(graded):
    first, second = (graded["rows"][n] for n in graded["fixed"])
    assert first["score"] == "20" and "score" in first["overrides"] and "misleading" in first["overrides"]
    assert second["heap"] == "0" and int(second["graded_total"]) - int(second["total"]) >= 0
    feedback = next((graded["out"] / "feedback").glob(f"*{graded['fixed'][1]}.md")).read_text()
    assert "the heap was copied from a classmate" in feedback


def test_one_learner_regrade_replaces_only_its_row(graded):
    out, names = graded["out"], graded["names"]
    folder = next(n for n in names if not n.endswith(".py") and n not in graded["fixed"])
    before = (out / "grades.csv").read_text().splitlines()
    v.write_series(graded["root"] / "class" / folder, {t: v.ALTERNATIVES[t][0] for t in TODOS})
    assert grade_main(["--learner", str(graded["root"] / "class" / folder), "--out", str(out),
                       *graded["common"]]) == 0
    after = (out / "grades.csv").read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after) if a != b]
    assert len(after) == len(before) and all(folder in a for a, _ in changed)
    assert next(r for r in csv.DictReader(after) if r["submission"].endswith(folder))["total"] == "100"


def test_roster_exports_and_the_report(graded):
    out, names = graded["out"], graded["names"]
    roster = graded["root"] / "roster.csv"
    students = [(f"u{k:03d}", f"Student {k} 学生", f"u{k}@uni.edu", n) for k, n in enumerate(names)
                if n != "copy.py"]  # the copy is nobody's on the roster: it must be reported
    with open(roster, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "name", "email", "file"])
        w.writerows([(i, n, e, p.split(".")[0] + "*") for i, n, e, p in students] + [("u999", "No Show", "ns@u", "zz*")])
    (graded["root"] / "times.csv").write_text("file,submitted\n" + "".join(
        f"{n.upper() if k % 2 else n},2026-12-0{1 + k % 3}T12:00:00Z\n" for k, n in enumerate(names)))
    assert grade_main(["export", str(out), "--roster", str(roster), "--due", "2026-12-01T23:59:00Z",
                       "--times", str(graded["root"] / "times.csv")]) == 0
    report = (out / "export" / "roster-report.txt").read_text()
    assert "unmatched submission (no roster pattern matches it): " in report and "copy.py" in report
    assert "no submission for u999 (No Show)" in report
    canvas = list(csv.reader(open(out / "export" / "canvas.csv", encoding="utf-8")))
    assert len(canvas) == 2 + len(students) + 1 and canvas[-1][5] == ""
    days = {i: str(names.index(n) % 3) for i, _, _, n in students}  # due Dec 1 23:59; handed in Dec 1, 2 or 3
    assert {r[2]: r[-1] for r in canvas[2:-1]} == days, "late days, whatever the case of the times file's names"
    assert grade_main(["report", str(out)]) == 0
    page = (out / "report" / "index.html").read_text()
    a, b = graded["copied"]
    review = page.split("Similar submissions to review")[1]
    assert a in review and b in review, "the disguised copy is listed for review"
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip("needs Debian's chromium for the screenshots (.ci/run installs it)")
    _shot(out / "report" / "index.html", SHOTS / "class-report.png", 3800)
    feedback = next((out / "feedback").glob(f"*{graded['fixed'][1]}.html"))
    _shot(feedback, SHOTS / "feedback-en.png", 2000)
    assert _spread(SHOTS / "class-report.png") > 20 and _spread(SHOTS / "feedback-en.png") > 5
