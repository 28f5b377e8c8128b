"""The answers that prove both graders right: plausible wrong ones, correct-but-different ones.

One source for the public learner checks (`kvsched_lab.course.checks`, tests/test_course_checks.py)
and the hidden grader (`kvsched grade`, tests/test_grading.py): every wrong answer must fail its own
TODO in both, with the public check's message naming the mistake (``why``), and nothing else; every
alternative must pass both. A wrong answer is the reference's method with one piece changed (the
change must apply, so a reference edit cannot silently turn a wrong answer into the reference).
Everything is the source of a TODO cell: a plain function taking ``self``, as `kvsched_lab.course.todos`
defines the cell contract. Submissions are built from these as .py files and as tagged notebooks
(`py_submission`, `notebook`). This file holds answers: it ships with the instructor copy only.
"""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Tuple

import nbformat

from kvsched_lab.grading.judging.stubs import CHAPTER_EXERCISE
from kvsched_lab.sim.scheduler import TODO_METHODS, SchedulerSkeleton
from kvsched_lab.course.todos import reference_sources

REF = reference_sources()


class Wrong(NamedTuple):
    """A plausible wrong answer: the reference's `todo` method with `old` replaced by `new`."""

    todo: str
    name: str
    old: str
    new: str
    why: str  # what the public check's message must say
    # The grader's status for this TODO (0 points either way): "failed", or "error" when the answer
    # raises on the hidden cases; None marks a wrong answer for the public checks only (say why).
    grader: Optional[str] = "failed"

    @property
    def source(self) -> str:
        assert self.old in REF[self.todo], f"wrong answer {self.todo}/{self.name} no longer applies to the reference"
        return REF[self.todo].replace(self.old, self.new)


_SCORE = "score = reuse_bonus + 0.5 * recency - 0.25 * size_penalty"
_RECORD = "(entry.priority, entry.last_used, prefix)"
_PUSH = "heapq.heappush(self.queue, queue_item)"
_STALE = "(priority, last_used) != (entry.priority, entry.last_used)"
_ENTRY = "CacheEntry(priority=0.0, last_used=self.time, prefix=prefix, hits=1, bytes=bytes_)"
_ORDER = "sorted(self.entries.values(), key=lambda e: (-e.priority, e.last_used, e.prefix))"
_KEY = "(-e.priority, e.last_used, e.prefix)"

# TODO -> its plausible wrong answers.
WRONG: Dict[str, List[Wrong]] = {
    "score": [
        Wrong("score", "weights swapped", _SCORE, "score = reuse_bonus + 0.25 * recency - 0.5 * size_penalty",
              "the recency term weighs too little"),
        Wrong("score", "size rewarded", _SCORE, "score = reuse_bonus + 0.5 * recency + 0.25 * size_penalty",
              "bigger entry must score lower"),
        Wrong("score", "recency left out", _SCORE, "score = reuse_bonus - 0.25 * size_penalty", "ignores recency"),
        Wrong("score", "one too many", _SCORE, "score = reuse_bonus + 1 + 0.5 * recency - 0.25 * size_penalty",
              "more than its weighted recency alone"),
        Wrong("score", "raw size", _SCORE, "score = reuse_bonus + 0.5 * recency - 0.25 * size",
              "the size penalty weighs too much"),
        Wrong("score", "hits halved", _SCORE, "score = 0.5 * reuse_bonus + recency - 0.25 * size_penalty",
              "the reuse term weighs too little"),
        Wrong("score", "negated", _SCORE, "score = -(reuse_bonus + 0.5 * recency - 0.25 * size_penalty)",
              "more hits must give a higher score"),
        Wrong("score", "returns None", _SCORE, "score = None", "must return a number", grader="error"),
        # Raises only where last_used is ahead of the clock: the grader's precision family, so it
        # keeps the other families' points (tests/test_grading.py checks 18 of 20).
        Wrong("score", "recency unclamped", _SCORE,
              "score = reuse_bonus + 0.5 / (1 + self.time - last_used) - 0.25 * size_penalty", "the gap counts as 0",
              grader="error"),
        Wrong("score", "size over a constant", _SCORE, "score = reuse_bonus + 0.5 * recency - 0.25 * size / 128",
              "the size penalty weighs too little"),
        Wrong("score", "hits ignored", "score = reuse_bonus +", "score = 1.0 +", "the score ignores hits"),
        # Public checks only: the grader reports an endless loop as "timed out" (tests/test_grading.py
        # LOOP covers that), and would spend its whole timeout on it.
        Wrong("score", "endless loop", _SCORE, "while True: pass", "did not finish", grader=None),
    ],
    "heap": [
        Wrong("heap", "negated priority", _RECORD, "(-entry.priority, entry.last_used, prefix)", "negated"),
        Wrong("heap", "last_used first", _RECORD, "(entry.last_used, entry.priority, prefix)", "compare by last use before priority"),
        Wrong("heap", "entry pushed", _RECORD, "(entry.priority, entry.last_used, entry)", "holds the CacheEntry object itself",
              grader="error"),
        Wrong("heap", "append, no heap", _PUSH, "self.queue.append(queue_item)", "no longer a min-heap"),
        Wrong("heap", "queue replaced", _PUSH, "self.queue = [queue_item]", "lost an older record"),
        Wrong("heap", "key in the middle", _RECORD, "(entry.priority, prefix, entry.last_used)",
              "does not say which entry it is about", grader="error"),
        Wrong("heap", "last_used zero", _RECORD, "(entry.priority, 0, prefix)", "does not carry the entry's current last_used"),
        Wrong("heap", "two fields", _RECORD, "(entry.priority, entry.last_used)", "unlike the records already in the queue",
              grader="error"),
        Wrong("heap", "pushed twice", _PUSH, f"{_PUSH}\n    {_PUSH}", "exactly one new record"),
        Wrong("heap", "new score not stored", "entry.priority = self._score", "old = self._score",
              "must store the new score"),
        Wrong("heap", "hits pushed", _RECORD, "(entry.hits, entry.last_used, prefix)",
              "would sort by something other than the entry's new priority"),
    ],
    "stale": [
        Wrong("stale", "never stale", _STALE, "False", "re-scored later, but it was used for eviction"),
        Wrong("stale", "priority only", _STALE, "priority != entry.priority", "last_used is out of date"),
        Wrong("stale", "last_used only", _STALE, "last_used != entry.last_used", "priority is out of date"),
        Wrong("stale", "inverted", _STALE, "(priority, last_used) == (entry.priority, entry.last_used)",
              "could never be evicted"),
        Wrong("stale", "lower priority only", _STALE, "priority < entry.priority", "last_used is out of date"),
        Wrong("stale", "always stale", _STALE, "True", "could never be evicted"),
        Wrong("stale", "older only", _STALE, "last_used < entry.last_used", "priority is out of date"),
    ],
    "entry": [
        Wrong("entry", "hits start at 0", "hits=1", "hits=0", "the newest entry must start with one hit"),
        Wrong("entry", "last_used not set", "last_used=self.time,", "last_used=0,", "last_used must be the current time"),
        Wrong("entry", "hits and bytes swapped", _ENTRY, "CacheEntry(0.0, self.time, prefix, bytes_, 1)",
              "hits and bytes are swapped"),
        Wrong("entry", "bytes not set", ", bytes=bytes_)", ")", "must record its size"),
        Wrong("entry", "a dict", "CacheEntry(priority=", "dict(priority=", "must be a CacheEntry", grader="error"),
        Wrong("entry", "last_used one behind", "last_used=self.time,", "last_used=self.time - 1,",
              "last_used must be the current time"),
        Wrong("entry", "another prefix", "prefix=prefix,", "prefix='entry',", "must record its own prefix"),
        Wrong("entry", "last_used one ahead", "last_used=self.time,", "last_used=self.time + 1,", "last_used must be the current time"),
    ],
    "snapshot": [
        Wrong("snapshot", "ascending", _KEY, "(e.priority, e.last_used, e.prefix)", "lowest priority first"),
        Wrong("snapshot", "reversed", f"key=lambda e: {_KEY})", "key=lambda e: (e.priority, e.last_used, e.prefix), reverse=True)",
              "came out newest first"),
        Wrong("snapshot", "priority only, reversed", f"key=lambda e: {_KEY})", "key=lambda e: e.priority, reverse=True)",
              "came out newest first"),
        # Shows only where priorities agree to 4 places: the grader's precision family.
        Wrong("snapshot", "rounded priority", _KEY, "(-round(e.priority, 4), e.last_used, e.prefix)", "full priority"),
        Wrong("snapshot", "no prefix tie-break", _KEY, "(-e.priority, e.last_used)", "prefix order"),
        Wrong("snapshot", "not sorted", _ORDER, "list(self.entries.values())", "priority"),
        Wrong("snapshot", "entries cleared", _ORDER, "self.entries.values(); self.entries.clear()",
              "must not change self.entries"),
        Wrong("snapshot", "newer first on ties", _KEY, "(-e.priority, -e.last_used, e.prefix)", "came out newest first"),
        Wrong("snapshot", "ties by prefix only", _KEY, "(-e.priority, e.prefix)", "came out newest first"),
        Wrong("snapshot", "dataclass order reversed", _ORDER, "sorted(self.entries.values(), reverse=True)",
              "came out newest first"),
        Wrong("snapshot", "not rounded", "round(e.priority, 4)", "e.priority", "round(priority, 4)"),
    ],
}


def graded_wrong(todo: str) -> List[Wrong]:
    """The wrong answers of `todo` the grader is run on (all but the public-only ones)."""
    return [w for w in WRONG[todo] if w.grader is not None]


# Correct answers written differently from the reference.
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
        """
def _score(self, hits, size, last_used):
    return -0.25 * size / max(self.capacity_bytes, 1) + hits + 0.5 / (1 + max(self.time - last_used, 0))
""",
        """
def _score(self, hits, size, last_used):
    recency = 1.0 / (1.0 + max(self.time - last_used, 0))
    size_penalty = size / max(self.capacity_bytes, 1)
    score = recency * 0.5 + float(hits) - size_penalty / 4
    return score
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
        """
def _refresh_queue(self, prefix):
    e = self.entries[prefix]
    e.priority = self._score(e.hits, e.bytes, e.last_used)
    heapq.heappush(self.queue, tuple([e.priority, e.last_used, e.prefix]))
""",
    ],
    "stale": [
        REF["stale"].replace(_STALE, "priority != entry.priority or last_used != entry.last_used"),
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
        """
def _evict_until_fit(self, needed):
    while self.current_bytes + needed > self.capacity_bytes and self.entries:
        while self.queue:
            record = heapq.heappop(self.queue)
            entry = self.entries.get(record[2])
            if entry is None:
                continue
            if record != (entry.priority, entry.last_used, entry.prefix):
                continue
            break
        else:
            entry = min(self.entries.values(), key=lambda e: (e.priority, e.last_used))
        self.current_bytes -= entry.bytes
        self.entries.pop(entry.prefix, None)
        self.log.append(f"evict:{entry.prefix}")
""",
    ],
    "entry": [
        REF["entry"].replace(_ENTRY, "CacheEntry(1.0, self.time, prefix, 1, bytes_)"),
        REF["entry"].replace("CacheEntry(priority=0.0,", "CacheEntry(priority=self._score(1, bytes_, self.time),"),
        REF["entry"].replace(_ENTRY, "CacheEntry(0.0, self.time, prefix, 1, bytes_)"),
        """
def touch(self, prefix, bytes_):
    if bytes_ > self.capacity_bytes:
        raise ValueError("single cache entry exceeds capacity")
    self.time += 1
    if prefix in self.entries:
        hit = self.entries[prefix]
        hit.hits, hit.last_used = hit.hits + 1, self.time
        self._refresh_queue(prefix)
        self.log.append("reuse:" + str(prefix))
        return
    self._evict_until_fit(bytes_)
    self.entries[prefix] = CacheEntry(hits=1, bytes=bytes_, prefix=prefix, last_used=self.time, priority=-1.0)
    self.current_bytes += bytes_
    self._refresh_queue(prefix)
    self.log.append("add:" + str(prefix))
""",
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
        """
def snapshot(self):
    by_age = sorted(self.entries.values(), key=lambda e: (e.last_used, e.prefix))
    ordered_entries = sorted(by_age, key=lambda e: e.priority, reverse=True)
    return [(e.prefix, e.bytes, round(e.priority, 4), e.hits) for e in ordered_entries]
""",
        """
def snapshot(self):
    by_prefix = sorted(self.entries.values(), key=lambda e: e.prefix)
    ordered_entries = sorted(by_prefix, key=lambda e: (e.priority, -e.last_used), reverse=True)
    return [(e.prefix, e.bytes, round(e.priority, 4), e.hits) for e in ordered_entries]
""",
    ],
}
for _todo, _alts in ALTERNATIVES.items():
    assert all(a != REF[_todo] for a in _alts), f"an alternative for {_todo} is the reference itself"
    assert len(set(_alts)) == len(_alts), f"two alternatives for {_todo} are the same"
for _todo, _wrongs in WRONG.items():
    assert len({w.source for w in _wrongs}) == len(_wrongs), f"two wrong answers for {_todo} are the same"


def mixed_rounds(wrong_per_round: int = 2) -> List[Dict[str, Tuple[str, Optional[Wrong]]]]:
    """Every graded wrong answer and every alternative, packed into few submissions for the grader.

    Each round holds `wrong_per_round` wrong answers (in different TODOs, those with the most left
    first) and correct alternatives in the other TODOs, cycling through each TODO's alternatives:
    TODO -> (source, the wrong answer or None). So every wrong answer is graded next to correct
    TODOs that must keep their points, and every alternative is graded at least once.
    """
    left = {t: list(graded_wrong(t)) for t in TODO_METHODS}
    used = {t: 0 for t in TODO_METHODS}
    rounds: List[Dict[str, Tuple[str, Optional[Wrong]]]] = []
    while any(left.values()):
        busiest = sorted((t for t in TODO_METHODS if left[t]), key=lambda t: -len(left[t]))[:wrong_per_round]
        one: Dict[str, Tuple[str, Optional[Wrong]]] = {}
        for t in TODO_METHODS:
            if t in busiest:
                w = left[t].pop(0)
                one[t] = (w.source, w)
            else:
                alts = ALTERNATIVES[t]
                one[t] = (alts[used[t] % len(alts)], None)
                used[t] += 1
        rounds.append(one)
    assert all(used[t] >= len(ALTERNATIVES[t]) for t in TODO_METHODS), "an alternative is never graded"
    return rounds


def stub(todo: str) -> str:
    """The skeleton's stub as a learner's TODO cell shows it."""
    import inspect

    return textwrap.dedent(inspect.getsource(getattr(SchedulerSkeleton, TODO_METHODS[todo])))


PY_HEADER = ("import heapq\n"
             "from kvsched_lab.sim.scheduler import CacheEntry, SchedulerSkeleton\n\n\n"
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
