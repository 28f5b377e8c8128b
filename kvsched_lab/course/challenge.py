"""The challenge of notebook 07 scores in two columns, like a Kaggle leaderboard. **Public**: the
slices a learner tunes on (`public_traces`, `public_leaderboard`): the first half in time of each
Mooncake trace and the generated workload with its default parameters. **Private**: requests never
shown while tuning: the second half in time of each Mooncake trace (the cache warmed by the first
half, only the second half's hits counted), a generated workload with other parameters, and an
instructor's own trace when given (``private_trace=`` or the ``KVSCHED_PRIVATE_TRACE`` environment
variable). `split_public_private` is the one place the Mooncake traces are cut; only `challenge`
reads the private part.
"""
from __future__ import annotations

import functools
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple, Union

from kvsched_lab.course.challenge_cache import cached_hits, parts_digest
from kvsched_lab.course.leaderboard import (
    BASELINE, BOUND, Leaderboard, PolicySpec, as_policy_mapping, leaderboard, percent, rank,
)
from kvsched_lab.course.table import row
from kvsched_lab.i18n import _, join
from kvsched_lab.i18n.width import display_width
from kvsched_lab.sim.traces import Request, load_trace, resolve_trace, sort_by_arrival, synthetic_trace

PUBLIC_SHARE = 0.5  # a Mooncake trace's public slice: its first half of requests, by arrival time
MOONCAKE_CAPACITIES = (4000, 8000)  # blocks: the cells where the course set its goal (15% of the gap)
GENERATED_CAPACITIES = (500, 1000)  # blocks: where LRU is farthest below the bound on the generated workloads
GENERATED_REQUESTS = 3000  # requests in each generated workload
# The public generated workload is `synthetic_trace`'s default look-alike (notebooks 02-05 use it);
# the private one changes most parameters: more system prompts, more and longer conversations,
# longer documents, twice the arrival rate.
PUBLIC_GENERATED: Dict[str, Any] = {"seed": 0}
PRIVATE_GENERATED: Dict[str, Any] = {"seed": 7, "num_system_prompts": 16, "session_share": 0.8,
                                     "turn_blocks": (2, 8), "document_blocks": (8, 60), "mean_gap_ms": 100}
PRIVATE_ID_OFFSET = 10 ** 12  # added to the private generated ids, so none equals a public one
PRIVATE_TRACE_ENV = "KVSCHED_PRIVATE_TRACE"  # path of an instructor's Mooncake-format trace, scored as private
PRIVATE_CAPACITIES_ENV = "KVSCHED_PRIVATE_CAPACITIES"  # its cache sizes in blocks, e.g. "2000,8000"


def split_public_private(requests: Sequence[Request], public_share: float = PUBLIC_SHARE
                         ) -> Tuple[List[Request], List[Request]]:
    """Cut a trace in time: requests before the arrival of request ``int(n * public_share)`` are
    public, the rest private. Requests with equal timestamps land on the same side."""
    if not 0.0 < public_share < 1.0:
        raise ValueError(f"public_share must be between 0 and 1 (exclusive), got {public_share!r}")
    ordered = sort_by_arrival(requests)
    if not ordered:
        return [], []
    cut_ms = ordered[min(len(ordered) - 1, int(len(ordered) * public_share))].timestamp
    return ([r for r in ordered if r.timestamp < cut_ms], [r for r in ordered if r.timestamp >= cut_ms])


@functools.lru_cache(maxsize=None)  # parsed once per process: a notebook asks for the traces several times
def _mooncake(name: str) -> Tuple[str, Tuple[Request, ...]]:
    """(label, requests) of a Mooncake trace, or of a generated stand-in labelled as such when offline."""
    try:
        return name, tuple(sort_by_arrival(load_trace(resolve_trace(name))))
    except FileNotFoundError:
        seed = 11 if name == "conversation" else 12
        return _("generated stand-in for {name}", name=name), tuple(synthetic_trace(6000, seed=seed))


def _shifted(requests: Sequence[Request], offset: int) -> List[Request]:
    return [Request(r.timestamp, r.input_length, r.output_length, tuple(i + offset for i in r.hash_ids))
            for r in requests]


@dataclass(frozen=True)
class Workload:
    """One trace of the challenge: `public` requests are replayed first, then `private` ones."""

    name: str
    public: Tuple[Request, ...]  # scored in the public column (from a cold cache)
    private: Tuple[Request, ...]  # scored in the private column, the cache warmed by `public`
    capacities: Tuple[int, ...]  # cache sizes in blocks


def _public_workloads() -> List[Workload]:
    out = []
    for name in ("conversation", "synthetic"):
        label, requests = _mooncake(name)
        public, private = split_public_private(requests)
        out.append(Workload(label, tuple(public), tuple(private), MOONCAKE_CAPACITIES))
    generated = synthetic_trace(GENERATED_REQUESTS, **PUBLIC_GENERATED)
    out.append(Workload("generated", tuple(generated), (), GENERATED_CAPACITIES))
    return out


def public_traces() -> Dict[str, List[Request]]:
    """The requests to tune on: each Mooncake trace's first half in time, and the generated workload."""
    return {w.name: list(w.public) for w in _public_workloads()}


def public_capacities() -> Dict[str, List[int]]:
    """The cache sizes (blocks) each public trace is scored at."""
    return {w.name: list(w.capacities) for w in _public_workloads()}


def public_leaderboard(policies: Union[Mapping[str, PolicySpec], Sequence[PolicySpec], None],
                       *, progress: bool = True) -> Leaderboard:
    """Rank `policies` on the public traces only: the leaderboard to tune against."""
    return leaderboard(policies, public_traces(), public_capacities(), progress=progress)


def _private_capacities(given: Optional[Sequence[int]]) -> Tuple[int, ...]:
    if given is not None:
        caps = tuple(given)
    elif os.environ.get(PRIVATE_CAPACITIES_ENV):
        raw = os.environ[PRIVATE_CAPACITIES_ENV]
        try:
            caps = tuple(int(x) for x in raw.split(","))
        except ValueError:
            raise ValueError(f"{PRIVATE_CAPACITIES_ENV}={raw!r}: expected block counts separated by commas, "
                             "e.g. 2000,8000") from None
    else:
        caps = MOONCAKE_CAPACITIES
    if not caps or any(isinstance(c, bool) or not isinstance(c, int) or c <= 0 for c in caps):
        raise ValueError(f"private capacities must be positive block counts, got {caps!r}")
    return caps


def _private_workloads(private_trace: Union[str, os.PathLike, Sequence[Request], None],
                       private_capacities: Optional[Sequence[int]]) -> List[Workload]:
    """Every workload, public parts and private parts (only `challenge` calls this)."""
    out = _public_workloads()
    other = _shifted(synthetic_trace(GENERATED_REQUESTS, **PRIVATE_GENERATED), PRIVATE_ID_OFFSET)
    out.append(Workload("generated-other", (), tuple(other), GENERATED_CAPACITIES))
    if private_trace is None:
        private_trace = os.environ.get(PRIVATE_TRACE_ENV) or None
    if private_trace is not None:
        requests = (load_trace(private_trace) if isinstance(private_trace, (str, os.PathLike))
                    else list(private_trace))
        if not requests:
            raise ValueError("the instructor's private trace holds no requests")
        out.append(Workload("instructor", (), tuple(sort_by_arrival(requests)),
                            _private_capacities(private_capacities)))
    return out


def bound_hits(warmup: Sequence[Sequence[Hashable]], scored: Sequence[Sequence[Hashable]],
               capacity_blocks: int) -> int:
    """The most block hits any policy can score on `scored` when `warmup` is replayed first.

    Belady's MIN run on the whole sequence maximizes *all* hits, so it may give up a hit in
    `scored` for an earlier one in `warmup`. Hits in `warmup` are worth nothing here, so a
    warm-up touch whose block comes back within the warm-up gets a fresh key (no policy needs
    to hold it: the block is touched, and can be cached, again before `scored` starts); MIN
    then maximizes exactly the hits that count.
    """
    from kvsched_lab.sim.policies.belady import BeladyPolicy, next_uses

    flat_warm = [k for ids in warmup for k in ids]
    flat_scored = [k for ids in scored for k in ids]
    if not flat_scored:
        return 0
    nxt = next_uses(flat_warm + flat_scored)
    renamed, i = [], 0
    for ids in warmup:
        row = []
        for k in ids:
            row.append(k if nxt[i] >= len(flat_warm) else ("warm-up only", i))
            i += 1
        renamed.append(row)
    sim = BeladyPolicy(capacity_blocks, future=[k for ids in renamed for k in ids] + flat_scored)
    sim.replay_requests(renamed, 1)
    before = sim.hits
    sim.replay_requests([list(ids) for ids in scored], 1)
    return sim.hits - before


def _part_hits(policy: PolicySpec, public: Sequence[Sequence[Hashable]], private: Sequence[Sequence[Hashable]],
               capacity_blocks: int) -> Tuple[int, int]:
    """Prefix hits of one fresh `policy` replaying `public`, then (warm) `private`."""
    from kvsched_lab.sim.policies import make_policy
    from kvsched_lab.sim.policies.base import gc_paused, generic_replay_requests

    sim = make_policy(policy, capacity_blocks) if isinstance(policy, str) else policy(capacity_blocks)
    fast = getattr(sim, "replay_requests", None)
    with gc_paused():
        run = fast if callable(fast) else (lambda lists, b: generic_replay_requests(sim, lists, b))
        return sum(run(public, 1)), sum(run(private, 1))


@dataclass
class ChallengeBoard:
    """Public and private scores side by side; shows as a table in a notebook.

    ``public`` and ``private`` are `Leaderboard` objects (per-cell hit rates and gaps closed);
    a score is the mean share of the LRU-to-bound gap a policy closes over a column's cells.
    """

    public: Leaderboard
    private: Leaderboard

    @property
    def rows(self) -> List[Dict[str, Any]]:
        """Per policy: public and private scores and ranks, in public-rank order."""
        private = {r["policy"]: r for r in self.private}
        return [{"policy": r["policy"], "public": r["mean_gap_closed"], "private": private[r["policy"]]["mean_gap_closed"],
                 "public_rank": r["rank"], "private_rank": private[r["policy"]]["rank"]} for r in self.public]

    def __getitem__(self, policy: str) -> Dict[str, Any]:
        for entry in self.rows:
            if entry["policy"] == policy:
                return entry
        raise KeyError(policy)

    def lead_kept(self, policy: str) -> float:
        """The share of `policy`'s public lead over LRU left on the private part (NaN without a lead)."""
        entry = self[policy]
        return entry["private"] / entry["public"] if entry["public"] > 0 else math.nan

    @staticmethod
    def _head() -> List[str]:
        return [_("policy"), _("public"), _("private"), _("public rank"), _("private rank")]

    def to_text(self) -> str:
        head = self._head()
        body = [[r["policy"], percent(r["public"]), percent(r["private"]), str(r["public_rank"]), str(r["private_rank"])]
                for r in self.rows]
        widths = [max(display_width(x) for x in col) + 2 for col in zip(head, *body)]
        lines = [row(line, [-widths[0]] + widths[1:]) for line in [head] + body]
        return "\n".join(lines + [self._note()])

    __str__ = __repr__ = to_text

    def _note(self) -> str:
        return _("score = share of the {baseline}-to-{bound} gap closed, mean over cells. public: {public}. "
                 "private: {private}", baseline=self.public.baseline, bound=self.public.bound,
                 public=join(self.public.cells), private=join(self.private.cells))

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in self._head())
        body = "".join(
            f"<tr><td style='text-align:left'>{r['policy']}</td><td>{percent(r['public'])}</td>"
            f"<td><b>{percent(r['private'])}</b></td><td>{r['public_rank']}</td><td>{r['private_rank']}</td></tr>"
            for r in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table><p><small>{self._note()}</small></p>"


def challenge(policies: Union[Mapping[str, PolicySpec], Sequence[PolicySpec], None] = None, *,
              private_trace: Union[str, os.PathLike, Sequence[Request], None] = None,
              private_capacities: Optional[Sequence[int]] = None, progress: bool = True) -> ChallengeBoard:
    """Score `policies` (None: `default_policies()`) on the public and the private parts.

    Each policy replays each workload once per capacity: the public requests, then the private
    ones with the cache as the public part left it, so an online policy's public hits are those
    of a replay of the public part alone. `private_trace` (a path or requests; default: the
    file named by ``$KVSCHED_PRIVATE_TRACE``) is scored whole, at `private_capacities`
    (default ``$KVSCHED_PRIVATE_CAPACITIES``, else 4000 and 8000 blocks). With
    ``$KVSCHED_REPLAY_CACHE`` set, a library policy's hits and the bound are read back when another
    kernel computed them (challenge_cache.py).
    """
    named = as_policy_mapping(policies)
    named.pop(BOUND, None)  # the bound is computed per column below, not replayed like a policy
    named.setdefault(BASELINE, BASELINE)
    workloads = _private_workloads(private_trace, private_capacities)
    jobs = [(w, cap) for w in workloads for cap in w.capacities]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs) * (len(named) + 1), desc=_("challenge"), unit="run", file=sys.stderr, leave=False)
    rows: Dict[str, List[Dict[str, Any]]] = {"public": [], "private": []}
    for w, cap in jobs:
        public, private = [r.hash_ids for r in w.public], [r.hash_ids for r in w.private]
        refs = {"public": sum(map(len, public)), "private": sum(map(len, private))}
        digest, most = parts_digest(w.public, w.private), (refs["public"], refs["private"])
        hits: Dict[str, Dict[str, int]] = {}
        for label, spec in named.items():
            if bar is not None:
                bar.set_postfix_str(f"{w.name} {label} @{cap}", refresh=False)
            found = cached_hits(digest, "policy", spec, cap, most, lambda: _part_hits(spec, public, private, cap))
            hits[label] = dict(zip(("public", "private"), found))
            if bar is not None:
                bar.update(1)
        found = cached_hits(digest, "bound", None, cap, most,
                            lambda: (bound_hits([], public, cap), bound_hits(public, private, cap)))
        hits[BOUND] = dict(zip(("public", "private"), found))
        if bar is not None:
            bar.update(1)
        for column in ("public", "private"):
            # A Mooncake trace's private cells are its held-back second half: named so, apart from the public ones.
            trace = _("{trace} (second half)", trace=w.name) if column == "private" and w.public else w.name
            if refs[column]:
                rows[column] += [{"trace": trace, "policy": label, "capacity": cap,
                                  "hit_rate": h[column] / refs[column]} for label, h in hits.items()]
    if bar is not None:
        bar.close()
    return ChallengeBoard(rank(rows["public"]), rank(rows["private"]))
