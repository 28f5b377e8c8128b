"""The optional TODO ``aging`` (notebook 05, beyond the chapter): GDSF's inflation value L.

The chapter's score is LFU plus a size penalty and never ages (notebooks 02 and 05), so a
prefix that was hot once stays cached forever. GreedyDual-Size-Frequency (Cherkasova 1998)
fixes that with one number, the *inflation value* ``L``: every eviction raises ``L`` to the
victim's priority, and every priority computed afterwards starts from ``L``. New and re-used
entries then outrank entries whose hits are old, without re-scoring anybody.

`AgingScheduler` is a small library policy that keeps the bookkeeping: its records, its
victim choice and its ``inflation`` (raised at each eviction). The learner writes only its
priority, as a plain function ``_aged_score(self, hits, size, last_used)`` that may read
``self.inflation`` and ``self.chapter_score(hits, size, last_used)``. That base score is the
learner's own notebook 02 ``_score``, handed to the scheduler: the library itself computes the
chapter's score nowhere (it would answer TODO score). `kvsched_lab.course.checks.aging.grade_aging`
grades the aged score by the decisions it leads to, with a stand-in base score of its own.
"""
from __future__ import annotations

from heapq import heappop, heappush
from typing import Callable, Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE
from kvsched_lab.i18n import _
from kvsched_lab.sim.policies.base import Policy, prefix_hits

AgedScore = Callable[..., float]  # (scheduler, hits, size, last_used) -> priority
BaseScore = Callable[..., float]  # (scheduler, hits, size, last_used) -> the score aging starts from


class AgingScheduler(Policy):
    """Evict the lowest ``_aged_score`` (ties: older last use); each eviction raises ``inflation``.

    Priorities are computed at touch time, as in the chapter (so ``last_used == time`` there).
    Records ``(priority, last_used, key)`` sit in a min-heap; a record whose entry was touched
    again since it was pushed is skipped when popped (``last_used`` is unique per touch).
    """

    name = "aging"

    def __init__(self, capacity_bytes: int, aged_score: AgedScore, base_score: BaseScore, *,
                 future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        if not callable(aged_score):
            raise TypeError(_("aged_score must be a function (self, hits, size, last_used), got {value!r}",
                              value=aged_score))
        if not callable(base_score):
            raise TypeError(_("base_score must be a function (self, hits, size, last_used), such as your notebook 02 "
                              "_score; got {value!r}", value=base_score))
        self.aged_score = aged_score
        self.base_score = base_score  # your notebook 02 `_score`: what `chapter_score` returns
        self.inflation = 0.0  # L: the priority of the latest victim; new priorities start from it
        self.meta: Dict[Hashable, List] = {}  # key -> [priority, last_used, hits, bytes]
        self.records: List[Tuple[float, int, Hashable]] = []  # min-heap, stale records included

    def chapter_score(self, hits: int, size: int, last_used: int) -> float:
        """The base score aging starts from: the `base_score` given (in notebook 05, your notebook 02 `_score`)."""
        return float(self.base_score(self, hits, size, last_used))

    def _rescore(self, key: Hashable) -> None:
        m = self.meta[key]
        m[0] = float(self.aged_score(self, m[2], m[3], m[1]))
        heappush(self.records, (m[0], m[1], key))

    def on_hit(self, key: Hashable) -> None:
        m = self.meta[key]
        m[1], m[2] = self.time, m[2] + 1
        self._rescore(key)

    def on_insert(self, key: Hashable, size: int) -> None:
        self.meta[key] = [0.0, self.time, 1, size]
        self._rescore(key)

    def victim(self) -> Hashable:
        while True:
            priority, last_used, key = heappop(self.records)
            m = self.meta.get(key)
            if m is not None and m[1] == last_used:  # the entry's current record
                self.inflation = priority  # L rises to the victim's priority
                return key

    def on_evict(self, key: Hashable, size: int) -> None:
        del self.meta[key]

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        # `Policy._replay` with `touch` and the hooks inlined: the same hits, entries, log and
        # inflation (tests compare them), fast enough for a whole Mooncake trace in a notebook.
        # The clock stays on `self` (the learner's score reads self.time); bytes are counted locally.
        entries, meta, records, score = self.entries, self.meta, self.records, self.aged_score
        contains, emit, cap, used = entries.__contains__, self.log.append_event, self.capacity_bytes, self.current_bytes
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                out.append(prefix_hits(contains, ids))
                for key in ids:
                    self.time += 1
                    m = meta.get(key)
                    if m is not None:
                        self.hits += 1
                        m[1], m[2] = self.time, m[2] + 1
                        m[0] = p = float(score(self, m[2], m[3], m[1]))
                        heappush(records, (p, m[1], key))
                        emit((REUSE, key))
                        continue
                    while used + bytes_ > cap:
                        old = self.victim()
                        used -= entries.pop(old)
                        del meta[old]
                        emit((EVICT, old))
                    entries[key] = bytes_
                    used += bytes_
                    meta[key] = m = [0.0, self.time, 1, bytes_]
                    m[0] = p = float(score(self, 1, bytes_, m[1]))
                    heappush(records, (p, m[1], key))
                    emit((ADD, key))
        finally:  # keep the byte count true even if the replay is interrupted
            self.current_bytes = used
        return out

    def snapshot(self) -> List[Tuple[Hashable, int, float, int]]:
        """``(key, bytes, round(priority, 4), hits)``, highest priority first (older first on ties)."""
        ordered = sorted(self.meta.items(), key=lambda kv: (-kv[1][0], kv[1][1]))
        return [(k, m[3], round(m[0], 4), m[2]) for k, m in ordered]


def evictions(aged_score: AgedScore, base_score: BaseScore, capacity_bytes: int,
              touches: Sequence[Tuple[Hashable, int]]) -> List[Hashable]:
    """The keys `AgingScheduler` with `aged_score` (over `base_score`) evicts over `touches`, in order."""
    sim = AgingScheduler(capacity_bytes, aged_score, base_score)
    for key, size in touches:
        sim.touch(key, size)
    return [key for op, key in sim.log.events() if op == EVICT]
