"""What the class report puts first: the rows an instructor must look at, and the mistakes many learners share.

`needs_attention` names every row (none is cut off) that is not a plain verdict: the row could not
be graded (``error``), a TODO ran out of time or failed with an error, a TODO's ``todo:`` tag
was lost (its method is in an untagged cell), a TODO has two different attempts, or an override
changed the row. `common_mistakes` groups the learners who lost points on a TODO by what is
wrong, which the grader knows as data: the TODO's status and the hidden-case families it does not
pass (``score: fails precision; ties``), never the text of a first difference. Both read
``grades.csv`` rows and ``details.json`` records (class_files.py), never learner code.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

from kvsched_lab.grading.judging.submissions import UNTAGGED
from kvsched_lab.sim.scheduler import TODO_METHODS

TWO_ATTEMPTS = "different attempts"  # the words of a review note on a TODO tagged twice (submissions.py)
MAX_EXAMPLES = 8  # learners named per mistake (the count is always whole)
FEW = 3  # families named in a mistake's summary; more are counted (the report lists them all below it)


@dataclass
class Attention:
    """One row to look at: its name, its feedback file's stem, and each reason (plain text)."""

    submission: str
    feedback: str
    total: int
    reasons: List[str] = field(default_factory=list)


@dataclass
class Mistake:
    """Learners who lost points on `todo` the same way."""

    todo: str
    status: str  # the TODO's status: failed, error, timed out
    families: Tuple[str, ...]  # the case families not passed, in the order the grader lists them
    learners: List[Tuple[str, str]] = field(default_factory=list)  # (submission, feedback stem)

    @property
    def what(self) -> str:
        """In a few words: ``fails precision; ties``, ``timed out (fails ties)``, ``fails 11 families``."""
        fams = "; ".join(self.families) if len(self.families) <= FEW else f"{len(self.families)} families"
        if self.status == "failed":
            return f"fails {fams}" if self.families else "fails"
        return f"{self.status} ({'fails ' + fams if self.families else 'no case passed'})"


def needs_attention(rows: Sequence[Dict[str, str]], details: Sequence[dict]) -> List[Attention]:
    """Every row with a reason to look at it, in row order (`rows`: grades.csv; `details`: the same rows)."""
    out = []
    for row, d in zip(rows, details, strict=True):
        reasons = []
        if d["error"]:
            reasons.append(f"could not be graded: {d['error']}")
        for todo, t in d["todos"].items():
            if d["error"]:
                break
            if t["status"] in ("timed out", "error"):
                reasons.append(f"{todo}: {t['status']}")
            elif t["status"] == UNTAGGED:
                reasons.append(f"{todo}: lost its todo:{todo} tag (the method is in an untagged cell)")
        reasons += [f"two attempts: {note}" for note in d["review"] if TWO_ATTEMPTS in note]
        if row.get("overrides"):
            reasons.append(f"override: {row['overrides']}")
        if reasons:
            out.append(Attention(d["submission"], d["feedback"], int(row["total"]), reasons))
    return out


def common_mistakes(details: Sequence[dict], limit: int = 12) -> List[Mistake]:
    """The `limit` most shared (TODO, status, failing families) among learners who lost points, most first."""
    groups: Dict[tuple, Mistake] = {}
    for d in details:
        if d["error"]:
            continue  # a row that could not be graded is no mistake in a TODO (needs_attention names it)
        for todo in TODO_METHODS:
            t = d["todos"][todo]
            if t["status"] not in ("failed", "error", "timed out"):
                continue
            key = (todo, t["status"], tuple(t["failing"]))
            groups.setdefault(key, Mistake(todo, t["status"], tuple(t["failing"]))).learners.append(
                (d["submission"], d["feedback"]))
    order = {todo: k for k, todo in enumerate(TODO_METHODS)}
    return sorted(groups.values(), key=lambda m: (-len(m.learners), order[m.todo], m.status, m.families))[:limit]

