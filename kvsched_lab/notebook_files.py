"""The course's notebook files: read and write nbformat-4 JSON, and a cell's source as one string.

The one module at the top of the package besides ``__init__`` and ``__main__``, because four
concerns open .ipynb files (the course's TODO cells, the grader's intake, the Chinese edition's
builder in ``i18n``, and ``kvsched bench``/``make check``) and ``i18n`` sits below the course:
keeping the file format here lets each of them read notebooks without importing a higher layer.
Plain ``json``, not nbformat, so the learner-side library needs no extra dependency.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Union

Notebook = dict  # nbformat v4 JSON


def read_notebook(path: Union[str, Path]) -> Notebook:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_notebook(nb: Notebook, path: Union[str, Path]) -> None:
    Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def cell_source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src
