"""The "beat LRU" leaderboard: policies scored on traces at several capacities.

``leaderboard(policies, traces, capacities)`` replays every policy on every trace at every
capacity (the course's replay protocol) and ranks the policies by the share
of the gap between LRU and the optimal bound that they close:

    gap closed = (hit rate - LRU's) / (bound - LRU's)

0 is LRU, 1 (100%) is the offline optimum, negative is worse than LRU. The bound is Belady's
block-level MIN with bypass; its block-hit rate bounds every policy's prefix-hit rate.

A policy is a library name (``"lru"``), a `Policy` subclass or any scheduler class or factory
called with ``capacity_bytes`` (one byte per block here), such as your own class.

The challenge of notebook 07 (public and private columns) is `challenge.py`, built on this board.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, Hashable, List, Mapping, Sequence, Union

from kvsched_lab.i18n import _
from kvsched_lab.sim.replay import replay
from kvsched_lab.sim.traces import Request, sort_by_arrival

BASELINE = "lru"
BOUND = "belady"
PolicySpec = Any  # a library name, a class, or a factory called with capacity_bytes


# Registered policies a board leaves out unless named: seed-compact decides as seed does; lecar,
# cacheus and wtinylfu, per-block mixtures kept to compare with libCacheSim, trail LRU on these traces; they
# and arc-prefix replay through the hooks, several times slower than the rest, which would slow
# every default board (notebook 06's sweep). Notebook 07 names arc-prefix where it shows it.
# lecar-prefix, LeCaR with arc-prefix's two rules, is left out with LeCaR for the same reason.
NOT_BY_DEFAULT = ("seed-compact", "lecar", "cacheus", "wtinylfu", "arc-prefix", "lecar-prefix")


def default_policies() -> List[str]:
    """Every policy in the zoo, in registry order, but those of `NOT_BY_DEFAULT`.

    Built from the registry, so in the student release, which withholds ``seed`` and
    ``seed-compact`` (the chapter's answers), neither appears. A policy left out here is still
    scored when named (``leaderboard(["lecar", ...])``)."""
    from kvsched_lab.sim.policies import POLICIES

    return [name for name in POLICIES if name not in NOT_BY_DEFAULT]


def policy_label(spec: PolicySpec) -> str:
    """A name for a policy: the library name, else the ``name`` a class sets itself, else its class name."""
    if isinstance(spec, str):
        return spec
    own = vars(spec).get("name") if isinstance(spec, type) else None  # not one inherited from a library class
    return own if isinstance(own, str) else getattr(spec, "__name__", type(spec).__name__)


def hit_rate(policy: PolicySpec, requests: Sequence[Request], capacity_blocks: int) -> float:
    """Prefix-hit rate of `policy` on `requests` holding `capacity_blocks` blocks.

    For ``"belady"`` this is its block-hit rate (hits over block references), the bound on
    every policy's prefix-hit rate (`kvsched_lab.sim.replay`, item 4).
    """
    ordered = sort_by_arrival(requests)
    if policy == BOUND:
        from kvsched_lab.sim.policies import make_policy

        sim = make_policy(BOUND, capacity_blocks, future=[k for r in ordered for k in r.hash_ids])
        result = replay(ordered, sim, capacity_blocks)
        return sim.hits / result.block_refs if result.block_refs else 0.0
    return replay(ordered, policy, capacity_blocks).prefix_hit_rate


def as_policy_mapping(policies: Union[Mapping[str, PolicySpec], Sequence[PolicySpec], None]) -> Dict[str, PolicySpec]:
    if policies is None:
        policies = default_policies()
    if isinstance(policies, Mapping):
        out = dict(policies)
    else:
        out = {}
        for spec in policies:
            out[policy_label(spec)] = spec
    return out


def sweep(policies: Union[Mapping[str, PolicySpec], Sequence[PolicySpec], None],
          traces: Mapping[str, Sequence[Request]],
          capacities: Union[Sequence[int], Mapping[str, Sequence[int]]],
          progress: bool = False) -> List[Dict[str, Any]]:
    """Hit rate of every policy on every trace at every capacity.

    `capacities` is one list for all traces or a list per trace name. Returns rows
    ``{"trace", "policy", "capacity", "hit_rate"}`` (policy: its label).
    """
    named = as_policy_mapping(policies)
    caps = {t: list(capacities[t] if isinstance(capacities, Mapping) else capacities) for t in traces}
    jobs = [(t, label, cap) for t in traces for cap in caps[t] for label in named]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc=_("replays"), unit="run", file=sys.stderr, leave=False)
    rows = []
    for t, label, cap in jobs:
        if bar is not None:
            bar.set_postfix_str(f"{t} {label} @{cap}", refresh=False)
        rows.append({"trace": t, "policy": label, "capacity": cap,
                     "hit_rate": hit_rate(named[label], traces[t], cap)})
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return rows


def gap_closed(rate: float, baseline: float, bound: float) -> float:
    """Share of the baseline-to-bound gap `rate` closes; NaN when the bound does not beat the baseline."""
    gap = bound - baseline
    return (rate - baseline) / gap if gap > 1e-12 else math.nan


@dataclass
class Leaderboard:
    """Ranked rows plus the raw `sweep` results they come from; shows as a table in a notebook.

    Each row: ``policy``, ``rates`` ({"trace@capacity": hit rate}), ``gaps`` (same keys: share
    of the LRU-to-bound gap closed), ``mean_gap_closed`` (mean over the cells with a gap),
    ``rank``.
    """

    rows: List[Dict[str, Any]]
    results: List[Dict[str, Any]]
    baseline: str = BASELINE
    bound: str = BOUND
    cells: List[str] = field(default_factory=list)

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, policy: str) -> Dict[str, Any]:
        for row in self.rows:
            if row["policy"] == policy:
                return row
        raise KeyError(policy)

    def to_text(self) -> str:
        head = ["#", _("policy")] + self.cells + [_("gap closed")]
        body = []
        for r in self.rows:
            body.append([str(r["rank"]), r["policy"]] + [f"{100 * r['rates'][c]:.1f}%" for c in self.cells]
                        + [percent(r["mean_gap_closed"])])
        widths = [max(len(x) for x in col) for col in zip(head, *body)]
        lines = ["  ".join(x.rjust(w) if i != 1 else x.ljust(w) for i, (x, w) in enumerate(zip(line, widths)))
                 for line in [head] + body]
        note = _("hit rates are prefix-hit rates ({bound}: block-hit rate, the offline bound); gap closed = "
                 "(rate - {baseline}) / ({bound} - {baseline}), mean over cells", bound=self.bound,
                 baseline=self.baseline)
        return "\n".join(lines + [note])

    __str__ = __repr__ = to_text

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in ["#", _("policy")] + self.cells + [_("gap closed")])
        body = []
        for r in self.rows:
            strong = r["policy"] in (self.baseline, self.bound)
            name = f"<b>{r['policy']}</b>" if strong else r["policy"]
            cells = "".join(f"<td>{100 * r['rates'][c]:.1f}%</td>" for c in self.cells)
            body.append(f"<tr><td>{r['rank']}</td><td style='text-align:left'>{name}</td>{cells}"
                        f"<td><b>{percent(r['mean_gap_closed'])}</b></td></tr>")
        return (f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
                + _("<p><small>Cells: prefix-hit rate per trace@capacity (blocks); {bound}: its block-hit rate, "
                    "the offline bound. Gap closed = (rate &minus; {baseline}) / ({bound} &minus; {baseline}), "
                    "averaged over the cells: 0% is {baseline}, 100% the bound.</small></p>",
                    bound=self.bound, baseline=self.baseline))


def percent(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:+.1f}%"


def rank(results: Sequence[Mapping[str, Any]], baseline: str = BASELINE, bound: str = BOUND) -> Leaderboard:
    """Turn `sweep` rows (which must include `baseline` and `bound`) into a ranked `Leaderboard`."""
    rate: Dict[tuple, float] = {(r["policy"], r["trace"], r["capacity"]): r["hit_rate"] for r in results}
    cells: List[tuple] = []
    for r in results:
        if (r["trace"], r["capacity"]) not in cells:
            cells.append((r["trace"], r["capacity"]))
    policies: List[str] = []
    for r in results:
        if r["policy"] not in policies:
            policies.append(r["policy"])
    for needed in (baseline, bound):
        if needed not in policies:
            raise ValueError(f"the results must include {needed!r} to rank against it")
    names = {c: f"{c[0]}@{c[1]}" for c in cells}
    rows = []
    for p in policies:
        rates = {names[c]: rate[(p, *c)] for c in cells}
        gaps = {names[c]: gap_closed(rate[(p, *c)], rate[(baseline, *c)], rate[(bound, *c)]) for c in cells}
        valid = [g for g in gaps.values() if not math.isnan(g)]
        mean = sum(valid) / len(valid) if valid else math.nan
        rows.append({"policy": p, "rates": rates, "gaps": gaps, "mean_gap_closed": mean})
    rows.sort(key=lambda r: -math.inf if math.isnan(r["mean_gap_closed"]) else -r["mean_gap_closed"])
    for i, r in enumerate(rows, start=1):
        r["rank"] = i
    return Leaderboard(rows, list(results), baseline, bound, [names[c] for c in cells])


def leaderboard(policies: Union[Mapping[str, PolicySpec], Sequence[PolicySpec], None],
                traces: Mapping[str, Sequence[Request]],
                capacities: Union[Sequence[int], Mapping[str, Sequence[int]]],
                *, baseline: str = BASELINE, bound: str = BOUND, progress: bool = True) -> Leaderboard:
    """Score `policies` (None: `default_policies()`) on `traces` at `capacities` and rank them.

    The baseline (LRU) and the bound (Belady) are added when missing. `traces` maps a name to
    its requests; `capacities` is one list of block counts or a list per trace.
    """
    named = as_policy_mapping(policies)
    for needed in (baseline, bound):
        named.setdefault(needed, needed)
    return rank(sweep(named, traces, capacities, progress=progress), baseline, bound)


def trace_requests(id_lists: Sequence[Sequence[Hashable]]) -> List[Request]:
    """Requests from plain lists of block ids (timestamps 0, 1, ...), for hand-made traces."""
    return [Request(i, 512 * len(ids), 1, tuple(ids)) for i, ids in enumerate(id_lists)]


def hit_breakdown(policy: PolicySpec, requests: Sequence[Request], capacity_blocks: int) -> Dict[str, Any]:
    """Block hits against prefix hits of `policy` (a library name or a `Policy` subclass) on `requests`.

    A block hit whose request had already missed an earlier block saves nothing: prefill must
    recompute everything after the first missing block. ``wasted_hits`` counts those: cache
    space held by blocks behind an evicted head. Returns policy, capacity, block_refs,
    block_hits, prefix_hits, wasted_hits, block_hit_rate, prefix_hit_rate.
    """
    from kvsched_lab.sim.policies import make_policy

    ordered = sort_by_arrival(requests)
    if isinstance(policy, str):
        sim = make_policy(policy, capacity_blocks, future=[k for r in ordered for k in r.hash_ids])
    else:
        sim = policy(capacity_blocks)
    result = replay(ordered, sim, capacity_blocks)
    refs = result.block_refs or 1
    return {"policy": policy_label(policy), "capacity": capacity_blocks, "block_refs": result.block_refs,
            "block_hits": sim.hits, "prefix_hits": result.prefix_hits, "wasted_hits": sim.hits - result.prefix_hits,
            "block_hit_rate": sim.hits / refs, "prefix_hit_rate": result.prefix_hits / refs}
