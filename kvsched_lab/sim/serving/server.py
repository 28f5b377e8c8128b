"""`serve`: a trace through a prefill server with deadlines, on block ids: who waits, who is refused, who is late.

The model, stated (each line is a simplification of a real engine, said in notebook 10):

- `workers` prefill workers share one prefix cache of `capacity_blocks` blocks (a zoo policy,
  LRU by default). A worker prefills one request at a time; decoding happens elsewhere, as on
  Mooncake's separate decode instances, so a request leaves the prefill side at its first token.
- A request's prefill takes ``cost.seconds(uncached tokens)``: its prompt minus its prefix hits,
  which are counted when a worker **starts** it (at least one token is always computed). At the
  start its cached blocks are touched; at the end the rest of its blocks enter the cache, so with
  one worker, FCFS and admit-all the cache sees exactly the course's replay protocol.
- Arrivals are the trace's timestamps divided by `load` (2.0: twice the trace's rate).
- The waiting queue's order (`discipline`): ``fcfs``; ``priority``, vLLM's (``PriorityRequestQueue``
  in ``vllm/v1/core/sched/request_queue.py``: smaller priority first, then earlier arrival; a
  waiting request never preempts); ``priority-preempt``, SGLang's (``preempt_to_schedule`` in
  ``python/sglang/srt/managers/schedule_policy.py``: a request more urgent than a running one by
  more than `preempt_threshold` takes its place; the preempted prefill's work is lost and it waits
  again); ``edf``, earliest deadline first.
- Admission at arrival (`admission`): ``all``; ``fit``, the chapter's rule: refuse a request at
  once when its blocks do not fit in the blocks not yet reserved by admitted requests (every
  admitted request reserves its whole prompt until its prefill ends); ``bypass``: such a request
  is served anyway but leaves the cache alone (its blocks are neither reserved nor cached);
  ``predict``: refuse it when the predicted TTFT (the work queued ahead of it, shared by the
  workers, plus its own prefill with the prefix cached now) exceeds its deadline. That is the
  TTFT test of Mooncake's Conductor (Qin et al., FAST 2025, section 4.1, Algorithm 1 lines 12-19:
  per prefill instance, TTFT = KV transfer + queue (the predicted prefill times queued there) +
  prefill (an offline-fitted regression of prompt and prefix length); the smallest is taken, and
  HTTP 429 is returned before any prefill when it, or the chosen decode instance's TBT, misses its
  SLO). Here: one queue for all workers, the server's own cost as the prediction, no transfer and
  no decode side. Mooncake's Early Rejection and Early Rejection Based on Prediction (arXiv
  2407.00079v1, sections 6.2-6.4) decide on the *decoding* load, current or predicted for when
  the prefill ends; with no decode stage, this server models neither. `admission` may also be a
  function of an `AdmissionInfo`, True to admit.
- `protect_queued`: the cache evicts blocks that no waiting request holds first (`ProtectedLRU`).

A request meets its SLO when its first token comes by its deadline; a refused one does not.

With ``KVSCHED_REPLAY_CACHE`` set, a run of a library policy and a named admission rule is computed
once per key and read back after (serve_cache.py); the result's ``from_cache`` then says so.
"""
from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Dict, Hashable, List, Optional, Sequence, Union

from kvsched_lab.sim.policies import make_policy
from kvsched_lab.sim.policies.base import Policy, prefix_hits
from kvsched_lab.sim.serving.serve_cache import cached_serve, serve_key
from kvsched_lab.sim.serving.tenants import Workload
from kvsched_lab.sim.traces import MOONCAKE_BLOCK_TOKENS

DISCIPLINES = ("fcfs", "priority", "priority-preempt", "edf")
ADMISSIONS = ("all", "fit", "bypass", "predict")
# What each admission rule does, in a line: `kvsched replay --help` and its --json output say it.
ADMISSION_RULES = {
    "all": "admit every request",
    "fit": "refuse at arrival a request whose blocks do not fit in the blocks admitted requests have not "
           "reserved (the chapter's rule)",
    "bypass": "serve a request that does not fit without the cache: its blocks are neither reserved nor cached",
    "predict": "refuse at arrival a request whose predicted TTFT (the queued work ahead, shared by the workers, plus "
               "its own prefill with its prefix cached now) exceeds its deadline: the TTFT test of Mooncake's "
               "Conductor (FAST'25 section 4.1, Algorithm 1), on one shared queue; Mooncake's early rejection on "
               "the decoding load, current or predicted (arXiv 2407.00079v1 sections 6.2-6.4), is not modelled: "
               "this server has no decode stage",
}


@dataclass(frozen=True)
class PrefillCost:
    """Seconds a prefill takes: a fixed part per call plus a part per uncached prompt token."""

    per_token_s: float  # seconds per computed prompt token
    fixed_s: float = 0.0  # seconds per prefill, whatever its length
    source: str = ""  # where the figures come from (measured, or FLOPs of a named model and GPU)

    def __post_init__(self) -> None:
        for name in ("per_token_s", "fixed_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name} must be a number of seconds >= 0, got {value!r}")

    def seconds(self, tokens: int) -> float:
        return self.fixed_s + tokens * self.per_token_s


class ProtectedLRU(Policy):
    """LRU that evicts blocks no waiting request holds before any block one does."""

    name = "protected-lru"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.free: OrderedDict = OrderedDict()  # cached, no waiting request holds it: oldest first
        self.held: OrderedDict = OrderedDict()  # cached and held by a waiting request
        self.holds: Dict[Hashable, int] = {}  # block -> waiting requests holding it (cached or not)

    def hold(self, ids: Sequence[Hashable]) -> None:
        for key in ids:
            self.holds[key] = self.holds.get(key, 0) + 1
            if key in self.free:
                del self.free[key]
                self.held[key] = None

    def release(self, ids: Sequence[Hashable]) -> None:
        for key in ids:
            n = self.holds[key] - 1
            if n:
                self.holds[key] = n
                continue
            del self.holds[key]
            if key in self.held:  # its request is starting and touches it next: it joins as recent
                del self.held[key]
                self.free[key] = None

    def on_hit(self, key: Hashable) -> None:
        (self.held if key in self.held else self.free).move_to_end(key)

    def on_insert(self, key: Hashable, size: int) -> None:
        (self.held if key in self.holds else self.free)[key] = None

    def on_evict(self, key: Hashable, size: int) -> None:
        (self.held if key in self.held else self.free).pop(key)

    def victim(self) -> Hashable:
        return next(iter(self.free or self.held))


@dataclass(frozen=True)
class AdmissionInfo:
    """What an admission rule of your own sees of an arriving request (``serve(admission=rule)``)."""

    blocks: int  # blocks of its prompt
    free_blocks: int  # blocks not reserved by admitted requests now
    wait_s: float  # predicted seconds until a worker starts it
    prefill_s: float  # predicted seconds of its prefill, with the prefix cached now
    deadline_s: float  # seconds from now until its first token is due


@dataclass
class _Job:
    index: int  # position in the workload
    arrival_s: float
    deadline_s: float  # absolute
    priority: int
    ids: Sequence[Hashable]
    input_length: int
    cache_it: bool = True  # False: bypassed, its blocks are neither reserved nor cached
    start_s: float = -1.0
    end_s: float = -1.0
    hits: int = 0
    predicted_s: float = 0.0  # predicted prefill seconds, at arrival


@dataclass
class ServeResult:
    """What one `serve` run did, per request and in sum."""

    requests: int
    rejected: int
    met: int  # first token by the deadline (rejected requests never meet it)
    slo_attainment: float  # met / requests
    goodput_rps: float  # met requests per second of the arrivals' span
    span_s: float  # first to last arrival, at this load
    prefill_s: float  # worker seconds spent prefilling, preempted work included
    wasted_prefill_s: float  # ... on requests that missed their deadline, and on preempted work
    preemptions: int
    prefix_hits: int  # over the requests that were prefilled
    block_refs: int
    ttft_s: List[Optional[float]] = field(repr=False, default_factory=list)  # per request; None if refused
    met_by_tenant: Dict[str, float] = field(default_factory=dict)  # tenant -> SLO attainment
    from_cache: bool = False  # read back from KVSCHED_REPLAY_CACHE (serve_cache.py), not run here

    @property
    def rejected_share(self) -> float:
        return self.rejected / self.requests if self.requests else 0.0

    @property
    def wasted_share(self) -> float:
        return self.wasted_prefill_s / self.prefill_s if self.prefill_s else 0.0

    @property
    def prefix_hit_rate(self) -> float:
        return self.prefix_hits / self.block_refs if self.block_refs else 0.0

    def summary(self) -> Dict[str, object]:
        out = {k: v for k, v in vars(self).items() if k != "ttft_s"}
        out.update(rejected_share=self.rejected_share, wasted_share=self.wasted_share,
                   prefix_hit_rate=self.prefix_hit_rate)
        return out


def serve(workload: Workload, capacity_blocks: int, cost: PrefillCost, *, workers: int = 1,
          discipline: str = "fcfs", admission: Union[str, Callable[["AdmissionInfo"], bool]] = "all", protect_queued: bool = False,
          load: float = 1.0, policy: str = "lru", preempt_threshold: int = 0,
          block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> ServeResult:
    """Run `workload` through the prefill server of the module docstring and report its SLOs."""
    if discipline not in DISCIPLINES:
        raise ValueError(f"unknown discipline {discipline!r}; choose one of {', '.join(DISCIPLINES)}")
    if not callable(admission) and admission not in ADMISSIONS:
        raise ValueError(f"unknown admission {admission!r}; choose one of {', '.join(ADMISSIONS)}")
    for name, value in (("capacity_blocks", capacity_blocks), ("workers", workers)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not isinstance(load, (int, float)) or not load > 0:
        raise ValueError(f"load must be a number > 0, got {load!r}")
    if protect_queued and policy != "lru":
        raise ValueError("protect_queued runs its own LRU (ProtectedLRU): leave policy='lru'")
    def compute() -> ServeResult:
        cache = ProtectedLRU(capacity_blocks) if protect_queued else make_policy(policy, capacity_blocks)
        return _Server(workload, cache, cost, workers, discipline, admission, load, preempt_threshold, block_tokens).run()

    args = {"capacity_blocks": capacity_blocks, "workers": workers, "discipline": discipline, "admission": admission,
            "protect_queued": protect_queued, "load": load, "policy": policy, "preempt_threshold": preempt_threshold,
            "block_tokens": block_tokens}
    key = serve_key(workload, cost, PrefillCost, args)
    return compute() if key is None else cached_serve(key, workload, load, ServeResult, compute)


class _Server:
    def __init__(self, workload: Workload, cache: Policy, cost: PrefillCost, workers: int, discipline: str,
                 admission: str, load: float, preempt_threshold: int, block_tokens: int) -> None:
        self.w, self.cache, self.cost, self.workers = workload, cache, cost, workers
        self.discipline, self.admission, self.threshold, self.bt = discipline, admission, preempt_threshold, block_tokens
        self.capacity = cache.capacity_bytes
        self.protect = isinstance(cache, ProtectedLRU)
        self.jobs = [_Job(i, r.timestamp / 1000.0 / load, 0.0, workload.service_of(i).priority, r.hash_ids,
                          r.input_length) for i, r in enumerate(workload.requests)]
        for j in self.jobs:
            j.deadline_s = j.arrival_s + workload.service_of(j.index).ttft_deadline_s
        self.queue: List[tuple] = []  # heap of (order key, index)
        self.running: Dict[int, _Job] = {}  # index -> job in prefill
        self.done: List[tuple] = []  # heap of (end_s, index) of running jobs
        self.reserved = 0  # blocks reserved by admitted jobs until their prefill ends
        self.rejected: set = set()
        self.prefill_s = self.wasted_s = 0.0
        self.preemptions = self.hits = self.refs = 0
        self.queued_work_s = 0.0  # predicted seconds of the waiting jobs

    # -- the queue -----------------------------------------------------------------------------
    def _key(self, j: _Job) -> tuple:
        if self.discipline == "fcfs":
            return (j.arrival_s, j.index)
        if self.discipline == "edf":
            return (j.deadline_s, j.arrival_s, j.index)
        return (j.priority, j.arrival_s, j.index)  # vLLM: priority, then arrival

    def _enqueue(self, j: _Job) -> None:
        heapq.heappush(self.queue, (self._key(j), j.index))
        self.queued_work_s += j.predicted_s
        if self.protect and j.cache_it:
            self.cache.hold(j.ids)

    # -- cache work ----------------------------------------------------------------------------
    def _touch(self, ids: Sequence[Hashable], lo: int, hi: int) -> None:
        """Touch blocks ``lo..hi-1`` (0-based) of one request, head first, one block each."""
        cache, n = self.cache, len(ids)
        for depth in range(lo + 1, hi + 1):
            cache.touch_in_request(ids[depth - 1], 1, depth, depth == n)

    def _prefill_s(self, j: _Job, hits: int) -> float:
        return self.cost.seconds(max(j.input_length - hits * self.bt, 1))

    # -- events --------------------------------------------------------------------------------
    def _arrive(self, j: _Job, now: float) -> None:
        contains = self.cache.entries.__contains__
        j.predicted_s = self._prefill_s(j, prefix_hits(contains, j.ids))
        fits = len(j.ids) <= self.capacity - self.reserved
        if callable(self.admission):
            info = AdmissionInfo(len(j.ids), self.capacity - self.reserved, self._predicted_wait(j, now),
                                 j.predicted_s, j.deadline_s - now)
            if not self.admission(info):
                self.rejected.add(j.index)
                return
        elif self.admission == "fit" and not fits:
            self.rejected.add(j.index)
            return
        if self.admission == "bypass" and not fits:
            j.cache_it = False
        if self.admission == "predict" and now + self._predicted_wait(j, now) + j.predicted_s > j.deadline_s:
            self.rejected.add(j.index)
            return
        if j.cache_it:
            self.reserved += len(j.ids)
        if self.discipline == "priority-preempt" and len(self.running) == self.workers:
            self._maybe_preempt(j, now)
        self._enqueue(j)

    def _predicted_wait(self, j: _Job, now: float) -> float:
        """Seconds until a worker starts `j`: the queued work ahead of it (and the rest of the running
        prefills, if every worker is busy), shared by the workers."""
        if self.discipline == "fcfs":
            ahead = self.queued_work_s
        else:
            key = self._key(j)
            ahead = sum(self.jobs[i].predicted_s for k, i in self.queue if k < key)
        busy = sum(r.end_s - now for r in self.running.values()) if len(self.running) == self.workers else 0.0
        return (ahead + busy) / self.workers

    def _maybe_preempt(self, j: _Job, now: float) -> None:
        # SGLang: the least urgent running request (latest arrival among ties), if j beats it by > threshold.
        victim = max(self.running.values(), key=lambda r: (r.priority, r.arrival_s))
        if victim.priority - j.priority <= self.threshold:
            return
        del self.running[victim.index]
        self.done = [(t, i) for t, i in self.done if i != victim.index]
        heapq.heapify(self.done)
        spent = now - victim.start_s
        self.prefill_s += spent
        self.wasted_s += spent
        self.preemptions += 1
        self.hits -= victim.hits
        self.refs -= len(victim.ids)
        victim.start_s = victim.end_s = -1.0
        self._enqueue(victim)

    def _start(self, now: float) -> None:
        while self.queue and len(self.running) < self.workers:
            _, i = heapq.heappop(self.queue)
            j = self.jobs[i]
            self.queued_work_s -= j.predicted_s
            if self.protect and j.cache_it:
                self.cache.release(j.ids)
            j.hits = prefix_hits(self.cache.entries.__contains__, j.ids)
            self.cache.begin_request(j.ids)
            self._touch(j.ids, 0, j.hits)  # refresh the cached prefix now; the rest enters at the end
            j.start_s, j.end_s = now, now + self._prefill_s(j, j.hits)
            self.hits += j.hits
            self.refs += len(j.ids)
            self.running[i] = j
            heapq.heappush(self.done, (j.end_s, i))

    def _finish(self, now: float) -> None:
        _, i = heapq.heappop(self.done)
        j = self.running.pop(i)
        spent = j.end_s - j.start_s
        self.prefill_s += spent
        if j.end_s > j.deadline_s:
            self.wasted_s += spent
        if j.cache_it:
            self._touch(j.ids, j.hits, len(j.ids))
            self.reserved -= len(j.ids)

    def run(self) -> ServeResult:
        arrivals, k, now = self.jobs, 0, 0.0
        while k < len(arrivals) or self.done or self.queue:
            next_arrival = arrivals[k].arrival_s if k < len(arrivals) else float("inf")
            if self.done and self.done[0][0] <= next_arrival:
                now = self.done[0][0]
                self._finish(now)
            else:
                now = next_arrival
                self._arrive(arrivals[k], now)
                k += 1
            self._start(now)
        return self._result()

    def _result(self) -> ServeResult:
        w, jobs = self.w, self.jobs
        ttft = [None if j.index in self.rejected else j.end_s - j.arrival_s for j in jobs]
        met_flags = [t is not None and j.end_s <= j.deadline_s for t, j in zip(ttft, jobs)]
        span = (jobs[-1].arrival_s - jobs[0].arrival_s) if jobs else 0.0
        by_tenant: Dict[str, List[bool]] = {t: [] for t in w.tenants}
        for name, ok in zip(w.tenant_of, met_flags):
            by_tenant[name].append(ok)
        met = sum(met_flags)
        return ServeResult(
            requests=len(jobs), rejected=len(self.rejected), met=met,
            slo_attainment=met / len(jobs) if jobs else 0.0, goodput_rps=met / span if span else 0.0, span_s=span,
            prefill_s=self.prefill_s, wasted_prefill_s=self.wasted_s, preemptions=self.preemptions,
            prefix_hits=self.hits, block_refs=self.refs, ttft_s=ttft,
            met_by_tenant={t: (sum(v) / len(v) if v else 0.0) for t, v in by_tenant.items()})
