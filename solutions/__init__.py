"""The hidden reference for kvsched-lab: the chapter's scheduler with all five TODOs filled.

Instructors keep this package; `kvsched release` leaves it out of the student bundle.
"""
from solutions.scheduler import CacheEntry, KVCacheSchedulerSim  # CacheEntry is given code, re-exported

__all__ = ["CacheEntry", "KVCacheSchedulerSim"]
