"""Notebook tables that line up in both editions, and the pieces of plain-text lines.

`table(rows, headers)` is what a cell shows with ``display(...)``: Jupyter, JupyterLab and Colab
render its HTML as a real table, so a column of Chinese text stays aligned however wide the
browser's CJK glyphs are (padding with spaces drifts: a CJK glyph is not exactly two Latin
columns of the browser's monospaced font). Its plain text (``repr``, what nbval, a terminal and
``print`` get) pads by on-screen width, where a Chinese character takes two columns. A column
whose every cell is a number (``12.5%``, ``1,234``, ``+0.3 pt``) is right-aligned, header
included; text is left-aligned. Headers and cells are plain strings in the cell, so the zh
edition translates them like any other string; cells are shown as text, never as HTML.

`row` and `pad` pad one plain-text line by on-screen width (the doctor's report, the challenge
board's text). `yes_no` says a check's outcome in the reader's language (是 / 否), where
``{flag}`` would print Python's True / False in both editions.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Iterable, Sequence, Tuple

from kvsched_lab.i18n import _
from kvsched_lab.i18n.width import display_width

# A number as a cell shows it: a sign, digits with , or . (or a leading .), then any unit or note.
_NUMBER = re.compile(r"^[+\-−]?(\d|\.\d)")
_GAP = "  "  # between two columns of the plain text


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


def _cell_text(value: object) -> str:
    """What a cell shows: text as it is, a flag as yes / no, an int with thousands separators."""
    if isinstance(value, bool):
        return yes_no(value)
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


@dataclass(frozen=True)
class Table:
    """A table a notebook cell shows: ``display(lab.table(rows, headers=[...]))``.

    ``headers``: one per column; ``rows``: each as many cells as headers (already formatted
    text, or an int / a flag); ``note``: an optional line under it (units, what a column counts).
    """

    headers: Tuple[str, ...]
    rows: Tuple[Tuple[str, ...], ...]
    note: str = ""

    @property
    def numeric(self) -> Tuple[bool, ...]:
        """Per column: every non-empty cell is a number (so the column is right-aligned)."""
        columns = zip(*self.rows) if self.rows else [()] * len(self.headers)
        return tuple(any(c for c in col) and all(_NUMBER.match(c) for c in col if c) for col in columns)

    def to_text(self) -> str:
        """The table as aligned plain text (width counted in terminal columns), then its note."""
        lines = [self.headers, *self.rows]
        widths = [max(display_width(line[i]) for line in lines) for i in range(len(self.headers))]
        text = [_GAP.join(pad(c, w if right else -w) for c, w, right in zip(line, widths, self.numeric)).rstrip()
                for line in lines]
        return "\n".join(text + ([self.note] if self.note else []))

    __str__ = __repr__ = to_text

    def _repr_html_(self) -> str:
        def cell(tag: str, text: str, right: bool) -> str:
            align = "right" if right else "left"
            return f'<{tag} style="text-align:{align}">{html.escape(text)}</{tag}>'

        head = "".join(cell("th", h, right) for h, right in zip(self.headers, self.numeric))
        body = "".join("<tr>" + "".join(cell("td", c, right) for c, right in zip(r, self.numeric)) + "</tr>"
                       for r in self.rows)
        note = f"<p><small>{html.escape(self.note)}</small></p>" if self.note else ""
        return (f'<table style="font-variant-numeric:tabular-nums"><thead><tr>{head}</tr></thead>'
                f"<tbody>{body}</tbody></table>{note}")


def table(rows: Iterable[Sequence[object]], headers: Sequence[str], note: str = "") -> Table:
    """A `Table` of `rows` under `headers`; a row with a different number of cells is a ValueError
    that names it (counting from 1)."""
    heads = tuple(str(h) for h in headers)
    body = tuple(tuple(_cell_text(c) for c in r) for r in rows)
    for i, r in enumerate(body, 1):
        if len(r) != len(heads):
            raise ValueError(f"row {i} has {len(r)} cells but there are {len(heads)} headers")
    return Table(heads, body, note)
