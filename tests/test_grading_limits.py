"""A TODO's time limits count the CPU its code uses, so a busy machine never times out a right answer.

The harness (kvsched_lab/grading/kernel/harness.py) runs here in the test's own process, without a
sandbox or a kernel: it forks one child per run of cases, as in the grading kernel. Before: the
limits were wall-clock seconds (``--timeout 5``: a case had one wall second), and on the loaded
2-core machine a correct answer's case, waiting for a core, timed out (the grading batch of
tests/test_grading.py failed now and then). Now the limits are the child's CPU seconds; code that
waits without computing is still ended, by a wall-clock backstop `WALL_PER_CPU` times as long.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from kvsched_lab.grading.judging.cases import hidden_cases
from kvsched_lab.grading.kernel import harness

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
import variants as v  # noqa: E402

ENDLESS = "def _score(self, hits, size, last_used):\n    while True:\n        pass\n"
SLEEPS = "def _score(self, hits, size, last_used):\n    import time\n    time.sleep(1000)\n"

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists() or not hasattr(os, "fork"),
                                reason="the CPU-time limits read /proc (Linux)")


def _grade(tmp_path: Path, monkeypatch, source: str, budget: float, case_limit: float, cases: int = 12) -> dict:
    """Run the harness on TODO score with `source`; its result file as a dict."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(harness, "_CFG", {})
    config = {"nonce": "t", "cases": [{"phases": c["phases"]} for c in hidden_cases()[:cases]],
              "todos": {"score": {"kind": "cell", "source": source}}, "budget": budget, "case_limit": case_limit}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    harness.setup("config.json")
    harness.grade_todo("score")
    return json.loads((tmp_path / "t.score.json").read_text(encoding="utf-8"))


def _children() -> set:
    pid = os.getpid()
    out = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            out |= {int(x) for x in Path(f"/proc/{pid}/task/{task}/children").read_text().split()}
        except OSError:
            pass
    return out


def test_a_right_answer_on_a_busy_machine_is_not_timed_out(tmp_path, monkeypatch):
    """The harness's child is stopped for 0.4 wall seconds at a time, twice as long as a case may
    take (0.2 s), then runs as long: a machine where it gets half a core. Before: cases timed out; now every case is
    observed, since the child used almost no CPU."""
    stops, done = [], threading.Event()

    def busy_machine() -> None:
        while not done.is_set():
            for pid in _children():
                try:
                    os.kill(pid, signal.SIGSTOP)
                    stops.append(pid)
                    time.sleep(0.4)
                    os.kill(pid, signal.SIGCONT)
                    time.sleep(0.4)  # then as long running: half a core, well within the backstop
                except OSError:
                    pass
            time.sleep(0.01)

    stopper = threading.Thread(target=busy_machine, daemon=True)
    stopper.start()
    try:
        result = _grade(tmp_path, monkeypatch, v.REF["score"], budget=5, case_limit=0.2)
    finally:
        done.set()
        stopper.join()
    assert stops, "the child was stopped at least once (else this shows nothing)"
    assert not any("timeout" in c for c in result["cases"].values()), result["cases"]
    assert len(result["cases"]) == 12 and "stopped" not in result
    assert result["elapsed"] > 0.4 and result["cpu"] < result["elapsed"]


def test_an_endless_loop_still_times_out_on_its_cpu(tmp_path, monkeypatch):
    """A loop uses CPU: each case ends after its 0.2 CPU seconds, long before the wall-clock backstop
    (set far out here, so that only the CPU limit can fire), and three in a row end the TODO."""
    monkeypatch.setattr(harness, "WALL_PER_CPU", 200)
    result = _grade(tmp_path, monkeypatch, ENDLESS, budget=5, case_limit=0.2)
    assert [c.get("timeout") for c in result["cases"].values()] == [True] * harness.STOP_AFTER_TIMEOUTS
    assert result["stopped"] == f"{harness.STOP_AFTER_TIMEOUTS} cases in a row timed out"
    assert result["cpu"] >= 0.2 * harness.STOP_AFTER_TIMEOUTS and result["elapsed"] < 0.2 * 200


def test_the_budget_counts_the_cpu_of_every_case(tmp_path, monkeypatch):
    """The TODO's budget (0.5 CPU seconds) is spent before three cases of 0.4 s each are done."""
    monkeypatch.setattr(harness, "WALL_PER_CPU", 200)
    result = _grade(tmp_path, monkeypatch, ENDLESS, budget=0.5, case_limit=0.4)
    assert result["stopped"] == "time budget used up" and len(result["cases"]) == 2, result
    assert 0.5 <= result["cpu"] < 0.5 + 0.4


def test_code_that_waits_without_computing_is_ended_by_the_wall_clock_backstop(tmp_path, monkeypatch):
    """A sleep uses no CPU: each case ends after `WALL_PER_CPU` (4 here) times its 0.3 s, 1.2 wall seconds.
    The case limit leaves room for the CPU a forked child spends before it sleeps (copying a big
    parent's pages): with 0.1 s, a test process grown by the earlier tests hit the CPU limit first."""
    monkeypatch.setattr(harness, "WALL_PER_CPU", 4)
    result = _grade(tmp_path, monkeypatch, SLEEPS, budget=5, case_limit=0.3)
    assert [c.get("timeout") for c in result["cases"].values()] == [True] * harness.STOP_AFTER_TIMEOUTS
    backstop = 0.3 * harness.WALL_PER_CPU
    assert result["elapsed"] >= backstop * harness.STOP_AFTER_TIMEOUTS, result
    assert result["cpu"] < 0.3 * harness.STOP_AFTER_TIMEOUTS, result
