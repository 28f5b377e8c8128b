"""KV machinery beyond one request at a time: ref-counted blocks shared by running requests, and a concurrent engine.

`ConcurrentEngine` (concurrent.py) prefills and decodes several requests at once on a
`KVBlockPool`, pins the blocks running requests read, and preempts the most recently admitted
request when a step runs out of blocks; `RefCountedBlockManager` (block_manager.py) keeps the
reference counts, the prefix cache and the free-block queue.

`tiers/` keeps KV blocks in device, host and disk tiers (notebook 09): `HostBlockPool` and
`DiskBlockStore` (stores.py), placement rules (placement.py), the torch-free `TierHierarchy`
(hierarchy.py), `TieredPrefixCacheEngine` on real blocks (engine.py), trace and real-KV replays,
measured costs and the break-even model; its `__init__.py` says which file holds what.
The rest of this folder: `block_pool.py` (the pool tensor and its allocator), `model.py` (the tiny
decoder), `model_configs.py` (real models' KV sizes), `device.py`, `engine.py` (the device-only
prefix-cache engine), `real_kv.py` (its trace replay).
"""
from kvsched_lab.kv.block_manager import RefCountedBlockManager
from kvsched_lab.kv.concurrent import ConcurrentConfig, ConcurrentEngine, ConcurrentReport, run_concurrent

__all__ = ["ConcurrentConfig", "ConcurrentEngine", "ConcurrentReport", "RefCountedBlockManager", "run_concurrent"]
