"""The package's layout: concerns import only downwards, no file imports itself round a circle,
and every file of the package stays readable (under 400 lines, a docstring on top).

Every ``import`` counts, also one inside a function: a lazy import is still a dependency, and a
circle closed by one works only as long as nobody moves the import to the top of the file.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Set

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "kvsched_lab"
# Concerns, lowest first: a file may import its own concern or a lower one, never a higher one.
LAYERS = ["notebook_files", "i18n", "sim", "kv", "course", "grading", "cli"]
TOP_MODULES = {"__init__.py", "__main__.py", "notebook_files.py"}  # the only modules at the top
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = ["kvsched_lab", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> Dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path, modules: Dict[str, Path]) -> Set[str]:
    """The package's modules that `path` imports (``from X import y`` of a submodule y counts as X.y only)."""
    name = module_name(path)
    is_package = path.name == "__init__.py"
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: List[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # ``from X import y``: the submodule X.y where there is one, else X itself
            subs = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in modules]
            targets = subs + ([mod] if len(subs) < len(node.names) else [])
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != "kvsched_lab" and t != name:
                found.add(t)
    return found


def concern(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "kvsched_lab"


def graph() -> Dict[str, Set[str]]:
    modules = package_modules()
    return {m: imports_of(p, modules) for m, p in modules.items()}


def cycles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each as a sorted list."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    out: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def upward_imports(edges: Dict[str, Set[str]]) -> List[str]:
    bad = []
    for src, targets in sorted(edges.items()):
        if concern(src) not in LAYERS:  # the package's own __init__/__main__: the public API, on top
            continue
        for dst in sorted(targets):
            if concern(dst) in LAYERS and LAYERS.index(concern(dst)) > LAYERS.index(concern(src)):
                bad.append(f"{src} imports {dst} ({concern(src)} is below {concern(dst)})")
    return bad


def test_the_walker_sees_cycles_and_upward_imports():
    # The checks below pass only if they can fail: fed a circle and an upward edge, they say so.
    edges = {"kvsched_lab.sim.a": {"kvsched_lab.sim.b"}, "kvsched_lab.sim.b": {"kvsched_lab.sim.a"},
             "kvsched_lab.kv.c": {"kvsched_lab.course.d"}, "kvsched_lab.course.d": set()}
    assert cycles(edges) == [["kvsched_lab.sim.a", "kvsched_lab.sim.b"]]
    assert upward_imports(edges) == ["kvsched_lab.kv.c imports kvsched_lab.course.d (kv is below course)"]
    # and the real graph is read: the engine imports the model, the course the scheduling lab
    real = graph()
    assert "kvsched_lab.kv.model" in real["kvsched_lab.kv.engine"]
    assert "kvsched_lab.course.checks" in real["kvsched_lab.course"]


def test_no_import_cycle_between_files():
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_no_concern_imports_a_higher_one():
    bad = upward_imports(graph())
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_every_module_belongs_to_a_concern_folder():
    top = {p.name for p in PACKAGE.glob("*.py")}
    assert top <= TOP_MODULES, f"modules at the top of kvsched_lab/: {sorted(top - TOP_MODULES)}"
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(LAYERS) - {"notebook_files"}, folders


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_each_file_is_short_and_says_what_it_is(path):
    text = path.read_text(encoding="utf-8")
    lines = text.count("\n")
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE)}: {lines} lines (at most {MAX_LINES}): split it by idea"
    if path.name != "__main__.py" or lines > 5:
        assert ast.get_docstring(ast.parse(text)), f"{path.relative_to(PACKAGE)} opens with no docstring"


# What grading, the checks and the policy lab import must not load torch: the grader imports the
# harness (and through it the course's checks) once per sandboxed submission, where torch's import
# cost more than grading itself; a learner's policy work runs on a laptop without it.
TORCH_FREE = ["kvsched_lab", "kvsched_lab.course", "kvsched_lab.grading.harness", "kvsched_lab.grading.nbrun",
              "kvsched_lab.sim.policies", "kvsched_lab.kv", "kvsched_lab.kv.tiers", "kvsched_lab.cli.main"]


def test_the_grader_the_checks_and_the_policy_lab_import_without_torch():
    probe = ("import importlib, sys\n"
             f"for name in {TORCH_FREE!r}:\n"
             "    importlib.import_module(name)\n"
             "    if 'torch' in sys.modules:\n"
             "        sys.exit(name + ' imports torch')\n"
             "import kvsched_lab.kv.model\n"  # and the probe can see it when it happens
             "print('torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "True"
