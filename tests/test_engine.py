"""Tests for PrefixCacheEngine and real_kv_replay: real blocks follow the scheduler, no leaks, right logits."""
from __future__ import annotations

import hashlib
import random
from collections import OrderedDict
from types import SimpleNamespace
from typing import List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvsched_lab import check_invariants
from kvsched_lab.kv.engine import PrefixCacheEngine, SchedulerEventError, block_id_tokens, chain_block_keys
from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP, EventLog
from kvsched_lab.kv.model import TinyDecoder, TinyDecoderConfig
from kvsched_lab.kv.model_configs import model_kv_bytes_per_block
from kvsched_lab.sim.policies import make_policy
from kvsched_lab.kv.real_kv import real_kv_replay
from solutions import KVCacheSchedulerSim

BS = 4  # tokens per block
CFG = TinyDecoderConfig(vocab_size=64, dim=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8,
                        ffn_hidden=64, max_positions=256)
MODEL = TinyDecoder(CFG, device="cpu")  # read-only: every test builds its own engine and pool
BLOCK_BYTES = MODEL.kv_bytes_per_token * BS


class ListLogLRU:
    """A learner-style scheduler: plain LRU, `entries` of int sizes, a list-of-strings log."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self.current_bytes = 0
        self.entries: "OrderedDict[str, int]" = OrderedDict()
        self.log: List[str] = []

    def touch(self, prefix, bytes_: int) -> None:
        if prefix in self.entries:
            self.entries.move_to_end(prefix)
            self.log.append(f"reuse:{prefix}")
            return
        while self.current_bytes + bytes_ > self.capacity_bytes:
            key, size = self.entries.popitem(last=False)
            self.current_bytes -= size
            self.log.append(f"evict:{key}")
        self.entries[prefix] = bytes_
        self.current_bytes += bytes_
        self.log.append(f"add:{prefix}")


class HalfBypassLRU:
    """LRU that never caches keys starting with 0-7 (a bypass, like Belady's), logging to an `EventLog`."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self.current_bytes = 0
        self.entries: "OrderedDict[str, int]" = OrderedDict()
        self.log = EventLog()

    def touch(self, prefix, bytes_: int) -> None:
        if prefix in self.entries:
            self.entries.move_to_end(prefix)
            self.log.emit(REUSE, prefix)
        elif prefix[0] in "01234567":
            self.log.emit(SKIP, prefix)
        else:
            while self.current_bytes + bytes_ > self.capacity_bytes:
                key, size = self.entries.popitem(last=False)
                self.current_bytes -= size
                self.log.emit(EVICT, key)
            self.entries[prefix] = bytes_
            self.current_bytes += bytes_
            self.log.emit(ADD, prefix)


def make_engine(scheduler, max_blocks: int = 12, **kwargs) -> PrefixCacheEngine:
    return PrefixCacheEngine(MODEL, scheduler, tokens_per_block=BS, max_tokens_per_request=max_blocks * BS, **kwargs)


def workload(seed: int, num_requests: int = 40, max_blocks: int = 12) -> List[List[int]]:
    """Conversations: a shared system prompt, then turns that extend the previous turn."""
    rng = random.Random(seed)
    next_id = 1000
    conversations: List[List[int]] = []
    requests = []
    for _ in range(num_requests):
        if conversations and rng.random() < 0.6:
            conv = rng.choice(conversations)
            grow = rng.randint(1, 3)
        else:
            conv = [rng.randrange(3)]  # one of three system prompts
            conversations.append(conv)
            grow = rng.randint(0, 3)
        if len(conv) + grow > max_blocks:
            conversations.remove(conv)
            conv = [rng.randrange(3)]
            conversations.append(conv)
        conv.extend(range(next_id, next_id + grow))
        next_id += grow
        requests.append(list(conv))
    return requests


def protocol_expectation(requests, capacity_blocks: int, peak: bool = False):
    """Brute force: the same scheduler fed chained block-id keys, no model; cached tokens per request.

    With `peak`, also the most pool blocks in use at once: the entries cached at a request's
    arrival plus the fresh blocks it computes."""
    sim = KVCacheSchedulerSim(capacity_bytes=capacity_blocks * BLOCK_BYTES)
    expected = []
    blocks_in_use_max = 0
    for ids in requests:
        keys = [tuple(ids[:i + 1]) for i in range(len(ids))]
        hits = 0
        while hits < len(keys) and keys[hits] in sim.entries:
            hits += 1
        expected.append(min(hits, len(ids) - 1) * BS)  # the last block is always recomputed
        blocks_in_use_max = max(blocks_in_use_max, len(sim.entries) + len(ids) - expected[-1] // BS)
        for key in keys:
            sim.touch(key, BLOCK_BYTES)
    return (expected, blocks_in_use_max) if peak else expected


def tokens_of(ids):
    return [t for b in ids for t in block_id_tokens(b, BS, CFG.vocab_size)]


def test_chain_keys_are_stable_prefix_hashes():
    a, b = list(range(10)), list(range(8)) + [99, 98]
    ka, kb = chain_block_keys(a, 4), chain_block_keys(b, 4)
    assert len(ka) == 2  # the 2-token tail has no key
    assert ka == chain_block_keys(list(range(10)), 4) and ka[0] == kb[0] and ka[1] == kb[1]
    assert chain_block_keys([5, 6, 7, 8] * 2, 4)[1] != chain_block_keys([5, 6, 7, 8] * 2, 4)[0]
    assert all(isinstance(k, str) and len(k) == 32 for k in ka)
    assert block_id_tokens(7, 4, 64) == block_id_tokens(7, 4, 64) != block_id_tokens(8, 4, 64)


@pytest.mark.parametrize("capacity_blocks", [3, 10, 40])
def test_reference_scheduler_workload(capacity_blocks):
    sim = KVCacheSchedulerSim(capacity_bytes=capacity_blocks * BLOCK_BYTES)
    engine = make_engine(sim)
    assert engine.capacity_blocks == capacity_blocks
    assert engine.pool.num_blocks == capacity_blocks + 12
    requests = workload(seed=capacity_blocks)
    expected, blocks_in_use_max = protocol_expectation(requests, capacity_blocks, peak=True)
    for ids, cached in zip(requests, expected):
        result = engine.serve_block_ids(ids)
        assert result.num_cached_tokens == cached
        # The model ran exactly the uncached tokens: one logits row each.
        assert result.logits.shape[0] == result.num_computed_tokens == len(ids) * BS - cached
        full = MODEL.forward(tokens_of(ids))
        assert (result.logits - full[cached:]).abs().max().item() <= 1e-4
        engine.check_consistency()  # held blocks == live entries, no leak
        check_invariants(sim)
        assert engine.pool.allocator.num_used_blocks <= capacity_blocks
    assert engine.blocks_in_use_max == blocks_in_use_max
    assert engine.prefill_tokens_total == sum(len(ids) for ids in requests) * BS
    assert engine.prefill_tokens_computed == engine.prefill_tokens_total - sum(expected)
    assert engine.hit_tokens == sum(expected) > 0
    assert engine.num_requests == len(requests)


def test_policies_hear_of_each_request_before_its_touches():
    # s3fifo-repeat ranks a request by whether all its blocks are known: the engine must call
    # `begin_request` with the whole prompt, and then agree with a trace-only replay of its keys.
    policy = make_policy("s3fifo-repeat", 10 * BLOCK_BYTES)
    engine = make_engine(policy)
    requests = workload(seed=3)
    requests += requests[:15]  # prompts sent again word for word
    results = [engine.serve_block_ids(ids) for ids in requests]
    twin = make_policy("s3fifo-repeat", 10 * BLOCK_BYTES)
    assert [r.num_hit_blocks for r in results] == twin.replay_requests([r.block_keys for r in results], BLOCK_BYTES)
    assert policy.request == len(requests) and list(policy.log) == list(twin.log)
    assert sum(r.num_hit_blocks for r in results) > 0
    engine.check_consistency()


def test_whole_prompt_cached_recomputes_only_the_last_block():
    engine = make_engine(KVCacheSchedulerSim(capacity_bytes=20 * BLOCK_BYTES))
    ids = [1, 2, 3]
    engine.serve_block_ids(ids)
    again = engine.serve_block_ids(ids)
    assert again.num_hit_blocks == 3 and again.num_cached_tokens == 8 and again.num_computed_tokens == 4
    assert (again.logits[-1] - MODEL.forward(tokens_of(ids))[-1]).abs().max().item() <= 1e-4
    engine.check_consistency()


def test_partial_tail_block_is_never_cached():
    sim = KVCacheSchedulerSim(capacity_bytes=20 * BLOCK_BYTES)
    engine = make_engine(sim)
    tokens = list(range(10))  # two full blocks and a 2-token tail
    first = engine.serve_tokens(tokens)
    assert first.num_cached_tokens == 0 and len(sim.entries) == 2
    assert engine.pool.allocator.num_used_blocks == 2
    second = engine.serve_tokens(tokens + [11, 12])
    assert second.num_cached_tokens == 8 and second.num_computed_tokens == 4
    assert (second.logits - MODEL.forward(tokens + [11, 12])[8:]).abs().max().item() <= 1e-4
    engine.check_consistency()


def test_learner_scheduler_with_a_list_of_strings_log():
    sim = ListLogLRU(capacity_bytes=8 * BLOCK_BYTES)
    engine = make_engine(sim)
    for ids in workload(seed=7):
        result = engine.serve_block_ids(ids)
        assert (result.logits - MODEL.forward(tokens_of(ids))[result.num_cached_tokens:]).abs().max() <= 1e-4
        engine.check_consistency()
        check_invariants(sim)
    assert engine.hit_tokens > 0 and len(sim.entries) <= 8


def test_skip_events_leave_blocks_uncached():
    sim = HalfBypassLRU(capacity_bytes=8 * BLOCK_BYTES)
    engine = make_engine(sim)
    for ids in workload(seed=11):
        engine.serve_block_ids(ids)
        engine.check_consistency()
        check_invariants(sim)
    assert any(op == SKIP for op, _ in sim.log.events())
    assert all(key[0] not in "01234567" for key in engine.cached_block_ids)


def test_block_bytes_in_a_big_models_units():
    big = model_kv_bytes_per_block("Llama-3-8B", 512)
    sim = KVCacheSchedulerSim(capacity_bytes=5 * big)
    engine = make_engine(sim, block_bytes=big)
    assert engine.capacity_blocks == 5
    for ids in workload(seed=3, num_requests=15):
        engine.serve_block_ids(ids)
        engine.check_consistency()
    assert all(e.bytes == big for e in sim.entries.values())


class FlakyScheduler(KVCacheSchedulerSim):
    def __init__(self, capacity_bytes: int, fail_at: int) -> None:
        super().__init__(capacity_bytes)
        self.fail_at = fail_at
        self.calls = 0

    def touch(self, prefix, bytes_):
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("boom")
        super().touch(prefix, bytes_)


def test_scheduler_that_raises_leaves_the_engine_consistent():
    sim = FlakyScheduler(capacity_bytes=4 * BLOCK_BYTES, fail_at=6)
    engine = make_engine(sim)
    engine.serve_block_ids([1, 2, 3])
    with pytest.raises(SchedulerEventError, match="raised RuntimeError: boom"):
        engine.serve_block_ids([1, 2, 4, 5, 6])
    engine.check_consistency()
    assert engine.num_requests == 1  # the failed request is not counted
    result = engine.serve_block_ids([1, 2, 4, 5, 6])
    assert result.num_cached_tokens == 8  # blocks 1, 2 survived; the engine keeps working
    engine.check_consistency()


class LyingScheduler(ListLogLRU):
    def __init__(self, capacity_bytes: int, lie: str) -> None:
        super().__init__(capacity_bytes)
        self.lie = lie

    def touch(self, prefix, bytes_):
        super().touch(prefix, bytes_)
        if len(self.entries) == 2:
            self.log.append(self.lie)


@pytest.mark.parametrize("lie, message", [
    ("evict:nope", "holds no block for"),
    ("add:nope", "only evictions may name another key"),
    ("grow:x", "cannot read the scheduler's log"),
])
def test_bad_events_raise_clear_errors_without_leaking(lie, message):
    engine = make_engine(LyingScheduler(capacity_bytes=10 * BLOCK_BYTES, lie=lie))
    with pytest.raises(SchedulerEventError, match=message):
        engine.serve_block_ids([1, 2, 3, 4])
    assert engine.pool.allocator.num_used_blocks == len(engine.cached_block_ids)


def test_too_long_prompt_is_rejected_before_anything_changes():
    sim = KVCacheSchedulerSim(capacity_bytes=10 * BLOCK_BYTES)
    engine = make_engine(sim, max_blocks=3)
    with pytest.raises(ValueError, match="1..12 tokens"):
        engine.serve_tokens(list(range(13)))
    assert sim.log == [] and engine.pool.allocator.num_used_blocks == 0 and engine.prefill_tokens_total == 0


def test_scheduler_without_capacity_needs_capacity_blocks():
    sim = SimpleNamespace(entries={}, log=[], touch=lambda prefix, bytes_: None)
    with pytest.raises(ValueError, match="pass capacity_blocks"):
        make_engine(sim)
    assert make_engine(sim, capacity_blocks=3).pool.num_blocks == 3 + 12


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    requests=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=6), min_size=1, max_size=12),
    capacity_blocks=st.integers(1, 6),
    learner=st.booleans(),
)
def test_random_requests_never_leak(requests, capacity_blocks, learner):
    sim = (ListLogLRU if learner else KVCacheSchedulerSim)(capacity_bytes=capacity_blocks * BLOCK_BYTES)
    engine = make_engine(sim, max_blocks=6)
    peak = computed = 0
    for ids in requests:
        cached_before = len(engine.cached_block_ids)
        result = engine.serve_block_ids(ids)
        check_invariants(sim)
        engine.check_consistency()
        assert engine.pool.allocator.num_used_blocks <= capacity_blocks
        assert result.num_computed_tokens == len(ids) * BS - result.num_cached_tokens
        assert result.num_cached_tokens == min(result.num_hit_blocks, len(ids) - 1) * BS
        peak = max(peak, cached_before + len(ids) - result.num_cached_tokens // BS)
        computed += result.num_computed_tokens
    # The engine's running totals agree with the per-request results summed here.
    assert engine.blocks_in_use_max == peak
    assert (engine.prefill_tokens_total, engine.prefill_tokens_computed) == (
        sum(len(ids) for ids in requests) * BS, computed)


def test_real_kv_replay_matches_the_trace_only_protocol():
    requests = [SimpleNamespace(timestamp=i, hash_ids=ids) for i, ids in enumerate(workload(seed=5, num_requests=30))]
    sim = KVCacheSchedulerSim(capacity_bytes=10 * BLOCK_BYTES)
    out = real_kv_replay(requests, sim, tokens_per_block=BS, device="cpu", model_config=CFG, check_every=3)
    assert out["requests"] == 30 and out["requests_checked"] == 10
    expected, blocks_in_use_max = protocol_expectation([r.hash_ids for r in requests], 10, peak=True)
    assert out["prefill_tokens_total"] == sum(len(r.hash_ids) for r in requests) * BS
    assert out["hit_tokens"] == sum(expected) > 0
    assert out["prefill_tokens_computed"] == out["prefill_tokens_total"] - sum(expected)
    assert out["max_abs_logit_diff"] <= 1e-4
    assert out["capacity_blocks"] == 10 and out["pool_blocks"] == 10 + max(len(r.hash_ids) for r in requests)
    assert out["blocks_in_use_max"] == blocks_in_use_max
    assert out["device"] == "cpu" and out["dtype"] == "float32"
    # The replay protocol (`kvsched_lab.sim.replay`), on block ids alone, without the model.
    ref = KVCacheSchedulerSim(capacity_bytes=10 * BLOCK_BYTES)
    hits = 0
    for r in requests:
        run = 0
        while run < len(r.hash_ids) and r.hash_ids[run] in ref.entries:
            run += 1
        hits += run
        for b in r.hash_ids:
            ref.touch(b, BLOCK_BYTES)
    assert out["protocol_hit_blocks"] == hits
    assert out["prefix_hit_rate"] == hits / sum(len(r.hash_ids) for r in requests)


def test_real_kv_replay_respects_max_requests():
    requests = [SimpleNamespace(hash_ids=[1, 2, i]) for i in range(10)]
    out = real_kv_replay(requests, KVCacheSchedulerSim(capacity_bytes=50 * BLOCK_BYTES), tokens_per_block=BS,
                         device="cpu", model_config=CFG, max_requests=4, check_every=None)
    assert out["requests"] == 4 and out["requests_checked"] == 0
    assert out["hit_tokens"] == 3 * 2 * BS
    with pytest.raises(ValueError, match="no requests"):
        real_kv_replay([], KVCacheSchedulerSim(), device="cpu")


# -- prompts whose last block is partial ----------------------------------------------------------
def expected_cached_tokens(num_tokens: int, num_hit_blocks: int) -> int:
    """Every hit block is reused, unless the hit covers the whole prompt: then its last block is
    recomputed, because the model needs at least one new token to give logits."""
    if num_hit_blocks * BS < num_tokens:
        return num_hit_blocks * BS
    return (num_hit_blocks - 1) * BS


def test_a_partial_last_block_keeps_every_full_block_reusable():
    sim = KVCacheSchedulerSim(capacity_bytes=20 * BLOCK_BYTES)
    engine = make_engine(sim)
    tokens = list(range(10))  # two full blocks and a 2-token tail
    engine.serve_tokens(tokens)
    # The same prompt again: both full blocks are cached, only the 2-token tail is computed.
    again = engine.serve_tokens(tokens)
    assert (again.num_hit_blocks, again.num_cached_tokens, again.num_computed_tokens) == (2, 8, 2)
    assert (again.logits - MODEL.forward(tokens)[8:]).abs().max().item() <= 1e-4
    # One token more than two blocks and one token less than three: still two blocks reused.
    for n in (9, 11):
        result = engine.serve_tokens(tokens[:8] + list(range(40, 40 + n - 8)))
        assert (result.num_hit_blocks, result.num_cached_tokens, result.num_computed_tokens) == (2, 8, n - 8)
    assert engine.hit_tokens == 3 * 8 and engine.prefill_tokens_total == 10 + 10 + 9 + 11
    engine.check_consistency()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prompts=st.lists(st.tuples(st.integers(0, 2), st.integers(1, 4 * BS)), min_size=1, max_size=10),
    capacity_blocks=st.integers(1, 6),
)
def test_random_prompt_lengths_reuse_every_cached_full_block(prompts, capacity_blocks):
    """Prompts of any length (mostly with a partial last block) against a twin scheduler fed the same keys."""
    sim = KVCacheSchedulerSim(capacity_bytes=capacity_blocks * BLOCK_BYTES)
    twin = KVCacheSchedulerSim(capacity_bytes=capacity_blocks * BLOCK_BYTES)
    engine = make_engine(sim, max_blocks=4)
    total = cached = 0
    for system, length in prompts:
        tokens = ([system] * 3 * BS + list(range(10, 10 + BS)))[:length]  # three system prompts, shared heads
        keys = [tuple(tokens[:end]) for end in range(BS, length + 1, BS)]  # one key per full block
        hits = 0
        while hits < len(keys) and keys[hits] in twin.entries:
            hits += 1
        for key in keys:
            twin.touch(key, BLOCK_BYTES)
        want = expected_cached_tokens(length, hits)
        result = engine.serve_tokens(tokens)
        assert (result.num_hit_blocks, result.num_cached_tokens) == (hits, want)
        assert result.num_computed_tokens == length - want
        assert (result.logits - MODEL.forward(tokens)[want:]).abs().max().item() <= 1e-4
        total, cached = total + length, cached + want
        engine.check_consistency()
    assert (engine.prefill_tokens_total, engine.hit_tokens, engine.prefill_tokens_computed) == (
        total, cached, total - cached)


# -- an engine attached to a scheduler that already holds entries ---------------------------------
def test_engine_attached_to_a_warmed_scheduler():
    """Entries older than the engine have no K/V: they count as misses until the engine computes
    them, a reuse of one adopts the fresh copy, and evicting one frees nothing."""
    sim = KVCacheSchedulerSim(capacity_bytes=4 * BLOCK_BYTES)
    old_a, old_b = chain_block_keys(tokens_of([1, 2]), BS)
    sim.touch(old_a, BLOCK_BYTES)
    sim.touch(old_b, BLOCK_BYTES)
    sim.touch("never-served", BLOCK_BYTES)
    log_before = len(sim.log)
    engine = make_engine(sim)
    # Block 1 is in the scheduler but not in the pool: no hit, computed in full, then adopted.
    first = engine.serve_block_ids([1, 9])
    assert (first.num_hit_blocks, first.num_cached_tokens) == (0, 0)
    assert engine.cached_block_ids.keys() >= {old_a} and old_b not in engine.cached_block_ids
    assert sim.log[log_before] == f"reuse:{old_a}"
    # Now block 1's K/V is held: the next prompt that starts with it hits it and reads it.
    second = engine.serve_block_ids([1, 2, 3])
    assert (second.num_hit_blocks, second.num_cached_tokens) == (1, BS)
    assert (second.logits - MODEL.forward(tokens_of([1, 2, 3]))[BS:]).abs().max().item() <= 1e-4
    # More new blocks evict the old entries the engine never held; nothing is freed for them.
    for ids in ([5, 6, 7], [5, 6, 7, 8]):
        engine.serve_block_ids(ids)
    assert "never-served" not in sim.entries and any(line == "evict:never-served" for line in sim.log)
    assert engine.pool.allocator.num_used_blocks == len(engine.cached_block_ids) == len(sim.entries)
    engine.check_consistency()


def test_engine_rejects_bad_sizes_with_clear_errors():
    sim = KVCacheSchedulerSim(capacity_bytes=10 * BLOCK_BYTES)
    for kwargs in ({"tokens_per_block": 0, "max_tokens_per_request": 8},
                   {"tokens_per_block": 4, "max_tokens_per_request": 0}):
        with pytest.raises(ValueError) as info:
            PrefixCacheEngine(MODEL, sim, **kwargs)
        assert str(info.value) == "tokens_per_block and max_tokens_per_request must be > 0"
    with pytest.raises(ValueError) as info:
        PrefixCacheEngine(MODEL, sim, tokens_per_block=4, max_tokens_per_request=257)
    assert str(info.value) == "max_tokens_per_request=257 exceeds the model's max_positions=256"
    assert PrefixCacheEngine(MODEL, sim, tokens_per_block=4, max_tokens_per_request=256).max_blocks_per_request == 64
    with pytest.raises(ValueError) as info:
        make_engine(KVCacheSchedulerSim(capacity_bytes=BLOCK_BYTES - 1))
    assert str(info.value) == f"capacity is 0 blocks of {BLOCK_BYTES} bytes; give the scheduler more"
    with pytest.raises(ValueError) as info:
        make_engine(SimpleNamespace(entries={}, log=[], touch=lambda prefix, bytes_: None))
    assert str(info.value) == "the scheduler has no capacity_bytes; pass capacity_blocks"
    # A prompt of one block more than a whole number of blocks takes a partial extra block.
    engine = PrefixCacheEngine(MODEL, sim, tokens_per_block=4, max_tokens_per_request=9)
    assert engine.max_blocks_per_request == 3 and engine.pool.num_blocks == 10 + 3
    assert sim.log == [] and not sim.entries  # nothing was touched
    for bad in ([], list(range(10))):
        with pytest.raises(ValueError) as info:
            engine.serve_tokens(bad)
        assert str(info.value) == f"a prompt must have 1..9 tokens, got {len(bad)}"


def test_block_tokens_are_fixed_by_the_id_and_the_seed():
    tokens = block_id_tokens(7, 16, 64)
    assert len(tokens) == 16 and all(0 <= t < 64 for t in tokens) and len(set(tokens)) > 1
    assert block_id_tokens(7, 16, 64, seed=0) == tokens != block_id_tokens(7, 16, 64, seed=1)
    assert block_id_tokens(7, 16, 1000)[:4] != block_id_tokens(8, 16, 1000)[:4]
    engine = make_engine(KVCacheSchedulerSim(capacity_bytes=10 * BLOCK_BYTES), block_seed=3)
    assert engine.serve_block_ids([5]).block_keys == chain_block_keys(block_id_tokens(5, BS, 64, seed=3), BS)


class ScriptedLRU(ListLogLRU):
    """ListLogLRU that logs extra lines (a buggy learner's scheduler) on the touches listed in `extra`."""

    def __init__(self, capacity_bytes: int, extra) -> None:
        super().__init__(capacity_bytes)
        self.extra = extra  # touch number (1-based) -> lines to log after that touch's own
        self.calls = 0

    def touch(self, prefix, bytes_):
        self.calls += 1
        if self.calls in self.extra and self.extra[self.calls] == "add instead of reuse":
            self.entries.move_to_end(prefix)
            self.log.append(f"add:{prefix}")
            return
        super().touch(prefix, bytes_)
        for line in self.extra.get(self.calls, ()):
            self.log.append(line.format(key=prefix))


def test_each_scheduler_event_error_in_full():
    keys = chain_block_keys(tokens_of([1, 2]), BS)
    cases = [
        ({2: ["evict:nope", "add:other"]},
         "the scheduler evicted 'nope', a key the engine holds no block for (added without an 'add:' event, "
         f"or evicted twice?); touch({keys[1]!r}) logged 'add:other'; only evictions may name another key"),
        # Touch 3 is the hit on block 1 of the second request: evicting and re-adding the key
        # throws away the only copy of its K/V (the request reused it, computed nothing).
        ({3: ["evict:{key}", "add:{key}"]}, f"'add:{keys[0]}' for a block whose K/V the engine no longer has"),
        ({3: "add instead of reuse"}, f"the scheduler added {keys[0]!r} while it was still cached (no evict in between)"),
    ]
    for extra, message in cases:
        engine = make_engine(ScriptedLRU(10 * BLOCK_BYTES, extra))
        with pytest.raises(SchedulerEventError) as info:
            engine.serve_block_ids([1, 2])
            engine.serve_block_ids([1, 2])
        assert str(info.value) == message
        assert engine.pool.allocator.num_used_blocks == len(engine.cached_block_ids)
    sim = FlakyScheduler(capacity_bytes=4 * BLOCK_BYTES, fail_at=1)
    engine = make_engine(sim)
    with pytest.raises(SchedulerEventError) as info:
        engine.serve_block_ids([1])
    key = chain_block_keys(tokens_of([1]), BS)[0]
    assert str(info.value) == (
        f"scheduler.touch({key!r}, {BLOCK_BYTES}) raised RuntimeError: boom; "
        "the engine followed the events logged before it and freed this request's uncached blocks")
    engine = make_engine(LyingScheduler(capacity_bytes=10 * BLOCK_BYTES, lie="grow:x"))
    with pytest.raises(SchedulerEventError) as info:
        engine.serve_block_ids([1, 2])
    assert str(info.value).startswith("cannot read the scheduler's log: ")


def test_consistency_check_names_what_is_out_of_step():
    sim = KVCacheSchedulerSim(capacity_bytes=10 * BLOCK_BYTES)
    engine = make_engine(sim)
    result = engine.serve_block_ids([1, 2])
    engine.check_consistency()
    a, b = result.block_keys
    sim.touch("stranger", BLOCK_BYTES)  # cached by the scheduler behind the engine's back
    with pytest.raises(AssertionError) as info:
        engine.check_consistency()
    assert str(info.value) == "engine holds 2 blocks, scheduler has 3 entries; held not live [], live not held ['stranger']"
    del sim.entries["stranger"]
    leaked = engine.pool.allocator.allocate()
    with pytest.raises(AssertionError) as info:
        engine.check_consistency()
    assert str(info.value) == "3 pool blocks in use but 2 cached: a leak"
    engine.pool.allocator.free(leaked)
    engine.check_consistency()
    assert sorted(engine.cached_block_ids) == sorted([a, b])


def test_chain_keys_follow_the_documented_formula():
    # h_i = blake2b(h_{i-1} + block i's tokens as little-endian int64, 16-byte digest), h_{-1} = b"":
    # rebuilt here with int.to_bytes, not the engine's struct format.
    tokens = [3, 0, 63, 1, 7, 7, 2, 9, 5]  # two full blocks of 4 and a 1-token tail
    parent, expected = b"", []
    for start in (0, 4):
        payload = b"".join(t.to_bytes(8, "little", signed=True) for t in tokens[start:start + 4])
        parent = hashlib.blake2b(parent + payload, digest_size=16).digest()
        expected.append(parent.hex())
    assert chain_block_keys(tokens, 4) == expected
    assert chain_block_keys(tokens[:8], 4) == expected and chain_block_keys(tokens[:7], 4) == expected[:1]
    assert chain_block_keys(tokens[:3], 4) == []


class DepthRecordingLRU(ListLogLRU):
    """ListLogLRU with the library's request-aware touch: records each call's depth and `last` flag."""

    def __init__(self, capacity_bytes: int) -> None:
        super().__init__(capacity_bytes)
        self.calls = []  # (key, bytes_, depth, last) per touch

    def touch_in_request(self, prefix, bytes_, depth, last):
        self.calls.append((prefix, bytes_, depth, last))
        self.touch(prefix, bytes_)


def test_request_aware_schedulers_hear_each_blocks_depth_and_the_last_block():
    sim = DepthRecordingLRU(capacity_bytes=10 * BLOCK_BYTES)
    engine = make_engine(sim)
    tokens = list(range(14))  # three full blocks of 4, then a 2-token tail (no key, no touch)
    keys = chain_block_keys(tokens, BS)
    engine.serve_tokens(tokens)
    assert sim.calls == [(keys[0], BLOCK_BYTES, 1, False), (keys[1], BLOCK_BYTES, 2, False),
                         (keys[2], BLOCK_BYTES, 3, True)]
    engine.check_consistency()


def test_blocks_are_sixteen_tokens_by_default():
    sim = KVCacheSchedulerSim(capacity_bytes=4 * MODEL.kv_bytes_per_token * 16)
    engine = PrefixCacheEngine(MODEL, sim, max_tokens_per_request=40)
    assert engine.capacity_blocks == 4 and engine.max_blocks_per_request == 3
    # Nothing served yet: no pool block was ever in use.
    assert (engine.blocks_in_use_max, engine.num_requests, engine.hit_tokens) == (0, 0, 0)
    tokens = list(range(40))  # two full 16-token blocks and an 8-token tail
    first = engine.serve_tokens(tokens)
    assert first.block_keys == chain_block_keys(tokens, 16)
    assert (first.num_prompt_tokens, first.num_cached_tokens, first.num_computed_tokens) == (40, 0, 40)
    assert all(e.bytes == MODEL.kv_bytes_per_token * 16 for e in sim.entries.values()) and len(sim.entries) == 2
    assert engine.serve_tokens(tokens).num_cached_tokens == 32


class AddsThenRaises(ListLogLRU):
    """Caches the block and logs its `add`, then raises on touch number `fail_at` (a half-done touch)."""

    def __init__(self, capacity_bytes: int, fail_at: int) -> None:
        super().__init__(capacity_bytes)
        self.fail_at = fail_at
        self.calls = 0

    def touch(self, prefix, bytes_):
        self.calls += 1
        super().touch(prefix, bytes_)
        if self.calls == self.fail_at:
            raise RuntimeError("late boom")


def test_a_block_added_before_the_scheduler_raised_is_kept():
    sim = AddsThenRaises(capacity_bytes=10 * BLOCK_BYTES, fail_at=2)
    engine = make_engine(sim)
    tokens = tokens_of([1, 2, 3])
    keys = chain_block_keys(tokens, BS)
    with pytest.raises(SchedulerEventError) as info:
        engine.serve_tokens(tokens)
    assert str(info.value).startswith(f"scheduler.touch({keys[1]!r}, {BLOCK_BYTES}) raised RuntimeError: late boom;")
    # Block 2's add was logged before the raise: the engine adopted it, block 3 was never touched.
    assert sorted(engine.cached_block_ids) == sorted(keys[:2]) and engine.pool.allocator.num_used_blocks == 2
    engine.check_consistency()
    assert engine.serve_tokens(tokens).num_cached_tokens == 2 * BS


def test_an_old_entry_evicted_twice_is_an_error_the_second_time():
    # An entry older than the engine frees nothing when evicted; it is then forgotten, so a
    # second eviction of it (a buggy scheduler) is reported like any key the engine never held.
    sim = ScriptedLRU(10 * BLOCK_BYTES, {1: ["evict:old"], 2: ["evict:old"]})
    sim.touch("old", BLOCK_BYTES)
    sim.calls = 0  # the scripted lines count the engine's touches only
    engine = make_engine(sim)
    assert engine.keys_without_kv == {"old"}
    with pytest.raises(SchedulerEventError) as info:
        engine.serve_block_ids([1, 2])
    assert str(info.value) == ("the scheduler evicted 'old', a key the engine holds no block for "
                               "(added without an 'add:' event, or evicted twice?)")
    assert engine.keys_without_kv == set()
    assert engine.pool.allocator.num_used_blocks == len(engine.cached_block_ids) == 2
