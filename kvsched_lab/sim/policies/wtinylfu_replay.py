"""W-TinyLFU's fast replay (wtinylfu.py): the rules of `WTinyLFUPolicy.touch` inlined in one loop,
with the sketch's counting done in numpy, a stretch of requests at a time.

Counting was most of the time: every miss counts two keys (at its insertion and at its window
exit), ten counters each, and comparing reads twenty more. But the comparison of rule 4 needs
the counts only where they could change its outcome, so this loop counts nothing itself. Every
access but a window hit counts its own key once (at its insertion, or its hit in main), so the
loop notes only the exceptions: the window hits (``uncounted``) and the window exits, each a
count of the access that inserted the block. The window is kept as such notes: a list of the
accesses that inserted its blocks, oldest first from ``head`` (an exit moves ``head`` on; a window
hit appends its block's access again and leaves ``MOVED`` in its old place), so the exits since a
flush are the slice ``exits[exits_counted:head]`` and a miss costs a few list steps where an
`OrderedDict` cost a pop and an insertion (the policy's ``window`` is written again when the loop
ends). numpy adds a stretch of accesses' own
counts and the notes to the counters (``counters``, exact up to the last ``flush``) at the start
of each *chunk* of requests, before a comparison that bounds cannot decide, at a halving and at
the end.

Bounds, for the comparison of the window's oldest block *w* with main's victim *m*:

- **An upper bound on w's count.** Within a chunk, an access adds at most two counts to its key
  (one at a miss and one at that block's window exit; a hit in main adds one, in the window
  none), and a block already in the window at the chunk's start adds at most its exit. So
  ``counters + 2 x (the chunk's accesses) + (the window's blocks)``, per counter, is at least
  any counter's value anywhere in the chunk; less one for w, whose own exit is charged in it but
  comes after the comparison. ``upper[a]`` is that bound for the block inserted at access `a`.
- **A lower bound on a count.** Counts only grow between halvings, so the count at the last
  flush is a floor: m's ``floor``; w's ``lower[a]``, its count at the chunk's start plus the
  one count of its insertion when that came later. A halving (rare) flushes, halves, and
  bounds the rest of the chunk again.

A comparison is decided by ``upper[w] <= floor`` (a rejection), or by ``lower[w] > ceiling of
m`` (an admission), or else by flushing and reading both exact counts, which is what the hook
path compares, so the decisions are the rules'. In the bench's replay (288,500 touches at 8,000
blocks, 25 calls of 500 requests) the bounds decide all but 1,291 of the 246,937 comparisons (chunks of
3,000 accesses; 790 at 2,000, where the 50% more chunks cost more than the exact reads saved).
`positions` hashes the keys of all accesses at once before the loop, and of the blocks cached
before it only the window and main's next victims (the others, if met, have `slots`).

It runs only when every cached block has the one size of the replay; otherwise the replay goes
touch by touch. tests/test_policy_wtinylfu.py checks that both give the same log and state.
"""
from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate, islice
from typing import Any, Dict, Hashable, Iterable, List, Sequence, Tuple

import numpy as np

from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP
from kvsched_lab.sim.policies.base import Policy, prefix_hits

CHUNK_ACCESSES = 3000  # a chunk's requests hold at least this many accesses (the last one fewer)
MOVED = -1  # in the window's list: a block's old place, left when a window hit moved it to the end
VICTIMS_AHEAD = 256  # main's next victims whose bounds a chunk computes up front (admissions evict them)


class _Counts:
    """The counts not yet added to the sketch's counters, and a chunk's bounds.

    Access ``a`` (``a >= 0``) is the key at column ``positions[:, a]``: some keys cached before the replay
    first (the window's, then main's next victims), then the replay's accesses in order.
    ``upper``/``lower`` are lists indexed by access; ``main_access`` maps a key in main to an
    access of it (its positions), where it has one."""

    def __init__(self, sketch: Any, positions: np.ndarray, first: int, window: int) -> None:
        self.sketch = sketch
        self.counters = sketch.counters  # added to in place: the sketch stays true after a flush
        self.positions = positions
        self.counted = first  # the replay's accesses before it have their own count in the counters
        self.exits = list(range(window))  # the window's accesses; those before a head have left it
        self.exits_counted = 0  # the exits before it are in the counters
        self.uncounted: List[int] = []  # window hits: accesses after `counted` that count nothing
        self.upper: List[int] = [0] * positions.shape[1]
        self.lower: List[int] = [0] * positions.shape[1]
        # per counter, at least its value anywhere in the chunk; one buffer rewritten by each chunk,
        # because a new array of the counters' size each chunk cost three times the copy (fresh pages)
        self.ceiling = np.empty_like(self.counters)
        self.main_access: Dict[Hashable, int] = {}

    def flush(self, upto: int, head: int) -> None:
        """Count the accesses before `upto`, the window's exits before `head` and the window hits
        (`upto` is at least `counted`)."""
        # add.at, not fancy +=: a key may have a position twice, and two keys may share one
        np.add.at(self.counters, self.positions[:, self.counted:upto], 1)
        self.counted = upto
        if head > self.exits_counted:
            left = np.array(self.exits[self.exits_counted:head], dtype=np.intp)
            np.add.at(self.counters, self.positions[:, left[left != MOVED]], 1)
            self.exits_counted = head
        if self.uncounted:
            np.add.at(self.counters, self.positions[:, self.uncounted], -1)
            self.uncounted.clear()

    def exact(self, row: np.ndarray) -> int:
        """The count of the key at positions `row` now (flush first)."""
        return int(self.counters[row].min())

    def halve(self, upto: int, head: int) -> None:
        self.flush(upto, head)
        self.sketch.decay()

    def chunk(self, start: int, stop: int, head: int) -> None:
        """Bounds for the chunk of accesses ``start:stop``, the window's oldest block at `head`."""
        self.flush(start, head)
        window_accesses = [a for a in self.exits[head:] if a != MOVED]
        own = self.positions[:, start:stop]
        waiting = self.positions[:, window_accesses]
        ceiling = self.ceiling
        np.copyto(ceiling, self.counters)
        np.add.at(ceiling, own, 2)  # a miss and its exit, or a hit
        np.add.at(ceiling, waiting, 1)  # the exit of a block in the window now
        # `take`, not indexing: a slice of columns is not contiguous, and indexing with it is slower
        self.upper[start:stop] = (ceiling.take(own).min(axis=0) - 1).tolist()  # less its own exit
        self.lower[start:stop] = (self.counters.take(own).min(axis=0) + 1).tolist()  # plus its insertion
        if window_accesses:
            ups = (ceiling[waiting].min(axis=0) - 1).tolist()
            lows = self.counters[waiting].min(axis=0).tolist()  # inserted before: in the counters
            for a, up, low in zip(window_accesses, ups, lows):
                self.upper[a], self.lower[a] = up, low

    def main_row(self, key: Hashable) -> Sequence[int]:
        """The positions of `key`, in main; one cached before the replay and not hashed with it has
        the sketch's own (computed once)."""
        a = self.main_access.get(key)
        return self.positions[:, a] if a is not None else self.sketch.slots(key)

    def victim_bounds(self, keys: List[Hashable]) -> Dict[Hashable, Tuple[int, int]]:
        """key -> (floor, ceiling) of its count in this chunk, for keys in main."""
        if all(k in self.main_access for k in keys):
            rows = self.positions[:, [self.main_access[k] for k in keys]]
        else:
            rows = np.array([self.main_row(k) for k in keys], dtype=np.intp).T
        return dict(zip(keys, zip(self.counters[rows].min(axis=0).tolist(), self.ceiling[rows].min(axis=0).tolist())))


def replay_one_size(policy: Any, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
    """`WTinyLFUPolicy.replay_requests` for `policy` (a `WTinyLFUPolicy`), every block `bytes_` bytes."""
    if set(policy.entries.values()) - {bytes_}:  # mixed sizes: touch by touch (a set: one C pass)
        return Policy._replay(policy, hash_id_lists, bytes_)
    lists = hash_id_lists if isinstance(hash_id_lists, (list, tuple)) else list(hash_id_lists)
    if bytes_ > policy.window_bytes_max or bytes_ > policy.probation_max:  # rule 1: nothing fits
        return _replay_skipping(policy, lists)
    window = policy.window
    # main's blocks are hashed only as far as its next victims are likely to go (the rest: `main_row`)
    before = [*window, *islice(policy.probation, 8 * VICTIMS_AHEAD), *islice(policy.protected, VICTIMS_AHEAD)]
    keys = before + [k for ids in lists for k in ids]  # access -> key
    counts = _Counts(policy.sketch, policy.sketch.positions(keys), len(before), len(window))
    counts.main_access.update(zip(before[len(window):], range(len(window), len(before))))
    return _loop(policy, lists, bytes_, counts, keys, len(before))


def _replay_skipping(policy: Any, lists: Sequence[Sequence[Hashable]]) -> List[int]:
    """No block fits (rule 1): nothing is ever cached, so every touch is skipped."""
    entries, emit, skip, out = policy.entries, policy.log.append_event, SKIP, []
    for ids in lists:
        out.append(prefix_hits(entries.__contains__, ids))
        for key in ids:
            hash(key)  # a TypeError for an unhashable id, before its touch counts (as `touch` refuses it)
            policy.time += 1
            emit((skip, key))
    return out


def _loop(policy: Any, lists: Sequence[Sequence[Hashable]], b: int, counts: _Counts, keys: List[Hashable],
          first: int) -> List[int]:
    entries, probation, protected = policy.entries, policy.probation, policy.protected
    window, head = counts.exits, 0  # the window: the accesses of `window[head:]`, oldest first
    # key -> its index in `window`, brought up to date only at a window hit: a dictionary written
    # at every miss cost about what the `OrderedDict` did (`seen`: the indexes before it are in it)
    slot: Dict[Hashable, int] = {}
    seen = 0
    win_add, prot_move, prot_pop, prob_pop = window.append, protected.move_to_end, protected.popitem, probation.popitem
    emit = policy.log.append_event
    add, evict, reuse = ADD, EVICT, REUSE
    full, main_full = policy.capacity_bytes - b, policy.main_bytes_max - b  # above them, `b` more bytes do not fit
    prob_max, prot_max = policy.probation_max, policy.protected_max
    cur, hits, time0 = policy.current_bytes, policy.hits, policy.time
    win_bytes, prob_bytes, prot_bytes = policy.window_bytes, policy.probation_bytes, policy.protected_bytes
    main_hits, decay_every = policy.main_hits, policy.decay_every
    uncount, upper, lower = counts.uncounted.append, counts.upper, counts.lower
    main_access = counts.main_access
    starts = list(accumulate((len(ids) for ids in lists), initial=first))
    m = floor_key = None  # main's victim (None: look again), and the key `floor` is a count of
    floor = m_ceiling = 0
    victims: Dict[Hashable, Tuple[int, int]] = {}  # main's next victims: (floor, ceiling)
    stop = first
    a = first - 1  # the access being replayed
    out: List[int] = []
    r = 0  # the request being replayed (the except clause reads its start)
    contains = entries.__contains__
    try:
        for r, ids in enumerate(lists):
            if starts[r] >= stop:  # a new chunk: count what is pending, bound the next requests
                stop = starts[min(bisect_left(starts, starts[r] + CHUNK_ACCESSES), len(lists))]
                counts.chunk(starts[r], stop, head)
                victims = counts.victim_bounds(list(islice(probation or protected, VICTIMS_AHEAD)))
                m = floor_key = None
            out.append(prefix_hits(contains, ids))
            for key in ids:
                a += 1
                if key in entries:
                    hits += 1
                    if key in protected:  # main's order changes
                        prot_move(key)
                        m = None
                    elif key in probation:  # probation -> protected; protected's overflow to probation's newest end
                        del probation[key]
                        prob_bytes -= b
                        protected[key] = b
                        prot_bytes += b
                        m = None
                        while prot_bytes > prot_max:
                            probation[prot_pop(False)[0]] = b
                            prot_bytes -= b
                            prob_bytes += b
                            while prob_bytes > prob_max:  # probation is not empty: it is over its share
                                old = prob_pop(False)[0]
                                prob_bytes -= b
                                del entries[old]
                                cur -= b
                                emit((evict, old))
                    else:  # a window hit (rare): to the window's newest end, not counted
                        for at in range(max(seen, head), len(window)):  # the window's slots since the last hit
                            if window[at] != MOVED:
                                slot[keys[window[at]]] = at
                        at = slot[key]
                        slot[key], seen = len(window), len(window) + 1
                        win_add(window[at])
                        window[at] = MOVED
                        uncount(a)
                        emit((reuse, key))
                        continue
                    main_hits += 1
                    if main_hits >= decay_every:  # rare: halve, then bound the rest of the chunk again
                        main_hits = 0
                        counts.halve(a + 1, head)
                        counts.chunk(a + 1, stop, head)
                        victims, floor_key = {}, None
                    emit((reuse, key))
                    continue
                # Rule 4, one eviction of libCacheSim's: while main has room the window's oldest
                # blocks move into it (and an empty window evicts main's victim); then one comparison.
                # (the window's bytes, not its list's length, say whether it is empty: no call a miss)
                while cur > full and (prob_bytes + prot_bytes <= main_full or not win_bytes):
                    if win_bytes:  # into main, which has room (never over its bytes)
                        wa = window[head]
                        while wa == MOVED:  # a block's old place: its newer one comes later
                            head += 1
                            wa = window[head]
                        head += 1  # its exit is counted
                        w = keys[wa]
                        win_bytes -= b
                        if prob_bytes + b <= prob_max or prot_bytes + b > prot_max:  # probation, else protected
                            probation[w] = b
                            prob_bytes += b
                        else:
                            protected[w] = b
                            prot_bytes += b
                        main_access[w] = wa
                    else:  # an empty window: main's victim
                        if probation:
                            old = prob_pop(False)[0]
                            prob_bytes -= b
                        else:
                            old = prot_pop(False)[0]
                            prot_bytes -= b
                        del entries[old]
                        cur -= b
                        emit((evict, old))
                    m = None
                if cur > full:  # main is full: w or m leaves, `key` takes its place (the usual miss)
                    wa = window[head]
                    while wa == MOVED:
                        head += 1
                        wa = window[head]
                    w = keys[wa]
                    if m is None:
                        m = next(iter(probation or protected))
                        if m is not floor_key:  # a new victim: its bounds
                            got = victims.get(m) or counts.victim_bounds([m])[m]
                            floor_key, (floor, m_ceiling) = m, got
                    if upper[wa] <= floor:  # w's count is at most m's: rejected
                        admitted = False
                    elif lower[wa] > m_ceiling:  # w's count is above m's
                        admitted = True
                    else:  # the bounds overlap: the exact counts
                        counts.flush(a, head)  # `key`'s own count and w's exit come after
                        floor = counts.exact(counts.main_row(m))
                        admitted = counts.exact(counts.positions[:, wa]) > floor
                    head += 1  # w's exit is counted after the comparison
                    if admitted:  # main's victim leaves; w enters probation (room: m's, or an empty probation)
                        if probation:
                            del probation[m]
                        else:
                            del protected[m]
                            prot_bytes -= b
                            prob_bytes += b
                        probation[w] = b
                        main_access[w] = wa
                        del entries[m]
                        emit((evict, m, add, key))
                        m = None
                    else:  # rejected: the window's block leaves
                        del entries[w]
                        emit((evict, w, add, key))
                else:
                    win_bytes += b
                    cur += b
                    emit((add, key))
                win_add(a)
                entries[key] = b
    except BaseException:  # an unhashable id raises at its access, before that access counts (as
        a = max(a, starts[r]) - 1  # `touch` refuses it), or in its request's prefix hits, after the last
        raise
    finally:  # keep the state true even if the replay is interrupted (`a`: the last access replayed)
        counts.flush(a + 1, head)
        policy.window.clear()
        policy.window.update((keys[wa], b) for wa in window[head:] if wa != MOVED)
        policy.current_bytes, policy.hits, policy.time = cur, hits, time0 + a + 1 - first
        policy.window_bytes, policy.probation_bytes, policy.protected_bytes = win_bytes, prob_bytes, prot_bytes
        policy.main_hits = main_hits
    return out
