"""The policy zoo: every eviction policy the course compares, behind one API.

``make_policy("lru", capacity_bytes)`` builds one by name; `POLICIES` maps each name to its
class. All share `Policy` (base.py): ``touch``, ``schedule``, ``snapshot``, ``entries``,
``log``, ``hits`` and ``replay_requests`` for trace replays. Subclass `Policy` to write your own.

``seed`` and ``seed-compact`` are the chapter's finished scheduler, so they answer the course's
five TODOs. The student release (``kvsched release``) leaves their modules out; the registry is
built from the modules present, and `WITHHELD` names the policies whose module is missing, so
``make_policy("seed", ...)`` there says why it is absent instead of failing on an import.
"""
from __future__ import annotations

import importlib
from typing import Dict, Hashable, Optional, Sequence

from kvsched_lab.sim.policies.arc import ARCPolicy
from kvsched_lab.sim.policies.arc_prefix import PrefixARCPolicy
from kvsched_lab.sim.policies.base import Policy
from kvsched_lab.sim.policies.belady import BeladyPolicy
from kvsched_lab.sim.policies.cacheus import CacheusPolicy
from kvsched_lab.sim.policies.fifo import FIFOPolicy
from kvsched_lab.sim.policies.gdsf import GDSFPolicy
from kvsched_lab.sim.policies.lecar import LeCaRPolicy
from kvsched_lab.sim.policies.lecar_prefix import PrefixLeCaRPolicy
from kvsched_lab.sim.policies.lfu import LFUPolicy
from kvsched_lab.sim.policies.lru import LRUPolicy
from kvsched_lab.sim.policies.radix import RadixPolicy
from kvsched_lab.sim.policies.s3fifo import S3FIFOPolicy
from kvsched_lab.sim.policies.s3fifo_prefix import PrefixS3FIFOPolicy
from kvsched_lab.sim.policies.s3fifo_repeat import RepeatS3FIFOPolicy
from kvsched_lab.sim.policies.sieve import SievePolicy
from kvsched_lab.sim.policies.vllm import VLLMPolicy
from kvsched_lab.sim.policies.wtinylfu import WTinyLFUPolicy

# Policies the student release withholds: registry name -> (module, class name).
CHAPTER_POLICIES: Dict[str, tuple] = {
    "seed": ("kvsched_lab.sim.policies.seed", "SeedPolicy"),
    "seed-compact": ("kvsched_lab.sim.policies.seed_compact", "SeedCompactPolicy"),
}


def _optional(module: str, cls_name: str) -> Optional[type]:
    """`module.cls_name`, or None when the module itself is absent (never hides other errors)."""
    try:
        return getattr(importlib.import_module(module), cls_name)
    except ModuleNotFoundError as e:
        if e.name not in {m for m, _ in CHAPTER_POLICIES.values()}:
            raise
        return None


_chapter = {name: _optional(*where) for name, where in CHAPTER_POLICIES.items()}
# Names of the chapter's policies whose module is missing (the student release): both, or none.
WITHHELD = tuple(name for name, cls in _chapter.items() if cls is None)
WITHHELD_MESSAGE = ("policy {name!r} is withheld in the student release: it is the chapter's finished "
                    "scheduler, i.e. the answers to the five TODOs. Your own version is `lab.my_scheduler()` "
                    "(import kvsched_lab.course as lab) once notebooks 02-05 pass")

POLICIES: Dict[str, type] = {
    cls.name: cls
    for cls in (
        FIFOPolicy, LRUPolicy, LFUPolicy, _chapter["seed"], _chapter["seed-compact"],
        GDSFPolicy, SievePolicy, S3FIFOPolicy, PrefixS3FIFOPolicy, RepeatS3FIFOPolicy, ARCPolicy, PrefixARCPolicy,
        LeCaRPolicy, PrefixLeCaRPolicy, CacheusPolicy, WTinyLFUPolicy, VLLMPolicy, RadixPolicy, BeladyPolicy,
    )
    if cls is not None
}


def make_policy(name: str, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> Policy:
    """Build the policy registered as `name`; `future` (every key to be touched, in order) is
    required by ``belady`` and ignored by the others."""
    try:
        cls = POLICIES[name]
    except KeyError:
        if name in WITHHELD:
            raise ValueError(WITHHELD_MESSAGE.format(name=name)) from None
        raise ValueError(f"unknown policy {name!r}; valid names: {', '.join(POLICIES)}") from None
    return cls(capacity_bytes, future=future)


__all__ = [
    "ARCPolicy", "BeladyPolicy", "CHAPTER_POLICIES", "CacheusPolicy", "FIFOPolicy", "GDSFPolicy", "LFUPolicy", "LRUPolicy",
    "LeCaRPolicy", "POLICIES", "Policy", "PrefixARCPolicy", "PrefixLeCaRPolicy", "PrefixS3FIFOPolicy", "RadixPolicy", "RepeatS3FIFOPolicy",
    "S3FIFOPolicy", "SievePolicy", "VLLMPolicy", "WITHHELD", "WTinyLFUPolicy", "make_policy",
]
if _chapter["seed"] is not None:
    SeedPolicy = _chapter["seed"]
    __all__.append("SeedPolicy")
if _chapter["seed-compact"] is not None:
    SeedCompactPolicy = _chapter["seed-compact"]
    __all__.append("SeedCompactPolicy")
