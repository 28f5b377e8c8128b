"""`kvsched bench`, sections 1, 2, 4 and 5: policy replay speed against the chapter's reference, heap
records per live entry, prefix-hit rates with the share of the LRU-to-Belady gap closed, and the sweep's CPU time per policy."""
from __future__ import annotations

import gc
import statistics
import time
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from kvsched_lab.cli.bench_libcachesim import libcachesim_timer
from kvsched_lab.cli.bench_rounds import round_ratios, speed_verdict, spread
from kvsched_lab.sim.policies import POLICIES, make_policy
from kvsched_lab.sim.policies.base import generic_replay_requests
from kvsched_lab.sim.replay import replay
from kvsched_lab.sim.traces import Request

SPEED_TARGET = 3.0  # every library policy, touches/s over the reference's
FAST_TARGET = 10.0  # lru, fifo, s3fifo
FAST_POLICIES = ("lru", "fifo", "s3fifo")
LIBCACHESIM_TARGETS = {"lru": 0.5}  # touches/s over libCacheSim's C loop for the same cache (issue 32)
ADAPTIVE_TARGET = 5.0  # the policies of issue 31, each beside its libCacheSim column where it has one
ADAPTIVE_POLICIES = ("sieve", "lecar", "cacheus", "wtinylfu", "arc-prefix", "lecar-prefix")
HEAP_TARGET = 2.0  # records per live entry, seed-compact and gdsf
SWEEP_TARGET_S = 60.0


def _reference_factory() -> Optional[Callable[[int], Any]]:
    """The instructor's reference scheduler, or None where ``solutions`` is absent (the student release)."""
    try:
        from solutions import KVCacheSchedulerSim
    except ImportError:
        return None
    return KVCacheSchedulerSim


def _build(name: str, capacity: int, requests: Sequence[Request]) -> Any:
    if name == "reference":
        return _reference_factory()(capacity)
    return make_policy(name, capacity, future=[k for r in requests for k in r.hash_ids])


def _cpu_timed(sim: Any) -> Tuple[Any, Callable[[], float]]:
    """`sim` with its ``replay_requests`` timed in CPU seconds (the calls `replay`'s wall_seconds
    covers: not its sorting), and a function reading the total. A scheduler without one gets the
    generic loop `replay` would run for it."""
    inner = getattr(sim, "replay_requests", None)
    if not callable(inner):
        inner = partial(generic_replay_requests, sim)
    spent = [0.0]

    def timed(id_lists: Sequence[Sequence[Any]], bytes_: int) -> List[int]:
        start = time.process_time()
        try:
            return inner(id_lists, bytes_)
        finally:
            spent[0] += time.process_time() - start

    sim.replay_requests = timed  # on this instance only
    return sim, lambda: spent[0]


# -- 1 and 2: speed and heap records ----------------------------------------------------------
def bench_speed(requests: Sequence[Request], blocks: int, repeats: int) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Replay CPU seconds of the reference and every policy in interleaved rounds; and heap records.

    Each of `repeats` rounds replays every policy (and libCacheSim's caches) once, between two runs
    of the reference (one more run of it than rounds). A policy's ``vs_reference`` is the median of
    its per-round ratios (`round_ratios`), ``spread`` their band and ``verdict`` its call against the
    target (`speed_verdict`); ``seconds`` is its median run. A replay runs on one core; its
    process's CPU time (`time.process_time`) leaves out the time other work on a shared machine
    holds the core, which wall time counts for whoever waits. Without the reference (the student
    release) its row and the ratios are left out (None); the heap table lists only the schedulers
    present (no ``seed`` there either)."""
    has_reference = _reference_factory() is not None
    names = ["reference", *POLICIES] if has_reference else list(POLICIES)
    seconds: Dict[str, List[float]] = {n: [] for n in names}
    last: Dict[str, Any] = {}

    def run(name: str) -> None:
        # Only the counts the tables need outlive a run. Kept whole, every policy's event log (half a
        # million tuples each) stayed alive, and a full garbage collection, which walks every live
        # object, fell inside whichever replay happened to trigger it: one policy's rounds then
        # differed by 2x. Collecting before each run starts every replay from the same small heap;
        # what lived before the section is frozen (`gc.freeze`), so neither that collection nor the
        # replay's own walk it, however big the calling process (a test worker, a notebook kernel).
        sim, cpu_seconds = _cpu_timed(_build(name, blocks, requests))
        gc.collect()
        result = replay(requests, sim, blocks)
        seconds[name].append(cpu_seconds())
        records = len(sim.queue) if name == "reference" else getattr(sim, "num_records", None)
        last[name] = {"block_refs": result.block_refs, "prefix_hit_rate": result.prefix_hit_rate,
                      "records": records, "live": len(sim.entries)}

    gc.collect()
    gc.freeze()
    try:
        with libcachesim_timer([k for r in requests for k in r.hash_ids], blocks) as lcs_timer:  # None without it
            if has_reference:
                run("reference")
            for _ in range(repeats):
                for name in names[1:] if has_reference else names:
                    run(name)
                if lcs_timer is not None:  # interleaved with ours, so machine load hits both alike
                    lcs_timer.run_once()
                if has_reference:
                    run("reference")
    finally:
        gc.unfreeze()
    touches = last[names[0]]["block_refs"]
    rows = {}
    for name in names:
        s = statistics.median(seconds[name])
        row: Dict[str, Any] = {"seconds": s, "touches_per_s": touches / s, "vs_reference": None, "target": None,
                               "spread": None, "verdict": None, "prefix_hit_rate": last[name]["prefix_hit_rate"]}
        if has_reference and name == "reference":
            row.update(vs_reference=1.0, target=1.0)
        elif has_reference:
            ratios = round_ratios(seconds["reference"], seconds[name])
            target = (FAST_TARGET if name in FAST_POLICIES else ADAPTIVE_TARGET if name in ADAPTIVE_POLICIES
                      else SPEED_TARGET)
            row.update(vs_reference=statistics.median(ratios), vs_reference_per_round=ratios, target=target,
                       spread=list(spread(ratios)), verdict=speed_verdict(ratios, target))
        rows[name] = row
    speed = {"trace_requests": len(requests), "touches": touches, "capacity_blocks": blocks,
             "repeats": repeats, "reference_runs": len(seconds["reference"]) if has_reference else 0,
             "policies": rows}
    if lcs_timer is not None:
        speed["libcachesim"] = lcs_timer.report(rows, {n: seconds[n] for n in names})
        for name, target in LIBCACHESIM_TARGETS.items():
            if "vs_libcachesim" in rows.get(name, {}):
                rows[name].update(libcachesim_target=target,
                                  libcachesim_verdict=speed_verdict(rows[name]["vs_libcachesim_per_round"], target))
    heap_rows = {}
    for name in ("reference", "seed", "seed-compact", "lfu", "gdsf", "belady"):
        if name not in last:  # no reference, or seed withheld (the student release)
            continue
        records, live = last[name]["records"], last[name]["live"]
        per_live = records / live if live else 0.0
        heap_rows[name] = {"records": records, "live": live, "records_per_live": per_live,
                           "target": HEAP_TARGET if name in ("seed-compact", "gdsf") else None}
    return speed, {"capacity_blocks": blocks, "policies": heap_rows}


# -- 4 and 5: the policy table and the sweep ---------------------------------------------------
def hit_rates(requests: Sequence[Request], capacities: Sequence[int],
              cpu_seconds: Optional[Dict[str, float]] = None) -> Dict[str, Dict[int, float]]:
    """Prefix-hit rate of every library policy at every capacity (Belady: its block-hit rate too).

    The id lists and Belady's future are built once for all replays. `cpu_seconds`, when given,
    gains each policy's CPU seconds over all capacities (building it and replaying)."""
    lists = [r.hash_ids for r in requests]
    future = [k for ids in lists for k in ids]
    refs = len(future)
    out: Dict[str, Dict[int, float]] = {name: {} for name in POLICIES}
    out["belady (block hits)"] = {}
    spent = cpu_seconds if cpu_seconds is not None else {}
    for cap in capacities:
        for name in POLICIES:
            start = time.process_time()
            policy = make_policy(name, cap, future=future)
            out[name][cap] = sum(policy.replay_requests(lists, 1)) / refs
            spent[name] = spent.get(name, 0.0) + time.process_time() - start
            if name == "belady":
                out["belady (block hits)"][cap] = policy.hits / refs
    return out


def gap_closed(rates: Dict[str, Dict[int, float]], name: str, cap: int) -> Optional[float]:
    """(policy - lru) / (belady - lru), all prefix-hit rates; Belady's block-hit rate, the bound of
    the replay protocol, is reported next to it (bypassing mid-prompt blocks, it exceeds its prefix hits)."""
    gap = rates["belady"][cap] - rates["lru"][cap]
    return (rates[name][cap] - rates["lru"][cap]) / gap if gap > 0 else None


def bench_policies(traces: Dict[str, Tuple[List[Request], str]], capacities: Sequence[int],
                   conversation_rates: Optional[Dict[str, Dict[int, float]]] = None) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for trace, (requests, source) in traces.items():
        rates = conversation_rates if trace == "conversation" and conversation_rates else hit_rates(requests, capacities)
        rows = {name: {str(cap): {"prefix_hit_rate": rates[name][cap], "gap_closed": gap_closed(rates, name, cap)}
                       for cap in capacities} for name in rates}
        online = [n for n in POLICIES if n != "belady"]
        best = {str(cap): max(online, key=lambda n: rates[n][cap]) for cap in capacities}
        out[trace] = {"source": source, "requests": len(requests), "capacities": list(capacities),
                      "policies": rows, "best_online": best}
    return out


def bench_sweep(requests: Sequence[Request], capacities: Sequence[int]) -> Tuple[Dict[str, Any], Dict[str, Dict[int, float]]]:
    """Every policy at every capacity, one core: CPU seconds (held to the target, as the speed
    section is: other work on a shared machine does not count), wall seconds beside them, and
    each policy's share, the slowest first, so that the report says where the time goes."""
    spent: Dict[str, float] = {}
    start, cpu_start = time.perf_counter(), time.process_time()
    rates = hit_rates(requests, capacities, spent)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    by_policy = dict(sorted(spent.items(), key=lambda item: -item[1]))
    return ({"requests": len(requests), "capacities": list(capacities), "policies": len(POLICIES),
             "replays": len(POLICIES) * len(capacities), "seconds": cpu, "wall_seconds": wall,
             "policy_seconds": by_policy, "target_s": SWEEP_TARGET_S, "ok": cpu <= SWEEP_TARGET_S}, rates)
