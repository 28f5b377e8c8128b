"""LeCaR and lecar-prefix: the fast loop (lecar_replay.py) makes the hooks' decisions, draws and
weights included; the layout fact it relies on holds; lecar-prefix's two rules traced by hand
from lecar_prefix.py's docstring. (libCacheSim's decisions: tests/test_crosscheck_libcachesim.py.)"""
import random

import pytest

from kvsched_lab.sim.policies import make_policy
from kvsched_lab.sim.policies.base import Policy
from policy_helpers import replay_by_touch


def full_state(policy):
    """Everything a later decision reads: the log, the cache in both experts' orders, the counts,
    the ghosts, the weights and the generator."""
    return (list(policy.log.events()), list(policy.entries.items()), dict(policy.freq),
            {f: list(node) for f, node in policy.by_freq.items()}, list(policy.ones), dict(policy.ones_stale),
            policy.min_freq, policy.max_freq, policy.key_bound,
            list(policy.ghost_lru.items()), list(policy.ghost_lfu.items()), policy.ghost_lru_bytes,
            policy.ghost_lfu_bytes, policy.w_lru, policy.w_lfu, policy.rand_state, policy.current_bytes,
            policy.time, policy.hits)


def hot_cold_requests(seed, capacity, n):
    """Requests of 1-6 blocks from a hot set of half the cache and a cold set of three caches, so
    victims come back soon: ghost hits move the weights and draws decide hits."""
    rng = random.Random(seed)
    return [[rng.randrange(capacity // 2) if rng.random() < 0.5 else capacity + rng.randrange(3 * capacity)
             for _ in range(rng.randint(1, 6))] for _ in range(n)]


@pytest.mark.parametrize("name", ["lecar", "lecar-prefix"])
@pytest.mark.parametrize("capacity, seed", [(20, 1), (37, 2), (64, 3)])
def test_fast_loop_makes_the_hooks_decisions_draws_and_weights(name, capacity, seed):
    lists = hot_cold_requests(seed, capacity, 1500)
    fast, slow = make_policy(name, capacity), make_policy(name, capacity)
    assert fast.replay_requests(lists, 1) == replay_by_touch(slow, lists, 1)
    assert full_state(fast) == full_state(slow)
    assert fast.w_lru != 0.5 and fast.rand_state != make_policy(name, capacity).rand_state  # regrets and draws happened
    assert fast.ghost_lru and fast.ghost_lfu


def repeat_requests(seed, capacity, n):
    """Requests whose blocks come twice in a row (a few keys more than the cache): a new block is
    often hit before the next miss, so every cached block has a count above 1 and the LFU expert's
    lowest count is above 1 when a miss needs a victim."""
    rng = random.Random(seed)
    return [[k for _ in range(rng.randint(1, 3)) for k in [rng.randrange(capacity + 3)] * rng.choice((1, 2, 2))]
            for _ in range(n)]


@pytest.mark.parametrize("name", ["lecar", "lecar-prefix"])
@pytest.mark.parametrize("capacity, seed", [(4, 7), (9, 8)])
def test_fast_loop_when_no_cached_block_has_count_1(name, capacity, seed):
    """The LFU expert's victim from a bucket above 1 (every block hit), both draws' outcomes: the
    fast loop's rare path makes the hooks' decisions."""
    lists = repeat_requests(seed, capacity, 2000)
    fast, slow = make_policy(name, capacity), make_policy(name, capacity)
    choices = []  # (lowest count, who chose) of every victim the experts disagreed on, by hook
    victim = slow.victim

    def watched_victim():
        key = victim()
        if slow._expert:
            choices.append((slow.min_freq > 1, slow._expert))
        return key

    slow.victim = watched_victim
    assert fast.replay_requests(lists, 1) == replay_by_touch(slow, lists, 1)
    assert full_state(fast) == full_state(slow)
    assert {(True, 1), (True, 2), (False, 1), (False, 2)} <= set(choices)  # LRU's and LFU's, either lowest count


def test_fast_loop_continues_where_the_hooks_left_off_and_back():
    """Half the requests by hook, half by the loop, then a touch: the same as all by hook."""
    lists = hot_cold_requests(4, 30, 1000)
    mixed, slow = make_policy("lecar-prefix", 30), make_policy("lecar-prefix", 30)
    Policy._replay(mixed, lists[:500], 1)
    mixed.replay_requests(lists[500:], 1)
    replay_by_touch(slow, lists, 1)
    assert full_state(mixed) == full_state(slow)


@pytest.mark.parametrize("name", ["lecar", "lecar-prefix"])
def test_every_bucket_is_in_lru_order(name):
    """The fact the fast loop's agreement test rests on: each count's keys are in the order of the
    LRU list (so the experts agree exactly when the LRU block has the lowest count)."""
    policy = make_policy(name, 25)
    for i, ids in enumerate(hot_cold_requests(5, 25, 600)):
        policy.replay_requests([ids], 1) if i % 2 else replay_by_touch(policy, [ids], 1)
        rank = {k: n for n, k in enumerate(policy.entries)}
        buckets = {**policy.by_freq, 1: list(policy.count_one_keys())}
        for f, node in buckets.items():
            assert [rank[k] for k in node] == sorted(rank[k] for k in node), (i, f)
            assert all(policy.freq.get(k, 1) == f for k in node)
        assert sum(map(len, buckets.values())) == len(policy.entries)
        assert not policy.entries or buckets[policy.min_freq]


def test_a_finished_requests_tail_leaves_before_its_head():
    """Capacity 3. Request [a, b, c, x]: a, b, c are cached, x (its last block) is bypassed. When
    [d, y] arrives they are refreshed tail first, so the LRU list is c, b, a: d evicts c, the
    tail; plain LeCaR caches x and then evicts a, the head, first."""
    ours, plain = make_policy("lecar-prefix", 3), make_policy("lecar", 3)
    lists = [["a", "b", "c", "x"], ["d", "y"]]
    assert ours.replay_requests(lists, 1) == [0, 0]
    plain.replay_requests(lists, 1)
    assert list(ours.log) == ["add:a", "add:b", "add:c", "skip:x", "evict:c", "add:d", "skip:y"]
    assert list(plain.log)[3:5] == ["evict:a", "add:x"]
    assert [k for k, _, _ in ours.snapshot()] == ["d", "a", "b"]
    # The next request re-sending the prompt finds its first two blocks; plain LeCaR lost a.
    assert ours.replay_requests([["a", "b", "c", "z"]], 1) == [2]
    assert plain.replay_requests([["a", "b", "c", "z"]], 1) == [0]


def test_the_refresh_reorders_the_lfu_bucket_too_so_the_experts_agree_on_the_tail():
    """[a, b, c, x] then [a, b, c, y]: a, b, c are hit once (count 2, bucket order a, b, c). At
    [d, z] the refresh makes both orders c, b, a: both experts name c, so c goes with no draw and
    no ghost. Refreshing the LRU list alone would have LRU name c and LFU a: a draw."""
    policy = make_policy("lecar-prefix", 3)
    policy.replay_requests([["a", "b", "c", "x"], ["a", "b", "c", "y"]], 1)
    state = policy.rand_state
    policy.replay_requests([["d", "z"]], 1)
    assert list(policy.log)[-3:] == ["evict:c", "add:d", "skip:z"]
    assert policy.rand_state == state and not policy.ghost_lru and not policy.ghost_lfu
    assert [k for k, _, _ in policy.snapshot()] == ["d", "a", "b"]


@pytest.mark.parametrize("by_hook", [False, True])
def test_a_bypassed_last_block_leaves_lecars_state_as_it_was(by_hook):
    """Capacity 2: [a], [a], [b], [c] leave a ghost (a hit block and a new one disagree, a draw
    decides). A prompt [c, g] ending on that ghost g: c hits, g is skipped, and the ghost, the
    weights and the generator are as before: no regret, no draw."""
    policy = make_policy("lecar-prefix", 2)
    policy.replay_requests([["a"], ["a"], ["b"], ["c"]], 1)
    ghosts = list(policy.ghost_lru) + list(policy.ghost_lfu)
    assert len(ghosts) == 1
    before = (list(policy.ghost_lru.items()), list(policy.ghost_lfu.items()), policy.w_lru, policy.rand_state)
    run = replay_by_touch if by_hook else type(policy).replay_requests
    run(policy, [["c", ghosts[0]]], 1)
    assert list(policy.log)[-2:] == ["reuse:c", f"skip:{ghosts[0]}"]
    assert (list(policy.ghost_lru.items()), list(policy.ghost_lfu.items()), policy.w_lru, policy.rand_state) == before
    # The same block touched as a plain LeCaR would (not a prompt's last) is a ghost hit: the weights move.
    policy.touch(ghosts[0], 1)
    assert policy.w_lru != before[2]


def test_a_plain_touch_is_lecars():
    """Without request structure (`touch(key, bytes_)`) lecar-prefix decides as LeCaR."""
    keys = [k for ids in hot_cold_requests(6, 20, 800) for k in ids]
    ours, plain = make_policy("lecar-prefix", 20), make_policy("lecar", 20)
    for k in keys:
        ours.touch(k, 1)
        plain.touch(k, 1)
    assert full_state(ours) == full_state(plain)


def test_a_refresh_that_moves_the_held_lru_block_is_seen_by_the_fast_loop():
    """Capacity 2. In [a, b, c, d], a (count 3) is the LRU block when c misses and every block was
    hit, so the experts disagree and LFU's draw evicts b. The refresh at [e, f] moves a back to the
    newest end: c (count 1) is now the LRU block, both experts name it, no draw, no ghost."""
    lists = [["a", "a", "b", "x"], ["a", "b", "c", "d"], ["e", "f"]]
    fast, slow = make_policy("lecar-prefix", 2), make_policy("lecar-prefix", 2)
    assert fast.replay_requests(lists, 1) == replay_by_touch(slow, lists, 1) == [0, 2, 0]
    assert full_state(fast) == full_state(slow)
    assert list(fast.log)[-3:] == ["evict:c", "add:e", "skip:f"]
    assert list(fast.ghost_lfu) == ["b"] and not fast.ghost_lru


@pytest.mark.parametrize("by_hook", [False, True])
def test_a_draw_equal_to_w_lru_picks_lfus_block(by_hook):
    """Rule 2: LRU's block only when r < w_lru. The generator's first r is 0.97; with w_lru set to
    0.97, the hot LRU block h stays and the new block n1 (LFU's) goes to LFU's ghost."""
    policy = make_policy("lecar", 2)
    policy.w_lru, policy.w_lfu = 0.97, 0.03
    run = replay_by_touch if by_hook else type(policy).replay_requests
    run(policy, [["h"], ["h"], ["n1"], ["n2"]], 1)
    assert list(policy.log)[-2:] == ["evict:n1", "add:n2"]
    assert list(policy.ghost_lfu) == ["n1"] and policy.draw() == 0.82  # one draw was made: the next is the second


@pytest.mark.parametrize("name", ["lecar", "lecar-prefix"])
def test_a_ghost_of_another_size_sends_the_replay_touch_by_touch(name):
    """The fast loop counts a ghost's bytes as its length times the replay's size, so one ghost
    of another size must send the replay to the hooks, even when every cached block has the
    replay's size: the ghosts' bytes and the trims are then the hooks'."""
    fast, slow = make_policy(name, 8), make_policy(name, 8)
    for policy in (fast, slow):
        for key in ["h", "h", "a", "b", "c", "d", "e", "f", "g", "i", "j"]:
            policy.touch(key, 1)
        for key in ["x", "y", "z", "w"]:
            policy.touch(key, 2)
    assert set(fast.entries.values()) == {2} and {b for b, _ in fast.ghost_lfu.values()} == {1}
    lists = [["a", "p"], ["q", "r", "s"], ["b", "t", "u"]]
    assert fast.replay_requests(lists, 2) == replay_by_touch(slow, lists, 2)
    assert full_state(fast) == full_state(slow)
    assert fast.ghost_lfu_bytes + fast.ghost_lru_bytes != 2 * (len(fast.ghost_lfu) + len(fast.ghost_lru))


def test_a_key_equal_to_an_int_turns_the_new_key_shortcut_off():
    """An int above every int that missed skips the look-ups (most misses of the bench's traces),
    but a float that missed may equal a later int: 7.0 is cached, so 7 is a hit, by hook and loop."""
    lists = [[1, 2, 3], [7.0, 4], [7, 5], [6, 7]]
    for name in ("lecar", "lecar-prefix"):
        fast, slow = make_policy(name, 4), make_policy(name, 4)
        assert fast.replay_requests(lists, 1) == replay_by_touch(slow, lists, 1) == [0, 0, 1, 0]
        assert full_state(fast) == full_state(slow)
        assert fast.key_bound == float("inf")
    plain = make_policy("lecar", 50)
    plain.replay_requests([[3, 1, 2], [2, 9]], 1)
    assert plain.key_bound == 9


def live_order(policy_ones, stale):
    """The live keys of a count-1 order (a deque with counted stale copies), oldest first."""
    skip, out = dict(stale), []
    for key in policy_ones:
        if skip.get(key):
            skip[key] -= 1
        else:
            out.append(key)
    return out


@pytest.mark.parametrize("order, stale, keys, in_place", [
    (["o", "a", "b", "c"], {}, ["c", "b", "a"], True),  # the request's own blocks at the end: reversed
    (["o", "a", "b", "x"], {"x": 1}, ["b", "a"], False),  # a stale copy after them: a newer copy each
    (["o", "x", "y", "x"], {"x": 1}, ["x", "y", "x"], True),  # the end matches with x twice, one copy stale
    (["x", "o", "y", "x"], {"x": 1}, ["x", "y", "x"], False),  # x twice, the end does not match
])
def test_the_refresh_of_count_1s_order_moves_keys_as_one_at_a_time_would(order, stale, keys, in_place):
    """`refresh_ones` puts `keys` (tail first) at the newest end of the live order, as moving each
    to the end in turn does; taken off and put back reversed only when that is the same."""
    from collections import deque

    from kvsched_lab.sim.policies.lecar_replay import refresh_ones
    expected = live_order(order, stale)
    for key in keys:
        expected.remove(key) if key in expected else None
        expected.append(key)
    ones, counts = deque(order), dict(stale)
    refresh_ones(ones, counts, keys)
    assert live_order(ones, counts) == expected
    assert sum(counts.values()) == len(ones) - len(expected)
    assert (len(ones) == len(order)) == in_place  # reversed in place: no new stale copy


@pytest.mark.parametrize("name", ["lecar", "lecar-prefix"])
def test_count_1s_order_is_rebuilt_when_stale_copies_pile_up(name):
    """Blocks hit right after they arrive leave a stale copy each, and the evictions come from
    counts above 1, so nothing drains `ones` from its front: it is rebuilt (at the same touch by
    hook and loop), and stays within twice its live keys plus the slack."""
    from kvsched_lab.sim.policies.lecar_replay import SLACK
    lists = [[k, k] for k in range(3000)]  # each block hit at once: count 1 never loses its oldest
    fast, slow = make_policy(name, 6), make_policy(name, 6)
    longest = 0
    for i in range(0, len(lists), 50):
        fast.replay_requests(lists[i:i + 50], 1)
        replay_by_touch(slow, lists[i:i + 50], 1)
        assert full_state(fast) == full_state(slow)
        longest = max(longest, len(fast.ones))
        assert len(fast.ones) <= 2 * (len(fast.entries) - len(fast.freq)) + SLACK + 1
    assert longest > SLACK // 2  # stale copies did pile up (3,000 without the rebuild)


def conversation_requests(seed, n):
    """Chats: a turn re-sends its chat's last prompt but the bypassed last block, plus 1-4 new
    blocks (now and then a head block twice); a new chat one turn in three."""
    rng, chats, lists, new = random.Random(seed), [], [], iter(range(10**6))
    for _ in range(n):
        if not chats or rng.random() < 0.3:
            chats.append([])
        chat = rng.choice(chats)
        head = chat[:-1] + (chat[:1] if len(chat) > 1 and rng.random() < 0.1 else [])
        chat[:] = head[-10:] + [next(new) for _ in range(rng.randint(1, 4))]  # at most 14 blocks
        lists.append(list(chat))
    return lists


def counting_refreshes_by_look_ups(policy):
    """How often `policy`'s fast loop refreshes a finished request by look-ups (the hooks' refresh)."""
    calls = []
    real = policy._refresh_tail_first
    policy._refresh_tail_first = lambda ids: calls.append(1) or real(ids)
    return calls


def test_the_refresh_without_look_ups_is_the_hooks_refresh():
    """A request whose head was hit and the rest missed, on a cache where it cannot lose a block
    (its length within the blocks of count 1), is refreshed from its counts alone: the same
    log and state as the hooks, with head blocks twice, bypassed and cached last blocks, mixed
    with requests refreshed by look-ups."""
    lists = conversation_requests(9, 1200)
    fast, slow = make_policy("lecar-prefix", 120), make_policy("lecar-prefix", 120)
    fallbacks = counting_refreshes_by_look_ups(fast)
    for i in range(0, len(lists), 300):
        assert fast.replay_requests(lists[i:i + 300], 1) == replay_by_touch(slow, lists[i:i + 300], 1)
        assert full_state(fast) == full_state(slow)
    # By look-ups: each call's first request (finished in the call before) and a head hit after a miss.
    assert 4 < len(fallbacks) < len(lists) // 5
    assert fast.hits > 1000 and fast.ghost_lru and fast.ghost_lfu
    assert any(len(set(ids)) < len(ids) for ids in lists)  # a head block twice


def test_the_refresh_by_look_ups_when_a_request_may_lose_a_block_or_hit_after_a_miss():
    """Capacity 4. [a, p, q, r, s, t]: a is hit, then p, q, r evict the last request's other
    blocks and s evicts a itself (the experts disagree and the draw, 0.97 < w_lru 0.99, picks
    LRU's): a request longer than the cache's blocks of count 1 is refreshed by look-ups. Capacity 20: so is
    [c, a, b, y], short, but a and b are hit after c missed; [a, b, x] before it is not."""
    lists = [["a", "b", "c", "d", "x"], ["a", "p", "q", "r", "s", "t"], ["c", "s", "t", "u"], ["u"], ["v"]]
    fast, slow = make_policy("lecar-prefix", 4), make_policy("lecar-prefix", 4)
    for policy in (fast, slow):
        policy.w_lru, policy.w_lfu = 0.99, 0.01
    assert fast.replay_requests(lists, 1) == replay_by_touch(slow, lists, 1)
    assert full_state(fast) == full_state(slow)
    assert "evict:a" in list(fast.log)[:14] and list(fast.ghost_lru) == ["a"]
    lists = [["a", "b", "x"], ["c", "a", "b", "y"], ["z"]]
    fast, slow = make_policy("lecar-prefix", 20), make_policy("lecar-prefix", 20)
    fallbacks = counting_refreshes_by_look_ups(fast)
    assert fast.replay_requests(lists, 1) == replay_by_touch(slow, lists, 1) == [0, 0, 0]
    assert full_state(fast) == full_state(slow)
    assert len(fallbacks) == 2  # the first request's (nothing finished) and [c, a, b, y]'s
