"""LeCaR's fast replay (lecar.py): the hooks of `LeCaRPolicy` inlined in one loop, and its regret rule.

A call per touch and an attribute look-up per field cost more than LeCaR's rules, so this loop
keeps every field in a local and writes them back at the end, even if interrupted. It runs only
when every block (cached or remembered by a ghost) has the replay's one size; then a miss evicts
at most one block and trims at most one ghost, so each ``while`` of the hooks is an ``if``, and
the LFU expert's walk up to the next used frequency is skipped: the new block sets the lowest
frequency back to 1 right after (and once the cache is full, every miss evicts). Facts of the layout make it cheaper than the hooks:

- every frequency bucket is in LRU order (a block's last touch is when it reached its count), so
  the experts agree exactly when the LRU block has the lowest count: one look-up decides, and
  the LFU bucket is read only when they disagree;
- the buckets are never removed, so every count up to ``max_freq`` has one: a hit reaches
  ``f + 1`` by indexing, and creates a bucket only past the highest count;
- count 1's order is a deque (lecar.py): a miss appends the new block and most evictions take
  the oldest, two cheap ends where an `OrderedDict` paid an insert and a delete, each a look-up
  and a linked node (in the bench's replay those two were about a quarter of the loop's time);
- an int key above ``key_bound`` never missed before, so it is in no structure: most misses of
  the bench's traces (182,790 of 237,000) skip their look-ups in the cache and both ghosts.

And one fact of LeCaR's runs: once the LRU block has a count above the lowest, the experts go on
disagreeing on it at every miss (on the bench's trace LFU's weight wins, so 84k of 229k victims
are LFU's while one hit block sits at the LRU end). The loop *holds* that block (``held``): it
stays the LRU block until it is hit, evicted or refreshed (lecar-prefix), or ``ones`` runs dry,
and while it is held a miss draws at once instead of taking the LRU block out and putting it back.
The lowest count is read only where it matters (``ones`` empty) and written back at the end.
A draw is compared as the integer ``x % 100`` against the count of hundredths below ``w_lru``.

With ``prefix_rules`` (lecar-prefix) it is also `PrefixLeCaRPolicy.begin_request` and its bypass
of a prompt's last block. The refresh of a request that ran in this loop, was hit on its head only
and could not lose a block (its length within the cache's blocks of count 1) needs no look-ups:
its blocks' places follow from the counts (12,006 of the bench's 12,031 requests).
tests/test_policy_lecar.py and tests/test_policies.py check that this loop and the hooks give the
same prefix hits, log, entries, weights and draws.
"""
from __future__ import annotations

import math
from bisect import bisect_left
from collections import OrderedDict
from itertools import islice, repeat, starmap
from operator import itemgetter
from typing import Any, Dict, Hashable, Iterable, List, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP
from kvsched_lab.sim.policies.base import Policy, prefix_hits
from kvsched_lab.sim.policies.lehmer import LEHMER_MULTIPLIER, MASK128


def regret(w_up: float, w_other: float, lr: float, discount: float) -> Tuple[float, float]:
    """LeCaR's rule 4: the weights after a regret of the expert weighing `w_up` (`discount` = ``dr ** t``).

    The float operations are libCacheSim's, in its order (each weight gets 1e-10, the sum 2e-10
    more), so the weights stay bit-identical to its run."""
    w_up = w_up * math.exp(-lr * discount) + 1e-10
    s = w_up + w_other + 2e-10
    return w_up / s, (w_other + 1e-10) / s


first = itemgetter(0)  # a ghost's bytes, from its (bytes, evicted at)
CENTS = tuple(r / 100 for r in range(100))  # the draws' values: x % 100 = r draws r / 100


SLACK = 64  # stale copies the count-1 order may hold beyond its live keys before it is rebuilt


def pop_one(ones: Any, stale: Dict[Hashable, int], key: Hashable) -> Hashable:
    """The oldest live key of the count-1 order `ones` (a deque), `key` just taken from its front:
    the stale copies before it are dropped (`stale` counts each key's stale copies, which all
    stand before its live one)."""
    while True:
        n = stale.get(key)
        if not n:
            return key
        if n == 1:
            del stale[key]
        else:
            stale[key] = n - 1
        key = ones.popleft()


def reverse_newest(ones: Any, n: int) -> None:
    """The newest `n` copies of the count-1 order `ones` reversed in place: a request's new blocks,
    added head first, put back tail first (taken off newest first, in C)."""
    ones.extend([*starmap(ones.pop, repeat((), n))])


def refresh_ones(ones: Any, stale: Dict[Hashable, int], keys: List[Hashable]) -> None:
    """lecar-prefix's rule 1 in count 1's order: `keys` (count 1, cached, tail first) to the newest end.

    Usually they are the order's newest copies, in request order (the request just added them):
    then they are taken off and put back reversed. Each key's copies there are then the same in
    number, and its last is still its live one, so the stale counts stay true (a key twice in
    `keys` included). Otherwise each gets a newer copy, and its old one goes stale."""
    n = len(keys)
    if n and list(islice(reversed(ones), n)) == keys:
        reverse_newest(ones, n)
        return
    for key in keys:
        ones.append(key)
        stale[key] = stale.get(key, 0) + 1


def compact_ones(policy: Any) -> None:
    """Rebuild the count-1 order from the cache once its stale copies (from hits and refreshes)
    outnumber its live keys, so that blocks hit at once, or refreshed again and again, cannot
    grow it without end. Checked where a copy goes stale, at the same points by hook and loop."""
    ones, entries, freq = policy.ones, policy.entries, policy.freq
    if len(ones) > 2 * (len(entries) - len(freq)) + SLACK:
        ones.clear()  # in place: the fast loop holds its bound methods
        ones.extend([k for k in entries if k not in freq])  # count 1's keys: every bucket is in LRU order
        policy.ones_stale.clear()


def lru_draws_below(w_lru: float) -> int:
    """How many of the values ``x % 100`` pick LRU's block (``(x % 100) / 100 < w_lru``): a prefix of 0..99."""
    return bisect_left(CENTS, w_lru)


def replay_one_size(policy: Any, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
    """`LeCaRPolicy.replay_requests` for `policy` (a `LeCaRPolicy`), every block `bytes_` bytes."""
    ghost_lru, ghost_lfu = policy.ghost_lru, policy.ghost_lfu
    # The sizes in one set, built by C loops: the bench calls this 25 times on a full cache and
    # full ghosts, and generators over their 16,000 sizes cost 5% of its replay (instructions).
    sizes = {*policy.entries.values(), *map(first, ghost_lru.values()), *map(first, ghost_lfu.values())}
    if sizes - {bytes_}:  # mixed sizes: touch by touch
        return Policy._replay(policy, hash_id_lists, bytes_)
    entries, freq, by_freq = policy.entries, policy.freq, policy.by_freq
    contains, to_mru, emit = entries.__contains__, entries.move_to_end, policy.log.append_event
    oldest, get_freq = entries.popitem, freq.get
    ones, stale = policy.ones, policy.ones_stale  # count 1's order (a deque with stale copies), their counts
    ones_add, ones_pop, stale_count = ones.append, ones.popleft, stale.get
    multiplier, mask = LEHMER_MULTIPLIER, MASK128
    out: List[int] = []  # prefix hits per request
    last_time = 0  # the touch clock at the prompt's last block, bypassed on a miss (0: none)
    add, evict, reuse, skip = ADD, EVICT, REUSE, SKIP  # locals: faster than globals in the loop
    cap, b, lr, dr = policy.capacity_bytes, bytes_, policy.lr, policy.dr
    cur, hits, time, max_f = policy.current_bytes, policy.hits, policy.time, policy.max_freq
    ghost_blocks = policy.ghost_limit // b  # a ghost's bytes are its length times b: over the limit past this
    w_lru, w_lfu, state = policy.w_lru, policy.w_lfu, policy.rand_state
    lru_below = lru_draws_below(w_lru)  # a draw picks LRU's block when x % 100 is below this
    bound = policy.key_bound  # an int above it missed never before: in no structure (lecar.py)
    prefix_rules, finished = policy.prefix_rules, policy.finished
    blocks = cap // b  # the cache's length at every eviction
    # `hits` when `finished` began (None: unknown, or it may lose a block), and its prefix hits
    request_hits = head = None
    full = cur + b > cap  # the next miss evicts (it stays so: every eviction is followed by an add)
    held = held_f = None  # the LRU block while the experts are known to disagree on it, and its count
    lfu = ones  # the LFU expert's bucket while `held` is set
    try:
        for ids in hash_id_lists:
            out.append(prefix_hits(contains, ids))
            if prefix_rules:  # lecar-prefix: its begin_request, and the clock at the prompt's last block
                if request_hits is not None and hits - request_hits == head:  # rule 1, the usual request
                    # Its head (`head` prefix hits) was hit and the rest missed, and no block of it
                    # was evicted: the rest, but for a bypassed last block, are the newest `m` copies in
                    # `ones`, in order, the head's blocks the newest of their buckets, and `held`, if
                    # set, older than all of them: no look-ups.
                    skipped = 1 if head < len(finished) > 1 else 0
                    m = len(finished) - skipped - head
                    for key in islice(reversed(finished), skipped, None):
                        to_mru(key)
                    for key in reversed(finished[:head]):
                        by_freq[freq[key]].move_to_end(key)
                    if m > 1:
                        reverse_newest(ones, m)
                    compact_ones(policy)
                else:  # the hooks' refresh: a request of an earlier call, or one that may have lost a block
                    if held is not None and held in finished:  # the refresh moves it off the LRU end
                        held = None
                    policy._refresh_tail_first(finished)
                # No block of `ids` can be evicted in it while len(ids) <= blocks - F, F = len(freq) now:
                # at an eviction, t of its blocks touched and h hit, at most t < blocks of it are cached,
                # and of count 1 at least blocks - F - h >= t + 1 - h blocks, its t - h new ones the
                # newest: both experts name an older block.
                finished, head = ids, out[-1]
                request_hits = hits if len(ids) <= blocks - len(freq) else None
                last_time = time + len(ids) if len(ids) > 1 else 0  # a one-block prompt's block is no "last"
            for key in ids:
                time += 1
                if key.__class__ is int and key > bound:  # never missed before: no look-ups
                    bound = key
                    if time == last_time:  # lecar-prefix: a prompt's missed last block is not cached
                        emit((skip, key))
                        continue
                elif key in entries:  # a hit: the LRU list and the count
                    hits += 1
                    to_mru(key)
                    if key == held:  # no longer the LRU block
                        held = None
                    f = get_freq(key, 1) + 1
                    freq[key] = f
                    if f == 2:  # its copy in count 1's order goes stale
                        stale[key] = stale_count(key, 0) + 1
                        if len(ones) > 2 * (len(entries) - len(freq)) + SLACK:
                            compact_ones(policy)
                        if len(entries) == len(freq):  # count 1 ran dry: the LFU expert looks elsewhere
                            held = None
                    else:
                        del by_freq[f - 1][key]
                    if f > max_f:
                        max_f = f
                        by_freq[f] = OrderedDict.fromkeys((key,))
                    else:
                        by_freq[f][key] = None
                    emit((reuse, key))
                    continue
                else:
                    if key.__class__ is not int:  # a bool, a float, a numpy int may equal an int key
                        bound = math.inf
                    if time == last_time:
                        emit((skip, key))
                        continue
                    if key in ghost_lru:  # rule 4: LRU's regret
                        w_lru, w_lfu = regret(w_lru, w_lfu, lr, dr ** (time - ghost_lru.pop(key)[1]))
                        lru_below = lru_draws_below(w_lru)
                    elif key in ghost_lfu:
                        w_lfu, w_lru = regret(w_lfu, w_lru, lr, dr ** (time - ghost_lfu.pop(key)[1]))
                        lru_below = lru_draws_below(w_lru)
                if full:  # rule 2: one victim makes room
                    if held is None:  # look at the LRU block
                        old = oldest(False)[0]
                        if old not in freq:  # count 1, so the lowest: it heads `ones` too, the experts agree
                            front = ones_pop()
                            if front in stale:
                                pop_one(ones, stale, front)
                        else:
                            f = freq[old]
                            # the lowest count: 1 while a cached block (`old` is out) is not in `freq`
                            low = 1 if len(entries) >= len(freq) else next(g for g in range(2, f + 1) if by_freq[g])
                            if f == low:  # they agree on a block hit before: nobody remembers it
                                del by_freq[f][old]
                                del freq[old]
                            else:  # they disagree: the block goes back to the LRU end and is held there
                                entries[old] = b
                                to_mru(old, False)
                                held, held_f, lfu = old, f, ones if low == 1 else by_freq[low]
                    if held is not None:  # they disagree: a draw, and the chooser's ghost remembers the victim
                        state = (state * multiplier) & mask
                        if (state >> 64) % 100 < lru_below:  # LRU's block
                            old, held = held, None
                            del entries[old]
                            del by_freq[held_f][old]
                            del freq[old]
                            ghost = ghost_lru
                        elif lfu is ones:  # LFU's: the oldest block of count 1
                            old = ones_pop()
                            if old in stale:
                                old = pop_one(ones, stale, old)
                            del entries[old]
                            ghost = ghost_lfu
                        else:  # LFU's, when count 1 was empty (the new block below refills it)
                            old = lfu.popitem(False)[0]
                            del entries[old]
                            del freq[old]
                            lfu = ones
                            ghost = ghost_lfu
                        ghost[old] = (b, time)
                        if len(ghost) > ghost_blocks:  # rule 3: over half the capacity
                            ghost.popitem(False)
                    emit((evict, old, add, key))  # the victim and the add, in one call
                else:
                    cur += b
                    full = cur + b > cap
                    emit((add, key))
                entries[key] = b
                ones_add(key)
    finally:  # keep the state true even if the replay is interrupted
        policy.current_bytes, policy.hits, policy.time, policy.max_freq = cur, hits, time, max_f
        if entries:  # the lowest count in use, as the hooks keep it
            policy.min_freq = 1 if len(entries) > len(freq) else next(g for g in range(2, max_f + 1) if by_freq[g])
        policy.ghost_lru_bytes, policy.ghost_lfu_bytes = len(ghost_lru) * b, len(ghost_lfu) * b
        policy.w_lru, policy.w_lfu, policy.rand_state = w_lru, w_lfu, state
        policy.finished, policy.key_bound = tuple(finished), bound
    return out
