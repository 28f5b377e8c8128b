"""The package's layout: concerns import only downwards, no file imports itself round a circle,
and every file of the package stays readable (under 400 lines, a docstring on top).

grading/ (a third of the package) has rooms of its own, with the same rule one level down: rooms
import only downwards, a few modules stay loose above them, and the sandbox's room is exactly what
the sandbox's library holds of grading/.

Every ``import`` counts, also one inside a function: a lazy import is still a dependency, and a
circle closed by one works only as long as nobody moves the import to the top of the file.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Set

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "kvsched_lab"
# Concerns, lowest first: a file may import its own concern or a lower one, never a higher one.
LAYERS = ["notebook_files", "i18n", "sim", "kv", "course", "grading", "cli"]
TOP_MODULES = {"__init__.py", "__main__.py", "notebook_files.py"}  # the only modules at the top
MAX_LINES = 400
GRADING = PACKAGE / "grading"
# grading/'s rooms, lowest first: a room may import itself or a lower one, never a higher one or a loose module.
GRADING_ROOMS = ["learner", "kernel", "box", "judging", "release", "classroom", "batch"]
SANDBOX_ROOM = "kernel"  # the sandbox's side: it imports no other room, since it is the only one in the box
MAX_LOOSE = 6  # modules of grading/ in no room (its __init__.py aside): the command lines above the rooms


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


def room(module: str) -> Optional[str]:
    """The room of a module of grading/ ("" for a loose one or grading/ itself); None outside grading/."""
    parts = module.split(".")
    if parts[:2] != ["kvsched_lab", "grading"]:
        return None
    return parts[2] if len(parts) > 3 or (len(parts) == 3 and (GRADING / parts[2]).is_dir()) else ""


def room_imports(edges: Dict[str, Set[str]]) -> List[str]:
    """Imports between grading/'s rooms that run up, into a loose module, or out of the sandbox's room."""
    bad = []
    for src, targets in sorted(edges.items()):
        here = room(src)
        if not here:  # outside grading/, a loose module or grading/ itself: above every room
            continue
        for dst in sorted(targets):
            there = room(dst)
            if there is None or there == here:
                continue
            if there == "" or there not in GRADING_ROOMS or GRADING_ROOMS.index(there) > GRADING_ROOMS.index(here):
                bad.append(f"{src} imports {dst} (room {here} is below {there or 'the loose modules'})")
            elif here == SANDBOX_ROOM:
                bad.append(f"{src} imports {dst} (the sandbox's room holds all the box has of grading/)")
    return bad


def test_the_walker_sees_cycles_and_upward_imports():
    # The checks below pass only if they can fail: fed a circle and an upward edge, they say so.
    edges = {"kvsched_lab.sim.a": {"kvsched_lab.sim.b"}, "kvsched_lab.sim.b": {"kvsched_lab.sim.a"},
             "kvsched_lab.kv.c": {"kvsched_lab.course.d"}, "kvsched_lab.course.d": set()}
    assert cycles(edges) == [["kvsched_lab.sim.a", "kvsched_lab.sim.b"]]
    assert upward_imports(edges) == ["kvsched_lab.kv.c imports kvsched_lab.course.d (kv is below course)"]
    # and between grading/'s rooms: up, into a loose module, and out of the sandbox's room
    rooms = {"kvsched_lab.grading.judging.verdict": {"kvsched_lab.grading.batch.grade", "kvsched_lab.grading.command",
                                                     "kvsched_lab.grading.learner.writers", "kvsched_lab.sim.scheduler"},
             "kvsched_lab.grading.kernel.harness": {"kvsched_lab.grading.learner.writers",
                                                    "kvsched_lab.grading.kernel.audit"},
             "kvsched_lab.grading.command": {"kvsched_lab.grading.batch.batch"}}
    assert room_imports(rooms) == [
        "kvsched_lab.grading.judging.verdict imports kvsched_lab.grading.batch.grade (room judging is below batch)",
        "kvsched_lab.grading.judging.verdict imports kvsched_lab.grading.command (room judging is below the loose "
        "modules)",
        "kvsched_lab.grading.kernel.harness imports kvsched_lab.grading.learner.writers (the sandbox's room holds all "
        "the box has of grading/)"]
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


def test_grading_rooms_import_only_downwards():
    bad = room_imports(graph())
    assert not bad, "imports between grading/'s rooms:\n" + "\n".join(bad)


def test_grading_is_laid_out_in_rooms():
    rooms = {p.name for p in GRADING.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert rooms == set(GRADING_ROOMS), f"grading/'s folders {sorted(rooms)}, its rooms {GRADING_ROOMS}"
    assert all((GRADING / r / "__init__.py").exists() for r in GRADING_ROOMS)
    loose = sorted(p.name for p in GRADING.glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= MAX_LOOSE, f"{len(loose)} loose modules in grading/ (at most {MAX_LOOSE}): {loose}"


def test_the_sandbox_library_holds_the_sandbox_room_and_the_kernel_refuses_the_rest(tmp_path):
    """The sandbox's room is the rule: the library the batch copies holds it whole and nothing else of
    grading/, and the kernel launcher refuses every other module of grading/ by its room or name."""
    from kvsched_lab.grading.batch.grade import SANDBOX_ROOM as copied_room, build_library
    from kvsched_lab.grading.kernel.kernel_launcher import REFUSED

    assert copied_room == GRADING / SANDBOX_ROOM
    lib = build_library(tmp_path / "lib") / "kvsched_lab" / "grading"

    def files(root: Path) -> List[str]:
        return sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if "__pycache__" not in p.parts)

    assert files(lib) == ["__init__.py", *(f"{SANDBOX_ROOM}/{n}" for n in files(GRADING / SANDBOX_ROOM))]
    assert (lib / "__init__.py").read_bytes() == (GRADING / "__init__.py").read_bytes()
    grading = sorted(m for m in package_modules() if room(m) is not None and m != "kvsched_lab.grading")
    refused = [m for m in grading if any(m == r or m.startswith(r + ".") for r in REFUSED)]
    assert refused == [m for m in grading if room(m) != SANDBOX_ROOM], "the kernel refuses the grader side only"


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
TORCH_FREE = ["kvsched_lab", "kvsched_lab.course", "kvsched_lab.grading.kernel.harness",
              "kvsched_lab.grading.kernel.nbrun",
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
