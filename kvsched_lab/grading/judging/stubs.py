"""What "not attempted" looks like: the stubs a learner starts from, compared by syntax tree.

Known stubs are the chapter's own exercise class (chapter 41, Step 4, verbatim below: it is the
public starting point, so a .py submission often is this file), `SchedulerSkeleton`'s methods,
and the TODO cells of the course notebooks on disk. Two functions are the same stub when their
syntax trees match with comments, docstrings and annotations ignored.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path
from typing import Dict, Iterable, Optional, Set

from kvsched_lab.sim.scheduler import TODO_METHODS, SchedulerSkeleton
from kvsched_lab.course.todos import tagged_cells
from kvsched_lab.notebook_files import cell_source, read_notebook

CHAPTER_EXERCISE = '''
class KVCacheSchedulerSim:
    def __init__(self, capacity_bytes: int = 1024):
        self.capacity_bytes = capacity_bytes
        self.current_bytes = 0
        self.time = 0
        self.entries: Dict[str, CacheEntry] = {}
        self.queue: List[Tuple[float, int, str]] = []
        self.log: List[str] = []

    def _score(self, hits: int, size: int, last_used: int) -> float:
        recency = 1.0 / (1.0 + max(self.time - last_used, 0))
        reuse_bonus = float(hits)
        size_penalty = size / max(self.capacity_bytes, 1)
        # score = ???
        return score

    def _refresh_queue(self, prefix: str):
        entry = self.entries[prefix]
        entry.priority = self._score(entry.hits, entry.bytes, entry.last_used)
        # queue_item = ???
        heapq.heappush(self.queue, queue_item)

    def _evict_until_fit(self, needed: int):
        while self.current_bytes + needed > self.capacity_bytes and self.entries:
            while self.queue:
                priority, last_used, prefix = heapq.heappop(self.queue)
                entry = self.entries.get(prefix)
                if entry is None:
                    continue
                # is_stale = ???
                if is_stale:
                    continue
                break
            else:
                entry = min(self.entries.values(), key=lambda e: (e.priority, e.last_used))
                prefix = entry.prefix

            self.current_bytes -= entry.bytes
            self.entries.pop(prefix, None)
            self.log.append(f"evict:{prefix}")

    def touch(self, prefix: str, bytes_: int):
        if bytes_ > self.capacity_bytes:
            raise ValueError("single cache entry exceeds capacity")

        self.time += 1
        if prefix in self.entries:
            entry = self.entries[prefix]
            entry.hits += 1
            entry.last_used = self.time
            self._refresh_queue(prefix)
            self.log.append(f"reuse:{prefix}")
            return

        self._evict_until_fit(bytes_)
        # entry = ???
        self.entries[prefix] = entry
        self.current_bytes += bytes_
        self._refresh_queue(prefix)
        self.log.append(f"add:{prefix}")

    def schedule(self, requests: List[Tuple[str, int]]) -> List[str]:
        for prefix, bytes_ in requests:
            self.touch(prefix, bytes_)
        return list(self.log)

    def snapshot(self) -> List[Tuple[str, int, float, int]]:
        # ordered_entries = ???
        return [(e.prefix, e.bytes, round(e.priority, 4), e.hits) for e in ordered_entries]
'''

# Given code of the course's own stubs that the chapter does not have (the skeleton validates a
# touch before anything else); release's leak check must not count it as an answer.
COURSE_GIVEN_LINES = ("self._check_touch(prefix, bytes_)",)


def _strip(fn: ast.AST) -> ast.AST:
    """A copy of a function node without docstring and annotations."""
    fn = ast.parse(ast.unparse(fn)).body[0]
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        fn.body = body[1:] or [ast.Pass()]
    fn.returns = None
    for arg in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs:
        arg.annotation = None
    return fn


def fingerprint(fn: ast.AST) -> str:
    return ast.dump(_strip(fn), include_attributes=False)


def functions_in(source: str, names: Iterable[str]) -> Dict[str, ast.AST]:
    """Top-level functions with these names in `source` (the last definition wins); {} if it does not parse."""
    wanted = set(names)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    found: Dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in wanted:
            found[node.name] = node
    return found


def class_methods(source: str, class_name: str = "KVCacheSchedulerSim") -> Optional[Dict[str, ast.AST]]:
    """Methods defined in the body of top-level class `class_name`; None if there is no such class."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return {n.name: n for n in node.body if isinstance(n, ast.FunctionDef)}
    return None


def known_stubs(notebooks_dir: Optional[Path] = None) -> Dict[str, Set[str]]:
    """Fingerprints of every known stub, per TODO name."""
    stubs: Dict[str, Set[str]] = {name: set() for name in TODO_METHODS}
    chapter = class_methods(CHAPTER_EXERCISE) or {}
    for name, method in TODO_METHODS.items():
        stubs[name].add(fingerprint(chapter[method]))
        skeleton = textwrap.dedent(inspect.getsource(getattr(SchedulerSkeleton, method)))
        stubs[name].add(fingerprint(functions_in(skeleton, [method])[method]))
    if notebooks_dir is not None and notebooks_dir.is_dir():
        for path in sorted(notebooks_dir.glob("*.ipynb")):
            try:
                nb = read_notebook(path)
            except (OSError, ValueError):
                continue
            for name, idx in tagged_cells(nb, "todo").items():
                if name in TODO_METHODS:
                    for i in idx:
                        fn = functions_in(cell_source(nb["cells"][i]), [TODO_METHODS[name]]).get(TODO_METHODS[name])
                        if fn is not None:
                            stubs[name].add(fingerprint(fn))
    return stubs
