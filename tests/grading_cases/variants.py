"""Answers for proving the grader right: plausible wrong ones, correct-but-different ones, misbehaving ones.

Wrong answers are the reference's method with one line changed (the change must apply, so a
reference edit cannot silently turn a mutant into the reference). Everything is the source of a
TODO cell: a plain function taking ``self``, as `kvsched_lab.todos` defines the cell contract.
Submissions are built from these as .py files and as tagged notebooks (`py_submission`, `notebook`).
"""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Dict, List, Tuple

import nbformat

from kvsched_lab.grading.stubs import CHAPTER_EXERCISE
from kvsched_lab.scheduler import TODO_METHODS, SchedulerSkeleton
from kvsched_lab.todos import reference_sources

REF = reference_sources()

# TODO -> [(name, old text, new text)]: each turns the reference into a plausible wrong answer.
MUTATIONS: Dict[str, List[Tuple[str, str, str]]] = {
    "score": [
        ("weights swapped", "0.5 * recency - 0.25 * size_penalty", "0.25 * recency - 0.5 * size_penalty"),
        ("size rewarded", "- 0.25 * size_penalty", "+ 0.25 * size_penalty"),
        ("recency left out", "reuse_bonus + 0.5 * recency", "reuse_bonus"),
        ("raw size", "0.25 * size_penalty", "0.25 * size"),
        ("hits ignored", "score = reuse_bonus +", "score = 1.0 +"),
    ],
    "heap": [
        ("negated priority", "(entry.priority, entry.last_used, prefix)", "(-entry.priority, entry.last_used, prefix)"),
        ("last_used first", "(entry.priority, entry.last_used, prefix)", "(entry.last_used, entry.priority, prefix)"),
        ("hits pushed", "(entry.priority, entry.last_used, prefix)", "(entry.hits, entry.last_used, prefix)"),
        ("append, no heap", "heapq.heappush(self.queue, queue_item)", "self.queue.append(queue_item)"),
        ("queue replaced", "heapq.heappush(self.queue, queue_item)", "self.queue = [queue_item]"),
    ],
    "stale": [
        ("priority only", "(priority, last_used) != (entry.priority, entry.last_used)", "priority != entry.priority"),
        ("last_used only", "(priority, last_used) != (entry.priority, entry.last_used)", "last_used != entry.last_used"),
        ("never stale", "(priority, last_used) != (entry.priority, entry.last_used)", "False"),
        ("inverted", "(priority, last_used) != (entry.priority, entry.last_used)",
         "(priority, last_used) == (entry.priority, entry.last_used)"),
        ("lower priority only", "(priority, last_used) != (entry.priority, entry.last_used)", "priority < entry.priority"),
        ("older only", "(priority, last_used) != (entry.priority, entry.last_used)", "last_used < entry.last_used"),
    ],
    "entry": [
        ("hits start at 0", "hits=1", "hits=0"),
        ("last_used not set", "last_used=self.time,", "last_used=0,"),
        ("bytes not set", ", bytes=bytes_)", ")"),
        ("last_used one ahead", "last_used=self.time,", "last_used=self.time + 1,"),
        ("hits and bytes swapped", "CacheEntry(priority=0.0, last_used=self.time, prefix=prefix, hits=1, bytes=bytes_)",
         "CacheEntry(0.0, self.time, prefix, bytes_, 1)"),
    ],
    "snapshot": [
        ("ascending", "key=lambda e: (-e.priority, e.last_used, e.prefix)", "key=lambda e: (e.priority, e.last_used, e.prefix)"),
        ("newer first on ties", "(-e.priority, e.last_used, e.prefix)", "(-e.priority, -e.last_used, e.prefix)"),
        ("ties by prefix only", "(-e.priority, e.last_used, e.prefix)", "(-e.priority, e.prefix)"),
        ("dataclass order reversed", "sorted(self.entries.values(), key=lambda e: (-e.priority, e.last_used, e.prefix))",
         "sorted(self.entries.values(), reverse=True)"),
        ("not sorted", "sorted(self.entries.values(), key=lambda e: (-e.priority, e.last_used, e.prefix))",
         "list(self.entries.values())"),
        ("not rounded", "round(e.priority, 4)", "e.priority"),
    ],
}


def mutant(todo: str, k: int) -> str:
    name, old, new = MUTATIONS[todo][k]
    assert old in REF[todo], f"mutation {todo}/{name} no longer applies to the reference"
    return REF[todo].replace(old, new)


# Correct answers written differently from the reference: two per TODO.
ALTERNATIVES: Dict[str, List[str]] = {
    "score": [
        """
def _score(self, hits, size, last_used):
    return hits + 0.5 / (1 + max(self.time - last_used, 0)) - size / max(self.capacity_bytes, 1) / 4
""",
        """
def _score(self, hits, size, last_used):
    recency = 1.0 / (1.0 + max(self.time - last_used, 0))
    # the same terms summed in another order: the last bits of the float may differ
    return 0.5 * recency - 0.25 * (size / max(self.capacity_bytes, 1)) + float(hits)
""",
    ],
    "heap": [
        """
def _refresh_queue(self, prefix):
    entry = self.entries[prefix]
    entry.priority = self._score(entry.hits, entry.bytes, entry.last_used)
    self.queue.append((entry.priority, entry.last_used, prefix))
    heapq.heapify(self.queue)
""",
        """
def _refresh_queue(self, prefix):
    entry = self.entries[prefix]
    entry.priority = self._score(entry.hits, entry.bytes, entry.last_used)
    q = self.queue
    q.append((entry.priority, entry.last_used, prefix))
    i = len(q) - 1
    while i > 0 and q[i] < q[(i - 1) // 2]:  # sift up by hand
        q[i], q[(i - 1) // 2] = q[(i - 1) // 2], q[i]
        i = (i - 1) // 2
""",
    ],
    "stale": [
        REF["stale"].replace("(priority, last_used) != (entry.priority, entry.last_used)",
                             "priority != entry.priority or last_used != entry.last_used"),
        """
def _evict_until_fit(self, needed):
    while self.current_bytes + needed > self.capacity_bytes and self.entries:
        victim = None
        while self.queue and victim is None:
            priority, last_used, prefix = heapq.heappop(self.queue)
            entry = self.entries.get(prefix)
            if entry is not None and entry.priority == priority and entry.last_used == last_used:
                victim = entry
        if victim is None:
            victim = min(self.entries.values(), key=lambda e: (e.priority, e.last_used))
        self.current_bytes -= victim.bytes
        del self.entries[victim.prefix]
        self.log.append("evict:" + str(victim.prefix))
""",
    ],
    "entry": [
        REF["entry"].replace("CacheEntry(priority=0.0, last_used=self.time, prefix=prefix, hits=1, bytes=bytes_)",
                             "CacheEntry(1.0, self.time, prefix, 1, bytes_)"),
        REF["entry"].replace("CacheEntry(priority=0.0,", "CacheEntry(priority=self._score(1, bytes_, self.time),"),
    ],
    "snapshot": [
        """
def snapshot(self):
    rows = sorted(self.entries.values(), key=lambda e: e.prefix)
    rows.sort(key=lambda e: e.last_used)
    rows.sort(key=lambda e: e.priority, reverse=True)  # stable: earlier keys break the ties
    return [(e.prefix, e.bytes, round(e.priority, 4), e.hits) for e in rows]
""",
        """
def snapshot(self):
    best = heapq.nsmallest(len(self.entries), self.entries.values(),
                           key=lambda e: (-e.priority, e.last_used, e.prefix))
    return [(e.prefix, e.bytes, round(e.priority, 4), e.hits) for e in best]
""",
    ],
}
for _todo, _alts in ALTERNATIVES.items():
    assert all(a != REF[_todo] for a in _alts), f"an alternative for {_todo} is the reference itself"


def stub(todo: str) -> str:
    """The skeleton's stub as a learner's TODO cell shows it."""
    import inspect

    return textwrap.dedent(inspect.getsource(getattr(SchedulerSkeleton, TODO_METHODS[todo])))


PY_HEADER = ("import heapq\n"
             "from kvsched_lab.scheduler import CacheEntry, SchedulerSkeleton\n\n\n"
             "class KVCacheSchedulerSim(SchedulerSkeleton):\n")


def py_submission(methods: Dict[str, str]) -> str:
    """A .py defining KVCacheSchedulerSim from one TODO-cell source per TODO (reference for the rest)."""
    body = [textwrap.indent(textwrap.dedent(methods.get(t, REF[t])).strip("\n"), "    ") for t in TODO_METHODS]
    return PY_HEADER + "\n\n".join(body) + "\n"


def chapter_file(answered: bool) -> str:
    """The chapter's own exercise as one file, with the answers filled in or as given."""
    answers = {
        "# score = ???": "score = reuse_bonus + 0.5 * recency - 0.25 * size_penalty",
        "# queue_item = ???": "queue_item = (entry.priority, entry.last_used, prefix)",
        "# is_stale = ???": "is_stale = (priority, last_used) != (entry.priority, entry.last_used)",
        "# entry = ???": "entry = CacheEntry(priority=0.0, last_used=self.time, prefix=prefix, hits=1, bytes=bytes_)",
        "# ordered_entries = ???": "ordered_entries = sorted(self.entries.values(), "
                                   "key=lambda e: (-e.priority, e.last_used, e.prefix))",
    }
    body = CHAPTER_EXERCISE
    if answered:
        for old, new in answers.items():
            body = body.replace(old, new)
    head = ("import heapq\nfrom dataclasses import dataclass, field\nfrom typing import Dict, List, Tuple\n\n\n"
            "@dataclass(order=True)\nclass CacheEntry:\n    priority: float\n    last_used: int\n"
            "    prefix: str = field(compare=False)\n    hits: int = field(default=0, compare=False)\n"
            "    bytes: int = field(default=0, compare=False)\n\n")
    return head + body


# The series' layout: which notebook holds which TODO (02-05), as the course notebooks do.
LAYOUT = {"02_score.ipynb": ["score"], "03_heap.ipynb": ["heap"], "04_evict.ipynb": ["stale", "entry"],
          "05_snapshot.ipynb": ["snapshot"]}

# A check cell that fails on the skeleton's stubs, as the course's public checks do.
CHECK = ("import inspect\n"
         "assert 'NotImplementedError' not in inspect.getsource({method}), 'write TODO {name} first'\n"
         "print('TODO {name}: written')")


def notebook(cells: List[Tuple[str, List[str]]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell("# A course notebook")]
    for source, tags in cells:
        cell = nbformat.v4.new_code_cell(source)
        if tags:
            cell.metadata["tags"] = tags
        nb.cells.append(cell)
    return nb


def write_series(folder: Path, sources: Dict[str, str], check: bool = True, layout=None) -> Path:
    """One learner's folder: the series' notebooks with these TODO-cell sources (stub where missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, todos in (layout or LAYOUT).items():
        cells: List[Tuple[str, List[str]]] = [("import math\nfrom typing import Hashable, List, Tuple\nprint('setup')", [])]
        for t in todos:
            cells.append((sources.get(t, stub(t)), [f"todo:{t}"]))
            if check:
                cells.append((CHECK.format(name=t, method=TODO_METHODS[t]), [f"check:{t}"]))
        nbformat.write(notebook(cells), str(folder / name))
    return folder
