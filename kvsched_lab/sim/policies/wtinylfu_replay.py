"""W-TinyLFU's fast replay (wtinylfu.py): the rules of `WTinyLFUPolicy.touch` inlined in one loop.

A method call per touch, per sketch count and per eviction cost more than the rules themselves,
so this loop keeps every field in a local and writes them back at the end, even if interrupted.
Before the loop, the sketch learns the counter positions of every key of the requests at once
(`CountingBloomFilter.learn`); a count is then ten list increments, an estimate one ``min``.

Over half the comparisons of rule 4 read one counter instead of twenty. Counts only grow
between two halvings, so main's victim's count, once read, stays a floor under its count while
it stays the victim (it did for 240,000 of the 247,000 comparisons of the bench's replay); and
the window block's count is at most any one of its counters. The window block is rejected
outright when its first counter is not above the floor; otherwise both counts are read (the
victim's again, as it may have grown) and compared exactly. A halving drops the floor. The
decisions are the rules'; what is left is counting, twenty counters a miss (three fifths of the
loop's time in the bench's replay).

It runs only when every cached block has the one size of the replay; otherwise the replay goes
touch by touch. tests/test_policy_wtinylfu.py checks that both give the same log and state.
"""
from __future__ import annotations

from typing import Any, Hashable, Iterable, List, Sequence

from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP
from kvsched_lab.sim.policies.base import Policy, prefix_hits


def replay_one_size(policy: Any, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
    """`WTinyLFUPolicy.replay_requests` for `policy` (a `WTinyLFUPolicy`), every block `bytes_` bytes."""
    if any(size != bytes_ for size in policy.entries.values()):  # mixed sizes: touch by touch
        return Policy._replay(policy, hash_id_lists, bytes_)
    lists = hash_id_lists if isinstance(hash_id_lists, (list, tuple)) else list(hash_id_lists)
    b = bytes_
    skip_all = b > policy.window_bytes_max or b > policy.probation_max  # rule 1: nothing fits
    sketch = policy.sketch
    if not skip_all:
        sketch.learn([k for ids in lists for k in ids])
    slots = sketch.known_slots
    counters = sketch.counters
    get = counters.__getitem__
    floor_key, floor = None, 0  # main's victim when its count was last read, and that count
    entries, window, probation, protected = policy.entries, policy.window, policy.probation, policy.protected
    win_move, prot_move, prot_pop, prob_pop = window.move_to_end, protected.move_to_end, protected.popitem, probation.popitem
    emit = policy.log.append_event
    add, evict, reuse, skip = ADD, EVICT, REUSE, SKIP
    cap, main_max = policy.capacity_bytes, policy.main_bytes_max
    prob_max, prot_max = policy.probation_max, policy.protected_max
    cur, hits, time = policy.current_bytes, policy.hits, policy.time
    win_bytes, prob_bytes, prot_bytes = policy.window_bytes, policy.probation_bytes, policy.protected_bytes
    main_hits, decay_every = policy.main_hits, policy.decay_every
    out: List[int] = []
    contains = entries.__contains__
    try:
        for ids in lists:
            out.append(prefix_hits(contains, ids))
            for key in ids:
                time += 1
                if key in entries:
                    hits += 1
                    if key in window:  # a window hit is not counted
                        win_move(key)
                        emit((reuse, key))
                        continue
                    if key in protected:
                        prot_move(key)
                    else:  # probation -> protected; protected's overflow to probation's newest end
                        del probation[key]
                        prob_bytes -= b
                        protected[key] = b
                        prot_bytes += b
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
                    for x in slots[key]:
                        counters[x] += 1
                    main_hits += 1
                    if main_hits >= decay_every:  # rare: through the sketch
                        main_hits = 0
                        sketch.decay()
                        counters = sketch.counters
                        get, floor_key = counters.__getitem__, None  # halved: read m's count again
                    emit((reuse, key))
                    continue
                if skip_all:
                    emit((skip, key))
                    continue
                while cur + b > cap:  # rule 4: one eviction of libCacheSim's
                    while window:
                        w = next(iter(window))
                        ws = slots[w]
                        if prob_bytes + prot_bytes + b > main_max:  # main is full: compare once
                            m = next(iter(probation or protected))
                            if m is not floor_key:  # a new victim: read its count
                                floor_key, floor = m, min(map(get, slots[m]))
                            # Counts only grow between halvings, so `floor` is at most m's count now,
                            # and w's count is at most its first counter: most rejections need no more.
                            admitted = False
                            if counters[ws[0]] > floor:
                                w_count = min(map(get, ws))
                                if w_count > floor:  # m's count may have grown since: read it again
                                    floor = min(map(get, slots[m]))
                                    admitted = w_count > floor
                            if admitted:  # main's victim leaves
                                if probation:
                                    del probation[m]
                                    prob_bytes -= b
                                else:
                                    del protected[m]
                                    prot_bytes -= b
                                gone = m
                            else:  # rejected: the window's block leaves
                                gone = w
                            del entries[gone]
                            cur -= b
                            emit((evict, gone))
                        else:
                            gone = None
                        del window[w]
                        win_bytes -= b
                        if gone is not w:  # into main; it has room (never over its bytes): probation,
                            if prob_bytes + b <= prob_max or prot_bytes + b > prot_max:  # else protected
                                probation[w] = b
                                prob_bytes += b
                            else:
                                protected[w] = b
                                prot_bytes += b
                        for x in ws:
                            counters[x] += 1
                        if gone is not None:
                            break
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
                window[key] = b
                win_bytes += b
                entries[key] = b
                cur += b
                for x in slots[key]:
                    counters[x] += 1
                emit((add, key))
    finally:  # keep the state true even if the replay is interrupted
        policy.current_bytes, policy.hits, policy.time = cur, hits, time
        policy.window_bytes, policy.probation_bytes, policy.protected_bytes = win_bytes, prob_bytes, prot_bytes
        policy.main_hits = main_hits
    return out
