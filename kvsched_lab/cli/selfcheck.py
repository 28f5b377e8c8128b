"""``python -m kvsched_lab.cli.selfcheck [NOTEBOOK_DIR]`` (``make check`` in the student edition).

Runs every notebook top to bottom in a fresh kernel, as "Run all" would (``pytest --nbval-lax``;
outputs are not compared), and prints one line per TODO check cell (passed, not attempted,
failed) and any other cell that raised. Check cells fail until their TODO is written: that is
expected and does not change the exit status. Exit status 0 when every other cell ran, 1 when one
raised (a broken setup or an edited demo cell), 2 when pytest/nbval could not run at all.

Your notebooks run in their own folder, so they read and update the same answers
(``kvsched_answers/`` or ``$KVSCHED_ANSWERS``) as when you run them in Jupyter.
"""
from __future__ import annotations

import importlib.util
import re
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from kvsched_lab.notebook_files import read_notebook

CELL_TIMEOUT_S = 600


class _Recorder:
    """pytest plugin: ``{node id: (outcome, last line of the failure)}``, and what each cell printed
    (an optional TODO's check left alone prints "not attempted" without failing)."""

    def __init__(self) -> None:
        self.outcomes: Dict[str, Tuple[str, str]] = {}
        self.printed: Dict[str, str] = {}

    def pytest_runtest_teardown(self, item) -> None:  # pytest hook: nbval's cell items keep their outputs
        outputs = getattr(item, "test_outputs", None) or []
        self.printed[item.nodeid] = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")

    def pytest_runtest_logreport(self, report) -> None:  # pytest hook
        if report.when == "call" or report.outcome != "passed":
            lines = [ln.strip() for ln in str(report.longrepr).splitlines() if ln.strip()] if report.failed else []
            self.outcomes.setdefault(report.nodeid, (report.outcome, _reason(lines)))


def _reason(lines: List[str]) -> str:
    """The most telling line of a failure: a check's verdict, else the exception line."""
    for ln in lines:
        if re.match(r"^(⬜|❌) \w+: ", ln):
            return ln
    errors = [ln for ln in lines if re.match(r"^\w*(Error|Exception|Exit|Interrupt)\b", ln)]
    return (errors or lines or [""])[-1][:300]


def _code_cell_tags(path: Path) -> List[List[str]]:
    return [c.get("metadata", {}).get("tags", []) for c in read_notebook(path).get("cells", [])
            if c.get("cell_type") == "code"]


def run(folder: Path) -> int:
    missing = [m for m in ("pytest", "nbval") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"selfcheck needs {' and '.join(missing)}: run `make check`, or pip install -e '.[test]'")
        return 2
    import pytest

    notebooks = sorted(folder.glob("*.ipynb"))
    if not notebooks:
        print(f"no notebooks in {folder}")
        return 2
    recorder = _Recorder()
    with tempfile.TemporaryDirectory(prefix="kvsched-selfcheck-") as tmp:
        ini = Path(tmp) / "pytest.ini"
        ini.write_text("[pytest]\n")
        print(f"running {len(notebooks)} notebooks in {folder} (a few minutes) ...", flush=True)
        code = pytest.main(["--nbval-lax", "--nbval-current-env", f"--nbval-cell-timeout={CELL_TIMEOUT_S}",
                            "-p", "no:cacheprovider", "-q", "--no-header", "--tb=no", "-c", str(ini),
                            "--rootdir", str(folder), *map(str, notebooks)], plugins=[recorder])
    if not recorder.outcomes:
        print(f"pytest/nbval did not run the notebooks (exit {int(code)})")
        return 2
    broken, passed, checks = [], 0, 0
    print()
    for path in notebooks:
        for k, tags in enumerate(_code_cell_tags(path)):
            outcome, why = _outcome(recorder.outcomes, path.name, k)
            check = next((t.split(":", 1)[1] for t in tags if t.startswith("check:")), None)
            if check is not None:
                checks += 1
                if outcome == "passed" and _said_not_attempted(recorder.printed, path.name, k):
                    outcome, why = "not attempted", "not attempted"  # an optional TODO left alone
                passed += outcome == "passed"
                mark = "✅ passed" if outcome == "passed" else (
                    "⬜ not attempted" if "not attempted" in why else f"❌ {why or outcome}")
                print(f"{path.name}  check {check:<9} {mark}")
            elif outcome != "passed":
                broken.append(f"{path.name} code cell {k + 1}: {outcome}: {why}")
    print(f"\n{passed}/{checks} TODO checks pass" + ("" if passed == checks else
          ": write the TODO cells above each failing check (lab.hint(name) helps)."))
    if broken:
        print("\nThese cells are not check cells and should not fail (re-run `make setup`, or undo your edit):")
        print("\n".join(f"  {b}" for b in broken))
        return 1
    print("Every other cell ran.")
    return 0


def _outcome(outcomes: Dict[str, Tuple[str, str]], name: str, k: int) -> Tuple[str, str]:
    return outcomes.get(f"{name}::Cell {k}", ("not run", ""))


def _said_not_attempted(printed: Dict[str, str], name: str, k: int) -> bool:
    """Did check cell `k` print a "not attempted" verdict (⬜, in either language) instead of raising?"""
    return any(re.match(r"^⬜ \w+[:：]", line) for line in printed.get(f"{name}::Cell {k}", "").splitlines())


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return run(Path(args[0] if args else "notebooks").resolve())


if __name__ == "__main__":
    sys.exit(main())
