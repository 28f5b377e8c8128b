"""Caches that know whose blocks they hold, and `tenant_replay`: per-tenant hit rates and fairness.

Each policy here is a `Policy` (the zoo's API) that is also told, before a request's first touch,
which tenant sends it (``begin_tenant(tenant)``). A block belongs to the tenant whose request
brought it in (a simplification: a block two tenants share is charged to the first).

- `QuotaLRU`: static quotas. Each tenant owns a fixed number of blocks and evicts only its own,
  least recently used first; a tenant with a quota of 0 is not cached at all.
- `PriorityLRU`: SGLang's priority-aware eviction (``--radix-eviction-policy priority``;
  ``PriorityStrategy`` in ``python/sglang/srt/mem_cache/evict_policy.py``): the victim is the
  lowest ``(priority, last_access_time)``. SGLang's ``_insert_helper`` (``radix_cache.py``) sets
  each node on a request's path to the max of its priority and the request's, so a block keeps
  the highest priority that ever used it. SGLang evicts radix-tree leaves; here every block is a
  candidate, as in the course's LRU. SGLang keeps a larger value when evicting; the course's
  classes use vLLM's convention (0 is most urgent), so a block's rank is ``-service.priority``.
- `FairShareLRU`: a fair share in the spirit of the Virtual Token Counter (Sheng et al., OSDI
  2024), which counts the service each client received and serves the one with the smallest
  counter. Here the counter is the cache room a tenant holds, divided by its weight, and the
  victim is the least recently used block of the tenant with the largest counter: no tenant
  loses blocks while another holds more than its weighted share, and room a tenant does not use
  goes to the others (unlike quotas).
- `weighted_chapter(cls)`: the chapter's scheduler (your class or the library's ``seed``) with
  its score multiplied by the weight of the tenant touching the block.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Hashable, List, Mapping, Optional, Sequence

from kvsched_lab.sim.events import EVICT
from kvsched_lab.sim.policies.base import Policy, prefix_hits
from kvsched_lab.sim.serving.tenants import Tenant, Workload


class TenantPolicy(Policy):
    """A policy that is told each request's tenant; blocks are owned by the tenant that inserted them."""

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.tenant: Optional[Tenant] = None  # the tenant of the request being served
        self.owner: Dict[Hashable, str] = {}  # block -> tenant name
        self.used: Dict[str, int] = {}  # tenant name -> bytes it holds

    def begin_tenant(self, tenant: Tenant) -> None:
        self.tenant = tenant
        self.used.setdefault(tenant.name, 0)

    def on_insert(self, key: Hashable, size: int) -> None:
        name = self.tenant.name if self.tenant is not None else ""
        self.owner[key] = name
        self.used[name] = self.used.get(name, 0) + size

    def on_evict(self, key: Hashable, size: int) -> None:
        self.used[self.owner.pop(key)] -= size

    def _evict_now(self, key: Hashable) -> None:
        """Evict `key` outside `touch`'s loop (a quota), with the same bookkeeping and log."""
        size = self.entries.pop(key)
        self.current_bytes -= size
        self.on_evict(key, size)
        self.log.emit(EVICT, key)


class PerTenantLRU(TenantPolicy):
    """One LRU order per tenant (``lru[name]``: its blocks, least recently used first); subclasses pick whose."""

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.lru: Dict[str, OrderedDict] = {}

    def begin_tenant(self, tenant: Tenant) -> None:
        super().begin_tenant(tenant)
        self.lru.setdefault(tenant.name, OrderedDict())

    def on_hit(self, key: Hashable) -> None:
        self.lru[self.owner[key]].move_to_end(key)

    def on_insert(self, key: Hashable, size: int) -> None:
        super().on_insert(key, size)
        self.lru[self.owner[key]][key] = None

    def on_evict(self, key: Hashable, size: int) -> None:
        del self.lru[self.owner[key]][key]
        super().on_evict(key, size)


class QuotaLRU(PerTenantLRU):
    """Static quotas: each tenant evicts only its own least recently used blocks (module docstring)."""

    name = "quota-lru"

    def __init__(self, capacity_bytes: int, quotas: Mapping[str, int], *,
                 future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        if any(q < 0 for q in quotas.values()) or sum(quotas.values()) > capacity_bytes:
            raise ValueError(f"quotas must be >= 0 and sum to at most the capacity ({capacity_bytes}), got {dict(quotas)}")
        self.quotas = dict(quotas)

    def on_miss(self, key: Hashable, size: int) -> bool:
        name = self.tenant.name
        if name not in self.quotas:
            raise ValueError(f"tenant {name!r} has no quota; quotas: {sorted(self.quotas)}")
        if size > self.quotas[name]:
            return False  # a quota of 0 (or too small for one block): this tenant is not cached
        own = self.lru[name]
        while self.used[name] + size > self.quotas[name]:
            self._evict_now(next(iter(own)))
        return True

    def victim(self) -> Hashable:
        # `on_miss` keeps each tenant within its quota and the quotas within the capacity, so `touch`
        # never needs a victim; `Policy` requires one all the same: the largest tenant's oldest block.
        return next(iter(max(self.lru.values(), key=len)))


class PriorityLRU(TenantPolicy):
    """SGLang's priority eviction on blocks: lowest rank first, least recently used within a rank."""

    name = "priority-lru"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.rank: Dict[Hashable, int] = {}  # block -> the highest rank that used it
        self.levels: Dict[int, OrderedDict] = {}  # rank -> its blocks, least recently used first

    def _request_rank(self) -> int:
        return -self.tenant.service.priority if self.tenant is not None else 0

    def _place(self, key: Hashable, rank: int) -> None:
        self.rank[key] = rank
        self.levels.setdefault(rank, OrderedDict())[key] = None

    def on_hit(self, key: Hashable) -> None:
        old = self.rank[key]
        del self.levels[old][key]
        self._place(key, max(old, self._request_rank()))  # SGLang: max(node.priority, priority)

    def on_insert(self, key: Hashable, size: int) -> None:
        super().on_insert(key, size)
        self._place(key, self._request_rank())

    def on_evict(self, key: Hashable, size: int) -> None:
        del self.levels[self.rank.pop(key)][key]
        super().on_evict(key, size)

    def victim(self) -> Hashable:
        lowest = min(rank for rank, od in self.levels.items() if od)
        return next(iter(self.levels[lowest]))


class FairShareLRU(PerTenantLRU):
    """Evict from the tenant holding the most room per unit of weight, its least recently used block."""

    name = "fair-share-lru"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.weight: Dict[str, float] = {}

    def begin_tenant(self, tenant: Tenant) -> None:
        super().begin_tenant(tenant)
        self.weight[tenant.name] = tenant.weight

    def victim(self) -> Hashable:
        # The largest virtual counter (room held / weight); ties go to the tenant named first.
        name = max((n for n, od in self.lru.items() if od), key=lambda n: self.used[n] / self.weight[n])
        return next(iter(self.lru[name]))


def weighted_chapter(cls: type) -> type:
    """`cls` (a chapter-style scheduler) whose score is multiplied by the touching tenant's weight.

    The score itself is `cls`'s own (``super()._score``): your TODO score, or the library's."""

    class TenantWeighted(cls):  # type: ignore[misc, valid-type]
        tenant_weight = 1.0  # replaced per instance by begin_tenant; a float, so sharing it is harmless

        def begin_tenant(self, tenant: Tenant) -> None:
            self.tenant_weight = tenant.weight

        def _score(self, *args: Any, **kwargs: Any) -> float:
            return self.tenant_weight * super()._score(*args, **kwargs)

    if isinstance(cls, type) and issubclass(cls, Policy):
        TenantWeighted._replay = Policy._replay  # the hook-by-hook loop: its fast loop inlines the score
    TenantWeighted.__name__ = TenantWeighted.__qualname__ = f"{cls.__name__}TenantWeighted"
    return TenantWeighted


@dataclass
class TenantReplayResult:
    """Prefix hits per tenant of one tenant replay (the course's protocol: blocks, at arrival)."""

    policy: str
    capacity_blocks: int
    block_refs: Dict[str, int]  # tenant -> block references of its requests
    prefix_hits: Dict[str, int]  # tenant -> leading cached blocks of its requests
    per_request_hits: List[int] = field(repr=False, default_factory=list)

    @property
    def hit_rate(self) -> Dict[str, float]:
        return {t: (self.prefix_hits[t] / n if n else 0.0) for t, n in self.block_refs.items()}

    @property
    def overall_hit_rate(self) -> float:
        refs = sum(self.block_refs.values())
        return sum(self.prefix_hits.values()) / refs if refs else 0.0


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index ``(sum x)^2 / (n * sum x^2)``: 1 when all are equal, 1/n when one has everything."""
    xs = [float(x) for x in values]
    if not xs or any(x < 0 for x in xs):
        raise ValueError(f"Jain's index needs one or more values >= 0, got {values!r}")
    squares = sum(x * x for x in xs)
    return 1.0 if squares == 0 else sum(xs) ** 2 / (len(xs) * squares)


def tenant_replay(workload: Workload, policy: Any, capacity_blocks: int, *, name: Optional[str] = None) -> TenantReplayResult:
    """Replay `workload` (one block = one byte) through `policy`, counting prefix hits per tenant.

    `policy` is a zoo name, a class or factory called with the capacity, or a fresh instance. The
    protocol is `kvsched_lab.sim.replay`'s: a request's prefix hits are counted at its arrival,
    then its blocks are touched head to tail; a tenant-aware policy hears ``begin_tenant`` first.
    """
    from kvsched_lab.sim.replay import _build  # the replay's own way of building a policy

    if isinstance(capacity_blocks, bool) or not isinstance(capacity_blocks, int) or capacity_blocks <= 0:
        raise ValueError(f"capacity_blocks must be a positive int, got {capacity_blocks!r}")
    sim, built_name = _build(policy, capacity_blocks, [r.hash_ids for r in workload.requests])
    contains = sim.entries.__contains__
    tell: Optional[Callable[[Tenant], None]] = getattr(sim, "begin_tenant", None)
    in_request = getattr(sim, "touch_in_request", None)
    begin = getattr(sim, "begin_request", None)
    refs = {t: 0 for t in workload.tenants}
    hits = {t: 0 for t in workload.tenants}
    per_request = []
    for r, t in zip(workload.requests, workload.tenant_of):
        ids = r.hash_ids
        if tell is not None:
            tell(workload.tenants[t])
        h = prefix_hits(contains, ids)
        per_request.append(h)
        hits[t] += h
        refs[t] += len(ids)
        if in_request is not None:
            begin(ids)
            for depth, key in enumerate(ids, 1):
                in_request(key, 1, depth, depth == len(ids))
        else:  # a chapter-style scheduler: plain touches
            for key in ids:
                sim.touch(key, 1)
    return TenantReplayResult(name or built_name, capacity_blocks, refs, hits, per_request)
