"""Shards: a deterministic 1/N of a class, so N machines (Slurm array tasks, Kubernetes pods) share it.

``--shard K/N`` (0 <= K < N, the numbering of ``$SLURM_ARRAY_TASK_ID`` and of a Kubernetes
Indexed Job's ``$JOB_COMPLETION_INDEX``) picks the learners whose rank, in the order of the
SHA-256 of their names, is K modulo N. The rank depends only on the set of names, never on the
order a folder lists them in or the arguments are given, so every task of one array computes the
same split, a re-run gets the same shard, and shard sizes differ by at most one. A name given
twice lands in one shard (once). ``kvsched grade merge`` (merge.py) puts the shards back together.
"""
from __future__ import annotations

import hashlib
import re
from typing import Iterable, List, Optional, Set, Tuple

Shard = Tuple[int, int]  # (K, N)


def parse_shard(text: str) -> Shard:
    """``"K/N"`` as (K, N); ValueError naming what is wrong (checked before any work)."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not m:
        raise ValueError(f"--shard must be K/N with whole numbers, 0 <= K < N (e.g. 0/4), not {text!r}")
    k, n = int(m.group(1)), int(m.group(2))
    if n < 1 or k >= n:
        raise ValueError(f"--shard {text}: K counts from 0 and must be below N (0/{max(n, 1)} ... "
                         f"{max(n, 1) - 1}/{max(n, 1)})")
    return k, n


def _rank_key(name: str) -> Tuple[str, str]:
    return hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest(), name


def shard_members(names: Iterable[str], shard: Optional[Shard]) -> Set[str]:
    """The names in `shard` (all of them for None)."""
    unique = sorted(set(names), key=_rank_key)
    if shard is None:
        return set(unique)
    k, n = shard
    return {name for rank, name in enumerate(unique) if rank % n == k}


def split(names: Iterable[str], n: int) -> List[Set[str]]:
    """Every shard's members, shard 0 first."""
    names = list(names)
    return [shard_members(names, (k, n)) for k in range(n)]
