"""Plain-text table lines for notebook output, aligned in both editions.

`row` pads each cell to a width counted in terminal columns, where a Chinese character takes two
(East Asian wide or full-width), so a header translated into Chinese still lines up with the
numbers under it. Headers are plain string arguments, so the zh edition translates them like any
other string in a cell.
"""
from __future__ import annotations

from typing import Sequence

from kvsched_lab.i18n.width import display_width


def row(cells: Sequence[object], widths: Sequence[int]) -> str:
    """One table line: cell i right-aligned in ``widths[i]`` columns (left-aligned when negative).

    A cell wider than its column is kept whole (the line gets longer, nothing is cut). Trailing
    spaces are dropped. Different lengths of `cells` and `widths` are a ValueError.
    """
    if len(cells) != len(widths):
        raise ValueError(f"{len(cells)} cells but {len(widths)} widths")
    out = []
    for cell, width in zip(cells, widths):
        text = str(cell)
        pad = " " * max(0, abs(width) - display_width(text))
        out.append(text + pad if width < 0 else pad + text)
    return "".join(out).rstrip()
