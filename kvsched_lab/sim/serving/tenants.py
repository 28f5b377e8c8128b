"""Tenants and service classes for trace requests, which carry neither: how each request gets one.

A **service class** says how urgent a request is: its priority (0 is the most urgent, as in
vLLM, where a smaller value is served first) and its time-to-first-token deadline. A **tenant**
is one customer of the server; it belongs to a class and has a weight (its share of the cache
under a fair share).

The Mooncake traces have no tenants, so `assign_tenants` derives one from the request itself:
the **conversation key** is the first block id of the prompt that is not a shared head (a block
that at least `shared_share` of all requests use, like the conversation trace's one-block system
prompt, which every request starts with). All turns of a conversation share that block (ids are
chained), so a conversation stays with one tenant. The key is hashed with SHA-256 together with
a seed into a number in [0, 1), which picks a tenant by the tenants' shares: deterministic, the
same on every machine, and independent of the request's position in the file.

`flood` makes a **noisy neighbour**: a batch tenant that sends prompts made of fresh block ids
(negative, so they never collide with a trace's), each used once: they can never hit, and under
a shared LRU they push other tenants' prefixes out.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from kvsched_lab.sim.traces import MOONCAKE_BLOCK_TOKENS, Request

SHARED_SHARE = 0.02  # a block that at least this share of requests use is a shared head, not a conversation


@dataclass(frozen=True)
class ServiceClass:
    """How urgent a request is: served by priority, judged by its deadline."""

    name: str
    priority: int  # smaller is more urgent (vLLM's convention; SGLang's default is the opposite)
    ttft_deadline_s: float  # the first token is due this many seconds after arrival

    def __post_init__(self) -> None:
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise ValueError(f"priority must be an int, got {self.priority!r}")
        if not isinstance(self.ttft_deadline_s, (int, float)) or not self.ttft_deadline_s > 0:
            raise ValueError(f"ttft_deadline_s must be a number of seconds > 0, got {self.ttft_deadline_s!r}")


@dataclass(frozen=True)
class Tenant:
    """One customer: its class, its share of the trace's conversations and its weight in a fair share."""

    name: str
    service: ServiceClass
    share: float = 1.0  # share of the trace's conversations it gets (0 for a tenant that only floods)
    weight: float = 1.0  # its share of the cache under a fair share, relative to the others

    def __post_init__(self) -> None:
        if not 0 <= self.share <= 1:
            raise ValueError(f"tenant {self.name!r}: share must be in [0, 1], got {self.share!r}")
        if not self.weight > 0:
            raise ValueError(f"tenant {self.name!r}: weight must be > 0, got {self.weight!r}")


INTERACTIVE = ServiceClass("interactive", priority=0, ttft_deadline_s=2.0)
BATCH = ServiceClass("batch", priority=1, ttft_deadline_s=30.0)


@dataclass
class Workload:
    """Requests in arrival order, each with its tenant; what every tenant and serving replay reads."""

    requests: List[Request]
    tenant_of: List[str]  # tenant name of each request, same order
    tenants: Dict[str, Tenant]  # by name

    def __post_init__(self) -> None:
        if len(self.requests) != len(self.tenant_of):
            raise ValueError(f"{len(self.requests)} requests but {len(self.tenant_of)} tenant names")
        unknown = set(self.tenant_of) - set(self.tenants)
        if unknown:
            raise ValueError(f"requests name tenants that are not defined: {sorted(unknown)}")

    def service_of(self, i: int) -> ServiceClass:
        return self.tenants[self.tenant_of[i]].service

    def counts(self) -> Dict[str, int]:
        """Requests per tenant, in the tenants' order."""
        c = Counter(self.tenant_of)
        return {name: c[name] for name in self.tenants}


def single_tenant(requests: Sequence[Request], service: ServiceClass = INTERACTIVE) -> Workload:
    """Every request from one tenant, ``"all"``: the plain replay's workload."""
    ordered = sorted(requests, key=lambda r: r.timestamp)
    return Workload(ordered, ["all"] * len(ordered), {"all": Tenant("all", service)})


def shared_heads(requests: Sequence[Request], shared_share: float = SHARED_SHARE) -> set:
    """Block ids that at least `shared_share` of the requests use (system prompts and the like)."""
    uses = Counter(i for r in requests for i in set(r.hash_ids))
    return {i for i, n in uses.items() if n >= shared_share * len(requests)}


def conversation_key(hash_ids: Sequence[int], heads: set) -> Optional[int]:
    """The first id that is not a shared head; a prompt made of shared heads only is keyed by its last id."""
    for i in hash_ids:
        if i not in heads:
            return i
    return hash_ids[-1] if hash_ids else None


def unit_hash(key: object, seed: int) -> float:
    """A number in [0, 1) from `key` and `seed`: SHA-256, so it is the same in every process and machine."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def assign_tenants(requests: Sequence[Request], tenants: Sequence[Tenant], *, seed: int = 0,
                   shared_share: float = SHARED_SHARE) -> Workload:
    """Give every request a tenant from its conversation key (module docstring); the shares must sum to 1."""
    shares = [t.share for t in tenants]
    if not tenants or abs(sum(shares) - 1.0) > 1e-9:
        raise ValueError(f"the tenants' shares must sum to 1, got {sum(shares):.6g}")
    names = [t.name for t in tenants]
    if len(set(names)) != len(names):
        raise ValueError(f"tenant names must be unique, got {names}")
    ordered = sorted(requests, key=lambda r: r.timestamp)
    heads = shared_heads(ordered, shared_share)
    bounds: List[Tuple[float, str]] = []
    total = 0.0
    for t in tenants:
        if t.share > 0:
            total += t.share
            bounds.append((total, t.name))
    chosen = []
    for r in ordered:
        u = unit_hash(conversation_key(r.hash_ids, heads), seed)
        chosen.append(next((name for bound, name in bounds if u < bound), bounds[-1][1]))
    return Workload(ordered, chosen, {t.name: t for t in tenants})


def flood(start_ms: int, end_ms: int, rate_per_s: float, blocks: int, *, first_id: int = -1) -> List[Request]:
    """Unique prompts of `blocks` blocks, evenly spaced at `rate_per_s` from `start_ms` to `end_ms`.

    Their ids count down from `first_id` (negative: no trace uses them), each used exactly once."""
    if rate_per_s <= 0 or blocks <= 0 or end_ms < start_ms:
        raise ValueError("flood needs rate_per_s > 0, blocks > 0 and end_ms >= start_ms")
    gap_ms = 1000.0 / rate_per_s
    out, k = [], 0
    while start_ms + k * gap_ms <= end_ms:
        ids = tuple(first_id - (k * blocks + j) for j in range(blocks))
        out.append(Request(int(start_ms + k * gap_ms), blocks * MOONCAKE_BLOCK_TOKENS, 1, ids))
        k += 1
    return out


def with_noisy_neighbour(workload: Workload, neighbour: Tenant, rate_per_s: float, blocks: int, *,
                         active: Tuple[float, float] = (0.0, 1.0)) -> Workload:
    """`workload` plus `neighbour` flooding unique prompts during `active`, a part of the workload's
    time span given as fractions (``(0.0, 1.0)``: all of it; ``(0.25, 0.75)``: its middle half)."""
    if neighbour.name in workload.tenants:
        raise ValueError(f"tenant {neighbour.name!r} already exists")
    lo, hi = active
    if not 0 <= lo <= hi <= 1:
        raise ValueError(f"active must be two fractions 0 <= start <= end <= 1, got {active!r}")
    reqs = workload.requests
    extra = []
    if reqs:
        first, last = reqs[0].timestamp, reqs[-1].timestamp
        extra = flood(int(first + lo * (last - first)), int(first + hi * (last - first)), rate_per_s, blocks)
    tagged = [(r, t) for r, t in zip(reqs, workload.tenant_of)] + [(r, neighbour.name) for r in extra]
    tagged.sort(key=lambda rt: rt[0].timestamp)  # stable: at equal times the trace's request comes first
    return Workload([r for r, _ in tagged], [t for _, t in tagged], {**workload.tenants, neighbour.name: neighbour})
