"""Every line a check cell shows for a known answer is the reviewed one, in both languages, and
every check gives the reference the reviewed inputs.

tests/grading_cases/check_messages.md records, for each TODO, what the check says to the
reference, to right answers written differently, to each plausible wrong answer, to each answer
aimed at one guard, to the stub and to broken code. A learner reads these lines; a change to
their words, to the values they quote or to the number of cases a pass reports must be seen,
so it fails here until the file is regenerated and its diff reviewed (see check_messages.py).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
import check_messages as cm  # noqa: E402

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize("todo", cm.TODOS)
def test_each_known_answer_is_told_the_reviewed_line(todo):
    table = cm.rows(todo)
    assert cm.section(todo, lambda _: table) == cm.golden_section(todo), (
        "a check's line changed: run `.venv/bin/python tests/grading_cases/check_messages.py --update` "
        "and review the diff of tests/grading_cases/check_messages.md")
    statuses = [en[:1] for _, en, _ in table]
    assert statuses[0] == "✅" and "❌" in statuses and "⬜" in statuses
    for label, en, zh in table:
        assert en[:1] == zh[:1], label  # the same verdict in both languages
        assert not CJK.search(en) and CJK.search(zh), label  # and the Chinese line is translated
