"""The box's cell runner (kvsched_lab/grading/kernel/cells.py) on its own failure modes.

The runner replaced ``pytest --nbval-lax`` in the grading box: the grading notebook's cells run in
order in one isolated IPython process fed over a Unix socket. These run it directly (no sandbox: what is
tested is the runner and its channel), on notebooks of cells written to misbehave: a cell that
kills its process, floods stdout, forges a reply, floods the socket, sleeps past its limit,
uses a magic; each run must end with one outcome per cell, in nbval's format, and never hang or
raise. The grading tests (test_grading*.py) run the same runner end to end, in the sandbox.
"""
from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest

from kvsched_lab.grading.kernel import cells
from kvsched_lab.grading.kernel.cells import DEAD, FAILED, REPLY_CAP, run_cells

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = ROOT / "kvsched_lab" / "grading" / "kernel" / "kernel_launcher.py"
NAME = "t.ipynb"

# Cell code that writes to every socket it holds (the runner's, in the kernel) or can reopen.
WRITE_SOCKETS = """import os, stat
def _sockets():
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                yield fd
        except OSError:
            pass
def write_sockets(data):
    wrote = 0
    for fd in _sockets():
        try:
            os.write(fd, data)
            wrote += 1
        except OSError:
            pass
    return wrote
def reopen_parents(data):  # its sockets, found by their links' names (socket:[INODE]): (seen, written to)
    seen = wrote = 0
    for name in os.listdir(f"/proc/{os.getppid()}/fd"):
        try:
            if not os.readlink(f"/proc/{os.getppid()}/fd/{name}").startswith("socket:"):
                continue
            seen += 1
            with open(f"/proc/{os.getppid()}/fd/{name}", "wb") as f:
                f.write(data)
            wrote += 1
        except OSError:
            pass
    return seen, wrote
"""
FORGED_NEXT = b'{"cell": 1, "outcome": "passed", "message": ""}\n'  # cell 1's outcome, sent early


def _run(tmp_path: Path, sources, cell_timeout: float = 20.0):
    """Outcomes of `sources`, the kernel's log, and the seconds the run took."""
    launcher = tmp_path / "kernel_launcher.py"  # beside the run's files, as box_main puts it
    shutil.copyfile(LAUNCHER, launcher)
    log = tmp_path / "box.log"
    kernel = [sys.executable, "-I", str(launcher), "--lib", str(ROOT), "--memory-mb", "2048", "--log", str(log)]
    started = time.monotonic()
    outcomes = run_cells(kernel, list(sources), NAME, cell_timeout, str(tmp_path))
    return outcomes, (log.read_text(errors="replace") if log.exists() else ""), time.monotonic() - started


def _cell(k: int) -> str:
    return f"{NAME}::Cell {k}"


def test_cells_run_in_order_in_one_kernel_with_magics_display_and_failures_as_nbval_reports_them(tmp_path):
    outcomes, log, _ = _run(tmp_path, [
        "x = 20",
        "%time y = x + 1",  # a line magic
        "%%capture kept\nprint('inside')",  # a cell magic
        "from IPython.display import display\ndisplay({'shown': y * 2})",
        "1 / 0",  # a failing cell: the next still runs, as with nbval
        "raise SystemExit(3)",
        "print('last', x + y, kept.stdout.strip())",
    ])
    assert list(outcomes) == [_cell(k) for k in range(7)]
    assert [o for o, _ in outcomes.values()] == ["passed"] * 4 + ["failed", "failed", "passed"]
    assert outcomes[_cell(4)] == ["failed", FAILED] and outcomes[_cell(0)] == ["passed", ""]
    assert "{'shown': 42}" in log and "ZeroDivisionError" in log and "last 41 inside" in log


def test_the_kernel_has_the_launchers_clean_import_path_and_limits(tmp_path):
    outcomes, log, _ = _run(tmp_path, [
        "import kvsched_lab, resource, sys\nprint('lib', kvsched_lab.__file__)\n"
        "print('as', resource.getrlimit(resource.RLIMIT_AS)[0] >> 20, 'argv', sys.argv[1:])",
        "import kvsched_lab.grading.box",  # the grader's side is refused in the kernel
        "import solutions",
    ])
    assert [o for o, _ in outcomes.values()] == ["passed", "failed", "failed"]
    assert f"lib {ROOT / 'kvsched_lab' / '__init__.py'}" in log and "as 2048 argv []" in log
    assert "not available while grading" in log


@pytest.mark.parametrize("kill", ["import os; os._exit(0)", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
def test_a_cell_that_kills_its_kernel_fails_and_so_does_every_later_cell(tmp_path, kill):
    outcomes, _, seconds = _run(tmp_path, ["a = 1", kill, "a"])
    assert outcomes[_cell(0)] == ["passed", ""]
    assert outcomes[_cell(1)][0] == "failed" and "Kernel dead" in outcomes[_cell(1)][1]
    assert outcomes[_cell(2)] == ["failed", DEAD]
    assert seconds < 15, "a dead kernel is seen at once, not after the cell's time limit"


def test_a_cell_past_its_limit_is_ended_and_later_cells_fail(tmp_path):
    outcomes, _, seconds = _run(tmp_path, ["import os; print('pid', os.getpid(), flush=True)",
                                           "import time; time.sleep(60)", "1"], cell_timeout=3)
    assert outcomes[_cell(1)][0] == "failed" and outcomes[_cell(1)][1].startswith("Timeout of 3 seconds")
    assert outcomes[_cell(2)] == ["failed", DEAD] and seconds < 30


def test_stdout_floods_go_to_the_log_not_the_channel(tmp_path):
    outcomes, log, _ = _run(tmp_path, [
        "import os, sys\nfor _ in range(200):\n    sys.stdout.write('y' * 10000 + '\\n')\n"
        "os.write(1, b'z' * 300000)", "print('after')"])
    assert [o for o, _ in outcomes.values()] == ["passed", "passed"] and log.endswith("after\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reopening through /proc/PID/fd is Linux's")
def test_children_the_kernel_forks_neither_hold_nor_reopen_its_socket(tmp_path):
    """The harness runs learner code in children the kernel forks: they cannot reach the runner's socket."""
    outcomes, log, _ = _run(tmp_path, [WRITE_SOCKETS + (
        "pid = os.fork()\nif pid == 0:\n"
        f"    os.write(1, b'child wrote to %d sockets; the kernel holds %d, %d reopened\\n' % "
        f"((write_sockets({FORGED_NEXT!r}),) + reopen_parents({FORGED_NEXT!r})))\n    os._exit(0)\nos.waitpid(pid, 0)"), "1 / 0"])
    assert "child wrote to 0 sockets; the kernel holds 1, 0 reopened" in log and "/fd/" not in log
    assert outcomes[_cell(1)] == ["failed", FAILED], "a forked child forged the next cell's outcome"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sender's credentials are Linux's")
def test_bytes_from_any_process_but_the_kernel_are_a_forgery(tmp_path):
    """A child given a copy of the socket (here by a cell, before the fork) still cannot speak for the kernel."""
    outcomes, _, _ = _run(tmp_path, [WRITE_SOCKETS + (
        "copies = [os.dup(fd) for fd in _sockets()]\npid = os.fork()\nif pid == 0:\n"
        f"    write_sockets({FORGED_NEXT!r})\n    os._exit(0)\nos.waitpid(pid, 0)"), "1", "2"])
    assert outcomes[_cell(0)][0] == "failed" and "other than the kernel" in outcomes[_cell(0)][1]
    assert outcomes[_cell(1)] == ["failed", DEAD] and outcomes[_cell(2)] == ["failed", DEAD]


@pytest.mark.parametrize("forged", [
    b'{"cell": 0, "outcome": "passed", "message": ""}\n',  # this cell's reply, ahead of the real one
    b'not json at all\n', b'{"cell": 0, "outcome": "won", "message": ""}\n',
    b'[' * 5000 + b'\n',  # deep enough to overflow a recursive parser
    b'{"cell": true, "outcome": "passed", "message": ""}\n',
])
def test_a_forged_reply_never_passes_a_later_cell_and_ends_the_kernel(tmp_path, forged):
    outcomes, _, _ = _run(tmp_path, [WRITE_SOCKETS + f"assert write_sockets({forged!r}) == 1",
                                     "1 / 0", "'never run'"])
    assert len(outcomes) == 3
    assert all(o == "failed" for o, _ in list(outcomes.values())[1:]), outcomes
    assert outcomes[_cell(2)] == ["failed", DEAD]
    if b"passed" not in forged or b"true" in forged:
        assert "did not write" in outcomes[_cell(0)][1]


def test_a_flooded_socket_is_cut_at_its_cap_and_ends_the_kernel(tmp_path):
    outcomes, _, seconds = _run(tmp_path, [WRITE_SOCKETS + f"write_sockets(b'x' * {4 * REPLY_CAP})\n"
                                           "import time; time.sleep(30)", "2"])
    assert outcomes[_cell(0)][0] == "failed" and f"more than {REPLY_CAP} bytes" in outcomes[_cell(0)][1]
    assert outcomes[_cell(1)] == ["failed", DEAD] and seconds < 25


def test_a_kernel_that_never_starts_fails_every_cell_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(cells, "STARTUP_SECONDS", 2.0)
    launcher = tmp_path / "never.py"
    launcher.write_text("import time; time.sleep(30)\n")
    started = time.monotonic()
    outcomes = run_cells([sys.executable, str(launcher)], ["1", "2"], NAME, 20.0, str(tmp_path))
    assert [o for o, _ in outcomes.values()] == ["failed", "failed"] and time.monotonic() - started < 15
    assert all(m.startswith(DEAD) and "did not start" in m for _, m in outcomes.values())


# Each of the runner's outcomes, made by really running it: (cells, cell timeout, the kinds of its failed cells).
OUTCOMES = {
    "a kernel that dies": (["1", "import os; os._exit(0)", "2"], 20.0, ["eof", "dead"]),
    "a cell past its limit": (["1", "import time; time.sleep(60)", "2"], 3.0, ["timeout", "dead"]),
    "a grader cell that raises": (["1", "1 / 0"], 20.0, ["failed"]),
    "a flooded socket": (["1", WRITE_SOCKETS + f"write_sockets(b'x' * {4 * REPLY_CAP})\nimport time; time.sleep(30)"],
                         20.0, ["flood"]),
    "a reply the runner did not write": (["1", WRITE_SOCKETS + "write_sockets(b'not json at all\\n')"], 20.0,
                                         ["garbled"]),
    "bytes from another process": (["1", WRITE_SOCKETS + "copies = [os.dup(fd) for fd in _sockets()]\npid = os.fork()\n"
                                    f"if pid == 0:\n    write_sockets({FORGED_NEXT!r})\n    os._exit(0)\nos.waitpid(pid, 0)",
                                    "2"], 20.0, ["forged", "dead"]),
}


def _zh_feedback(outcome) -> str:
    """The Chinese feedback file of a submission whose snapshot TODO's grading cell ended with `outcome`."""
    from kvsched_lab.grading.batch.grade import Grade, feedback_text
    from kvsched_lab.grading.judging.unfinished import why_unfinished
    from kvsched_lab.grading.judging.verdict import TodoGrade

    lines = [why_unfinished(tuple(outcome), False, "")]
    return feedback_text(Grade("s.py", {"snapshot": TodoGrade("error", lines=lines)}), "zh")


def _english_heads():
    """The start of every message the runner writes: none may reach a Chinese reader."""
    return [FAILED, DEAD] + [why.split("{")[0] for why in cells.WHY.values()]


@pytest.mark.parametrize("case", sorted(OUTCOMES))
def test_every_runner_outcome_reads_in_chinese_in_zh_feedback(tmp_path, case):
    """The runner's texts stay nbval's English (the grader recognises them); a learner graded in
    Chinese reads what each one means in Chinese, for the TODO it stopped and for every later one."""
    from english_prose import CJK, english_prose

    if case == "bytes from another process" and not sys.platform.startswith("linux"):
        pytest.skip("the sender's credentials are Linux's")
    sources, limit, kinds = OUTCOMES[case]
    outcomes, _, _ = _run(tmp_path, sources, cell_timeout=limit)
    failed = [o for o in outcomes.values() if o[0] == "failed"]
    assert [cells.outcome_kind(m) for _, m in failed] == kinds, outcomes
    for outcome in failed:
        text = _zh_feedback(outcome)
        graded = text.split("## snapshot", 1)[1]
        assert CJK.search(graded) and [line for line in graded.splitlines() if english_prose(line)] == [], graded
        assert not any(head in text for head in _english_heads()), text


def test_a_kernel_that_never_starts_reads_in_chinese_in_zh_feedback(tmp_path, monkeypatch):
    from english_prose import english_prose

    monkeypatch.setattr(cells, "STARTUP_SECONDS", 1.0)
    launcher = tmp_path / "never.py"
    launcher.write_text("import time; time.sleep(30)\n")
    outcome = run_cells([sys.executable, str(launcher)], ["1", "2"], NAME, 20.0, str(tmp_path))[_cell(1)]
    assert cells.outcome_kind(outcome[1]) == "not started"
    text = _zh_feedback(outcome)
    assert [line for line in text.splitlines() if english_prose(line)] == [] and "评分内核没有启动" in text, text
    assert not any(head in text for head in _english_heads()), text


@pytest.mark.parametrize("ended", ["wall", "output", "budget"])
def test_why_the_sandbox_was_ended_reads_in_chinese_before_its_output(ended):
    """A box ended for its wall clock, its output or its limits wrote no report: a learner graded in
    Chinese reads why in Chinese (the grader used to put the reason, in English, into the output's
    tail), and the tail itself stays data, quoted as it was."""
    from english_prose import CJK
    from kvsched_lab.grading.batch.grade import Grade, feedback_text
    from kvsched_lab.grading.judging.unfinished import ENDINGS, why_unfinished
    from kvsched_lab.grading.judging.verdict import TodoGrade

    tail = "learner's own print\n"
    line = why_unfinished(None, True, tail, ended)
    zh = feedback_text(Grade("s.py", {"snapshot": TodoGrade("error", lines=[line])}), "zh")
    en = feedback_text(Grade("s.py", {"snapshot": TodoGrade("error", lines=[line])}), "en")
    assert ENDINGS[ended] in en and ENDINGS[ended] not in zh
    assert "sandbox" not in zh.replace(tail, "") and CJK.search(zh.split(tail)[0])
    assert tail in zh and tail in en
    assert why_unfinished(None, True, tail) != line  # no reason given, none said
