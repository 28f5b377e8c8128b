"""The learner-facing course API: ``import kvsched_lab.course as lab``.

- ``lab.check(name, fn)``: grade ONE TODO (score, heap, stale, entry, snapshot) with fake
  schedulers, print one line, raise when it is not attempted or wrong; saves the answer. The
  optional ``aging`` left alone only prints its line, so Run All goes past it.
- ``lab.hint(name)``: the next of four hint tiers (``lab.hint(name, level)`` for one tier,
  ``lab.hint_reset(name)`` to start over); ``lab.reveal(name)``: the reference if it ships.
  Besides the five, the optional ``aging`` TODO (notebook 05) has a check and hints too.
- ``lab.my_scheduler()``: your scheduler class from the saved answers (or the labelled fallback);
  ``lab.needs_chapter(Sim, what)``: True for a chapter-style class, else one "skipped" line.
- ``lab.compare_prediction(question, predicted, observed, held)``: predict, then run (one line).
- ``lab.show_scheduler()``: your five saved methods in the chapter's class layout, printed.
- ``lab.status()``, ``lab.load_answers()``, ``lab.save_answer(name, fn)``, ``lab.answers_dir()``.
- ``lab.set_language("zh")``: messages and figures in Chinese from now on (default:
  ``$KVSCHED_LANG``, else English); ``lab.get_language()`` says which is in use.
- ``display(lab.table(rows, headers=[...]))``: a table, rendered as one in Jupyter and Colab
  (aligned in both editions), aligned plain text elsewhere; ``lab.yes_no(flag)``: 是 / 否 in zh.
  ``lab.row(cells, widths)`` and ``lab.pad(text, width)`` pad a plain-text line by on-screen width.
- ``lab.download_answers()``, ``lab.upload_answers()``, ``lab.use_drive()``: answers across Colab
  machines; ``lab.report_setup(...)`` is the setup cell's last line.

Which file holds what: checks/ (the public checks, one file per TODO), aging.py (the optional
aging TODO), practice.py (the practice TODOs' checks: notebook 08's, notebook 09's
`tier_choice` from practice_tiers.py and notebook 10's `admission` from practice_admission.py;
practice_base.py holds what they share), hints.py (four hint
tiers, `reveal`), answers.py and answers_io.py (the answers folder; Colab downloads and Drive),
predict.py (predict, then run), setup_cell.py (every notebook's first cell), todos.py (finding,
filling and loading TODO cells), widgets.py and plots.py (the notebooks' widgets and figures), table.py (`lab.table`, `lab.row`, `lab.pad`, `lab.yes_no`),
leaderboard.py (policies ranked by the share of the LRU-to-Belady gap closed) and challenge.py
(notebook 07's public and private scores; challenge_cache.py reads them back from the replay cache). The course builds on the scheduling lab and the KV machinery, never on grading.
"""
from __future__ import annotations

from typing import Callable, Optional

from kvsched_lab.course.answers import (
    ANSWERS_DIRNAME, ANSWERS_ENV, answer_status, answers_dir, fallback_scheduler, is_chapter_scheduler,
    load_answers, my_scheduler, needs_chapter, save_answer, scheduler_source, show_scheduler, status,
)
from kvsched_lab.course.answers_io import download_answers, upload_answers, use_drive
from kvsched_lab.course.checks import NOTEBOOK_OF, TODO_NAMES, CheckFailed, NotAttempted, Result, grade
from kvsched_lab.course.hints import hint, hint_reset, reveal
from kvsched_lab.course.predict import compare_prediction
from kvsched_lab.course.table import Table, pad, row, table, yes_no
from kvsched_lab.i18n import _, get_language
from kvsched_lab.i18n import set_language as _set_message_language
from kvsched_lab.i18n.fonts import use_figure_language


def set_language(lang: str) -> None:
    """Messages in `lang` (``"en"``, ``"zh"``) from now on, and every figure's font to match.

    Returns None (a cell ending with it shows nothing more); an unknown language raises
    ValueError and changes nothing.
    """
    _set_message_language(lang)
    use_figure_language()


def check(name: str, fn: Callable, save: bool = True) -> None:
    """Grade TODO `name` on `fn` alone; print one line on success, raise `CheckFailed` otherwise
    (an optional TODO left alone prints its "not attempted" line and does not raise).

    A graded attempt (passed or failed) is saved to the answers folder so later notebooks can
    build your scheduler; an untouched stub is not saved (it never overwrites a saved answer).
    """
    result = grade(name, fn)
    note = ""
    if save and result.status != "not attempted":
        try:
            save_answer(name, fn, result)
        except (OSError, TypeError) as e:  # no source (e.g. built with exec) or a read-only folder
            note = _(" (answer not saved: {error})", error=e)
    if result.stops:
        raise result.exception()
    print(result.line() + note)
    return None  # nothing echoed after the line


def report_setup(installed_from: Optional[str] = None, answers_on_drive: bool = False) -> None:
    """The setup cell's last line (see `kvsched_lab.course.setup_cell`, imported only when called)."""
    from kvsched_lab.course.setup_cell import report_setup as report

    report(installed_from, answers_on_drive)


__all__ = [
    "ANSWERS_DIRNAME", "ANSWERS_ENV", "CheckFailed", "NOTEBOOK_OF", "NotAttempted", "Result", "TODO_NAMES",
    "answer_status", "answers_dir", "check", "compare_prediction", "download_answers", "fallback_scheduler",
    "get_language", "grade", "hint", "hint_reset", "is_chapter_scheduler", "pad", "report_setup", "row",
    "set_language", "load_answers", "my_scheduler", "needs_chapter", "reveal", "save_answer", "scheduler_source",
    "show_scheduler", "status", "Table", "table", "upload_answers", "use_drive", "yes_no",
]
