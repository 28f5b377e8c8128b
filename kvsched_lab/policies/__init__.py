"""The policy zoo: every eviction policy the course compares, behind one API.

``make_policy("lru", capacity_bytes)`` builds one by name; `POLICIES` maps each name to its
class. All share `Policy` (base.py): ``touch``, ``schedule``, ``snapshot``, ``entries``,
``log``, ``hits`` and ``replay_requests`` for trace replays. Subclass `Policy` to write your own.
"""
from __future__ import annotations

from typing import Dict, Hashable, Optional, Sequence

from kvsched_lab.policies.arc import ARCPolicy
from kvsched_lab.policies.base import Policy
from kvsched_lab.policies.belady import BeladyPolicy
from kvsched_lab.policies.fifo import FIFOPolicy
from kvsched_lab.policies.gdsf import GDSFPolicy
from kvsched_lab.policies.lfu import LFUPolicy
from kvsched_lab.policies.lru import LRUPolicy
from kvsched_lab.policies.s3fifo import S3FIFOPolicy
from kvsched_lab.policies.seed import SeedPolicy
from kvsched_lab.policies.seed_compact import SeedCompactPolicy

POLICIES: Dict[str, type] = {
    cls.name: cls
    for cls in (
        FIFOPolicy, LRUPolicy, LFUPolicy, SeedPolicy, SeedCompactPolicy,
        GDSFPolicy, S3FIFOPolicy, ARCPolicy, BeladyPolicy,
    )
}


def make_policy(name: str, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> Policy:
    """Build the policy registered as `name`; `future` (every key to be touched, in order) is
    required by ``belady`` and ignored by the others."""
    try:
        cls = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; valid names: {', '.join(POLICIES)}") from None
    return cls(capacity_bytes, future=future)


__all__ = [
    "ARCPolicy", "BeladyPolicy", "FIFOPolicy", "GDSFPolicy", "LFUPolicy", "LRUPolicy",
    "POLICIES", "Policy", "S3FIFOPolicy", "SeedCompactPolicy", "SeedPolicy", "make_policy",
]
