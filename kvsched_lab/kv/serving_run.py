"""`serve_on_real_kv`: notebook 10's service classes on real KV blocks, through the concurrent engine.

The block-id server (``kvsched_lab.sim.serving.server``) prices a prefill by a cost per token.
This run computes every token instead: each request of a `Workload` is served by `ConcurrentEngine`
(the tiny model, a real `KVBlockPool`, chunked prefill under a token budget, decode, preemption),
and its time to first token is read off the engine's own steps:

- each block id becomes ``tokens_per_block`` tokens, as ``ConcurrentEngine.submit_trace`` does;
- a request arrives at the step of its timestamp: one engine step stands for `step_s` seconds of
  the trace's clock at `load` (a step computes at most ``max_num_batched_tokens`` tokens, so a busy
  step costs roughly the same time, as a compute-bound step of a real engine does);
- its class gives its priority (read only by ``scheduling_policy="priority"``) and its deadline,
  ``ttft_deadline_s / step_s`` steps;
- its TTFT is the steps from its arrival to the step that sampled its first token; it meets its
  SLO when that is at most its deadline.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from kvsched_lab.kv.concurrent import ConcurrentConfig, ConcurrentEngine
from kvsched_lab.kv.concurrent_report import ConcurrentReport
from kvsched_lab.kv.engine import block_id_tokens
from kvsched_lab.kv.model import TinyDecoder
from kvsched_lab.sim.serving.tenants import Workload


@dataclass
class ClassOutcome:
    """One service class in one run."""

    requests: int
    met: int  # first token within the class's deadline
    deadline_steps: float
    ttft_steps: List[int] = field(default_factory=list)  # its requests', in arrival order

    @property
    def slo_attainment(self) -> float:
        return self.met / self.requests if self.requests else 0.0

    @property
    def mean_ttft_steps(self) -> float:
        return sum(self.ttft_steps) / len(self.ttft_steps) if self.ttft_steps else 0.0


@dataclass
class RealKVServeResult:
    """What `serve_on_real_kv` measured: the engine's report and each class's TTFTs."""

    report: ConcurrentReport
    by_class: Dict[str, ClassOutcome]  # class name -> outcome
    outputs_match: Optional[bool]  # every request's tokens and logits equal a full recompute; None if unchecked


def serve_on_real_kv(workload: Workload, config: ConcurrentConfig, *, step_s: float, load: float = 1.0,
                     model: Optional[TinyDecoder] = None, check: bool = True, block_seed: int = 0) -> RealKVServeResult:
    """Serve every request of `workload` on real KV blocks (module docstring) and measure each class's TTFT.

    A request the pool or the model cannot hold raises a ValueError naming it. `check` compares every
    finished request with a full recompute."""
    for name, value in (("step_s", step_s), ("load", load)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{name} must be a number > 0, got {value!r}")
    if not workload.requests:
        raise ValueError("the workload has no requests")
    model = model or TinyDecoder(device="cpu")
    engine = ConcurrentEngine(model, config)
    bs, vocab, t0 = config.tokens_per_block, model.config.vocab_size, workload.requests[0].timestamp
    for i, r in enumerate(workload.requests):
        tokens = [t for b in r.hash_ids for t in block_id_tokens(b, bs, vocab, block_seed)]
        arrival = round((r.timestamp - t0) / 1000.0 / load / step_s)
        if arrival < 0:
            raise ValueError(f"request {i} arrives before the first: the workload is not in arrival order")
        try:  # the engine is this call's own: a request refused here leaves nothing behind
            engine.submit(tokens, max(int(r.output_length), 1), priority=workload.service_of(i).priority,
                          arrival_step=arrival)
        except ValueError as e:
            raise ValueError(f"request {i}: {e}") from None
    report = engine.run()
    by_class: Dict[str, ClassOutcome] = {}
    for i, ttft in enumerate(report.ttft_steps):
        service = workload.service_of(i)
        outcome = by_class.setdefault(service.name, ClassOutcome(0, 0, service.ttft_deadline_s / step_s))
        outcome.requests += 1
        outcome.ttft_steps.append(ttft)
        outcome.met += ttft <= outcome.deadline_steps
    return RealKVServeResult(report, by_class, engine.check_outputs()["match"] if check else None)
