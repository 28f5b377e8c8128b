"""Why a TODO's grading cell wrote no result: the box's report on that cell, explained to the learner.

The box's cell runner (kernel/cells.py) reports each cell as nbval did, ``[outcome, message]`` with
nbval's English messages, so the grader reads a runner's outcomes as it read nbval's. Those messages
are the runner's, not the learner's: here each kind of them (`cells.outcome_kind`) becomes a
feedback line of the grader's own, a `Deferred` rendered in the feedback's language. A message of
no kind the runner writes is shown as data, in a code span.
"""
from __future__ import annotations

from typing import Optional

from kvsched_lab.grading.kernel.cells import outcome_kind
from kvsched_lab.grading.learner.writers import fenced, inline
from kvsched_lab.i18n.messages import Deferred as _  # feedback lines: rendered in --lang's language when written
from kvsched_lab.i18n.messages import N_

# The grader's explanation of each of the runner's outcome kinds.
EXPLANATIONS = {
    "eof": N_("The grading kernel died while grading this TODO: code under test killed it, or it ran out of "
              "memory. TODOs graded after this one could not be graded either."),
    "dead": N_("The grading kernel had already died in an earlier grading cell, so this TODO could not be graded."),
    "timeout": N_("The grading kernel stopped responding while grading this TODO: its grading cell ran past its "
                  "time limit, so the kernel was ended. TODOs graded after this one could not be graded either."),
    "not started": N_("The grading kernel did not start, so no TODO could be graded; your code never ran. "
                      "Tell your instructor."),
    "failed": N_("The grading cell raised an exception outside the cases that run your code. Tell your instructor."),
    "flood": N_("The grading kernel sent more replies than a grading cell may, so the kernel was ended. "
                "TODOs graded after this one could not be graded either."),
    "forged": N_("A process other than the grading kernel wrote to the grader's channel, so the kernel was ended. "
                 "TODOs graded after this one could not be graded either."),
    "garbled": N_("The grading kernel sent a reply the grader does not recognise, so the kernel was ended. "
                  "TODOs graded after this one could not be graded either."),
}


# Why the sandbox itself was ended (box/sandbox.py's `SandboxRun`), said before its output's tail.
ENDINGS = {
    "wall": N_("The sandbox ran past its wall-clock limit and was ended."),
    "output": N_("The sandbox wrote too much output and was ended."),
    "budget": N_("The sandbox's processes together used more than its limits allow, so it was ended."),
}


def why_unfinished(outcome: Optional[tuple], no_report: bool, tail: str, ended: Optional[str] = None) -> str:
    """Why a grading cell wrote no result, from the box's `outcome` of it (None: the box reported no
    such cell); `no_report`: the box wrote no report at all, and `tail` is the end of its output;
    `ended`: why the sandbox was ended (a key of `ENDINGS`), if it was."""
    if no_report:
        failed = _("The grading run itself failed; its output ended with:\n\n{tail}", tail=fenced(tail[-1500:], 1500))
        return _("{why} {failed}", why=_(ENDINGS[ended]), failed=failed) if ended else failed
    if not outcome:
        return _("The grading kernel died or stopped responding: code under test killed it, or it ran out of "
                 "memory. TODOs graded after this one could not be graded either.")
    kind = outcome_kind(str(outcome[1]))
    if kind:
        return _(EXPLANATIONS[kind])
    return _("The grading cell failed: {message}", message=inline(outcome[1]))
