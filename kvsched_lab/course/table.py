"""Plain-text table lines for notebook output, aligned in both editions.

`row` pads each cell to a width counted in terminal columns, where a Chinese character takes two
(East Asian wide or full-width), so a header translated into Chinese still lines up with the
numbers under it. Headers are plain string arguments, so the zh edition translates them like any
other string in a cell. `pad` is one such cell inside an f-string (``f"{lab.pad(name, -8)} ..."``),
for a row label that the zh edition translates: ``f"{name:<8}"`` counts characters, not columns.
`yes_no` says a check's outcome in the reader's language (是 / 否), where ``{flag}`` would print
Python's True / False in both editions.
"""
from __future__ import annotations

from typing import Sequence

from kvsched_lab.i18n import _
from kvsched_lab.i18n.width import display_width


def yes_no(value: object) -> str:
    """"yes" or "no" (是 / 否 in the zh edition) for a flag a cell prints."""
    return _("yes") if value else _("no")


def pad(text: object, width: int) -> str:
    """`text` right-aligned in `width` terminal columns (left-aligned when negative); kept whole
    when wider. Unlike `row`, trailing spaces stay: the line goes on after it."""
    text = str(text)
    spaces = " " * max(0, abs(width) - display_width(text))
    return text + spaces if width < 0 else spaces + text


def row(cells: Sequence[object], widths: Sequence[int]) -> str:
    """One table line: cell i right-aligned in ``widths[i]`` columns (left-aligned when negative).

    A cell wider than its column is kept whole (the line gets longer, nothing is cut). Trailing
    spaces are dropped. Different lengths of `cells` and `widths` are a ValueError.
    """
    if len(cells) != len(widths):
        raise ValueError(f"{len(cells)} cells but {len(widths)} widths")
    return "".join(pad(cell, width) for cell, width in zip(cells, widths)).rstrip()
