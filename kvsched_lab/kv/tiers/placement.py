"""Placement rules: when a KV block is copied to a slower tier, and where an evicted block goes.

A tier hierarchy (hierarchy.py) asks its rule three questions, and nothing else:

- ``exclusive``: does a block brought up to the device leave the tier it came from?
  (exclusive tiers hold each block once; inclusive tiers keep the lower copy as a backup)
- ``copy_down(block)``: after a request touched a block on the device, copy it to the host
  tier now (if it has no copy there yet)?
- ``on_evict(block, tier)``: a block leaves `tier` and has no copy in any lower tier: the
  index of the tier to move it to (``tier + 1`` or further down), or None to drop it.

`BlockInfo` is what a rule may look at: hits so far, position in the prompt, size, and the
measured costs of moving it against recomputing it. The rules below are SGLang HiCache's three
write policies (``--hicache-write-policy``: write_through, SGLang's default, write_back,
write_through_selective) and the exclusive demote-on-eviction / promote-on-hit hierarchy, the
course's default, which is none of SGLang's (its tiers are always inclusive); `ChooseOnEvict` lets a
learner's function decide per evicted block (notebook 09's practice TODO).
"""
from __future__ import annotations

from typing import Callable, Hashable, NamedTuple, Optional, Tuple

DEVICE, HOST, DISK = 0, 1, 2
TIER_NAMES = ("device", "host", "disk")


class BlockInfo(NamedTuple):
    """What a placement rule knows about one block when it decides (a tuple: cheap to build per eviction)."""

    key: Hashable  # the block's key (a chain hash: it stands for the whole prefix up to it)
    hits: int  # requests that touched the block so far, the one that computed it included
    depth: int  # 1-based place of the block in the prompt that touched it last
    num_tiers: int  # tiers in the hierarchy: 1 (device only), 2 (+ host) or 3 (+ disk)
    recompute_s: float  # seconds to recompute the block's tokens (0.0 when no costs are given)
    load_s: Tuple[float, ...]  # seconds to bring the block back to the device from each tier (device: 0.0)


class PlacementRule:
    """Base rule: nothing is copied down early, and an evicted block moves one tier down."""

    name = "base"
    exclusive = False

    def copy_down(self, block: BlockInfo) -> bool:
        return False

    def on_evict(self, block: BlockInfo, tier: int) -> Optional[int]:
        below = tier + 1
        return below if below < block.num_tiers else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Demote(PlacementRule):
    """Exclusive tiers: an evicted block moves one tier down, a hit brings it up and out of that tier.

    With LRU in every tier this is one LRU list cut into pieces: the device holds the most
    recent blocks, the host the next ones, so the total hits equal one LRU cache of the summed
    capacity (tests/test_tiers.py checks it on a trace).
    """

    name = "demote"
    exclusive = True


class WriteBack(PlacementRule):
    """SGLang ``write_back``: copy a block to the host only when it is evicted from the device.

    Inclusive: a block brought back up keeps its host copy, so evicting it again moves nothing.
    """

    name = "write_back"


class SelectiveWriteThrough(PlacementRule):
    """SGLang ``write_through_selective``: copy a block down once it has been hit `min_hits` times.

    A block that never reached `min_hits` is dropped when the device evicts it. SGLang 0.5.23 counts
    a node's hits (``_inc_hit_count_and_check`` in ``mem_cache/unified_cache/unified_tree_core.py``)
    and backs it up when the count reaches ``write_through_threshold``: 1 for ``write_through``, 2
    for ``write_through_selective`` (set in ``mem_cache/unified_radix_cache.py``).
    """

    name = "write_through_selective"

    def __init__(self, min_hits: int = 2) -> None:
        if isinstance(min_hits, bool) or not isinstance(min_hits, int) or min_hits < 1:
            raise ValueError(f"min_hits must be an int >= 1, got {min_hits!r}")
        self.min_hits = min_hits

    def copy_down(self, block: BlockInfo) -> bool:
        return block.hits >= self.min_hits

    def on_evict(self, block: BlockInfo, tier: int) -> Optional[int]:
        if tier == DEVICE:
            return None  # not selected for the host, or its host copy is gone: recompute next time
        return super().on_evict(block, tier)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(min_hits={self.min_hits})"


class WriteThrough(SelectiveWriteThrough):
    """SGLang ``write_through``: copy every block to the host as soon as it is computed."""

    name = "write_through"

    def __init__(self) -> None:
        super().__init__(min_hits=1)

    def __repr__(self) -> str:
        return "WriteThrough()"


class ChooseOnEvict(PlacementRule):
    """A function decides where each block evicted from the device goes: ``"host"``, ``"disk"`` or ``"drop"``.

    ``choose(block: BlockInfo) -> str``. Exclusive like `Demote`; a block evicted from the host
    still moves to the disk when there is one.
    """

    name = "choose"
    exclusive = True
    CHOICES = {"host": HOST, "disk": DISK, "drop": None}

    def __init__(self, choose: Callable[[BlockInfo], str]) -> None:
        if not callable(choose):
            raise TypeError(f"choose must be a function of a BlockInfo, got {choose!r}")
        self.choose = choose

    def on_evict(self, block: BlockInfo, tier: int) -> Optional[int]:
        if tier != DEVICE:
            return super().on_evict(block, tier)
        choice = self.choose(block)
        if choice not in self.CHOICES:
            raise ValueError(f"the placement function returned {choice!r}; return 'host', 'disk' or 'drop'")
        target = self.CHOICES[choice]
        if target is not None and target >= block.num_tiers:
            raise ValueError(f"the placement function chose {choice!r}, but this hierarchy has no {choice} tier")
        return target

    def __repr__(self) -> str:
        return f"ChooseOnEvict({getattr(self.choose, '__name__', self.choose)!r})"


WRITE_POLICIES = {"demote": Demote, "write_back": WriteBack, "write_through": WriteThrough,
                  "write_through_selective": SelectiveWriteThrough}


def make_rule(name: str, min_hits: int = 2) -> PlacementRule:
    """The rule registered as `name` (`WRITE_POLICIES`); `min_hits` for write_through_selective."""
    if name not in WRITE_POLICIES:
        raise ValueError(f"unknown write policy {name!r}; valid names: {', '.join(WRITE_POLICIES)}")
    if name == "write_through_selective":
        return SelectiveWriteThrough(min_hits)
    return WRITE_POLICIES[name]()
