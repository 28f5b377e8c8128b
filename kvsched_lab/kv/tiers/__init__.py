"""KV blocks in three tiers (device memory, host memory, disk) and the rules that move them.

- placement.py: the rules, each a small class: `Demote` (exclusive: demote on eviction, promote
  on hit), SGLang's `WriteThrough`, `WriteBack`, `SelectiveWriteThrough`, and `ChooseOnEvict`
  (a function decides per evicted block);
- hierarchy.py: `TierHierarchy`, torch-free: which block is in which tier, each tier run by any
  course policy; it returns the steps (adopt, copy, free) an engine carries out;
- replay.py: `tier_replay`, a whole trace through the hierarchy (counts, no tensors);
- replay_cache.py: when `tier_replay` is cached (``KVSCHED_REPLAY_CACHE``): its key, and the
  checks a report read back must pass;
- stores.py: `HostBlockPool` (the device pool's layout in host memory, pinned on CUDA) and
  `DiskBlockStore` (a memory-mapped file of blocks), each with a capacity in blocks;
- engine.py: `TieredPrefixCacheEngine`, the prefix-cache engine on real blocks in all tiers;
- real_replay.py: `tiered_real_kv_replay`, a trace slice through that engine, logits checked;
- roundtrip.py: `round_trip_check`, one prompt served back from the host and the disk (tests, GPU check);
- costs.py: `TierCosts`, seconds per block for each move and for recomputing;
- measure.py: those seconds measured on this machine for the tiny model, and `prefix_ttft` (one
  prompt timed by where its prefix is);
- breakeven.py: for real models (KV bytes vs FLOPs per token) and links, when moving beats recomputing.
"""
from kvsched_lab.kv.tiers.costs import TierCosts
from kvsched_lab.kv.tiers.hierarchy import Step, TierHierarchy
from kvsched_lab.kv.tiers.placement import (
    BlockInfo, ChooseOnEvict, Demote, PlacementRule, SelectiveWriteThrough, WriteBack, WriteThrough, make_rule,
)
from kvsched_lab.kv.tiers.replay import build_hierarchy, tier_replay

__all__ = ["BlockInfo", "ChooseOnEvict", "Demote", "PlacementRule", "SelectiveWriteThrough", "Step", "TierCosts",
           "TierHierarchy", "WriteBack", "WriteThrough", "build_hierarchy", "make_rule", "tier_replay"]
