"""Every guard in the public learner checks, tested for the mistake it names.

tests/grading_cases/variants.py holds the plausible wrong answers both graders must fail. Some
guards in `kvsched_lab.course.checks` are reached by none of them: an answer wrong in just that
way would be rejected by a later guard with a vaguer message, or not at all. Each answer here is
the reference with one change aimed at one guard, and must fail with that guard's own words
(the checks stop at the first broken expectation, so the message also shows which guard fired).
These answers are built for the guards, not picked as common mistakes, so they stay out of the
grader's regression set. Guards no answer can reach are listed in docs/testing.md.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import kvsched_lab.course as lab
from kvsched_lab.course.todos import load_method, reference_sources

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
from variants import Wrong  # noqa: E402

REF = reference_sources()


def Aimed(todo: str, name: str, old: str, new: str, message: str) -> Wrong:
    """A wrong answer for the public checks only (grader=None): `message` is the one guard's words."""
    return Wrong(todo, name, old, new, message, grader=None)


_RECENCY = "recency = 1.0 / (1.0 + max(self.time - last_used, 0))"
_PUSH = "heapq.heappush(self.queue, queue_item)"
_RESCORE = "entry.priority = self._score(entry.hits, entry.bytes, entry.last_used)"
_NEW = "    self.entries[prefix] = entry\n    self.current_bytes += bytes_\n    self._refresh_queue(prefix)\n"
_MAKE_ROOM = "    self._evict_until_fit(bytes_)\n"
_STORE = "    self.entries[prefix] = entry\n"
_MISS = REF["entry"][REF["entry"].index(_MAKE_ROOM):REF["entry"].index("    self.log.append(f\"add")]  # a miss's steps
_HIT = "        entry.hits += 1\n        entry.last_used = self.time\n        self._refresh_queue(prefix)\n"
_ORDER = "sorted(self.entries.values(), key=lambda e: (-e.priority, e.last_used, e.prefix))"
_ROW = "(e.prefix, e.bytes, round(e.priority, 4), e.hits)"

AIMED = [
    # score: the seeded random cases, each property on its own.
    Aimed("score", "reuse capped at 5 hits", "reuse_bonus = float(hits)", "reuse_bonus = float(min(hits, 5))",
          "one more hit must raise the score by the same amount at every time and size"),
    Aimed("score", "age scaled by the clock", _RECENCY,
          "recency = 1.0 / (1.0 + max(self.time - last_used, 0) * max(self.time // 10, 1))",
          "not on the clock's absolute value"),
    Aimed("score", "capacity clamped at 1000", "size / max(self.capacity_bytes, 1)",
          "size / min(max(self.capacity_bytes, 1), 1000)", "relative to capacity_bytes"),
    Aimed("score", "age wraps around every 8 touches", _RECENCY,
          "recency = 1.0 / (1.0 + max(self.time - last_used, 0) % 8)", "score higher, at every age"),
    # heap
    Aimed("heap", "a list appended", f"    {_PUSH}", "    self.queue.append(list(queue_item))",
          "a heap record must be a tuple"),
    Aimed("heap", "pushed before re-scoring", f"    {_RESCORE}\n", "    heapq.heappush(self.queue, "
          "(entry.priority, entry.last_used, prefix))\n" f"    {_RESCORE}\n    return\n",
          "this one carries the priority from before re-scoring"),
    Aimed("heap", "never re-scored", f"    {_RESCORE}\n", "", "must re-score the entry with self._score"),
    Aimed("heap", "score arguments swapped", _RESCORE,
          "entry.priority = self._score(entry.hits, entry.last_used, entry.bytes)", "must call self._score once"),
    Aimed("heap", "entry replaced by a copy", f"    {_RESCORE}\n",
          "    entry = CacheEntry(self._score(entry.hits, entry.bytes, entry.last_used), entry.last_used, prefix, "
          "entry.hits, entry.bytes)\n    self.entries[prefix] = entry\n", "not replace or remove it"),
    Aimed("heap", "prefix stored as a string", f"    {_RESCORE}\n", f"    {_RESCORE}\n    entry.prefix = str(prefix)\n",
          "must change only the entry's priority"),
    Aimed("heap", "other entries' hits decayed", f"    {_PUSH}",
          f"    {_PUSH}\n    for other in self.entries.values():\n        if other is not entry:\n"
          "            other.hits //= 2", "must not change other entries"),
    # A record type that is a tuple and equal to the right one, but sorts newest first on ties:
    # wrong only when two priorities are equal.
    Aimed("heap", "newest first on priority ties", "    queue_item = (entry.priority, entry.last_used, prefix)\n",
          "    class Record(tuple):\n        def __lt__(a, b):\n            return (a[0], -a[1]) < (b[0], -b[1])\n"
          "    queue_item = Record((entry.priority, entry.last_used, prefix))\n",
          "records with equal priority must pop oldest last_used first"),
    # stale
    Aimed("stale", "logs 'remove:'", 'self.log.append(f"evict:{prefix}")', 'self.log.append(f"remove:{prefix}")',
          "the log may only gain 'evict:<prefix>' lines"),
    Aimed("stale", "victim left in entries", "        self.entries.pop(prefix, None)\n", "",
          "self.entries must lose exactly the evicted entries"),
    Aimed("stale", "current_bytes drops by what is needed", "self.current_bytes -= entry.bytes",
          "self.current_bytes -= needed", "current_bytes must drop by the evicted entries' bytes"),
    Aimed("stale", "queue sorted high to low, popped from the end", "heapq.heappop(self.queue)",
          "(self.queue.sort(reverse=True), self.queue.pop())[1]", "the queue is no longer a heap"),
    # entry
    Aimed("entry", "placeholder priority cleared after the refresh", _NEW, _NEW + "    entry.priority = None\n",
          "the new entry's priority must be a number"),
    Aimed("entry", "entry swapped for a dict after the refresh", _NEW,
          _NEW + "    self.entries[prefix] = vars(entry).copy()\n", "the new entry must be a CacheEntry"),
    # One CacheEntry object kept on the scheduler and rewritten for every new prefix: each touch on
    # its own looks right, but the first prefix's entry is the second's.
    Aimed("entry", "one CacheEntry object for every prefix",
          "CacheEntry(priority=0.0, last_used=self.time, prefix=prefix, hits=1, bytes=bytes_)",
          "self.__dict__.setdefault('_spare', CacheEntry(0.0, 0, prefix, 1, bytes_))\n"
          "    entry.priority, entry.last_used, entry.prefix, entry.hits, entry.bytes = "
          "0.0, self.time, prefix, 1, bytes_",
          "each new prefix needs its own, new CacheEntry"),
    Aimed("entry", "refreshed before it is stored", _NEW,
          "    self._refresh_queue(prefix)\n    self.entries[prefix] = entry\n    self.current_bytes += bytes_\n",
          "_refresh_queue was called before the new entry was stored"),
    Aimed("entry", "clock not advanced", "    self.time += 1\n", "", "the clock must advance by one per touch"),
    Aimed("entry", "no eviction", "    self._evict_until_fit(bytes_)\n", "",
          "must call self._evict_until_fit(bytes_) first"),
    Aimed("entry", "room for everything", "self._evict_until_fit(bytes_)",
          "self._evict_until_fit(self.current_bytes + bytes_)", "must make room for the new entry's bytes_"),
    Aimed("entry", "stored before evicting", _MISS,
          _MISS.replace(_MAKE_ROOM, "").replace(_STORE, _STORE + _MAKE_ROOM), "must evict before the new entry is stored"),
    Aimed("entry", "entry dropped after its refresh", _NEW, _NEW + "    del self.entries[prefix]\n",
          "the new entry must be stored in self.entries[prefix]"),
    Aimed("entry", "entry rebuilt after its refresh", _NEW,
          _NEW + "    self.entries[prefix] = CacheEntry(entry.priority, entry.last_used, prefix, 1, bytes_)\n",
          "must refresh the new entry's heap record"),
    Aimed("entry", "current_bytes not grown", "    self.current_bytes += bytes_\n", "",
          "current_bytes must grow by the new entry's bytes"),
    Aimed("entry", "current_bytes grown after the refresh", _NEW,
          "    self.entries[prefix] = entry\n    self._refresh_queue(prefix)\n    self.current_bytes += bytes_\n",
          "before its heap record is refreshed"),
    Aimed("entry", "logs 'added:'", 'self.log.append(f"add:{prefix}")', 'self.log.append(f"added:{prefix}")',
          "the log must end with one 'add:"),
    Aimed("entry", "a hit builds a new entry", "        entry = self.entries[prefix]\n",
          "        old = self.entries[prefix]\n        entry = CacheEntry(old.priority, old.last_used, prefix, "
          "old.hits, old.bytes)\n        self.entries[prefix] = entry\n", "a hit must update the existing entry"),
    Aimed("entry", "a hit keeps last_used", _HIT, "        entry.hits += 1\n        self._refresh_queue(prefix)\n",
          "a hit must add one hit and set last_used"),
    Aimed("entry", "a hit makes room for a size change", _HIT,
          "        self._evict_until_fit(bytes_ - entry.bytes)\n" + _HIT,
          "a hit only re-scores the entry"),
    Aimed("entry", "a hit logs 'hit:'", 'self.log.append(f"reuse:{prefix}")', 'self.log.append(f"hit:{prefix}")',
          "the log must gain exactly one 'reuse:"),
    Aimed("entry", "input check dropped", "    self._check_touch(prefix, bytes_)\n", "",
          "an entry bigger than the capacity must raise ValueError (keep the given input check)"),
    Aimed("entry", "input check as an assert", "    self._check_touch(prefix, bytes_)\n",
          "    assert bytes_ <= self.capacity_bytes, 'too big'\n", "it raised AssertionError"),
    Aimed("entry", "clock ticks before the input check", "    self._check_touch(prefix, bytes_)\n\n    self.time += 1\n",
          "    self.time += 1\n    self._check_touch(prefix, bytes_)\n", "a rejected touch must not change anything"),
    # snapshot
    Aimed("snapshot", "a tuple", f"return [{_ROW} for e in ordered_entries]",
          f"return tuple({_ROW} for e in ordered_entries)", "snapshot must return a list"),
    Aimed("snapshot", "rows without hits", _ROW, "(e.prefix, e.bytes, round(e.priority, 4))",
          "one (prefix, bytes, round(priority, 4), hits) tuple per live entry"),
    Aimed("snapshot", "hits in the prefix column", _ROW, "(e.hits, e.bytes, round(e.priority, 4), e.hits)",
          "must list every live entry exactly once"),
    Aimed("snapshot", "sorted by prefix", _ORDER, "sorted(self.entries.values(), key=lambda e: e.prefix)",
          "entries are not ordered by priority, highest first"),
    # Right on every fixed case (none has more than five entries), wrong on the random ones.
    Aimed("snapshot", "the top five only", _ORDER, f"{_ORDER}[:5]",
          "random entries with ties: snapshot must return one"),
]


@pytest.mark.parametrize("aimed", AIMED, ids=[f"{a.todo}-{a.name}" for a in AIMED])
def test_each_guard_rejects_the_mistake_it_names(aimed):
    result = lab.grade(aimed.todo, load_method(aimed.todo, aimed.source))
    assert result.status == "failed", result.line()
    assert aimed.why in result.message, result.line()


def test_aimed_answers_differ_from_the_reference_and_each_other():
    sources = [a.source for a in AIMED]
    assert len(set(sources)) == len(sources)
    assert not set(sources) & set(REF.values())
