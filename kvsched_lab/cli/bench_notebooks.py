"""`kvsched bench --notebooks`: seconds each course notebook takes top to bottom, TODOs filled from the reference."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

NOTEBOOK_TARGET_S, SERIES_TARGET_S = 60.0, 300.0  # a lesson's cells, and the whole series


def bench_notebooks(names: Optional[Sequence[str]] = None, timeout_s: float = 120.0,
                    folder: Optional[Path] = None) -> Dict[str, Any]:
    """Seconds each course notebook takes top to bottom, with its TODOs filled from `solutions`.

    Without `solutions` (the student release) the stubs run instead, errors allowed, so the check
    cells fail fast and the timing covers everything else. Each notebook gets a fresh kernel and a
    fresh answers folder, in a temporary copy of the notebooks folder. A notebook that fails or
    has a cell running past `timeout_s` (every lesson cell takes seconds) is reported under
    ``errors`` and the rest still run.
    """
    import tempfile

    import nbformat
    from nbclient import NotebookClient

    from kvsched_lab.course.todos import fill_todos, practice_reference_sources, reference_sources
    from kvsched_lab.notebook_files import read_notebook

    folder = folder or Path(__file__).resolve().parents[2] / "notebooks"
    paths = [folder / n for n in names] if names else sorted(folder.glob("*.ipynb"))
    try:
        sources: Optional[Dict[str, str]] = reference_sources(optional=True)  # the optional TODOs too
        practice = practice_reference_sources()  # notebook 08's practice TODOs
    except ImportError:
        sources = practice = None
    seconds: Dict[str, float] = {}
    errors: Dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        old = os.environ.get("KVSCHED_ANSWERS")
        os.environ["KVSCHED_ANSWERS"] = str(Path(tmp) / "answers")  # the kernels inherit it
        try:
            for path in paths:
                raw = read_notebook(path)
                filled = fill_todos(fill_todos(raw, sources), practice, kind="practice") if sources else raw
                nb = nbformat.reads(json.dumps(filled), as_version=4)
                start = time.perf_counter()
                try:
                    NotebookClient(nb, timeout=timeout_s, allow_errors=sources is None,
                                   resources={"metadata": {"path": tmp}}).execute()
                except Exception as e:  # a broken or stuck notebook is a result, not a crash
                    # A failing cell: its exception (nbclient keeps ename/evalue); else the client's error.
                    what = (f"{e.ename}: {e.evalue}" if getattr(e, "ename", None)
                            else f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}")
                    errors[path.name] = what[:200]
                seconds[path.name] = time.perf_counter() - start
        finally:
            if old is None:
                os.environ.pop("KVSCHED_ANSWERS", None)
            else:
                os.environ["KVSCHED_ANSWERS"] = old
    total = sum(seconds.values())
    return {"filled": sources is not None, "seconds": seconds, "errors": errors, "total_seconds": total,
            "target_s": NOTEBOOK_TARGET_S, "series_target_s": SERIES_TARGET_S,
            "ok": not errors and all(v <= NOTEBOOK_TARGET_S for v in seconds.values()) and total <= SERIES_TARGET_S}
