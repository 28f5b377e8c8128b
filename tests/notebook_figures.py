"""Which notebook cells drew a figure, and whether the learner saw it (tests/test_notebooks.py).

`install(folder, env)` puts an IPython startup file into a fresh IPython folder and points `env`
at it, so every kernel started with `env` (nbval's, one per notebook) logs one JSON line per cell
it runs: how many figures the cell created, how many images (and widgets) it displayed, which
figures are still open once the inline backend has shown the cell's figures, and whether
matplotlib is still interactive. A plotting cell is found by what it does (a figure was created), not by its text.
`read(folder)` gives the lines back.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

LOG_NAME = "figure_log.jsonl"

# Runs in each kernel before the first cell. Counting `Figure.__init__` calls sees every figure,
# made by pyplot or by the library's plots; wrapping the display publisher sees every image sent
# to the notebook, and the cell's value is what the display hook shows. `post_run_cell` fires after `post_execute`, where the inline backend shows
# and closes the cell's figures, so figures still open then were never shown.
STARTUP = '''
import json
import sys

import matplotlib.figure

_LOG = {log!r}
_seen = {{"figures": 0, "images": 0, "widgets": 0}}
_init = matplotlib.figure.Figure.__init__


def _counting_init(self, *args, **kwargs):
    _seen["figures"] += 1
    _init(self, *args, **kwargs)


matplotlib.figure.Figure.__init__ = _counting_init
_ip = get_ipython()
_publish = _ip.display_pub.publish


def _count(data):
    if "image/png" in data or "image/svg+xml" in data:
        _seen["images"] += 1
    if "application/vnd.jupyter.widget-view+json" in data:
        _seen["widgets"] += 1


def _counting_publish(data, *args, **kwargs):
    _count(data)
    return _publish(data, *args, **kwargs)


_ip.display_pub.publish = _counting_publish


def _before(info):
    _seen.update(figures=0, images=0, widgets=0)


def _after(result):
    if result.result is not None:  # the cell's value, shown by the display hook (a widget, say)
        _count(_ip.display_formatter.format(result.result)[0])
    pyplot = sys.modules.get("matplotlib.pyplot")
    with open(_LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps({{
            "source": result.info.raw_cell, "figures": _seen["figures"], "images": _seen["images"],
            "widgets": _seen["widgets"],
            "open": pyplot.get_fignums() if pyplot else [], "interactive": matplotlib.is_interactive(),
        }}) + "\\n")


_ip.events.register("pre_run_cell", _before)
_ip.events.register("post_run_cell", _after)
'''


def install(folder: Path, env: Dict[str, str]) -> None:
    """Make kernels started with `env` log their figures into `folder`/figure_log.jsonl."""
    startup = folder / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-figure-log.py").write_text(STARTUP.format(log=str(folder / LOG_NAME)))
    env["IPYTHONDIR"] = str(folder / "ipython")


def read(folder: Path) -> List[dict]:
    """One record per cell run, in the order run (kernels of different notebooks in sequence)."""
    path = folder / LOG_NAME
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
