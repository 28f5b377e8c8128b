"""The check of TODO ``entry`` (notebook 04): `touch(self, prefix, bytes_)` on a miss and on a hit.

`_evict_until_fit` and `_refresh_queue` are spies that record their calls, so the check sees
the order of the steps (make room, store the entry, refresh its record) and what each got.
"""
from __future__ import annotations

import heapq
from typing import Callable, Dict, Hashable, List

from kvsched_lab.i18n import _
from kvsched_lab.sim.scheduler import CacheEntry, SchedulerSkeleton
from kvsched_lab.course.checks.common import _budget, _NotDone, _OutOfTime, _run, _state, _Wrong


class _TouchSelf:
    """A scheduler for `touch`: `_evict_until_fit` and `_refresh_queue` are spies that record calls."""

    def __init__(self, capacity_bytes: int = 100):
        self.capacity_bytes = capacity_bytes
        self.current_bytes = 0
        self.time = 0
        self.entries: Dict[Hashable, CacheEntry] = {}
        self.queue: List[tuple] = []
        self.log: List[str] = []
        self.calls: List[tuple] = []
        self.next_priority = 1.25

    def _check_touch(self, prefix: Hashable, bytes_: int) -> None:
        SchedulerSkeleton._check_touch(self, prefix, bytes_)  # the given input check, as is

    def _score(self, hits: int, size: int, last_used: int) -> float:
        # A touch may score its new entry itself (right, if redundant): _refresh_queue rescores it.
        return self.next_priority

    def _evict_until_fit(self, needed: int) -> None:
        self.calls.append(("evict", needed, frozenset(self.entries)))
        while self.entries and self.current_bytes + needed > self.capacity_bytes:
            key = next(iter(self.entries))  # the spy evicts the oldest-inserted entry
            self.current_bytes -= self.entries.pop(key).bytes
            self.log.append(f"evict:{key}")

    def _refresh_queue(self, prefix: Hashable) -> None:
        entry = self.entries.get(prefix, None)
        if entry is None:
            raise _Wrong(_("_refresh_queue was called before the new entry was stored in self.entries"))
        if not isinstance(entry, CacheEntry):
            raise _Wrong(_("the new entry must be a CacheEntry (the dataclass given above), got {entry_type}",
                           entry_type=type(entry).__name__))
        self.calls.append(("refresh", prefix, entry, self.current_bytes))
        entry.priority = self.next_priority
        heapq.heappush(self.queue, (self.next_priority, entry.last_used, prefix))


def _touch_miss(fn: Callable, sim: _TouchSelf, key: Hashable, size: int) -> CacheEntry:
    time, before_keys, current = sim.time, frozenset(sim.entries), sim.current_bytes
    sizes = {k: e.bytes for k, e in sim.entries.items()}
    log_len = len(sim.log)
    sim.calls.clear()
    _run(fn, sim, key, size)
    what = _("touch({key!r}, {size}) on a miss", key=key, size=size)
    if sim.time != time + 1:
        raise _Wrong(_("{what}: the clock must advance by one per touch", what=what))
    kinds = [c[0] for c in sim.calls]
    if kinds != ["evict", "refresh"]:
        raise _Wrong(_("{what}: must call self._evict_until_fit(bytes_) first, then self._refresh_queue(prefix) "
                       "once the entry is stored; calls were {kinds}",
                       what=what, kinds=kinds))
    if sim.calls[0][1] != size:
        raise _Wrong(_("{what}: must make room for the new entry's bytes_ ({size}), asked for {value!r}",
                       what=what, size=size, value=sim.calls[0][1]))
    if key in sim.calls[0][2] or sim.calls[0][2] != before_keys:
        raise _Wrong(_("{what}: must evict before the new entry is stored", what=what))
    entry = sim.entries.get(key)
    if entry is None:
        raise _Wrong(_("{what}: the new entry must be stored in self.entries[prefix]", what=what))
    if not isinstance(entry, CacheEntry):
        raise _Wrong(_("{what}: the new entry must be a CacheEntry (the dataclass given above), got {entry_type}",
                       what=what, entry_type=type(entry).__name__))
    if sim.calls[1][1] != key or sim.calls[1][2] is not entry:
        raise _Wrong(_("{what}: must refresh the new entry's heap record with self._refresh_queue(prefix)",
                       what=what))
    if entry.hits == size and entry.bytes == 1 and size != 1:
        raise _Wrong(_("{what}: the new entry's hits and bytes are swapped", what=what))
    if entry.hits != 1:
        raise _Wrong(_("{what}: the newest entry must start with one hit (this access counts), it has {hits!r}",
                       what=what, hits=entry.hits))
    if entry.last_used != sim.time:
        raise _Wrong(_("{what}: a new entry's last_used must be the current time (self.time after the tick, "
                       "{time}), it is {last_used!r}",
                       what=what, time=sim.time, last_used=entry.last_used))
    if entry.bytes != size:
        raise _Wrong(_("{what}: the new entry must record its size bytes_ ({size}), it has {bytes!r}",
                       what=what, size=size, bytes=entry.bytes))
    if entry.prefix != key:
        raise _Wrong(_("{what}: the new entry must record its own prefix ({key!r}), it has {prefix!r}",
                       what=what, key=key, prefix=entry.prefix))
    if isinstance(entry.priority, bool) or not isinstance(entry.priority, (int, float)):
        raise _Wrong(_("{what}: the new entry's priority must be a number (any placeholder; _refresh_queue sets the "
                       "real one), got {priority!r}",
                       what=what, priority=entry.priority))
    evicted = [k for k in before_keys if k not in sim.entries]
    if sim.current_bytes != current - sum(sizes[k] for k in evicted) + size:
        raise _Wrong(_("{what}: current_bytes must grow by the new entry's bytes", what=what))
    if sim.calls[1][3] != sim.current_bytes:
        raise _Wrong(_("{what}: current_bytes must grow by the new entry's bytes before its heap record is refreshed",
                       what=what))
    if sim.log[-1:] != [f"add:{key}"] or len(sim.log) != log_len + len(evicted) + 1:
        raise _Wrong(_("{what}: the log must end with one 'add:{key}' line", what=what, key=key))
    return entry


def _touch_hit(fn: Callable, sim: _TouchSelf, key: Hashable, size: int) -> None:
    entry = sim.entries[key]
    hits, log_len, current = entry.hits, len(sim.log), sim.current_bytes
    sim.calls.clear()
    _run(fn, sim, key, size)
    what = _("touch({key!r}, {size}) on a hit", key=key, size=size)
    if sim.entries.get(key) is not entry:
        raise _Wrong(_("{what}: a hit must update the existing entry, not replace it", what=what))
    if entry.hits != hits + 1 or entry.last_used != sim.time:
        raise _Wrong(_("{what}: a hit must add one hit and set last_used to the current time", what=what))
    if [c[0] for c in sim.calls] != ["refresh"] or sim.current_bytes != current:
        raise _Wrong(_("{what}: a hit only re-scores the entry (no eviction, no new bytes)", what=what))
    if sim.log[log_len:] != [f"reuse:{key}"]:
        raise _Wrong(_("{what}: the log must gain exactly one 'reuse:{key}' line", what=what, key=key))


def grade_entry(fn: Callable) -> int:
    sim = _TouchSelf(capacity_bytes=100)
    first = _touch_miss(fn, sim, "a", 40)
    second = _touch_miss(fn, sim, "b", 50)
    if first is second:
        raise _Wrong(_("each new prefix needs its own, new CacheEntry"))
    _touch_hit(fn, sim, "a", 40)
    _touch_miss(fn, sim, "c", 30)  # the spy evicts to make room: the entry is built after that
    if "a" in sim.entries:
        raise _Wrong(_("touch must let _evict_until_fit make room before adding"))
    _touch_hit(fn, sim, "c", 30)
    _touch_miss(fn, sim, 7, 100)  # a non-string key, as big as the cache
    _touch_miss(fn, sim, ("req", 2), 1)
    cases = 7
    # The given input check still rejects an oversized entry before any change.
    state = (sim.time, _state(sim.entries), sim.current_bytes, list(sim.log))
    try:
        with _budget():
            fn(sim, "huge", 101)
    except ValueError:
        pass
    except NotImplementedError as e:
        raise _NotDone() from e
    except _OutOfTime:
        raise _Wrong(_("did not finish (an endless loop?) within the step budget")) from None
    except Exception as e:
        raise _Wrong(_("an entry bigger than the capacity must raise ValueError, it raised {e_type}: {e}",
                       e_type=type(e).__name__, e=e)) from None
    else:
        raise _Wrong(_("an entry bigger than the capacity must raise ValueError (keep the given input check)"))
    if (sim.time, _state(sim.entries), sim.current_bytes, list(sim.log)) != state:
        raise _Wrong(_("a rejected touch must not change anything (keep the input check first)"))
    return cases + 1
