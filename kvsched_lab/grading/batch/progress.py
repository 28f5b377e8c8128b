"""What a long batch shows while it works: its progress, learner by learner.

`BatchProgress` is ``kvsched grade``'s progress: a tqdm bar on a terminal (done / total,
failures so far, ETA), and one line per learner otherwise (a Slurm log, a pipe, CI), so a log
shows where a batch is without a carriage-return mess. A *failure* is a row that did not get a
verdict for every TODO (``error``, ``timed out``; the rows whose status is not ``ok``, leaving
out review notes and ``unsandboxed``).
"""
from __future__ import annotations

import sys
import threading
import time
from datetime import timedelta
from typing import Optional, TextIO

from tqdm import tqdm

from kvsched_lab.grading.batch.grade import NORMAL, Grade
from kvsched_lab.grading.judging.verdict import POINTS
from kvsched_lab.grading.learner.writers import bounded
from kvsched_lab.sim.scheduler import TODO_METHODS


def is_failure(g: Grade) -> bool:
    """True when `g` lacks a verdict for some TODO (or the submission could not be read)."""
    return bool(g.error) or any(t.status not in NORMAL for t in g.todos.values())


def _clock(seconds: float) -> str:
    return str(timedelta(seconds=int(round(seconds))))


class BatchProgress:
    """Progress of one batch of `total` learners, `resumed` of them already graded by an earlier run."""

    def __init__(self, total: int, resumed: int = 0, stream: Optional[TextIO] = None) -> None:
        self.stream = stream or sys.stderr
        self.total, self.done, self.failures, self.graded_now = total, resumed, 0, 0
        self.started = time.monotonic()
        self._lock = threading.Lock()
        tty = getattr(self.stream, "isatty", lambda: False)()
        self.bar = tqdm(total=total, initial=resumed, file=self.stream, unit="learner", desc="grading",
                        dynamic_ncols=True, smoothing=0.1) if tty else None
        if resumed:
            self._say(f"resuming: {resumed} of {total} learner(s) already graded (journal), {total - resumed} to go")

    def _say(self, line: str) -> None:
        tqdm.write(line, file=self.stream)  # above the bar, on the bar's stream (not stdout)
        self.stream.flush()

    def eta(self) -> Optional[float]:
        """Seconds left at this run's pace so far (None before the first learner is graded)."""
        if not self.graded_now:
            return None
        return (time.monotonic() - self.started) / self.graded_now * (self.total - self.done)

    def update(self, g: Grade) -> None:
        """One more learner graded (called from any worker thread)."""
        with self._lock:
            self.done += 1
            self.graded_now += 1
            self.failures += is_failure(g)
            if self.bar is not None:
                self.bar.set_postfix_str(f"failures {self.failures}", refresh=False)
                self.bar.update(1)
                return
            eta = self.eta()
            width = len(str(self.total))
            self._say(f"[{self.done:>{width}}/{self.total}] {bounded(g.submission, 120)}: "
                      f"{g.total}/{POINTS * len(TODO_METHODS)} {bounded(g.status, 120)} | failures so far "
                      f"{self.failures} | ETA {_clock(eta) if eta is not None else '?'}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        self._say(f"graded {self.graded_now} learner(s) in {_clock(time.monotonic() - self.started)}"
                  f" ({self.failures} failure(s))")
