"""The course's notebook files: read and write nbformat-4 JSON, and a cell's source as one string.

The one module at the top of the package besides ``__init__`` and ``__main__``, because four
concerns open .ipynb files (the course's TODO cells, the grader's intake, the Chinese edition's
builder in ``i18n``, and ``kvsched bench``/``make check``) and ``i18n`` sits below the course:
keeping the file format here lets each of them read notebooks without importing a higher layer.
Plain ``json``, not nbformat, so the learner-side library needs no extra dependency.

Files are written as JupyterLab saves them (nbformat's layout: keys sorted, a source as one
string per line, indent 1) and carry the metadata JupyterLab writes when the kernel starts
(`NOTEBOOK_METADATA`), so a notebook opened in JupyterLab is not marked modified and saving it
unchanged leaves the file as it was. ``python -m kvsched_lab.notebook_files notebooks/*.ipynb``
rewrites notebooks edited by other tools into that form (outputs are left to the clean test).
"""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Union

Notebook = dict  # nbformat v4 JSON

# What JupyterLab sets as ipykernel starts: the kernelspec and the kernel_info reply's language_info.
# `version` is the kernel's own Python: the course's reference Python (CI's and `make setup`'s);
# on another Python, JupyterLab updates that one field on first save.
NOTEBOOK_METADATA = {
    "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
    "language_info": {
        "codemirror_mode": {"name": "ipython", "version": 3},
        "file_extension": ".py",
        "mimetype": "text/x-python",
        "name": "python",
        "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3",
        "version": "3.11.7",
    },
}


def read_notebook(path: Union[str, Path]) -> Notebook:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def notebook_text(nb: Notebook) -> str:
    """`nb` as JupyterLab (nbformat) saves it: sorted keys, sources split into lines, a final newline."""
    out = copy.deepcopy(nb)
    for cell in out.get("cells", []):
        if isinstance(cell.get("source"), str):
            cell["source"] = cell["source"].splitlines(keepends=True)
    return json.dumps(out, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write_notebook(nb: Notebook, path: Union[str, Path]) -> None:
    Path(path).write_text(notebook_text(nb), encoding="utf-8")


def cell_source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


if __name__ == "__main__":  # rewrite the given notebooks with JupyterLab's metadata and layout
    for name in sys.argv[1:]:
        notebook = read_notebook(name)
        notebook["metadata"].update(copy.deepcopy(NOTEBOOK_METADATA))
        write_notebook(notebook, name)
