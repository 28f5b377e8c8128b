"""`TierHierarchy`: which KV blocks sit in which tier (device, host, disk), each tier run by a policy.

Torch-free bookkeeping, shared by the trace replay (which counts) and the tiered engine (which
copies real blocks). Each tier is any course policy (LRU, S3-FIFO, the learner's scheduler...)
with a capacity in blocks: it alone decides which block leaves that tier. The placement rule
(placement.py) decides where a leaving block goes and when a block is copied down early.

Per request, as in the replay protocol (`kvsched_lab.sim.replay`):

1. `prefix_tiers(keys)`: the leading run of keys held in any tier at arrival, with the fastest
   tier holding each (the per-tier prefix hits);
2. `serve(keys, num_loaded)`: touch every key head to tail. A key held below the device is
   brought up (the first `num_loaded` keys are copied up; later ones were recomputed anyway);
   the device's policy admits it and may evict others, which the rule moves down or drops;
   a lower tier that fills up evicts in turn.

`serve` returns the ordered `Step` list an engine must carry out on real blocks: ``adopt``
(the device keeps the request's fresh copy of a key), ``copy`` (copy a key's block from one
tier to another) and ``free`` (a tier lets go of its copy). A copy always comes before the
``free`` of its source, and a lower tier frees room before a copy lands in it.
"""
from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any, Dict, Hashable, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from kvsched_lab.kv.tiers.costs import TierCosts, move_name
from kvsched_lab.kv.tiers.placement import DEVICE, TIER_NAMES, BlockInfo, PlacementRule
from kvsched_lab.sim.events import ADD, EVICT, SKIP, EventLog, iter_events

ADOPT, COPY, FREE = "adopt", "copy", "free"


class Step(NamedTuple):
    """One thing an engine does to real blocks: ``adopt`` (src: where the key came from, or
    None when computed), ``copy`` src -> dst, or ``free`` the copy in tier src."""

    op: str
    key: Hashable
    src: Optional[int]
    dst: Optional[int] = None


@dataclass
class TierStats:
    """Counts over a run, per tier index (0 device, 1 host, 2 disk)."""

    requests: int = 0
    block_refs: int = 0
    prefix_hits: Counter = field(default_factory=Counter)  # tier -> prefix-hit blocks found there first
    moves: Counter = field(default_factory=Counter)  # (src, dst) -> blocks copied
    drops: Counter = field(default_factory=Counter)  # tier -> blocks that left it for nowhere
    recomputed_with_copy: int = 0  # blocks behind a miss recomputed although a lower tier held them


def can_discard(policy: Any) -> bool:
    """True when a block can be taken out of `policy` without asking it (exclusive tiers need that).

    LRU and FIFO keep all their state in ``entries`` (an OrderedDict); a policy may also offer
    its own ``discard(key)``. Others keep queues that a silent removal would corrupt.
    """
    if callable(getattr(policy, "discard", None)):
        return True
    from kvsched_lab.sim.policies import FIFOPolicy, LRUPolicy

    return type(policy) in (FIFOPolicy, LRUPolicy) and isinstance(policy.entries, OrderedDict)


class TierHierarchy:
    """Tiers of KV blocks, fastest first, each a policy holding up to its capacity in blocks."""

    def __init__(self, policies: Sequence[Any], rule: PlacementRule, *, costs: Optional[TierCosts] = None,
                 record_steps: bool = True) -> None:
        """`policies`: one fresh scheduler per tier, device first (capacity_bytes = capacity in
        blocks: every block has size 1 here). `costs` fill `BlockInfo`'s recompute and load times.
        `record_steps=False` skips building the steps (a trace replay only counts)."""
        if not 1 <= len(policies) <= len(TIER_NAMES):
            raise ValueError(f"give 1 to {len(TIER_NAMES)} tier policies (device, host, disk), got {len(policies)}")
        for tier, policy in enumerate(policies):
            for attr in ("touch", "entries", "log"):
                if not hasattr(policy, attr):
                    raise TypeError(f"the {TIER_NAMES[tier]} tier's scheduler has no {attr!r}")
            if len(policy.entries):
                raise ValueError(f"the {TIER_NAMES[tier]} tier's scheduler already holds entries: pass a fresh one")
            if rule.exclusive and tier > DEVICE and not can_discard(policy):
                raise ValueError(
                    f"the {rule.name!r} rule takes a block out of the {TIER_NAMES[tier]} tier when it is brought up; "
                    f"{type(policy).__name__} cannot give a block back (use lru or fifo below the device, "
                    "or an inclusive rule: write_through, write_back, write_through_selective)")
        self.policies = list(policies)
        self.rule = rule
        self.costs = costs
        self.num_tiers = len(policies)
        self.stats = TierStats()
        self._recompute_s = costs.recompute_s if costs else 0.0
        self._load_s = costs.load_s(self.num_tiers) if costs else (0.0,) * self.num_tiers
        # Only rules that copy down early are asked after every touch (the others never are), and
        # a rule that keeps the base `on_evict` (one tier down) is not asked per eviction.
        self._copies_down = type(rule).copy_down is not PlacementRule.copy_down
        self._one_tier_down = type(rule).on_evict is PlacementRule.on_evict
        self.record_steps = record_steps
        self._entries = [p.entries for p in policies]
        self._lower = list(enumerate(self._entries))[DEVICE + 1:]  # (tier, entries) below the device
        # The device is touched with the request's structure where its policy reads it (GDSF's depth).
        self._device_in_request = getattr(policies[DEVICE], "touch_in_request", None)
        self.touches: Dict[Hashable, int] = {}  # key -> requests that touched it (BlockInfo.hits)
        self._log_pos = [len(p.log) for p in policies]
        self._steps: List[Step] = []
        self._depth = 1

    # -- reading --------------------------------------------------------------------------------
    def tier_of(self, key: Hashable) -> Optional[int]:
        """The fastest tier holding `key`, or None."""
        for tier, policy in enumerate(self.policies):
            if key in policy.entries:
                return tier
        return None

    def prefix_tiers(self, keys: Sequence[Hashable]) -> List[int]:
        """The tier of each leading key held somewhere, at arrival (stops at the first miss)."""
        out = []
        for key in keys:
            tier = self.tier_of(key)
            if tier is None:
                break
            out.append(tier)
        return out

    def info(self, key: Hashable) -> BlockInfo:
        return BlockInfo(key, self.touches.get(key, 0), self._depth, self.num_tiers, self._recompute_s, self._load_s)

    # -- one request ----------------------------------------------------------------------------
    def serve(self, keys: Sequence[Hashable], num_loaded: Optional[int] = None) -> Tuple[List[int], List[Step]]:
        """Touch `keys` (one request, head to tail); return its prefix tiers and the steps to carry out.

        The first `num_loaded` keys (default: all prefix hits) held below the device are copied
        up; a later key found below was recomputed by the request, and its fresh copy is kept.
        A policy or rule that raises mid-request leaves the request half served, as a scheduler
        that raises inside the engine does; the keys themselves are checked before anything changes.
        """
        for key in keys:
            hash(key)  # TypeError for an unhashable key, before anything changes
        tiers = self.prefix_tiers(keys)
        num_loaded = len(tiers) if num_loaded is None else min(num_loaded, len(tiers))
        stats = self.stats
        stats.requests += 1
        stats.block_refs += len(keys)
        stats.prefix_hits.update(tiers)
        self._steps = []
        device = self.policies[DEVICE]
        begin_request = getattr(device, "begin_request", None)
        if begin_request is not None:
            begin_request(list(keys))
        for index, key in enumerate(keys):
            self._depth = index + 1
            at_arrival = tiers[index] if index < len(tiers) else None
            self._touch(key, at_arrival, loaded=index < num_loaded, last=index == len(keys) - 1)
        steps, self._steps = self._steps, []
        return tiers, steps

    def _touch(self, key: Hashable, at_arrival: Optional[int], loaded: bool, last: bool) -> None:
        """Touch one key of the request; `at_arrival`: the tier it was in when the request arrived."""
        touches = self.touches
        touches[key] = touches.get(key, 0) + 1
        below = [tier for tier, entries in self._lower if key in entries]
        came_from = None
        if below and key not in self._entries[DEVICE]:
            # A key on the device at arrival that an earlier key of this request pushed down is still
            # in the request's own block: nothing to copy up, the device takes that block back.
            if at_arrival != DEVICE:
                if loaded:
                    came_from = below[0]
                    self.stats.moves[came_from, DEVICE] += 1
                else:
                    self.stats.recomputed_with_copy += 1
            if self.rule.exclusive:
                for tier in below:  # it goes up: exclusive tiers keep one copy
                    self._discard(tier, key)
                below = []
        for tier in below:  # inclusive: the lower copies are used too (their policies see a hit)
            self._policy_touch(tier, key)
        for op, event_key in self._policy_touch(DEVICE, key, last=last):
            if op == EVICT:
                self._left(event_key, DEVICE, data_at=DEVICE)
            elif op == ADD:
                self._step(ADOPT, key, came_from)
            elif op == SKIP:  # the device's policy bypassed it: it leaves the device at once
                self._step(ADOPT, key, came_from)
                self._left(key, DEVICE, data_at=DEVICE)
        if self._copies_down and self.num_tiers > 1 and key in self.policies[DEVICE].entries \
                and not self._held_below(key, DEVICE) and self.rule.copy_down(self.info(key)):
            self._place(key, DEVICE + 1, data_at=DEVICE)

    # -- moving blocks --------------------------------------------------------------------------
    def _held_below(self, key: Hashable, tier: int) -> bool:
        for entries in self._entries[tier + 1:]:
            if key in entries:
                return True
        return False

    def _step(self, op: str, key: Hashable, src: Optional[int], dst: Optional[int] = None) -> None:
        if self.record_steps:
            self._steps.append(Step(op, key, src, dst))

    def _left(self, key: Hashable, tier: int, data_at: int) -> None:
        """`key` left `tier` (its policy evicted or refused it); its data is still in tier `data_at`."""
        if not self._held_below(key, tier):
            if self._one_tier_down:
                target = tier + 1 if tier + 1 < self.num_tiers else None
            else:
                target = self.rule.on_evict(self.info(key), tier)
            if target is None:
                self.stats.drops[tier] += 1
            else:
                if not tier < target < self.num_tiers:
                    raise ValueError(f"{self.rule!r} moved a block from the {TIER_NAMES[tier]} tier to tier {target}")
                self._place(key, target, data_at=data_at)
        if data_at == tier:
            self._step(FREE, key, tier)

    def _place(self, key: Hashable, tier: int, data_at: int) -> None:
        """Copy `key` (its data in tier `data_at`) into `tier`, whose policy makes room first."""
        for op, event_key in self._policy_touch(tier, key):
            if op == EVICT:
                self._left(event_key, tier, data_at=tier)
            elif op == ADD:
                self._step(COPY, key, data_at, tier)
                self.stats.moves[data_at, tier] += 1
            elif op == SKIP:  # this tier refused it: try further down
                self._left(key, tier, data_at=data_at)

    def _policy_touch(self, tier: int, key: Hashable, last: bool = False) -> Iterable[Tuple[str, Hashable]]:
        policy = self.policies[tier]
        if tier == DEVICE and self._device_in_request is not None:
            self._device_in_request(key, 1, self._depth, last)
        else:
            policy.touch(key, 1)
        log, start = policy.log, self._log_pos[tier]
        self._log_pos[tier] = len(log)
        # `events` slices the log: later touches of other tiers (other logs) cannot change what it yields
        return log.events(start) if isinstance(log, EventLog) else list(iter_events(log, start))

    def _discard(self, tier: int, key: Hashable) -> None:
        policy = self.policies[tier]
        if callable(getattr(policy, "discard", None)):
            policy.discard(key)
        else:
            policy.current_bytes -= policy.entries.pop(key)
        self._step(FREE, key, tier)

    # -- the report -----------------------------------------------------------------------------
    def report(self, block_bytes: int) -> Dict[str, Any]:
        """Hits per tier, blocks and bytes moved each way, drops: plain numbers for JSON."""
        s = self.stats
        hits = {TIER_NAMES[t]: s.prefix_hits.get(t, 0) for t in range(self.num_tiers)}
        total = sum(hits.values())
        moves = {move_name(src, dst): n for (src, dst), n in sorted(s.moves.items())}
        return {
            "requests": s.requests, "block_refs": s.block_refs, "prefix_hits": total,
            "prefix_hit_rate": total / s.block_refs if s.block_refs else 0.0,
            "prefix_hits_by_tier": hits,
            "prefix_hit_rate_by_tier": {k: v / s.block_refs if s.block_refs else 0.0 for k, v in hits.items()},
            "blocks_moved": moves, "bytes_moved": {k: n * block_bytes for k, n in moves.items()},
            "drops": {TIER_NAMES[t]: s.drops.get(t, 0) for t in range(self.num_tiers)},
            "recomputed_with_copy": s.recomputed_with_copy,
            "blocks_held": {TIER_NAMES[t]: len(p.entries) for t, p in enumerate(self.policies)},
        }
