"""Grading holds against a student who has read the grader: one sandboxed batch of attacks.

Every attack in tests/grading_cases/attacks/ (one TODO cell each, the other TODOs left as stubs,
so only the attack could earn points) plus the layout attacks built here (a FIFO and a link to
/dev/zero named .ipynb, a link to another student's folder, an oversized file, notebooks
directly in the class folder) and honest controls go through one ``kvsched grade`` run. Each
attack must end below full marks or with an error/review status; no process may outlive
grading; grades.csv must stay as the grader wrote it and match the SHA-256 it printed.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

from kvsched_lab.grading import grade_main
from kvsched_lab.grading.release.release_checks import forbidden_lines
from kvsched_lab.grading.box.leases import in_leased_range
from kvsched_lab.grading.box.sandbox import probe
from kvsched_lab.sim.scheduler import TODO_METHODS

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
import variants as v  # noqa: E402

ATTACKS = Path(__file__).parent / "grading_cases" / "attacks"
TODOS = list(TODO_METHODS)
MARK = "kvsched-attack"  # the detached attacker names itself so (PR_SET_NAME, 15 characters at most)
INJECTING_NAME = "x\u2028!:\u2028_kvh.watch=lambda*a:None#.py"  # once ran code in the grading kernel
FORMULA_NAME = "\uff1dHYPERLINK(\"x\").py"  # a full-width = : a formula to a spreadsheet
HONEST = ("honest-ref.py", "honest-different.py", "honest-bob", "honest-ann", "carol.ipynb", "caf\\xe9.py", "a_b.py")

works, why = probe()
pytestmark = pytest.mark.skipif(not works, reason=f"the grading sandbox cannot run here: {why}")


def _attack_source(path: Path, grades_csv: Path, class_dir: Path) -> tuple:
    text = path.read_text(encoding="utf-8")
    todo = re.match(r"# todo: (\w+)", text).group(1)
    return todo, text.replace("__GRADES_CSV__", str(grades_csv)).replace("__CLASS_DIR__", str(class_dir))


def _stubs_except(todo: str, source: str) -> Dict[str, str]:
    return {t: (source if t == todo else v.stub(t)) for t in TODOS}


def _alive(marker: str, uids: range) -> List[str]:
    """Processes named `marker` or running as one of the batch's leased `uids` (as root), on this machine."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            comm = Path(entry.path, "comm").read_text().strip()
            uid = entry.stat().st_uid
        except OSError:
            continue
        if comm == marker[:15] or (os.geteuid() == 0 and uid in uids):
            found.append(f"{entry.name} {comm} uid {uid}")
    return found


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    base = tmp_path_factory.mktemp("attacks")
    root, out = base / "class", base / "grades"
    root.mkdir()
    grades_csv = out / "grades.csv"
    names = []
    for path in sorted(ATTACKS.glob("*.py")):
        todo, source = _attack_source(path, grades_csv, root)
        (root / path.name).write_text(v.py_submission(_stubs_except(todo, source)), encoding="utf-8")
        names.append(path.name)
    # Honest controls in the same batch.
    (root / "honest-ref.py").write_text(v.py_submission({}), encoding="utf-8")
    (root / "honest-stub.py").write_text(v.py_submission({t: v.stub(t) for t in TODOS}), encoding="utf-8")
    wrong = v.graded_wrong("snapshot")[0]
    (root / "honest-one-mistake.py").write_text(v.py_submission({"snapshot": wrong.source}), encoding="utf-8")
    (root / "honest-different.py").write_text(v.py_submission({t: alts[1] for t, alts in v.ALTERNATIVES.items()}),
                                              encoding="utf-8")
    v.write_series(root / "honest-bob", v.REF)
    # Layout attacks.
    os.mkfifo(root / "fifo.ipynb")
    os.symlink("/dev/zero", root / "zero.ipynb")
    os.symlink(root / "honest-bob", root / "link-to-bob")
    (root / "huge.py").write_text(v.py_submission({}) + "#" * (5 << 20) + "\n", encoding="utf-8")
    v.write_series(base / "flat", v.REF, layout={"carol.ipynb": TODOS})
    (base / "flat" / "carol.ipynb").rename(root / "carol.ipynb")
    v.write_series(base / "flat", {}, layout={"dave.ipynb": TODOS})
    (base / "flat" / "dave.ipynb").rename(root / "dave.ipynb")
    bob_before = {p.name: p.read_bytes() for p in (root / "honest-bob").iterdir()}
    # Issue 19: names that once ran code, crashed the writers or took another's feedback file.
    import_solutions = v.py_submission(_stubs_except("score", "def _score(self, hits, size, last_used):\n"
                                                              "    import solutions\n"))
    (root / INJECTING_NAME).write_text(import_solutions, encoding="utf-8")
    (root / os.fsdecode(b"caf\xe9.py")).write_text(v.py_submission({}), encoding="utf-8")  # honest, not UTF-8
    (root / "a_b.py").write_text(v.py_submission({}), encoding="utf-8")  # honest
    (root / "a b.py").write_text(v.py_submission({t: v.stub(t) for t in TODOS}), encoding="utf-8")
    (root / FORMULA_NAME).write_text(v.py_submission({t: v.stub(t) for t in TODOS}), encoding="utf-8")
    ann = v.write_series(root / "honest-ann", v.REF)  # an ungraded notebook over 4 MiB beside her work
    plots = v.notebook([("print('plots')", [])])
    plots["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x" * (5 << 20)}]
    (ann / "06_plots.ipynb").write_text(json.dumps(plots), encoding="utf-8")

    import contextlib
    import io

    printed = io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(printed):
        code = grade_main([str(root), "--out", str(out), "--jobs", "2", "--timeout", "10"])
    seconds = time.monotonic() - started
    csv_after_grading = grades_csv.read_bytes()
    time.sleep(3)  # the detached attacker tries every 0.25 s for 30 s
    with open(grades_csv, newline="", encoding="utf-8") as f:
        rows = {Path(r["submission"]).name: r for r in csv.DictReader(f)}
    return {"code": code, "rows": rows, "out": out, "printed": printed.getvalue(), "names": names,
            "csv_after_grading": csv_after_grading, "root": root, "bob_before": bob_before, "seconds": seconds}


def test_no_process_outlives_grading_and_grades_csv_is_intact(attacked):
    assert attacked["code"] == 0, attacked["printed"][-2000:]
    first, last = 0, -1  # unprivileged: no uids of its own, the user namespace maps the grader's
    if os.geteuid() == 0:
        first, last = map(int, re.search(r"sandbox uids (\d+)-(\d+)", attacked["printed"]).groups())
        assert last == first + 1 and in_leased_range(first) and in_leased_range(last), "--jobs 2: two leased uids"
    assert _alive(MARK, range(first, last + 1)) == []
    data = (attacked["out"] / "grades.csv").read_bytes()
    assert data == attacked["csv_after_grading"] and b"forged" not in data
    digest = re.search(r"grades.csv sha256 ([0-9a-f]{64})", attacked["printed"]).group(1)
    assert digest == hashlib.sha256(data).hexdigest()


def test_every_attack_is_stopped(attacked):
    rows = attacked["rows"]
    for name in attacked["names"]:
        row = rows[name]
        stopped = int(row["total"]) < 100 or "error" in row["status"] or "review:" in row["status"]
        assert stopped, (name, row)
        assert int(row["total"]) == 0, (name, row)  # every other TODO is a stub: the attack earned nothing
    # The runtime audit names what each did.
    status = {n: rows[n]["status"] for n in attacked["names"]}
    assert "imports solutions" in status["reenable_import.py"]
    assert "opened" in status["read_solutions_by_path.py"] and "solutions" in status["read_solutions_by_path.py"]
    # it reaches for the kernel's socket through /proc (a socket cannot be reopened there) and is seen
    connect = status["connect_to_kernel.py"]
    assert "/cmdline" in connect and "/fd/" in connect, connect
    assert "forked a process" in status["detached_rewriter.py"]
    # it kills everything it can see: only the sandbox's own processes, so that row errs and the batch goes on
    assert "snapshot: error" in status["kill_the_grader.py"]
    assert "searched the heap (gc)" in status["print_reference_code.py"]
    assert "/proc/self/mem" in status["read_kernel_memory.py"]
    assert "imports solutions" in status["hidden_import.py"]
    # Issue 19, item 4: the audit's blind spots and its budget (before: each of these read "ok").
    blind = status["blind_the_channel.py"]
    # its copies of the pipe keep it open, so the parent sees a silent child: timed out, or a gap
    assert "tried to close or redirect the results channel" in blind and "imports solutions" in blind, blind
    assert "tampered with the results channel" in blind or "score: timed out" in blind, blind
    primitives = status["audit_primitives.py"]
    for seen in ("opened '/etc/hostname'", "_posixsubprocess", "tampered with the grading harness or sys.modules",
                 "opened process memory for writing"):
        assert seen in primitives, (seen, primitives)
    assert "imports solutions" in status["note_flood.py"], "harmless notes cannot push the serious one out"
    # item 6: all processes of one sandbox together (before: 4 x 600 MiB detached went through)
    assert "over its 2048 MiB" in status["memory_hogs.py"], status["memory_hogs.py"]
    assert "forked a process" in status["cpu_burners.py"]
    # item 1: a lone surrogate in an exception message is this row's error, not the batch's crash
    assert "score: error" in status["surrogate_message.py"]


def test_kernel_memory_and_printed_code_hold_no_reference(attacked):
    feedback = {p.name: p.read_text() for p in (attacked["out"] / "feedback").iterdir()}
    memory = next(t for n, t in feedback.items() if "read_kernel_memory" in n)
    assert "RuntimeError: nothing found" in memory, memory
    forbidden = forbidden_lines()
    for name, text in feedback.items():
        leaked = [line for line in forbidden if line in text and "honest" not in name]
        assert not leaked, (name, leaked[:2])


def test_layout_attacks_are_error_rows_and_nothing_is_merged(attacked):
    rows = attacked["rows"]
    assert rows["fifo.ipynb"]["status"] == "error: fifo.ipynb is a FIFO, not a regular file"
    assert rows["zero.ipynb"]["status"].startswith("error: zero.ipynb is a symbolic link")
    assert rows["link-to-bob"]["status"].startswith("error: link-to-bob is a symbolic link")
    assert rows["huge.py"]["status"] == "error: huge.py is larger than 4 MiB"
    assert rows["carol.ipynb"]["total"] == "100" and rows["dave.ipynb"]["total"] == "0", "two learners, not one"
    # another student's files were neither replaced nor graded differently
    root = attacked["root"]
    assert {p.name: p.read_bytes() for p in (root / "honest-bob").iterdir()} == attacked["bob_before"]
    assert not any(p.is_symlink() for p in root.iterdir() if p.name not in ("zero.ipynb", "link-to-bob"))


def test_honest_controls_in_the_attacked_batch(attacked):
    rows = attacked["rows"]
    for name in ("honest-ref.py", "honest-different.py", "honest-bob"):
        assert rows[name]["total"] == "100" and rows[name]["status"] == "ok", rows[name]
    assert rows["honest-stub.py"]["total"] == "0"
    one = rows["honest-one-mistake.py"]
    assert int(one["snapshot"]) < 20 and all(one[t] == "20" for t in TODOS if t != "snapshot"), one


def test_names_that_once_ran_code_or_spoofed_are_data(attacked):
    """Issue 19, items 2 and 5. Before: a file name with U+2028 ran code in the grading kernel (the
    audit turned off: ``ok``); ``a b.py`` took ``a_b.py``'s feedback file; a full-width ``＝`` name was a
    spreadsheet formula; a name that is not UTF-8 crashed the batch."""
    rows, out = attacked["rows"], attacked["out"]
    injected = rows[next(n for n in rows if n.startswith("x") and "_kvh.watch" in n)]
    assert "imports solutions" in injected["status"] and injected["total"] == "0", injected
    feedback = {p.name for p in (out / "feedback").glob("*.md")}
    assert {"a_b.py.md", "a%20b.py.md", "caf%5Cxe9.py.md"} <= feedback and len(feedback) == len(rows)
    assert "Total: 100 / 100" in (out / "feedback" / "a_b.py.md").read_text()
    raw = (out / "grades.csv").read_text(encoding="utf-8")
    assert "'" + FORMULA_NAME in rows and "\u2028" not in raw and str(attacked["root"]) not in raw
    spoof = next(p for p in (out / "feedback").glob("*.md") if p.name.startswith("surrogate_message")).read_text()
    assert [line for line in spoof.splitlines() if line.startswith(("Total:", "#"))][:2] == \
        ["# Feedback: ` surrogate_message.py `", "Total: 0 / 100"], "no forged heading"
    outside, fence = [], None  # lines a Markdown viewer renders: those outside code blocks
    for line in spoof.splitlines():
        if fence is None and line.startswith("```"):
            fence = line
        elif fence is not None and line == fence:
            fence = None
        elif fence is None:
            outside.append(line)
    assert not any(line.startswith("# Total") for line in outside), outside
    assert all(line.count("`") >= 2 for line in outside if "<img" in line), "HTML only inside code"



def test_a_class_of_attacks_and_honest_learners(attacked):
    """Every honest row of the attacked class folder is 100 and ok; no attack earned a point."""
    rows = attacked["rows"]
    for name in HONEST:
        assert rows[name]["total"] == "100" and rows[name]["status"] == "ok", (name, rows[name])
    ann = next(p for p in (attacked["out"] / "feedback").glob("*.md") if p.name.startswith("honest-ann"))
    assert "Not read: ` 06_plots.ipynb `" in ann.read_text()
    attacks = attacked["names"] + [n for n in rows if "_kvh.watch" in n] + ["a b.py", "'" + FORMULA_NAME]
    assert all(rows[n]["total"] == "0" for n in attacks), [(n, rows[n]["total"]) for n in attacks if rows[n]["total"] != "0"]
