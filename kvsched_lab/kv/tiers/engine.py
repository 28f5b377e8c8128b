"""`TieredPrefixCacheEngine`: the prefix-cache engine with real KV blocks in device, host and disk tiers.

Per request (compare kv/engine.py, the device-only engine):

1. the prefix hit is the leading run of block keys held in any tier at arrival
   (`TierHierarchy.prefix_tiers`); like vLLM, at least the last block is computed;
2. fresh device blocks are allocated for every block not already on the device, and the hit
   blocks held on the host or the disk are copied up into theirs: real tensor copies;
3. the model prefills only the tokens after the hit, reading the whole prefix from the pool;
4. the hierarchy touches the keys head to tail and returns steps, which the engine carries out
   on real blocks: ``adopt`` keeps a fresh block as the device's cached copy, ``copy`` copies a
   block between tiers (demotions, write-through), ``free`` releases a tier's copy;
5. fresh blocks nobody adopted are freed.

A copy is bit for bit, so logits from a prefix brought back from the host or the disk equal
those from the same prefix kept on the device exactly; against a full recompute they agree
within the model's float bound (fp32 on the CPU, fp16 on a GPU: see cli/gpu_check.py).
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Union

import torch

from kvsched_lab.kv.engine import block_id_tokens, chain_block_keys
from kvsched_lab.kv.model import TinyDecoder
from kvsched_lab.kv.tiers.hierarchy import ADOPT, COPY, FREE, Step, TierHierarchy
from kvsched_lab.kv.tiers.placement import DEVICE, DISK, HOST, TIER_NAMES
from kvsched_lab.kv.tiers.stores import DiskBlockStore, HostBlockPool, copy_block, device_block


@dataclass
class TieredResult:
    """What one request cost and returned."""

    num_prompt_tokens: int
    num_cached_tokens: int  # tokens whose K/V came from cached blocks, in any tier
    hit_tiers: List[int]  # tier of each prefix-hit block at arrival (0 device, 1 host, 2 disk)
    logits: torch.Tensor  # (num_prompt_tokens - num_cached_tokens, vocab)
    prefill_seconds: float  # the model's prefill alone
    load_seconds: float  # copying hit blocks up to the device before the prefill


class TieredPrefixCacheEngine:
    """Serves prompts with real KV blocks whose tier a `TierHierarchy` decides."""

    def __init__(self, model: TinyDecoder, hierarchy: TierHierarchy, *, tokens_per_block: int = 16,
                 max_tokens_per_request: int, disk_folder: Union[str, Path, None] = None, block_seed: int = 0) -> None:
        if tokens_per_block <= 0 or not 0 < max_tokens_per_request <= model.config.max_positions:
            raise ValueError(f"need tokens_per_block > 0 and 0 < max_tokens_per_request <= "
                             f"{model.config.max_positions} (the model's max_positions)")
        if hierarchy.stats.requests:
            raise ValueError("pass a fresh hierarchy: this one has served requests already")
        self.model, self.hierarchy = model, hierarchy
        self.tokens_per_block, self.block_seed = tokens_per_block, block_seed
        self.max_tokens_per_request = max_tokens_per_request
        self.max_blocks_per_request = -(-max_tokens_per_request // tokens_per_block)
        capacities = [p.capacity_bytes for p in hierarchy.policies]  # one block = one byte in a tier's policy
        # Cached device blocks never exceed the device tier's capacity; one request adds at most
        # max_blocks_per_request fresh ones.
        self.pool = model.make_pool(capacities[DEVICE] + self.max_blocks_per_request, tokens_per_block)
        self.host = HostBlockPool(self.pool, capacities[HOST]) if hierarchy.num_tiers > HOST else None
        self.disk = DiskBlockStore(self.pool, capacities[DISK], disk_folder) if hierarchy.num_tiers > DISK else None
        self.slots: List[Dict[str, int]] = [{} for _ in range(hierarchy.num_tiers)]  # per tier: key -> block id
        self.copies: Counter = Counter()  # (src, dst) -> blocks really copied
        self.copy_seconds: Counter = Counter()  # (src, dst) -> seconds spent copying
        self._sync = torch.cuda.synchronize if self.pool.device.type == "cuda" else (lambda: None)

    # -- the tiers as block stores ---------------------------------------------------------------
    def _allocator(self, tier: int):
        return (self.pool, self.host, self.disk)[tier].allocator

    def _view(self, tier: int, block_id: int) -> torch.Tensor:
        if tier == DEVICE:
            return device_block(self.pool, block_id)
        return (self.host if tier == HOST else self.disk).block(block_id)

    def _copy(self, src: int, src_id: int, dst: int, dst_id: int) -> None:
        self._sync()
        start = time.perf_counter()
        copy_block(self._view(src, src_id), self._view(dst, dst_id))
        self._sync()  # a non_blocking copy must land before its source block is reused
        self.copy_seconds[src, dst] += time.perf_counter() - start
        self.copies[src, dst] += 1

    # -- serving ---------------------------------------------------------------------------------
    def serve_block_ids(self, block_ids: Sequence[int]) -> TieredResult:
        """Serve a Mooncake request: each block id becomes `tokens_per_block` deterministic tokens."""
        vocab = self.model.config.vocab_size
        return self.serve_tokens([t for b in block_ids
                                  for t in block_id_tokens(b, self.tokens_per_block, vocab, self.block_seed)])

    def serve_tokens(self, token_ids: Sequence[int]) -> TieredResult:
        """Prefill one prompt, reusing its cached prefix from any tier, then let the hierarchy move blocks."""
        token_ids, bs = list(token_ids), self.tokens_per_block
        if not 0 < len(token_ids) <= self.max_tokens_per_request:
            raise ValueError(f"a prompt must have 1..{self.max_tokens_per_request} tokens, got {len(token_ids)}")
        keys = chain_block_keys(token_ids, bs)
        hit_tiers = self.hierarchy.prefix_tiers(keys)
        num_reused = min(len(hit_tiers), (len(token_ids) - 1) // bs)
        num_blocks = -(-len(token_ids) // bs)
        fresh: Dict[int, int] = {}  # block index in this prompt -> device block id, until adopted or freed
        device = self._allocator(DEVICE)
        try:
            for index in range(num_blocks):
                if not (index < num_reused and hit_tiers[index] == DEVICE):
                    fresh[index] = device.allocate()
            load_start = time.perf_counter()
            for index in range(num_reused):  # bring the prefix up before the prefill
                tier = hit_tiers[index]
                if tier != DEVICE:
                    self._copy(tier, self.slots[tier][keys[index]], DEVICE, fresh[index])
            load_seconds = time.perf_counter() - load_start
            table = [fresh[i] if i in fresh else self.slots[DEVICE][keys[i]] for i in range(num_blocks)]
            self._sync()
            start = time.perf_counter()
            logits = self.model.prefill(token_ids, table, num_reused * bs, self.pool)
            self._sync()
            prefill_seconds = time.perf_counter() - start
            _, steps = self.hierarchy.serve(keys, num_loaded=num_reused)
            self._carry_out(steps, {key: i for i, key in enumerate(keys)}, fresh)
        finally:
            for block_id in fresh.values():  # the partial tail, recomputed blocks, or everything after an error
                device.free(block_id)
        return TieredResult(len(token_ids), num_reused * bs, hit_tiers, logits, prefill_seconds, load_seconds)

    def _carry_out(self, steps: Sequence[Step], index_of: Dict[str, int], fresh: Dict[int, int]) -> None:
        for step in steps:
            if step.op == ADOPT:  # the fresh block (computed, or copied up in step 2) becomes the cached copy
                self.slots[DEVICE][step.key] = fresh.pop(index_of[step.key])
            elif step.op == COPY:
                dst_id = self._allocator(step.dst).allocate()
                self._copy(step.src, self.slots[step.src][step.key], step.dst, dst_id)
                self.slots[step.dst][step.key] = dst_id
            elif step.op == FREE:
                block_id = self.slots[step.src].pop(step.key)
                index = index_of.get(step.key)
                if step.src == DEVICE and index is not None and index not in fresh:
                    # a block this request read from the device and still holds: it stays the
                    # request's own, until the device takes it back (adopt) or the request ends
                    fresh[index] = block_id
                else:
                    self._allocator(step.src).free(block_id)
            else:
                raise ValueError(f"unknown step {step!r}")

    def check_consistency(self) -> None:
        """AssertionError unless every tier holds exactly its policy's entries, each in one allocated block."""
        for tier, policy in enumerate(self.hierarchy.policies):
            held, live = set(self.slots[tier]), {str(k) for k in policy.entries}
            assert held == live, (f"{TIER_NAMES[tier]}: engine holds {len(held)} blocks, its policy "
                                  f"{len(live)} entries; e.g. {sorted(held ^ live)[:3]}")
            used = self._allocator(tier).num_used_blocks
            assert used == len(held), f"{TIER_NAMES[tier]}: {used} blocks in use but {len(held)} cached: a leak"

    def close(self) -> None:
        if self.disk is not None:
            self.disk.close()
