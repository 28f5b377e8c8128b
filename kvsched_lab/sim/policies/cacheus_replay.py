"""CACHEUS's fast replay (cacheus.py): the rules of `CacheusPolicy.touch` inlined in one loop.

A call per touch and an attribute look-up per field would cost more than the rules themselves, so
this loop keeps every field in a local and writes them back at the end, even if interrupted.
It runs only when every touch so far had the replay's size (``block_size``); otherwise the replay
goes touch by touch. Against the hook path it saves what one size allows, and what it can remember
between misses (a miss costs about 20 dictionary operations, so each one left out counts):

- A miss evicts one block at most, and H's and the ghosts' trims take one block; the loop counts
  free places (in the cache, H, each ghost) rather than bytes, and compares list lengths with the
  targets in blocks. The byte counts are written back at the end.
- Both experts' candidates are remembered: SR's oldest key and the last key at the lowest count
  are looked up again only after one of them leaves.
- The weights are renormalised on the misses after a ghost hit, until they stop changing; the draw
  ``(x % 100) / 100 < w_lru`` is compared as the integer ``x % 100`` with the count of hundredths
  below ``w_lru``. Above 0.99 every draw picks SR-LRU, so the loop only counts them (`owed`) and
  takes them in one modular power when a draw decides again, at rule 4 and at the end.
- SR, H and the ghosts are added to and trimmed through their `LazyFifo`'s dict and deque, and
  a request's prefix hits are counted in the loop, not through `prefix_hits`.
- The newest block, new at count 1, is CR-LFU's next victim, and the next eviction takes it about
  half the time: it is placed in ``entries``, SR and the counts (`pending`) only when anything
  else happens first (a hit, the next request, SR-LRU's victim, a block back from H, SR's
  overflow, the end), so when it is evicted at once four insertions and four deletions are saved.

tests/test_policy_cacheus.py checks that both give the same log and every field of the state.
"""
from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any, Hashable, Iterable, List, Sequence

from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP
from kvsched_lab.sim.policies.base import Policy
from kvsched_lab.sim.policies.cacheus_fifo import SLACK
from kvsched_lab.sim.policies.lehmer import LEHMER_MULTIPLIER, MASK128

DEMOTED, NEW = 1, 2  # SR-LRU's flags on a block in SR: demoted from R; never hit since it arrived
CENTS = [r / 100 for r in range(100)]  # the draws' values: x % 100 = r draws r / 100


def link(freq: dict, by_freq: dict, key: Hashable, f: int) -> None:
    """Give `key` the count `f`, after the keys already there (CR-LFU's victim is the last)."""
    freq[key] = f
    node = by_freq.get(f)
    if node is None:
        node = by_freq[f] = {}
    node[key] = None


def to_history(freq: dict, by_freq: dict, history: Any, key: Hashable, new: bool, size: int, h_bytes: int,
               cap: int) -> int:
    """`key` left the cache: H remembers it with its count, trimmed below `cap` bytes; H's new bytes."""
    f = freq.pop(key)
    del by_freq[f][key]
    history.add(key, (size, new, f))
    h_bytes += size
    while h_bytes >= cap:
        h_bytes -= history.pop_oldest()[1][0]
    return h_bytes


def lehmer_skip(state: int, n: int) -> int:
    """The generator's state `n` draws after `state` (lehmer.py): one modular power for all of them."""
    return state * pow(LEHMER_MULTIPLIER, n, MASK128 + 1) & MASK128


def next_used(by_freq: dict, min_f: int, max_f: int, none_left: int) -> int:
    """The lowest count above `min_f` that holds keys, or `none_left` (CR-LFU's walk up)."""
    for f in range(min_f + 1, max_f + 1):
        if by_freq.get(f):
            return f
    return none_left


def replay_one_size(policy: Any, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
    """`CacheusPolicy.replay_requests` for `policy` (a `CacheusPolicy`), every block `bytes_` bytes."""
    if policy.block_size not in (None, bytes_):  # mixed sizes: touch by touch
        return Policy._replay(policy, hash_id_lists, bytes_)
    entries, r_list, sr_list, history = policy.entries, policy.r_list, policy.sr_list, policy.history
    freq, by_freq = policy.freq, policy.by_freq
    ghost_lru, ghost_lfu = policy.ghost_lru, policy.ghost_lfu
    emit, exp = policy.log.append_event, math.exp
    r_pop, r_move = r_list.popitem, r_list.move_to_end
    # SR, H and the ghosts (cacheus_fifo.py): added to and trimmed here through their dict and deque.
    sr_items, sr_order, sr_add, sr_next, sr_stale = (sr_list.items, sr_list.order, sr_list.order.append,
                                                     sr_list.order.popleft, sr_list.stale)
    h_items, h_add, h_next, h_stale = history.items, history.order.append, history.order.popleft, history.stale
    gl_items, gl_add, gl_next, gl_stale = ghost_lru.items, ghost_lru.order.append, ghost_lru.order.popleft, ghost_lru.stale
    gf_items, gf_add, gf_next, gf_stale = ghost_lfu.items, ghost_lfu.order.append, ghost_lfu.order.popleft, ghost_lfu.stale
    h_get = h_items.get
    add, evict, reuse = ADD, EVICT, REUSE
    cap, b = policy.capacity_bytes, bytes_
    # Every block has b bytes, so each byte count is b times a block count: the loop counts free
    # places instead (in the cache, H and each ghost), and the byte counts are written back at the end.
    room = (cap - policy.current_bytes) // b  # blocks the cache can still take
    h_room = (cap - 1) // b - len(history)  # H keeps fewer than cap bytes
    gl_room = policy.ghost_limit // b - len(ghost_lru)
    gf_room = policy.ghost_limit // b - len(ghost_lfu)
    hits, time = policy.hits, policy.time
    lr_due = (time // cap + 1) * cap  # rule 4's next touch: every `cap` touches
    sr_target, r_target = policy.sr_target, policy.r_target
    sr_most, r_most = sr_target // b, r_target // b  # the most blocks each list holds within its target
    demoted, new_in_h = policy.demoted, policy.new_in_history
    min_f, max_f = policy.min_freq, policy.max_freq
    w_lru, w_lfu, lr = policy.w_lru, policy.w_lfu, policy.lr
    settled = False  # True once renormalising leaves both weights as they are (until a ghost hit)
    lru_below = bisect_left(CENTS, w_lru)  # draws x with (x % 100) / 100 < w_lru: x % 100 below this
    hits_before = hits - policy.interval_hits  # the interval's hits: hits - hits_before
    state = policy.rand_state
    owed = 0  # draws not yet taken: while w_lru > 0.99 every one picks SR-LRU, so only their number counts
    ones = by_freq[1]  # count 1's keys (buckets are never dropped): every new block joins them
    # Each eviction names two candidates; both are remembered between misses (None: look again):
    sr_head = None  # SR's oldest key, while SR is not empty
    top = None  # the last key at count min_f (CR-LFU's victim)
    # The newest block, while it is new, is placed in the cache's structures only when something
    # else happens: CR-LFU names it first, so nearly half the time the next miss evicts it again.
    pending = None

    def place(block: Hashable) -> None:  # cached, new: count 1, SR's newest end
        entries[block] = b
        sr_items[block] = NEW
        sr_add(block)
        freq[block] = 1
        ones[block] = None

    fresh = (b, True, 1)  # H's record of a block that leaves new, as most do: one tuple for all of them
    out: List[int] = []
    try:
        for ids in hash_id_lists:
            if pending is not None:
                place(pending)
                pending = None
            n = 0  # prefix_hits, inlined: a call and an iterator chain cost more than a short run
            for key in ids:
                if key not in entries:
                    break
                n += 1
            out.append(n)
            for key in ids:
                if key in entries or key == pending:  # a hit: both experts
                    time += 1  # (in each branch, after `key` is hashed: an unhashable id leaves the clock)
                    if pending is not None:
                        place(pending)
                        pending = None
                    hits += 1
                    if key in r_list:
                        r_move(key)
                    else:
                        del sr_items[key]  # sr_list.remove, inlined: its copy stays behind, stale
                        sr_stale[key] = sr_stale.get(key, 0) + 1
                        if len(sr_order) > 2 * len(sr_items) + SLACK:
                            sr_list.compact()
                        if key == sr_head:
                            sr_head = None
                        r_list[key] = None
                        while len(r_list) > r_most:  # R's oldest demoted to SR's newest end
                            old = r_pop(False)[0]
                            sr_items[old] = DEMOTED
                            sr_add(old)
                            demoted += 1
                    f = freq[key]
                    node = by_freq[f]
                    del node[key]
                    if key == top:
                        top = None
                    f += 1
                    freq[key] = f
                    up = by_freq.get(f)
                    if up is None:
                        up = by_freq[f] = {}
                        if f > max_f:
                            max_f = f
                    up[key] = None
                    if not node and min_f == f - 1:
                        min_f = f  # the block just moved there: the next used count
                        top = key
                    emit((reuse, key))
                else:
                    time += 1
                    # Rule 3. A block is in one ghost at most: it enters one only when evicted,
                    # and its miss, before it is cached again, took it out of both.
                    if key in gl_items:
                        ghost_lru.remove(key)
                        gl_room += 1
                        w_lru *= exp(-lr)
                        settled = False
                    elif key in gf_items:
                        ghost_lfu.remove(key)
                        gf_room += 1
                        w_lfu *= exp(-lr)
                        settled = False
                    if not settled:
                        w = w_lru / (w_lru + w_lfu)
                        settled = w == w_lru and 1 - w == w_lfu
                        w_lru, w_lfu = w, 1 - w
                        lru_below = bisect_left(CENTS, w)
                    gone = None  # the victim, logged with the add when nothing else leaves
                    if room:
                        room -= 1  # the block takes a free place (given back below if it is skipped)
                    else:  # rule 2: one victim frees the place the block takes
                        if lru_below == 100:  # every draw picks SR-LRU: only their number matters
                            owed += 1
                        else:
                            if owed:
                                state, owed = lehmer_skip(state, owed), 0
                            state = (state * LEHMER_MULTIPLIER) & MASK128
                        if top is None:
                            top = next(reversed(by_freq[min_f]))  # not empty: cached blocks have counts
                        if sr_head is None:
                            if pending is not None and not sr_items:  # SR's oldest is the newest
                                place(pending)
                                pending = None
                            if sr_items:  # SR's oldest: the deque's first key once stale copies are gone
                                lru_key = sr_head = sr_order[0]
                                if lru_key in sr_stale:
                                    lru_key = sr_head = sr_list.oldest()
                            else:
                                lru_key = next(iter(r_list))
                        else:
                            lru_key = sr_head
                        lfu_key = top
                        if lru_below == 100 or (state >> 64) % 100 < lru_below:  # SR-LRU's victim, into its ghost
                            gone = lru_key
                            at_head = sr_head is not None  # SR's oldest, not R's
                            sr_head = None
                            if gone == lfu_key:
                                top = None
                            else:
                                gl_items[gone] = b
                                gl_add(gone)
                                if gl_room:
                                    gl_room -= 1
                                else:  # the oldest leaves (after any stale copies)
                                    old = gl_next()
                                    del gl_items[ghost_lru.skip_stale(old) if old in gl_stale else old]
                        else:  # CR-LFU's victim, into its ghost
                            gone = lfu_key
                            at_head = gone == sr_head
                            top = None
                            if gone == lru_key:
                                sr_head = None
                            else:
                                gf_items[gone] = b
                                gf_add(gone)
                                if gf_room:
                                    gf_room -= 1
                                else:
                                    old = gf_next()
                                    del gf_items[ghost_lfu.skip_stale(old) if old in gf_stale else old]
                        if gone == pending:  # never placed: it leaves new, at count 1
                            pending = None
                            new, f, node = True, 1, ones
                            new_in_h += 1
                        else:
                            if at_head:  # the deque's first copy is its live one
                                sr_next()
                                flags = sr_items.pop(gone)
                            else:
                                flags = sr_list.remove(gone) if gone in sr_items else None
                            if flags == NEW:
                                new = True
                                new_in_h += 1
                            else:
                                new = False
                                if flags is None:
                                    del r_list[gone]
                                else:
                                    demoted -= 1
                            del entries[gone]
                            f = freq.pop(gone)
                            node = by_freq[f]
                            del node[gone]
                        h_items[gone] = fresh if new and f == 1 else (b, new, f)  # into H with its count
                        h_add(gone)
                        if h_room:
                            h_room -= 1
                        else:
                            old = h_next()
                            del h_items[history.skip_stale(old) if old in h_stale else old]
                        if f == min_f and not node and pending is None:  # (pending: count 1 is used)
                            min_f = next_used(by_freq, min_f, max_f, -1 if gone == lfu_key else min_f)
                            top = None
                    past = h_get(key)
                    if b > (sr_target if past is None else r_target):  # SR-LRU's can_insert
                        room += 1
                        emit((SKIP, key) if gone is None else (evict, gone, SKIP, key))
                    else:
                        if past is None:  # new: count 1, SR (placed later)
                            if pending is not None:
                                entries[pending] = b
                                sr_items[pending] = NEW
                                sr_add(pending)
                                freq[pending] = 1
                                ones[pending] = None
                            pending = top = key
                            min_f = 1
                            over = len(sr_items) >= sr_most  # SR with the new block over its target
                        else:  # back from H: count + 1, R
                            if pending is not None:
                                place(pending)
                                pending = None
                            entries[key] = b
                            history.remove(key)
                            h_room += 1
                            f = past[2] + 1
                            while len(r_list) >= r_most:  # room in R for one more
                                old = r_pop(False)[0]
                                sr_items[old] = DEMOTED
                                sr_add(old)
                                demoted += 1
                            r_list[key] = None
                            link(freq, by_freq, key, f)
                            if f > max_f:
                                max_f = f
                            if min_f >= f or min_f == -1:
                                min_f = f
                                top = key
                            if past[1]:  # it left SR unhit: SR was too small
                                ratio = demoted // new_in_h
                                delta = 1.0 if ratio == 0 else ratio + 0.5
                                cur = len(entries) * b
                                if sr_target + delta > cur - 1:
                                    sr_target = cur - 1
                                else:
                                    sr_target = int(sr_target + delta)
                                r_target = cap - sr_target
                                sr_most, r_most = sr_target // b, r_target // b
                            over = len(sr_items) > sr_most
                        if over:
                            if pending is not None:
                                place(pending)
                                pending = None
                            while len(sr_items) > sr_most:  # SR's oldest leave, no expert asked
                                if gone is not None:
                                    emit((evict, gone))
                                    gone = None
                                old, flags = sr_list.pop_oldest()
                                sr_head = None
                                new = flags == NEW
                                if new:
                                    new_in_h += 1
                                else:
                                    demoted -= 1
                                del entries[old]
                                room += 1
                                if old == top:
                                    top = None
                                to_history(freq, by_freq, history, old, new, b, len(history) * b, cap)
                                h_room = (cap - 1) // b - len(history)
                                if not by_freq.get(min_f):
                                    min_f = next_used(by_freq, min_f, max_f, min_f)
                                    top = None
                                emit((evict, old))
                        emit((add, key) if gone is None else (evict, gone, add, key))
                if time == lr_due:  # rule 4: rare, through the method
                    state, owed = lehmer_skip(state, owed), 0
                    policy.interval_hits, policy.rand_state = hits - hits_before, state
                    policy._update_lr()
                    hits_before, state, lr = hits, policy.rand_state, policy.lr
                    lr_due += cap
    finally:  # keep the state true even if the replay is interrupted
        if pending is not None:
            place(pending)
        if time != policy.time:
            policy.block_size = b
        policy.current_bytes, policy.hits, policy.time = len(entries) * b, hits, time
        policy.r_bytes, policy.sr_bytes, policy.history_bytes = len(r_list) * b, len(sr_list) * b, len(history) * b
        policy.ghost_lru_bytes, policy.ghost_lfu_bytes = len(ghost_lru) * b, len(ghost_lfu) * b
        policy.sr_target, policy.r_target = sr_target, r_target
        policy.demoted, policy.new_in_history = demoted, new_in_h
        policy.min_freq, policy.max_freq = min_f, max_f
        policy.w_lru, policy.w_lfu = w_lru, w_lfu
        policy.interval_hits, policy.rand_state = hits - hits_before, lehmer_skip(state, owed)
    return out
