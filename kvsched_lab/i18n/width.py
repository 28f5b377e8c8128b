"""How wide text is on screen: a Chinese character takes two columns of a monospaced font.

Printed tables (`kvsched_lab.course.table`), the doctor's report and the grader's
observed/expected lines pad by this width, so they stay aligned in both languages.
"""
from __future__ import annotations

import unicodedata


def display_width(text: str) -> int:
    """Columns `text` takes in a monospaced font: 2 per wide or full-width character, 1 otherwise."""
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)
