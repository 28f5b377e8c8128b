"""A grade's review notes for the instructor, read back into the feedback's language.

Review notes are English texts written where what they report happened: the runtime audit in the
learner's process (kernel/audit.py), the harness (kernel/harness.py), the sandbox's memory watch
(box/limits.py), the intake (submissions.py) and the grader (batch/grade.py, `NOT_WRITTEN`). They are
kept as written: grades.csv, details.json and the journal are the same bytes in every language, and
audit.py ranks notes by their English openings. The feedback file shows each in its reader's
language: a note of a known template becomes a `Deferred` of its own, what it quotes (a path, a
module, a cell) in a code span; any other text (learner code can send anything down the audit
channel, and a note cut at 200 characters fits no template) is shown as data.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, Tuple

from kvsched_lab.grading.box.limits import MEMORY_TOGETHER, OUT_OF_MEMORY
from kvsched_lab.grading.judging.box_texts import cell_words, read_back
from kvsched_lab.grading.judging.submissions import ATTEMPTS
from kvsched_lab.grading.kernel.audit import CLOSED_CHANNEL, IMPORTS, OPENED, OPENED_MEMORY, STARTED_VIA
from kvsched_lab.grading.kernel.harness import CHANNEL_FORGED, CHANNEL_GAP, CHANNEL_SILENT, TAMPERED
from kvsched_lab.grading.learner.writers import inline
from kvsched_lab.i18n.messages import SEMICOLONS, Joined
from kvsched_lab.i18n.messages import Deferred as _  # feedback lines: rendered in --lang's language when written

NOT_WRITTEN = "the {todo} results were not written by the grading harness (rewritten?)"

# The notes without fields: the audit's events (audit.WATCHED_EVENTS) and the harness's channel checks.
FIXED_NOTES: Dict[str, str] = {
    "started a process": _("started a process"), "forked a process": _("forked a process"),
    "used a socket": _("used a socket"), "sent a signal": _("sent a signal"), "used ctypes": _("used ctypes"),
    "searched the heap (gc)": _("searched the heap (gc)"), "read other threads' frames": _("read other threads' frames"),
    "added an audit hook": _("added an audit hook"),
    CHANNEL_GAP: _("tampered with the results channel: lines lost or repeated (closed, redirected, or shared by a fork)"),
    CHANNEL_FORGED: _("tampered with the results channel: a line the harness did not write"),
    CHANNEL_SILENT: _("tampered with the results channel: it went silent before the harness finished"),
}


def _cells(text: str) -> Joined:
    """The cells a two-attempts note names ("FILE, cell N; ..."), each in the reader's words."""
    return Joined(map(cell_words, text.split("; ")), SEMICOLONS)


# The notes with fields: each template, and the words its fields are said in.
SAID: Tuple[Tuple[str, Callable[[Dict[str, str]], _]], ...] = (
    (OPENED_MEMORY, lambda f: _("opened process memory for writing ({path})", path=inline(f["path"]))),
    (OPENED, lambda f: _("opened {path}", path=inline(f["path"]))),
    (IMPORTS, lambda f: _("imports {module}", module=inline(f["module"]))),
    (CLOSED_CHANNEL, lambda f: _("tried to close or redirect the results channel ({call})", call=inline(f["call"]))),
    (STARTED_VIA, lambda f: _("started a process ({call})", call=inline(f["call"]))),
    (TAMPERED, lambda f: _("tampered with the grading harness or sys.modules ({names})", names=inline(f["names"]))),
    (MEMORY_TOGETHER, lambda f: _("the sandbox's processes used {used} MiB together, over its {budget} MiB "
                                  "(detached processes or children count too)", used=f["used"], budget=f["budget"])),
    (OUT_OF_MEMORY, lambda f: _("the sandbox ran out of its {budget} MiB (all its processes together)",
                                budget=f["budget"])),
    (NOT_WRITTEN, lambda f: _("the {todo} results were not written by the grading harness (rewritten?)",
                              todo=inline(f["todo"]))),
    (ATTEMPTS, lambda f: _("{todo} has {count} different attempts ({cells}): graded the last, {origin}",
                           todo=inline(f["todo"]), count=f["count"], cells=_cells(f["cells"]),
                           origin=_cells(f["origin"]))),
)


def review_note(text: str) -> str:
    """One review note in words the feedback's language renders (a `Deferred`), else as data."""
    return read_back(text, FIXED_NOTES, SAID, 200)


def review_notes(notes: Iterable[str]) -> Joined:
    """A grade's review notes, one after another, each read back by `review_note`."""
    return Joined(map(review_note, notes), SEMICOLONS)
