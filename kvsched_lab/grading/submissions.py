"""From paths on the command line to what each TODO of each submission should be graded on.

A submission is one of:

* a folder with notebooks directly inside it: one learner; the ``todo:*`` cells of all its
  notebooks are merged (notebooks in name order; for a TODO tagged more than once, the last cell
  that is not an untouched stub counts);
* a single ``.ipynb``;
* a single ``.py`` that defines a full ``KVCacheSchedulerSim`` like the chapter's.

A folder without notebooks directly inside is a class folder: each subfolder and each ``.py``
or ``.ipynb`` in it is one submission. Nothing here runs learner code; it only parses it.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Set

from kvsched_lab.grading.stubs import class_methods, fingerprint, functions_in
from kvsched_lab.scheduler import TODO_METHODS
from kvsched_lab.todos import cell_source, read_notebook, tagged_cells

MAX_FILE_BYTES = 4 << 20  # a notebook or .py larger than this is not a plausible submission

# What a TODO's code has no reason to touch; using it does not change a grade, it asks a human to look.
_REVIEW_MODULES = {"os", "sys", "subprocess", "ctypes", "gc", "inspect", "importlib", "builtins", "socket",
                   "mmap", "multiprocessing", "threading", "signal", "resource", "shutil", "pathlib", "pickle",
                   "marshal", "linecache", "IPython", "solutions", "_kvsched_harness", "kvsched_lab.grading"}
_REVIEW_NAMES = {"open", "exec", "eval", "compile", "__import__", "globals", "get_ipython", "breakpoint",
                 "In", "Out", "_ih", "__builtins__"}
_REVIEW_ATTRS = {"__mro__", "__bases__", "__base__", "__subclasses__", "__globals__", "__code__", "__closure__",
                 "__builtins__", "f_back", "f_globals", "f_locals", "modules"}
_REVIEW_STRINGS = ("solutions", "/proc", "_kvsched", "grading")


@dataclass
class TodoSource:
    """What one TODO of a submission is graded on."""

    status: str  # "run", "not attempted" or "error" (decided without running anything)
    kind: str = ""  # "cell" (a TODO cell) or "py" (a whole .py file)
    source: str = ""
    origin: str = ""  # where it came from, for the feedback
    detail: str = ""  # why it is not attempted / the error


@dataclass
class Submission:
    name: str
    path: Path
    todos: Dict[str, TodoSource] = field(default_factory=dict)
    error: str = ""  # the whole submission could not be read
    review: List[str] = field(default_factory=list)


def discover(paths: List[str]) -> List[tuple]:
    """``(name, path)`` per submission, in command-line order, class folders expanded."""
    out: List[tuple] = []
    for arg in paths:
        path = Path(arg)
        if path.is_dir() and not any(path.glob("*.ipynb")):
            children = sorted(p for p in path.iterdir() if not p.name.startswith((".", "__"))
                              and (p.is_dir() or p.suffix in (".py", ".ipynb")))
            out.extend((str(p), p) for p in children)
        else:
            out.append((str(path), path))
    return out


def _read_text(path: Path) -> str:
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"{path.name} is larger than {MAX_FILE_BYTES >> 20} MiB")
    return path.read_text(encoding="utf-8")


def _syntax_error(e: SyntaxError) -> str:
    return f"SyntaxError: {e.msg} (line {e.lineno})"


def _from_notebooks(sub: Submission, notebooks: List[Path], stubs: Dict[str, Set[str]]) -> None:
    candidates: Dict[str, List[tuple]] = {name: [] for name in TODO_METHODS}
    untagged: Dict[str, str] = {}
    for path in notebooks:
        try:
            nb = read_notebook(path) if path.stat().st_size <= MAX_FILE_BYTES else None
        except (OSError, ValueError) as e:
            sub.error = f"cannot read {path.name}: {e}"
            return
        if nb is None or not isinstance(nb.get("cells"), list):
            sub.error = f"{path.name} is not a notebook (or is larger than {MAX_FILE_BYTES >> 20} MiB)"
            return
        tagged = {i for idx in tagged_cells(nb, "todo").values() for i in idx}
        for name, idx in tagged_cells(nb, "todo").items():
            for i in idx:
                if name in candidates:
                    candidates[name].append((f"{path.name}, cell {i + 1}", cell_source(nb["cells"][i])))
        for i, cell in enumerate(nb["cells"]):  # for a hint when a tag went missing
            if i not in tagged and cell.get("cell_type") == "code":
                for name, method in TODO_METHODS.items():
                    if f"def {method}(" in cell_source(cell):
                        untagged[name] = f"{path.name}, cell {i + 1}"
    for name, method in TODO_METHODS.items():
        found = candidates[name]
        attempted = [(o, s) for o, s in found if not _is_stub(s, method, stubs[name])]
        if attempted:
            origin, source = attempted[-1]
            sub.todos[name] = _checked(TodoSource("run", "cell", source, origin))
        elif found:
            sub.todos[name] = TodoSource("not attempted", origin=found[-1][0], detail="the stub is unchanged")
        else:
            hint = (f"; {untagged[name]} defines {method} but is not tagged todo:{name} (restore the tag "
                    f"and resubmit)") if name in untagged else ""
            sub.todos[name] = TodoSource("not attempted", detail=f"no cell is tagged todo:{name}{hint}")


def _is_stub(source: str, method: str, stubs: Set[str]) -> bool:
    fn = functions_in(source, [method]).get(method)
    return fn is not None and fingerprint(fn) in stubs


def _checked(todo: TodoSource) -> TodoSource:
    """A TODO whose source does not even parse is an error without running it."""
    try:
        ast.parse(todo.source)
    except SyntaxError as e:
        return TodoSource("error", todo.kind, todo.source, todo.origin, _syntax_error(e))
    except ValueError as e:  # null bytes
        return TodoSource("error", todo.kind, todo.source, todo.origin, f"ValueError: {e}")
    return todo


def _from_py(sub: Submission, path: Path, stubs: Dict[str, Set[str]]) -> None:
    try:
        source = _read_text(path)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        sub.error = f"cannot read {path.name}: {e}"
        return
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as e:
        detail = _syntax_error(e) if isinstance(e, SyntaxError) else f"ValueError: {e}"
        sub.todos = {name: TodoSource("error", "py", source, path.name, detail) for name in TODO_METHODS}
        return
    methods = class_methods(source)
    assigned = any(isinstance(n, (ast.Assign, ast.AnnAssign, ast.ImportFrom)) and "KVCacheSchedulerSim" in ast.dump(n)
                   for n in tree.body)
    if methods is None and not assigned:
        classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
        detail = "the file defines no class KVCacheSchedulerSim" + (f" (it defines {', '.join(classes)})" if classes else "")
        sub.todos = {name: TodoSource("error", "py", source, path.name, detail) for name in TODO_METHODS}
        return
    for name, method in TODO_METHODS.items():
        fn = (methods or {}).get(method)
        if fn is not None and fingerprint(fn) in stubs[name]:
            sub.todos[name] = TodoSource("not attempted", origin=path.name, detail="the stub is unchanged")
        else:
            sub.todos[name] = TodoSource("run", "py", source, f"{path.name}, KVCacheSchedulerSim.{method}")


def _suspect_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in _REVIEW_MODULES)


def review_flags(sources: List[str]) -> List[str]:
    """Constructs a TODO has no need for (imports of os, sys, ...; open; __mro__; 'solutions')."""
    flags: Set[str] = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                flags.update(f"imports {a.name}" for a in node.names if _suspect_module(a.name))
            elif isinstance(node, ast.ImportFrom) and node.module and _suspect_module(node.module):
                flags.add(f"imports {node.module}")
            elif isinstance(node, ast.Name) and node.id in _REVIEW_NAMES:
                flags.add(f"uses {node.id}")
            elif isinstance(node, ast.Attribute) and node.attr in _REVIEW_ATTRS:
                flags.add(f"uses .{node.attr}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                flags.update(f"mentions {s!r}" for s in _REVIEW_STRINGS if s in node.value)
    return sorted(flags)


def load(name: str, path: Path, stubs: Dict[str, Set[str]]) -> Submission:
    """Parse one submission; problems end up in `Submission.error` or per TODO, never raised."""
    sub = Submission(name, path)
    if path.is_dir():
        notebooks = sorted(p for p in path.glob("*.ipynb") if not p.name.startswith("."))
        if not notebooks:
            sub.error = "the folder holds no notebooks"
        else:
            _from_notebooks(sub, notebooks, stubs)
    elif path.suffix == ".ipynb" and path.is_file():
        _from_notebooks(sub, [path], stubs)
    elif path.suffix == ".py" and path.is_file():
        _from_py(sub, path, stubs)
    elif not path.exists():
        sub.error = "no such file or folder"
    else:
        sub.error = "not a notebook, a .py file or a folder of notebooks"
    if not sub.error:
        sub.review = review_flags(sorted({t.source for t in sub.todos.values() if t.status == "run"}))
    return sub
