"""KV machinery beyond one request at a time: ref-counted blocks shared by running requests, and a concurrent engine.

`ConcurrentEngine` (concurrent.py) prefills and decodes several requests at once on a
`KVBlockPool`, pins the blocks running requests read, and preempts the most recently admitted
request when a step runs out of blocks; `RefCountedBlockManager` (block_manager.py) keeps the
reference counts, the prefix cache and the free-block queue.
"""
from kvsched_lab.kv.block_manager import RefCountedBlockManager
from kvsched_lab.kv.concurrent import ConcurrentConfig, ConcurrentEngine, ConcurrentReport, run_concurrent

__all__ = ["ConcurrentConfig", "ConcurrentEngine", "ConcurrentReport", "RefCountedBlockManager", "run_concurrent"]
