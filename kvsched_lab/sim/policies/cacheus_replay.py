"""CACHEUS's fast replay (cacheus.py): the rules of `CacheusPolicy.touch` inlined in one loop.

A call per touch and an attribute look-up per field would cost more than the rules themselves, so
this loop keeps every field in a local and writes them back at the end, even if interrupted.
It runs only when every block has the one size of the replay; otherwise the replay goes touch by
touch. Against the hook path it saves what one size allows: H's and the ghosts' trims take one
block, a victim named by CR-LFU proves its count's bucket was not empty (the walk up to the next
count is checked only when that bucket empties), and a block is looked up in one ghost at most.
tests/test_policy_cacheus.py checks that both give the same log and every field of the state.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Hashable, Iterable, List, Sequence

from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP
from kvsched_lab.sim.policies.base import Policy, prefix_hits
from kvsched_lab.sim.policies.lehmer import LEHMER_MULTIPLIER, MASK128

DEMOTED, NEW = 1, 2  # SR-LRU's flags on a block in SR: demoted from R; never hit since it arrived


def link(freq: dict, by_freq: dict, key: Hashable, f: int) -> None:
    """Give `key` the count `f`, after the keys already there (CR-LFU's victim is the last)."""
    freq[key] = f
    node = by_freq.get(f)
    if node is None:
        node = by_freq[f] = OrderedDict()
    node[key] = None


def to_history(freq: dict, by_freq: dict, history: Any, key: Hashable, new: bool, size: int, h_bytes: int,
               cap: int) -> int:
    """`key` left the cache: H remembers it with its count, trimmed below `cap` bytes; H's new bytes."""
    f = freq.pop(key)
    del by_freq[f][key]
    history[key] = (size, new, f)
    h_bytes += size
    while h_bytes >= cap:
        h_bytes -= history.popitem(last=False)[1][0]
    return h_bytes


def next_used(by_freq: dict, min_f: int, max_f: int, none_left: int) -> int:
    """The lowest count above `min_f` that holds keys, or `none_left` (CR-LFU's walk up)."""
    for f in range(min_f + 1, max_f + 1):
        if by_freq.get(f):
            return f
    return none_left


def replay_one_size(policy: Any, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
    """`CacheusPolicy.replay_requests` for `policy` (a `CacheusPolicy`), every block `bytes_` bytes."""
    sizes = (*policy.entries.values(), *policy.ghost_lru.values(), *policy.ghost_lfu.values(),
             *(v[0] for v in policy.history.values()))
    if any(size != bytes_ for size in sizes):  # mixed sizes: touch by touch
        return Policy._replay(policy, hash_id_lists, bytes_)
    entries, r_list, sr_list, history = policy.entries, policy.r_list, policy.sr_list, policy.history
    freq, by_freq = policy.freq, policy.by_freq
    ghost_lru, ghost_lfu = policy.ghost_lru, policy.ghost_lfu
    emit, exp = policy.log.append_event, math.exp
    r_pop, sr_pop, h_pop = r_list.popitem, sr_list.popitem, history.popitem
    r_move = r_list.move_to_end
    add, evict, reuse = ADD, EVICT, REUSE
    cap, b = policy.capacity_bytes, bytes_
    cur, hits, time = policy.current_bytes, policy.hits, policy.time
    r_bytes, sr_bytes, h_bytes = policy.r_bytes, policy.sr_bytes, policy.history_bytes
    gl_bytes, gf_bytes, g_limit = policy.ghost_lru_bytes, policy.ghost_lfu_bytes, policy.ghost_limit
    sr_target, r_target = policy.sr_target, policy.r_target
    demoted, new_in_h = policy.demoted, policy.new_in_history
    min_f, max_f = policy.min_freq, policy.max_freq
    w_lru, w_lfu = policy.w_lru, policy.w_lfu
    interval_hits = policy.interval_hits
    state = policy.rand_state
    ones = by_freq[1]  # count 1's keys (buckets are never dropped): every new block joins them
    out: List[int] = []
    contains = entries.__contains__
    try:
        for ids in hash_id_lists:
            out.append(prefix_hits(contains, ids))
            for key in ids:
                time += 1
                if key in entries:  # a hit: both experts
                    hits += 1
                    interval_hits += 1
                    if key in r_list:
                        r_move(key)
                    else:
                        del sr_list[key]
                        sr_bytes -= b
                        r_list[key] = None
                        r_bytes += b
                        while r_bytes > r_target:
                            sr_list[r_pop(False)[0]] = DEMOTED
                            r_bytes -= b
                            sr_bytes += b
                            demoted += 1
                    f = freq[key]
                    node = by_freq[f]
                    del node[key]
                    f += 1
                    freq[key] = f
                    up = by_freq.get(f)
                    if up is None:
                        up = by_freq[f] = OrderedDict()
                        if f > max_f:
                            max_f = f
                    up[key] = None
                    if not node and min_f == f - 1:
                        min_f = f  # the block just moved there: the next used count
                    emit((reuse, key))
                else:
                    # Rule 3. A block is in one ghost at most: it enters one only when evicted,
                    # and its miss, before it is cached again, took it out of both.
                    if ghost_lru.pop(key, None) is not None:
                        w_lru *= exp(-policy.lr)
                        gl_bytes -= b
                    elif ghost_lfu.pop(key, None) is not None:
                        w_lfu *= exp(-policy.lr)
                        gf_bytes -= b
                    w_lru = w_lru / (w_lru + w_lfu)
                    w_lfu = 1 - w_lru
                    while cur + b > cap:  # rule 2
                        lru_key = next(iter(sr_list or r_list))
                        lowest = by_freq[min_f]  # not empty: it names CR-LFU's victim
                        lfu_key = next(reversed(lowest))
                        state = (state * LEHMER_MULTIPLIER) & MASK128
                        lru_chosen = ((state >> 64) % 100) / 100 < w_lru
                        victim = lru_key if lru_chosen else lfu_key
                        flags = sr_list.pop(victim, None)
                        if flags is None:
                            del r_list[victim]
                            r_bytes -= b
                            new = False
                        else:
                            sr_bytes -= b
                            if flags & DEMOTED:
                                demoted -= 1
                            new = flags == NEW
                            if new:
                                new_in_h += 1
                        del entries[victim]
                        cur -= b
                        f = freq.pop(victim)  # into H with its count
                        del by_freq[f][victim]
                        history[victim] = (b, new, f)
                        h_bytes += b
                        while h_bytes >= cap:
                            h_pop(False)
                            h_bytes -= b
                        if f == min_f and not lowest:
                            min_f = next_used(by_freq, min_f, max_f, -1 if victim == lfu_key else min_f)
                        emit((evict, victim))
                        if lru_key != lfu_key:
                            if lru_chosen:
                                ghost_lru[victim] = b
                                gl_bytes += b
                                if gl_bytes > g_limit:
                                    ghost_lru.popitem(False)
                                    gl_bytes -= b
                            else:
                                ghost_lfu[victim] = b
                                gf_bytes += b
                                if gf_bytes > g_limit:
                                    ghost_lfu.popitem(False)
                                    gf_bytes -= b
                    past = history.get(key)
                    if b > (sr_target if past is None else r_target):  # SR-LRU's can_insert
                        emit((SKIP, key))
                    else:
                        entries[key] = b
                        cur += b
                        if past is None:  # new: count 1, SR
                            sr_list[key] = NEW
                            sr_bytes += b
                            freq[key] = 1
                            ones[key] = None
                            min_f = 1
                        else:  # back from H: count + 1, R
                            del history[key]
                            h_bytes -= b
                            f = past[2] + 1
                            while r_bytes + b > r_target:
                                sr_list[r_pop(False)[0]] = DEMOTED
                                r_bytes -= b
                                sr_bytes += b
                                demoted += 1
                            r_list[key] = None
                            r_bytes += b
                            link(freq, by_freq, key, f)
                            if f > max_f:
                                max_f = f
                            if min_f > f or min_f == -1:
                                min_f = f
                            if past[1]:  # it left SR unhit: SR was too small
                                ratio = demoted // new_in_h
                                delta = 1.0 if ratio == 0 else ratio + 0.5
                                if sr_target + delta > cur - 1:
                                    sr_target = cur - 1
                                else:
                                    sr_target = int(sr_target + delta)
                                r_target = cap - sr_target
                        while sr_bytes > sr_target:  # SR's oldest leave, no expert asked
                            old, flags = sr_pop(False)
                            sr_bytes -= b
                            if flags & DEMOTED:
                                demoted -= 1
                            new = flags == NEW
                            if new:
                                new_in_h += 1
                            del entries[old]
                            cur -= b
                            h_bytes = to_history(freq, by_freq, history, old, new, b, h_bytes, cap)
                            if not by_freq.get(min_f):
                                min_f = next_used(by_freq, min_f, max_f, min_f)
                            emit((evict, old))
                        emit((add, key))
                if time % cap == 0:  # rule 4: rare, through the method
                    policy.interval_hits, policy.rand_state = interval_hits, state
                    policy._update_lr()
                    interval_hits, state = policy.interval_hits, policy.rand_state
    finally:  # keep the state true even if the replay is interrupted
        policy.current_bytes, policy.hits, policy.time = cur, hits, time
        policy.r_bytes, policy.sr_bytes, policy.history_bytes = r_bytes, sr_bytes, h_bytes
        policy.ghost_lru_bytes, policy.ghost_lfu_bytes = gl_bytes, gf_bytes
        policy.sr_target, policy.r_target = sr_target, r_target
        policy.demoted, policy.new_in_history = demoted, new_in_h
        policy.min_freq, policy.max_freq = min_f, max_f
        policy.w_lru, policy.w_lfu = w_lru, w_lfu
        policy.interval_hits, policy.rand_state = interval_hits, state
    return out
