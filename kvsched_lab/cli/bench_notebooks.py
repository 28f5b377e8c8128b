"""`kvsched bench --notebooks`: each course notebook's Run All time, both editions, TODOs filled from the reference.

A learner's Run All: a fresh kernel runs every cell top to bottom. Each notebook's time is the
wall time of that run; its slowest cell is named next to it, so a slow notebook says where.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

NOTEBOOK_TARGET_S, SERIES_TARGET_S = 45.0, 600.0  # one notebook's Run All; all of them, both editions
ZH = "zh"  # the Chinese edition's folder under notebooks/


def _run_all(path: Path, sources, practice, timeout_s: float, tmp: str) -> Tuple[float, Optional[str], Tuple[int, float]]:
    """(seconds, error or None, (slowest code cell's index, its seconds)) of one notebook's Run All."""
    import nbformat
    from nbclient import NotebookClient

    from kvsched_lab.course.todos import fill_todos
    from kvsched_lab.notebook_files import read_notebook

    raw = read_notebook(path)
    filled = fill_todos(fill_todos(raw, sources), practice, kind="practice") if sources else raw
    nb = nbformat.reads(json.dumps(filled), as_version=4)
    error = None
    start = time.perf_counter()
    try:
        # A temporary working folder: whatever a notebook writes stays out of the repository.
        NotebookClient(nb, timeout=timeout_s, allow_errors=sources is None, record_timing=True,
                       resources={"metadata": {"path": tmp}}).execute()
    except Exception as e:  # a broken or stuck notebook is a result, not a crash
        # A failing cell: its exception (nbclient keeps ename/evalue); else the client's error.
        error = (f"{e.ename}: {e.evalue}" if getattr(e, "ename", None)
                 else f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}")[:200]
    seconds = time.perf_counter() - start
    return seconds, error, _slowest_cell(nb)


def _slowest_cell(nb: Any) -> Tuple[int, float]:
    """(code cell index from 0, seconds) of the cell that ran longest, from nbclient's timing metadata."""
    from datetime import datetime

    best = (-1, 0.0)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for k, cell in enumerate(code):
        timing = cell.get("metadata", {}).get("execution", {})
        began, ended = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        if began and ended:
            took = (datetime.fromisoformat(ended.rstrip("Z")) - datetime.fromisoformat(began.rstrip("Z"))).total_seconds()
            best = max(best, (k, took), key=lambda x: x[1])
    return best


def bench_notebooks(names: Optional[Sequence[str]] = None, timeout_s: float = 120.0,
                    folder: Optional[Path] = None) -> Dict[str, Any]:
    """Run All time of each course notebook, English then Chinese (``zh/NAME``), TODOs filled from `solutions`.

    `names` are paths relative to `folder` (default: the repository's ``notebooks/``, and every
    ``notebooks/zh/`` notebook after the English ones). Without `solutions` (the student release)
    the stubs run instead, errors allowed, so the check cells fail fast and the timing covers
    everything else. Each notebook gets a fresh kernel in a temporary folder, with one fresh
    answers folder for the run. A notebook that fails or has a cell running past `timeout_s`
    (every lesson cell takes seconds) is reported under ``errors`` and the rest still run.
    """
    import tempfile

    from kvsched_lab.course.todos import practice_reference_sources, reference_sources

    folder = folder or Path(__file__).resolve().parents[2] / "notebooks"
    if names:
        paths = [folder / n for n in names]
    else:
        paths = sorted(folder.glob("*.ipynb")) + sorted((folder / ZH).glob("*.ipynb"))
    try:
        sources: Optional[Dict[str, str]] = reference_sources(optional=True)  # the optional TODOs too
        practice = practice_reference_sources()  # notebooks 08 and 09's practice TODOs
    except ImportError:
        sources = practice = None
    seconds: Dict[str, float] = {}
    slowest: Dict[str, Dict[str, float]] = {}
    errors: Dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        old = os.environ.get("KVSCHED_ANSWERS")
        os.environ["KVSCHED_ANSWERS"] = str(Path(tmp) / "answers")  # the kernels inherit it
        try:
            for path in paths:
                name = path.relative_to(folder).as_posix()
                seconds[name], error, (cell, took) = _run_all(path, sources, practice, timeout_s, tmp)
                slowest[name] = {"code_cell": cell + 1, "seconds": took}
                if error:
                    errors[name] = error
        finally:
            if old is None:
                os.environ.pop("KVSCHED_ANSWERS", None)
            else:
                os.environ["KVSCHED_ANSWERS"] = old
    total = sum(seconds.values())
    return {"filled": sources is not None, "seconds": seconds, "slowest_cell": slowest, "errors": errors,
            "total_seconds": total, "target_s": NOTEBOOK_TARGET_S, "series_target_s": SERIES_TARGET_S,
            "ok": not errors and all(v <= NOTEBOOK_TARGET_S for v in seconds.values()) and total <= SERIES_TARGET_S}
