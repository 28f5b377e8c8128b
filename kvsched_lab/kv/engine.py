"""`PrefixCacheEngine`: a scheduler decides which KV blocks stay cached; the engine keeps real blocks to match.

The scheduler can be the chapter's `KVCacheSchedulerSim`, a learner's version of it, or a
library policy: anything with ``touch(prefix, bytes_)``, ``entries`` and ``log``. Blocks are
keyed like vLLM's prefix cache: a chain hash over full blocks of tokens, so equal keys mean
equal prefixes. Per request (the protocol of `kvsched_lab.sim.replay`):

1. the prefix hit is the leading run of block keys cached at arrival;
2. the model prefills only the tokens after the hit, writing their K/V into fresh pool blocks;
3. each full block is touched head to tail, and the engine follows the scheduler's events:
   ``add`` adopts the fresh block as the cached copy, ``evict`` frees a cached block,
   ``skip`` (a bypass) leaves the block uncached, ``reuse`` changes nothing;
4. fresh blocks nobody adopted (the partial tail, skipped blocks) are freed.

So the pool holds exactly the scheduler's live entries between requests (less the entries of a
warmed scheduler that are older than the engine and not computed since: they have no K/V, count
as misses, and free nothing when evicted), and at most ``capacity_blocks +
max_blocks_per_request`` blocks at any moment.
"""
from __future__ import annotations

import hashlib
import random
import struct
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Set

import torch

from kvsched_lab.sim.events import ADD, EVICT, REUSE, iter_events
from kvsched_lab.kv.model import TinyDecoder


def chain_block_keys(token_ids: Sequence[int], block_size: int) -> List[str]:
    """Hex keys of the full blocks of a prompt: ``h_i = blake2b(h_{i-1} + tokens of block i)``.

    A stable hash (Python's `hash` is salted per process); the chain makes a key stand for
    the whole prefix up to its block, as in vLLM. The partial tail block gets no key.
    """
    keys: List[str] = []
    parent = b""
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        block = token_ids[start:start + block_size]
        digest = hashlib.blake2b(parent + struct.pack(f"<{block_size}q", *block), digest_size=16).digest()
        keys.append(digest.hex())
        parent = digest
    return keys


def block_id_tokens(block_id: int, tokens_per_block: int, vocab_size: int, seed: int = 0) -> List[int]:
    """The token ids standing for a Mooncake block id: deterministic, from a generator seeded by the id."""
    rng = random.Random(f"kvsched-block:{seed}:{block_id}")  # str seeds hash with SHA-512: stable across runs
    return [rng.randrange(vocab_size) for _ in range(tokens_per_block)]


@dataclass
class RequestResult:
    """What one request cost and returned."""

    num_prompt_tokens: int
    num_cached_tokens: int  # tokens whose K/V came from cached blocks
    num_computed_tokens: int  # tokens the model ran: num_prompt_tokens - num_cached_tokens
    num_hit_blocks: int  # leading blocks cached at arrival (the protocol's prefix hits, before the cap below)
    logits: torch.Tensor  # (num_computed_tokens, vocab) logits of the new tokens; the last row samples the next token
    block_keys: List[str]  # chain keys of the full blocks


class SchedulerEventError(RuntimeError):
    """The scheduler raised, or logged an event the engine cannot follow."""


class PrefixCacheEngine:
    """Serves prompts with a real KV cache whose contents a scheduler decides."""

    def __init__(
        self,
        model: TinyDecoder,
        scheduler: Any,
        *,
        tokens_per_block: int = 16,
        max_tokens_per_request: int,
        capacity_blocks: Optional[int] = None,
        block_bytes: Optional[int] = None,
        block_seed: int = 0,
    ) -> None:
        """
        `block_bytes` is the size each `touch` reports (default: this model's real block bytes);
        pass a big model's figure, e.g. ``model_kv_bytes_per_block("Llama-3-8B", 512)``, to keep the
        scheduler's byte accounting in those units. `capacity_blocks` defaults to
        ``scheduler.capacity_bytes // block_bytes``.
        """
        if tokens_per_block <= 0 or max_tokens_per_request <= 0:
            raise ValueError("tokens_per_block and max_tokens_per_request must be > 0")
        if max_tokens_per_request > model.config.max_positions:
            raise ValueError(
                f"max_tokens_per_request={max_tokens_per_request} exceeds the model's "
                f"max_positions={model.config.max_positions}"
            )
        self.model = model
        self.scheduler = scheduler
        self.tokens_per_block = tokens_per_block
        self.max_tokens_per_request = max_tokens_per_request
        self.block_seed = block_seed
        self.block_bytes = block_bytes if block_bytes is not None else model.kv_bytes_per_token * tokens_per_block
        if capacity_blocks is None:
            if not hasattr(scheduler, "capacity_bytes"):
                raise ValueError("the scheduler has no capacity_bytes; pass capacity_blocks")
            capacity_blocks = scheduler.capacity_bytes // self.block_bytes
        if capacity_blocks <= 0:
            raise ValueError(
                f"capacity is {capacity_blocks} blocks of {self.block_bytes} bytes; give the scheduler more"
            )
        self.capacity_blocks = capacity_blocks
        self.max_blocks_per_request = -(-max_tokens_per_request // tokens_per_block)
        # Cached blocks never exceed capacity, and one request's fresh blocks never exceed
        # max_blocks_per_request, so this many blocks always suffice.
        self.pool = model.make_pool(capacity_blocks + self.max_blocks_per_request, tokens_per_block)
        self.cached_block_ids: Dict[str, int] = {}  # block key -> pool block id of its cached copy
        # A warmed scheduler's entries have no K/V here: misses until computed, nothing to free on eviction.
        self.keys_without_kv: Set[str] = {str(k) for k in scheduler.entries}
        self._log_pos = len(scheduler.log)  # events before the engine existed are not the engine's
        self.num_requests = 0
        self.prefill_tokens_total = 0
        self.prefill_tokens_computed = 0
        self.blocks_in_use_max = 0

    @property
    def hit_tokens(self) -> int:
        return self.prefill_tokens_total - self.prefill_tokens_computed

    def serve_block_ids(self, block_ids: Sequence[int]) -> RequestResult:
        """Serve a Mooncake request: each block id becomes `tokens_per_block` deterministic tokens."""
        vocab = self.model.config.vocab_size
        tokens = [t for b in block_ids for t in block_id_tokens(b, self.tokens_per_block, vocab, self.block_seed)]
        return self.serve_tokens(tokens)

    def serve_tokens(self, token_ids: Sequence[int]) -> RequestResult:
        """Prefill one prompt, reusing its cached prefix, then let the scheduler update the cache."""
        token_ids = list(token_ids)
        num_tokens, bs = len(token_ids), self.tokens_per_block
        if not 0 < num_tokens <= self.max_tokens_per_request:
            raise ValueError(f"a prompt must have 1..{self.max_tokens_per_request} tokens, got {num_tokens}")
        keys = chain_block_keys(token_ids, bs)

        # 1. Prefix hit at arrival: cached by the scheduler and held by the engine.
        num_hit_blocks = 0
        for key in keys:
            if key not in self.scheduler.entries or key not in self.cached_block_ids:
                break
            num_hit_blocks += 1
        # Like vLLM, compute at least the last block: its logits are needed to sample a token.
        num_reused_blocks = min(num_hit_blocks, (num_tokens - 1) // bs)
        num_cached_tokens = num_reused_blocks * bs

        # 2. Fresh blocks for the rest, then prefill only the new tokens.
        num_blocks = -(-num_tokens // bs)
        fresh_block_ids: Dict[int, int] = {}  # block index in this prompt -> pool block id, until adopted or freed
        try:
            for index in range(num_reused_blocks, num_blocks):
                fresh_block_ids[index] = self.pool.allocator.allocate()
            self.blocks_in_use_max = max(self.blocks_in_use_max, self.pool.allocator.num_used_blocks)
            block_table = [self.cached_block_ids[keys[i]] for i in range(num_reused_blocks)]
            block_table += [fresh_block_ids[i] for i in range(num_reused_blocks, num_blocks)]
            logits = self.model.prefill(token_ids, block_table, num_cached_tokens, self.pool)

            # 3. Touch full blocks head to tail and follow the scheduler's events. Library
            # policies hear of the whole request first (`Policy.begin_request`).
            begin_request = getattr(self.scheduler, "begin_request", None)
            if begin_request is not None:
                begin_request(keys)
            for index, key in enumerate(keys):
                self._touch(index, key, fresh_block_ids, last=index == len(keys) - 1)
        finally:
            # 4. Fresh blocks nobody adopted: the partial tail, skipped or recomputed blocks,
            # and, if anything above raised, all of this request's leftovers.
            for block_id in fresh_block_ids.values():
                self.pool.allocator.free(block_id)

        self.num_requests += 1
        self.prefill_tokens_total += num_tokens
        self.prefill_tokens_computed += num_tokens - num_cached_tokens
        return RequestResult(num_tokens, num_cached_tokens, num_tokens - num_cached_tokens, num_hit_blocks,
                             logits, keys)

    def _touch(self, index: int, key: str, fresh_block_ids: Dict[int, int], last: bool) -> None:
        try:
            # Library policies may use the request's structure; any other scheduler gets the
            # chapter's plain touch.
            touch_in_request = getattr(self.scheduler, "touch_in_request", None)
            if touch_in_request is not None:
                touch_in_request(key, self.block_bytes, index + 1, last)
            else:
                self.scheduler.touch(key, self.block_bytes)
        except Exception as exc:
            # It may have logged evictions before raising: follow them so the pool stays in step.
            self._follow_events(index, key, fresh_block_ids)
            raise SchedulerEventError(
                f"scheduler.touch({key!r}, {self.block_bytes}) raised {type(exc).__name__}: {exc}; "
                "the engine followed the events logged before it and freed this request's uncached blocks"
            ) from exc
        self._follow_events(index, key, fresh_block_ids)

    def _follow_events(self, index: int, key: str, fresh_block_ids: Dict[int, int]) -> None:
        """Apply the events `touch(key)` logged; apply every valid one, then raise for the first invalid one."""
        try:
            events = list(iter_events(self.scheduler.log, self._log_pos))
        except ValueError as exc:
            raise SchedulerEventError(f"cannot read the scheduler's log: {exc}") from exc
        finally:
            self._log_pos = len(self.scheduler.log)  # never read the same events twice
        problems: List[str] = []
        for op, event_key in events:
            event_key = str(event_key)
            if op == EVICT:
                block_id = self.cached_block_ids.pop(event_key, None)
                if block_id is None and event_key in self.keys_without_kv:
                    self.keys_without_kv.discard(event_key)  # an entry older than the engine: no block
                elif block_id is None:
                    problems.append(f"the scheduler evicted {event_key!r}, a key the engine holds no block for "
                                    "(added without an 'add:' event, or evicted twice?)")
                else:
                    self.pool.allocator.free(block_id)
            elif event_key != key:
                problems.append(f"touch({key!r}) logged '{op}:{event_key}'; only evictions may name another key")
            elif op in (ADD, REUSE) and key not in self.cached_block_ids:
                # ADD: the block just computed becomes the cached copy. REUSE of a key the engine
                # does not hold (an entry older than the engine): adopt the fresh copy as well.
                if index in fresh_block_ids:
                    self.cached_block_ids[key] = fresh_block_ids.pop(index)
                    self.keys_without_kv.discard(key)
                else:
                    problems.append(f"'{op}:{key}' for a block whose K/V the engine no longer has")
            elif op == ADD:
                problems.append(f"the scheduler added {key!r} while it was still cached (no evict in between)")
            # REUSE of a held key and SKIP need nothing: the fresh block, if any, is freed at the end.
        if problems:
            raise SchedulerEventError("; ".join(problems))

    def check_consistency(self) -> None:
        """Raise AssertionError unless the pool holds exactly the scheduler's live entries (between requests),
        less the entries older than the engine that no request has computed yet."""
        live = {str(k) for k in self.scheduler.entries} - self.keys_without_kv
        held = set(self.cached_block_ids)
        assert held == live, (
            f"engine holds {len(held)} blocks, scheduler has {len(live)} entries; "
            f"held not live {sorted(held - live)[:3]}, live not held {sorted(live - held)[:3]}"
        )
        used = self.pool.allocator.num_used_blocks
        assert used == len(held), f"{used} pool blocks in use but {len(held)} cached: a leak"
