"""Finding, filling and loading the five TODO cells of the course notebooks.

A TODO cell is a code cell tagged ``todo:<name>`` (``score``, ``heap``, ``stale``, ``entry``,
``snapshot``) that defines the chapter's method for that TODO as a plain function taking
``self`` (``def _score(self, hits, size, last_used): ...``). Its check cell, right after it,
is tagged ``check:<name>``. The notebooks, the public checks, the nbval tests and the grader
all go through this module, so the tag and name rules live in one place.

Optional TODOs beyond the chapter (``OPTIONAL_TODO_METHODS``, e.g. ``aging`` in notebook 05)
use the same tags and have public checks, but `todo_sources` (what the grader reads) and
`TODO_NAMES` stay the five graded ones.
Notebooks 08, 09 and 10 add practice TODOs outside the chapter's 100 points (`PRACTICE_FUNCTIONS`): their
cells are tagged ``practice:<name>`` and their check cells ``practice-check:<name>``, so nothing
that reads the five TODOs (checks, answers, grader) sees them.
"""
from __future__ import annotations

import heapq
import importlib
import inspect
import json
import textwrap
from typing import Callable, Dict, Hashable, List, Tuple

from kvsched_lab.notebook_files import Notebook, cell_source
from kvsched_lab.sim.scheduler import ALL_TODO_METHODS, OPTIONAL_TODO_METHODS, TODO_METHODS, CacheEntry

TODO_NAMES: Tuple[str, ...] = tuple(TODO_METHODS)
# The practice TODOs of notebooks 08, 09 and 10 (not graded): name -> the function its cell defines.
PRACTICE_FUNCTIONS: Dict[str, str] = {"free_order": "free_queue_after", "leaf_victim": "radix_victim",
                                      "tier_choice": "place_evicted", "admission": "admit"}


def tagged_cells(nb: Notebook, kind: str) -> Dict[str, List[int]]:
    """``{name: [cell indices]}`` for cells tagged ``<kind>:<name>`` (kind: ``todo`` or ``check``)."""
    found: Dict[str, List[int]] = {}
    for i, cell in enumerate(nb.get("cells", [])):
        for tag in cell.get("metadata", {}).get("tags", []):
            k, sep, name = tag.partition(":")
            if sep and k == kind:
                found.setdefault(name, []).append(i)
    return found


def todo_sources(nb: Notebook) -> Dict[str, str]:
    """Source of each TODO cell in `nb`; a name tagged twice keeps its last cell (the learner's latest)."""
    return {name: cell_source(nb["cells"][idx[-1]]) for name, idx in tagged_cells(nb, "todo").items()
            if name in TODO_NAMES}


def reference_sources(optional: bool = False) -> Dict[str, str]:
    """The reference's method source per TODO (needs the instructor-only ``solutions`` package).

    The five graded TODOs; with `optional`, the optional ones too (from ``solutions.aging``...).
    """
    from solutions import KVCacheSchedulerSim

    out = {name: textwrap.dedent(inspect.getsource(getattr(KVCacheSchedulerSim, method)))
           for name, method in TODO_METHODS.items()}
    if optional:
        for name, function in OPTIONAL_TODO_METHODS.items():
            module = importlib.import_module(f"solutions.{name}")
            out[name] = textwrap.dedent(inspect.getsource(getattr(module, function)))
    return out


def practice_reference_sources() -> Dict[str, str]:
    """The reference's source per practice TODO (instructor-only ``solutions.practice``)."""
    from solutions import practice

    return {name: textwrap.dedent(inspect.getsource(getattr(practice, fn))) for name, fn in PRACTICE_FUNCTIONS.items()}


def fill_todos(nb: Notebook, sources: Dict[str, str], kind: str = "todo") -> Notebook:
    """A copy of `nb` whose cells tagged `kind` (``todo``, or ``practice``) hold `sources`."""
    out = json.loads(json.dumps(nb))
    for name, idx in tagged_cells(out, kind).items():
        if name in sources:
            for i in idx:
                out["cells"][i]["source"] = sources[name]
    return out


def cell_namespace() -> dict:
    """What a TODO cell may use without importing it, as in the chapter's notebook."""
    return {"heapq": heapq, "CacheEntry": CacheEntry, "Dict": Dict, "List": List,
            "Tuple": Tuple, "Hashable": Hashable}


def load_method(name: str, source: str) -> Callable:
    """Run one TODO cell's source and return the function it defines for TODO `name`.

    Raises SyntaxError/any exception the cell raises, or LookupError when the cell does not
    define the chapter's method name (e.g. ``_score`` for ``score``).
    """
    if name not in ALL_TODO_METHODS:
        raise ValueError(f"unknown TODO {name!r}; expected one of {list(ALL_TODO_METHODS)}")
    ns = cell_namespace()
    exec(compile(source, f"<todo:{name}>", "exec"), ns)
    fn = ns.get(ALL_TODO_METHODS[name])
    if not callable(fn):
        raise LookupError(f"the todo:{name} cell must define a function named {ALL_TODO_METHODS[name]}")
    return fn


def load_practice(name: str, source: str) -> Callable:
    """Run one practice cell's source and return the function it defines for practice TODO `name`."""
    if name not in PRACTICE_FUNCTIONS:
        raise ValueError(f"unknown practice TODO {name!r}; expected one of {list(PRACTICE_FUNCTIONS)}")
    ns: dict = {}
    exec(compile(source, f"<practice:{name}>", "exec"), ns)
    fn = ns.get(PRACTICE_FUNCTIONS[name])
    if not callable(fn):
        raise LookupError(f"the practice:{name} cell must define a function named {PRACTICE_FUNCTIONS[name]}")
    return fn
