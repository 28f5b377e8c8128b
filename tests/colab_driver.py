"""Run one notebook top to bottom in the Python that runs this script, the way Colab runs a notebook.

Used by test_colab_sim.py inside its simulated runtime: ``python colab_driver.py NOTEBOOK OUT.json``.
The kernel is this interpreter (a kernelspec is written into its prefix, which an empty HOME
cannot override). Writes a JSON summary: seconds per cell, the first cell's text output, the
errors, and torch's and kvsched_lab's versions and files as the kernel saw them at the end.
"""
import json
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

PROBE = ("import json, torch, kvsched_lab; print('PROBE' + json.dumps({'torch': [torch.__version__, torch.__file__], "
         "'kvsched_lab': kvsched_lab.__file__}))")


def main(notebook: str, out: str) -> int:
    spec_dir = Path(sys.prefix) / "share" / "jupyter" / "kernels" / "python3"
    spec_dir.mkdir(parents=True, exist_ok=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))
    path = Path(notebook)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    seconds, errors = [], []
    started = time.perf_counter()
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            t = time.perf_counter()
            try:
                client.execute_cell(cell, index)
            except CellExecutionError as e:
                errors.append({"cell": index, "error": str(e)[-2000:]})
            if cell.cell_type == "code":
                seconds.append(round(time.perf_counter() - t, 3))
        probe = nbformat.v4.new_code_cell(PROBE)
        nb.cells.append(probe)  # nbclient writes each executed cell back into the notebook
        client.execute_cell(probe, len(nb.cells) - 1)
        nb.cells.pop()
    wall = time.perf_counter() - started
    first = next(c for c in nb.cells if c.cell_type == "code")
    text = "".join(o.get("text", "") for o in first.outputs if o.get("output_type") == "stream")
    seen = next(json.loads(o["text"].split("PROBE", 1)[1]) for o in probe.outputs if "PROBE" in o.get("text", ""))
    nbformat.write(nb, str(path.with_suffix(".executed.ipynb")))
    Path(out).write_text(json.dumps({"wall_seconds": wall, "cell_seconds": seconds, "setup_output": text,
                                     "errors": errors, **seen}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
