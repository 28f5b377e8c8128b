"""Reading one learner's (copied) files as untrusted data: every shape checked, nothing trusted.

A notebook from a learner may be any JSON at all (a cell that is a string or null, metadata that
is a list, a tag that is an int, a source list of ints, a top-level list, nesting 100k deep), and a
``.py`` may be any text (100k chained additions that overflow the parser's stack). Here such a
file becomes a `LearnerFileError` naming what is wrong, which the caller turns into that
learner's ``error:`` row; the course's own notebook helpers (course/todos.py) assume well-formed
notebooks and are never given a learner's file.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import List, Tuple

from kvsched_lab.grading.learner.writers import display_name

MAX_CELLS = 2000  # per notebook; the course's notebooks have under 100
MAX_NOTEBOOKS = 40  # per learner folder; the course has 10


class LearnerFileError(ValueError):
    """A learner's file cannot be read as what it claims to be (the message names what is wrong)."""


@dataclass(frozen=True)
class Cell:
    """One cell of a learner's notebook, its fields checked."""

    index: int  # 0-based position in the notebook
    cell_type: str
    source: str
    tags: Tuple[str, ...]


# Why a learner's file cannot be read, in its words (judging/error_texts.py reads each back into the
# feedback's language). `{where}` is `CELL_AT`.
CELL_AT = "{file}, cell {number}"
NO_SOURCE = "{where}: its source is neither text nor a list of lines"
NOT_UTF8 = "{file} is not UTF-8 text"
JSON_TOO_DEEP = "{file} is JSON nested too deeply to read"
NOT_JSON = "{file} is not valid JSON ({reason})"
NOT_NOTEBOOK = "{file} is not a notebook (no list of cells)"
TOO_MANY_CELLS = "{file} has {count} cells (at most {most} are read)"
NOT_A_CELL = "{where} is not a cell (a JSON object)"
NO_CELL_TYPE = "{where} has no cell_type"
BAD_METADATA = "{where}: its metadata is not a JSON object"
BAD_TAGS = "{where}: its tags are not a list of strings"
PYTHON_TOO_DEEP = "{file} is nested too deeply to parse (an expression or block far too long)"
TOO_LARGE = "{file} is larger than {mib} MiB"


def _source(value: object, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(part, str) for part in value):
        return "".join(value)
    raise LearnerFileError(NO_SOURCE.format(where=where))


def notebook_cells(data: bytes, name: str) -> List[Cell]:
    """The cells of the notebook `data` (the file `name`), or LearnerFileError."""
    name = display_name(name)
    try:
        nb = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise LearnerFileError(NOT_UTF8.format(file=name)) from None
    except RecursionError:
        raise LearnerFileError(JSON_TOO_DEEP.format(file=name)) from None
    except ValueError as e:
        raise LearnerFileError(NOT_JSON.format(file=name, reason=str(e)[:80])) from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise LearnerFileError(NOT_NOTEBOOK.format(file=name))
    if len(nb["cells"]) > MAX_CELLS:
        raise LearnerFileError(TOO_MANY_CELLS.format(file=name, count=len(nb["cells"]), most=MAX_CELLS))
    cells = []
    for i, cell in enumerate(nb["cells"]):
        where = CELL_AT.format(file=name, number=i + 1)
        if not isinstance(cell, dict):
            raise LearnerFileError(NOT_A_CELL.format(where=where))
        cell_type = cell.get("cell_type")
        if not isinstance(cell_type, str):
            raise LearnerFileError(NO_CELL_TYPE.format(where=where))
        metadata = cell.get("metadata", {})
        if not isinstance(metadata, dict):
            raise LearnerFileError(BAD_METADATA.format(where=where))
        tags = metadata.get("tags", [])
        if tags is None:
            tags = []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise LearnerFileError(BAD_TAGS.format(where=where))
        cells.append(Cell(i, cell_type, _source(cell.get("source", ""), where), tuple(tags)))
    return cells


def parse_python(source: str, name: str) -> ast.Module:
    """`source` parsed; SyntaxError as it is, LearnerFileError when the parser gives up on its size."""
    name = display_name(name)
    try:
        return ast.parse(source)
    except (RecursionError, MemoryError):
        raise LearnerFileError(PYTHON_TOO_DEEP.format(file=name)) from None


def read_text(path: Path, cap: int) -> str:
    """A copied file's text: at most `cap` bytes, UTF-8 (LearnerFileError otherwise)."""
    data, name = path.read_bytes(), display_name(path.name)
    if len(data) > cap:
        raise LearnerFileError(TOO_LARGE.format(file=name, mib=cap >> 20))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise LearnerFileError(NOT_UTF8.format(file=name)) from None
