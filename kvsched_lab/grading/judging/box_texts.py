"""The harness's own English texts in a TODO's result, read back into the grader's feedback lines.

harness.py writes a few texts of its own into a result: how a case's process ended (`KILLED`,
`EXITED`), why the rest of the cases were not run (`BUDGET_USED`, `IN_A_ROW`), what the file raised
at import (`RAISED_AT_IMPORT`), why no function could be taken from the code (`NO_FUNCTION`,
`NO_CLASS`, each maybe with `DEFINES`; `NO_METHOD`, `NOT_PLAIN`). They are the box's report, in English. The grader reads each back by
the template it was written from and gives the learner a line of its own, a `Deferred` rendered in
the feedback's language; what the learner's code controls in one (an exception's text) stays data,
in a code span. A text of no template (a result the harness did not write) is shown as data too.
`read_back` is that reading for a table of templates (review_texts.py, error_texts.py).
"""
from __future__ import annotations

import re
from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple

from kvsched_lab.grading.kernel.harness import (
    BUDGET_USED, DEFINES, EXITED, IN_A_ROW, KILL_HINTS, KILLED, NO_CLASS, NO_FUNCTION, NO_METHOD, NOT_PLAIN, RAISED_AT_IMPORT,
)
from kvsched_lab.grading.learner.learner_files import CELL_AT
from kvsched_lab.grading.learner.writers import TEXT_CAP, inline
from kvsched_lab.i18n.messages import Deferred as _  # feedback lines: rendered in --lang's language when written

# What a field of a template may hold where "anything" would be ambiguous.
FIELD_PATTERNS = {"signal": r"\S+", "status": r"\d+", "count": r"\d+", "todo": r"\w+", "method": r"\w+",
                  "number": r"\d+", "used": r"\d+", "budget": r"\d+", "most": r"\d+", "mib": r"\d+"}


def fields(template: str, text: str) -> Optional[Dict[str, str]]:
    """The fields `text` fills `template` with (its ``str.format`` names), None when `text` is not of it."""
    parts = re.split(r"\{(\w+)\}", template)
    pattern = "".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>{FIELD_PATTERNS.get(part, '.*')})"
                      for i, part in enumerate(parts))
    found = re.fullmatch(pattern, text, flags=re.S)
    return found.groupdict() if found else None


def read_back(text: str, fixed: Mapping[str, str], said: Sequence[Tuple[str, Callable[[Dict[str, str]], str]]],
              limit: int = TEXT_CAP) -> str:
    """`text` in the grader's words: `fixed`'s for a text of no fields, else those of the first
    template of `said` it fills (each with the function saying its fields); any other text as data."""
    if text in fixed:
        return fixed[text]
    for template, say in said:
        found = fields(template, text)
        if found is not None:
            return say(found)
    return inline(text, limit)


def cell_words(text: str) -> str:
    """A cell named as `CELL_AT` writes it ("FILE, cell N"), in the reader's words; else as data."""
    found = fields(CELL_AT, text)
    return inline(text) if found is None else _("{file}, cell {number}", file=inline(found["file"]),
                                                number=found["number"])


def how_it_ended(text: str) -> str:
    """How a case's process ended (a result's ``died``)."""
    killed = fields(KILLED, text)
    if killed is not None and killed["hint"] in ("", *KILL_HINTS.values()):
        signal = inline(killed["signal"])
        if killed["hint"] == KILL_HINTS["SIGKILL"]:
            return _("it was killed by {signal} (out of memory?)", signal=signal)
        if killed["hint"] == KILL_HINTS["SIGXCPU"]:
            return _("it was killed by {signal} (its CPU time limit)", signal=signal)
        return _("it was killed by {signal}", signal=signal)
    exited = fields(EXITED, text)
    if exited is not None:
        return _("it exited with status {status} (`os._exit`, or a crash)", status=exited["status"])
    return inline(text)


def why_stopped(text: str) -> str:
    """Why the rest of a TODO's cases were not run (a result's ``stopped``)."""
    if text == BUDGET_USED:
        return _("the TODO's time budget was used up")
    in_a_row = fields(IN_A_ROW, text)
    if in_a_row is not None:
        return _("{count} cases in a row ran out of time", count=in_a_row["count"])
    return inline(text)


def import_note(text: str) -> str:
    """A note on the learner's file (a result's ``note``)."""
    raised = fields(RAISED_AT_IMPORT, text)
    if raised is not None:
        return _("the file raised {error} at import, after defining the class", error=inline(raised["error"]))
    return inline(text)


def load_problem(text: str) -> str:
    """Why the learner's code could not be loaded (a result's ``load``): the harness's own reason, or
    what the code raised (data)."""
    for template in (NO_FUNCTION, NO_FUNCTION + DEFINES):
        found = fields(template, text)
        if found is not None:
            cell = inline(f"todo:{found['todo']}")
            if "names" in found:
                return _("the {cell} cell defines no function named {method} (it defines {names})",
                         cell=cell, method=inline(found["method"]), names=inline(found["names"]))
            return _("the {cell} cell defines no function named {method}", cell=cell, method=inline(found["method"]))
    if text == NO_CLASS:
        return _("the file defines no class KVCacheSchedulerSim")
    found = fields(NO_CLASS + DEFINES, text)
    if found is not None:
        return _("the file defines no class KVCacheSchedulerSim (it defines {classes})", classes=inline(found["names"]))
    found = fields(NO_METHOD, text)
    if found is not None:
        return _("KVCacheSchedulerSim has no method {method}", method=inline(found["method"]))
    found = fields(NOT_PLAIN, text)
    if found is not None:
        return _("{method} must be a plain function taking self, not {kind}",
                 method=inline(found["method"]), kind=inline(found["kind"]))
    return inline(text)
