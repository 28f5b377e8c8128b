"""`serve`'s rules in the replay cache (`kvsched_lab.sim.replay_cache`, ``KVSCHED_REPLAY_CACHE``).

A serving run is cached only when everything that decides it is plain data the key can hold: a
library cache policy by name (or the server's own `ProtectedLRU`), a named admission rule (never
a learner's function), and a `Workload`, its tenants, their service classes and the `PrefillCost`
of exactly the library's types (a subclass could change what they answer). Block ids only: no
tensor is involved (`serve_on_real_kv` is never cached).

The key is a SHA-256 of the bytes of every ``kvsched_lab/sim/**.py`` (the server, the policies),
every argument, every tenant and each request's fields and tenant, in order. A result read back
is checked against everything the workload fixes (counts, each request's time to first token or
refusal, the arrivals' span at this load, the SLO figures and each tenant's share met).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from typing import Any, Callable, Dict, Optional

from kvsched_lab.sim import replay_cache
from kvsched_lab.sim.serving.tenants import ServiceClass, Tenant, Workload

COUNTS = ("requests", "rejected", "met", "preemptions", "prefix_hits", "block_refs")
SECONDS = ("prefill_s", "wasted_prefill_s")


def serve_key(workload: Any, cost: Any, cost_type: type, args: Dict[str, Any]) -> Optional[str]:
    """The cache key of one `serve` run, or None when it is not to be cached (the module docstring);
    `cost_type`: the server's `PrefillCost` (passed in: the server imports this file)."""
    if (type(workload) is not Workload or type(args["admission"]) is not str
            or not replay_cache.is_library_policy(args["policy"]) or replay_cache.cache_folder() is None):
        return None
    tenants = []
    for name, tenant in workload.tenants.items():
        if type(tenant) is not Tenant or type(name) is not str:
            return None
        head = [getattr(tenant, f.name) for f in fields(Tenant) if f.name != "service"]
        service = replay_cache.plain_fields(tenant.service, ServiceClass)
        if service is None or not all(type(v) in (int, float, str) for v in head):
            return None
        tenants.append([name, head, service])
    price = replay_cache.plain_fields(cost, cost_type)
    if price is None or not all(type(t) is str for t in workload.tenant_of) \
            or not all(type(v) in (bool, int, float, str) for v in args.values()):
        return None
    h = hashlib.sha256()
    top = {"format": replay_cache.FORMAT, "kind": "serve", "sources": replay_cache.source_digest(), **args,
           "cost": price, "tenants": tenants, "tenant_of": workload.tenant_of}
    h.update(json.dumps(top, sort_keys=True).encode())
    return h.hexdigest() if replay_cache.hash_requests(h, workload.requests) else None


def cached_serve(key: str, workload: Workload, load: float, result_type: type, compute: Callable[[], Any]) -> Any:
    """The stored `result_type` (the server's `ServeResult`) of `key` if it checks out, else
    ``compute()`` stored; its ``from_cache`` says which."""
    names = [f.name for f in fields(result_type) if f.name != "from_cache"]

    def load_back(raw: bytes) -> Optional[Any]:
        data = replay_cache.read_result(raw, key)
        return result_type(**data, from_cache=True) if consistent(data, workload, load, names) else None

    def dump(result: Any) -> Dict[str, Any]:
        return {n: getattr(result, n) for n in names}

    return replay_cache.cached(key, replay_cache.cache_folder(), load_back, compute, dump)


def consistent(data: Any, workload: Workload, load: float, names: list) -> bool:
    """True when a `ServeResult` read back agrees with everything `workload` and `load` fix."""
    if not isinstance(data, dict) or list(data) != names or any(type(data[n]) is not int or data[n] < 0 for n in COUNTS):
        return False
    if any(type(data[n]) not in (int, float) or not data[n] >= 0 for n in SECONDS):
        return False
    requests, ttft = workload.requests, data["ttft_s"]
    n, met, refs = len(requests), data["met"], sum(len(r.hash_ids) for r in requests)
    if (data["requests"] != n or not isinstance(ttft, list) or len(ttft) != n
            or any(t is not None and (type(t) not in (int, float) or not t >= 0) for t in ttft)
            or ttft.count(None) != data["rejected"] or met > n - data["rejected"]
            or not data["prefix_hits"] <= data["block_refs"] <= refs):
        return False
    # The same float operations as the server's arrivals: the span is fixed by the trace and the load.
    span = requests[-1].timestamp / 1000.0 / load - requests[0].timestamp / 1000.0 / load if requests else 0.0
    if (data["span_s"] != span or data["slo_attainment"] != (met / n if n else 0.0)
            or data["goodput_rps"] != (met / span if span else 0.0)):
        return False
    shares = data["met_by_tenant"]
    if not isinstance(shares, dict) or list(shares) != list(workload.tenants) \
            or not all(type(v) in (int, float) and 0 <= v <= 1 for v in shares.values()):
        return False
    sizes = workload.counts()
    met_each = {t: round(v * sizes[t]) for t, v in shares.items()}
    return sum(met_each.values()) == met and all(
        0 <= m <= sizes[t] and shares[t] == (m / sizes[t] if sizes[t] else 0.0) for t, m in met_each.items())
