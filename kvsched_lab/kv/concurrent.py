"""`ConcurrentEngine`: several requests at once on real KV blocks: prefill, decode, pinning and preemption.

The prefix-cache engine (`kvsched_lab.kv.engine`) serves one prompt at a time. A server runs many:
each request prefills its prompt (reusing cached prefix blocks), then decodes one token per step,
and every running request's blocks are pinned while the cache keeps the rest. This engine does
that on a `KVBlockPool` with the tiny model, the way vLLM v1 schedules by default
(``vllm/v1/core/sched/scheduler.py``). Each step has a budget of ``max_num_batched_tokens``
tokens (None: no limit), spent in this order:

1. **Running requests**, oldest admitted first, each scheduled for the tokens it has not computed
   yet, as many as the budget has left: one for a decoding request, a chunk of its prompt for
   one still prefilling (**chunked prefill**: a long prompt takes several steps). Blocks are
   allocated for the scheduled tokens only, from the free queue's front, evicting the cached
   block there. Full blocks (of the prompt or of generated tokens) enter the prefix cache. A
   request whose computed tokens reach its last one samples its next token.
2. **Preemption**: when a step cannot get a block, the policy's victim (waiting_queue.py) is
   preempted: its blocks are released, tail first, and it goes back to the waiting queue to be
   recomputed later from its prompt and the tokens it already generated (which its cached blocks
   may partly spare).
3. **Admission**, in a step without preemption, while budget is left: the waiting queue's head
   (first come first served, or vLLM's ``(priority, arrival)`` order) is admitted if the free
   blocks cover its whole prompt after its cached prefix (vLLM's ``scheduler_reserve_full_isl``,
   on by default); else admission stops for this step. Its cached blocks are pinned and its
   first chunk scheduled as in 1. At most `max_running` run at once.
4. A request that has generated its `output_length` tokens finishes and releases its blocks.
A request may arrive late (``submit(..., arrival_step=k)``: it waits from step k+1 on).

Tokens are greedy (argmax), so a preempted-and-resumed request must produce exactly the tokens,
and within float tolerance the logits, of an uninterrupted run; `check_outputs` compares every
finished request against a full recompute with ``model.forward``.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from kvsched_lab.kv.engine import block_id_tokens, chain_block_keys
from kvsched_lab.kv.block_manager import RefCountedBlockManager
from kvsched_lab.kv.concurrent_report import LOGIT_TOLERANCE_FP32, LOGIT_TOLERANCE_HALF, ConcurrentReport
from kvsched_lab.kv.model import TinyDecoder
from kvsched_lab.kv.waiting_queue import WaitingQueue, check_arrival, check_policy



@dataclass
class ConcurrentConfig:
    """Sizes of one concurrent run."""

    num_blocks: int  # KV blocks in the pool: pinned by running requests plus free (cached or empty)
    tokens_per_block: int = 4  # tokens in one KV block
    max_running: int = 4  # requests decoding at once (vLLM's max_num_seqs)
    max_output_tokens: int = 16  # cap on a request's output_length, to keep CPU runs short
    max_num_batched_tokens: Optional[int] = None  # tokens computed per step, all requests together; None: no cap
    scheduling_policy: str = "fcfs"  # waiting order and preemption victim: "fcfs" or vLLM's "priority"

    def __post_init__(self) -> None:
        check_policy(self.scheduling_policy)
        for name in ("num_blocks", "tokens_per_block", "max_running", "max_output_tokens", "max_num_batched_tokens"):
            value = getattr(self, name)
            if value is None and name == "max_num_batched_tokens":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be an int > 0, got {value!r}")

    @property
    def token_budget(self) -> float:
        """Tokens one step may compute."""
        return float("inf") if self.max_num_batched_tokens is None else self.max_num_batched_tokens


@dataclass
class ServedRequest:
    """One request's state and history in a concurrent run."""

    index: int  # position in the submitted list
    prompt: List[int]  # prompt token ids
    output_length: int  # tokens to generate (already capped)
    priority: int = 0  # smaller is more urgent (vLLM's convention); only the priority policy reads it
    arrival_step: int = 0  # it joins the waiting queue after this many engine steps
    first_token_step: Optional[int] = None  # the step that sampled its first token
    generated: List[int] = field(default_factory=list)  # sampled tokens so far
    step_logits: List[torch.Tensor] = field(default_factory=list)  # (vocab,) logits that sampled each token
    block_table: List[int] = field(default_factory=list)  # pool blocks of its tokens, head first
    num_computed_tokens: int = 0  # tokens whose K/V sit in its blocks
    num_preemptions: int = 0
    finished: bool = False

    @property
    def tokens(self) -> List[int]:
        """Prompt and generated tokens: what a resumed request recomputes."""
        return self.prompt + self.generated


class ConcurrentEngine:
    """Runs requests concurrently on a pool of real KV blocks; see the module docstring for the rules."""

    def __init__(self, model: TinyDecoder, config: ConcurrentConfig) -> None:
        self.model = model
        self.config = config
        self.blocks = RefCountedBlockManager(model.make_pool(config.num_blocks, config.tokens_per_block))
        self.requests: List[ServedRequest] = []
        self.waiting = WaitingQueue(config.scheduling_policy)  # arrived or not, each request until admitted
        self.running: List[ServedRequest] = []  # admission order: the last is preempted first
        self.step_count = 0
        self.preemption_steps: List[int] = []
        self.preempted_requests: List[int] = []
        self.blocks_in_use: List[int] = []
        self.running_counts: List[int] = []
        self.tokens_recomputed = 0
        self.prefill_tokens_queried = 0
        self.prefill_tokens_cached = 0
        self.partial_prefills = 0
        self.peak_blocks_in_use = 0

    # -- submitting ----------------------------------------------------------------------------
    def submit(self, prompt: Sequence[int], output_length: int, *, priority: int = 0,
               arrival_step: int = 0) -> ServedRequest:
        """Queue a request that fits the pool alone, prompt and (capped) output together, arriving after
        `arrival_step` steps (not in the past); `priority`: smaller first. A rejected one changes nothing."""
        prompt, output_length = self._checked(prompt, output_length)
        check_arrival(priority, arrival_step, self.step_count)
        request = ServedRequest(len(self.requests), prompt, output_length, priority, arrival_step)
        self.requests.append(request)
        self.waiting.add(request, self.step_count)
        return request

    def submit_trace(self, trace_requests: Iterable[Any], *, block_seed: int = 0) -> None:
        """Queue Mooncake requests: each block id becomes `tokens_per_block` tokens, output from the trace.

        All are checked first: one that cannot be served queues none (a ValueError naming it)."""
        bs, vocab = self.config.tokens_per_block, self.model.config.vocab_size
        checked = []
        for i, r in enumerate(trace_requests):
            tokens = [t for b in r.hash_ids for t in block_id_tokens(b, bs, vocab, block_seed)]
            try:
                checked.append(self._checked(tokens, max(int(r.output_length), 1)))
            except ValueError as e:
                raise ValueError(f"trace request {i}: {e}") from None
        for prompt, output_length in checked:
            self.submit(prompt, output_length)

    def _checked(self, prompt: Sequence[int], output_length: int) -> Tuple[List[int], int]:
        """The prompt as a list and the capped output length; ValueError/TypeError for a request that cannot run."""
        cfg, model_cfg = self.config, self.model.config
        prompt = [operator.index(t) for t in prompt]  # a TypeError for a float or a string token
        if not prompt or any(not 0 <= t < model_cfg.vocab_size for t in prompt):
            raise ValueError(f"a prompt needs at least one token, each in 0..{model_cfg.vocab_size - 1}")
        if isinstance(output_length, bool) or not isinstance(output_length, int) or output_length <= 0:
            raise ValueError(f"output_length must be an int > 0, got {output_length!r}")
        output_length = min(output_length, cfg.max_output_tokens)
        total = len(prompt) + output_length
        if total > model_cfg.max_positions:
            raise ValueError(f"{total} tokens exceed the model's max_positions={model_cfg.max_positions}")
        if -(-total // cfg.tokens_per_block) > cfg.num_blocks:
            raise ValueError(f"a request of {total} tokens needs {-(-total // cfg.tokens_per_block)} blocks; "
                             f"the pool has {cfg.num_blocks}")
        return prompt, output_length

    # -- running -------------------------------------------------------------------------------
    def run(self, max_steps: int = 100_000) -> ConcurrentReport:
        """Step until every request has finished; RuntimeError past `max_steps` (a stuck schedule)."""
        while self.waiting or self.running or self.waiting.num_not_arrived:
            if self.step_count >= max_steps:
                raise RuntimeError(f"not done after {max_steps} steps")
            self.step()
        return self.report()

    def step(self) -> None:
        """Advance every running request within the token budget, preempting when short of blocks; then admit.

        Like vLLM's scheduler: running requests first, and no admission in a step that preempted."""
        self.waiting.arrive(self.step_count)  # requests with arrival_step <= the steps run so far
        self.step_count += 1
        preemptions = len(self.preemption_steps)
        budget = self.config.token_budget
        for request in list(self.running):  # oldest admitted first
            if budget <= 0:
                break
            if request in self.running:  # not preempted earlier in this step
                budget -= self._advance(request, budget)
        if len(self.preemption_steps) == preemptions:
            self._admit(budget)
        used = self.blocks.num_used_blocks
        self.blocks_in_use.append(used)
        self.running_counts.append(len(self.running))

    def _admit(self, budget: float) -> None:
        cfg, blocks = self.config, self.blocks
        while self.waiting and len(self.running) < cfg.max_running and budget > 0:
            request = self.waiting.peek()
            tokens = request.tokens
            keys = chain_block_keys(tokens, cfg.tokens_per_block)
            hit = blocks.cached_prefix(keys)
            # Like vLLM, compute at least the last token: its logits sample the next one.
            hit = hit[: (len(tokens) - 1) // cfg.tokens_per_block]
            needed = -(-len(tokens) // cfg.tokens_per_block) - len(hit)
            free_after_pins = blocks.num_free_blocks - sum(1 for b in hit if blocks.ref_cnt[b] == 0)
            if needed > free_after_pins:
                if not self.running:  # nothing will ever free blocks: submit() makes this unreachable
                    raise RuntimeError(f"request {request.index} cannot fit an idle pool")
                return  # the head waits, and so do the requests behind it (vLLM's `break`)
            self.waiting.pop()
            for b in hit:
                blocks.pin(b)
            request.block_table = list(hit)
            num_cached = len(hit) * cfg.tokens_per_block
            if request.num_preemptions:
                self.tokens_recomputed += max(request.num_computed_tokens - num_cached, 0)
            self.prefill_tokens_queried += len(tokens)
            self.prefill_tokens_cached += num_cached
            request.num_computed_tokens = num_cached
            self.running.append(request)
            budget -= self._advance(request, budget)  # its blocks were checked free: no preemption

    def _advance(self, request: ServedRequest, budget: float) -> int:
        """Compute up to `budget` of the request's uncomputed tokens (1 when decoding); returns how many.

        Blocks for them come from the free queue, preempting a running request (the policy's victim)
        while none is free; 0 if that preempted the request itself."""
        bs, blocks = self.config.tokens_per_block, self.blocks
        tokens = request.tokens
        start = request.num_computed_tokens  # K/V in place; the rest is computed now
        end = start + int(min(len(tokens) - start, budget))
        while len(request.block_table) * bs < end:  # blocks for the scheduled tokens
            block = blocks.allocate()
            while block is None:
                victim = self.waiting.victim(self.running)
                self._preempt(victim)
                if victim is request:
                    return 0
                block = blocks.allocate()
            request.block_table.append(block)
            self._note_peak()
        logits = self.model.prefill(tokens[:end], request.block_table, start, blocks.pool)
        request.num_computed_tokens = end
        self.partial_prefills += end < len(tokens)
        if end // bs > start // bs:  # a block filled up: cache it
            self._cache_full_blocks(request, chain_block_keys(tokens[:end], bs))
        if end == len(tokens):  # caught up: its logits sample the next token
            self._sample(request, logits[-1])
        return end - start

    def _sample(self, request: ServedRequest, logits: torch.Tensor) -> None:
        if not request.generated:
            request.first_token_step = self.step_count
        request.generated.append(int(logits.argmax()))
        request.step_logits.append(logits.float().cpu())
        if len(request.generated) == request.output_length:
            request.finished = True
            self.running.remove(request)
            self.blocks.release(request.block_table)
            request.block_table = []

    def _preempt(self, request: ServedRequest) -> None:
        self.running.remove(request)
        self.blocks.release(request.block_table)
        request.block_table = []
        request.num_preemptions += 1
        self.preemption_steps.append(self.step_count)
        self.preempted_requests.append(request.index)
        self.waiting.prepend(request)  # vLLM: the front under fcfs, its (priority, arrival) place under priority

    def _cache_full_blocks(self, request: ServedRequest, keys: Sequence[str]) -> None:
        for key, block in zip(keys, request.block_table):
            self.blocks.cache(key, block)

    def _note_peak(self) -> None:
        self.peak_blocks_in_use = max(self.peak_blocks_in_use, self.blocks.num_used_blocks)

    # -- checking and reporting ----------------------------------------------------------------
    def check_consistency(self) -> None:
        """Raise AssertionError unless pins match the running requests and every running request's K/V is in place."""
        self.blocks.check([r.block_table for r in self.running])
        bs = self.config.tokens_per_block
        for r in self.running:
            assert len(r.block_table) == -(-r.num_computed_tokens // bs), f"request {r.index}: block table size"

    def check_outputs(self, requests: Optional[Sequence[ServedRequest]] = None) -> Dict[str, Any]:
        """Compare finished requests with a full recompute: same greedy tokens, logits within tolerance."""
        chosen = [r for r in (self.requests if requests is None else requests) if r.finished]
        tolerance = LOGIT_TOLERANCE_FP32 if self.model.dtype == torch.float32 else LOGIT_TOLERANCE_HALF
        worst, match = 0.0, True
        for r in chosen:
            full = self.model.forward(r.tokens[:-1])[len(r.prompt) - 1:].float().cpu()  # (output_length, vocab)
            served = torch.stack(r.step_logits)
            worst = max(worst, (served - full).abs().max().item())
            match &= r.generated == full.argmax(dim=-1).tolist()
        return {"checked": len(chosen), "preempted_checked": sum(r.num_preemptions > 0 for r in chosen),
                "max_abs_logit_diff": worst, "tolerance": tolerance, "match": match and worst <= tolerance}

    def report(self) -> ConcurrentReport:
        queried = self.prefill_tokens_queried
        return ConcurrentReport(
            requests=len(self.requests), requests_finished=sum(r.finished for r in self.requests),
            steps=self.step_count, preemptions=len(self.preemption_steps),
            requests_preempted=sum(r.num_preemptions > 0 for r in self.requests),
            tokens_recomputed=self.tokens_recomputed, tokens_generated=sum(len(r.generated) for r in self.requests),
            prefill_tokens_queried=queried, prefill_tokens_cached=self.prefill_tokens_cached,
            partial_prefills=self.partial_prefills,
            prefix_hit_rate=self.prefill_tokens_cached / queried if queried else 0.0,
            num_blocks=self.config.num_blocks, peak_blocks_in_use=self.peak_blocks_in_use,
            evictions=self.blocks.num_evictions, blocks_in_use=list(self.blocks_in_use),
            running=list(self.running_counts), preemption_steps=list(self.preemption_steps),
            preempted_requests=list(self.preempted_requests),
            ttft_steps=[None if r.first_token_step is None else r.first_token_step - r.arrival_step
                        for r in self.requests])


def run_concurrent(trace_requests: Sequence[Any], config: ConcurrentConfig, *, model: Optional[TinyDecoder] = None,
                   check: str = "preempted") -> ConcurrentReport:
    """Serve `trace_requests` (Mooncake `Request`s, in arrival order) concurrently and report.

    `check`: ``"preempted"`` compares every preempted-and-resumed request (and the first finished
    one) with a full recompute, ``"all"`` every request, ``"none"`` none.
    """
    if check not in ("preempted", "all", "none"):
        raise ValueError(f"check must be 'preempted', 'all' or 'none', got {check!r}")
    engine = ConcurrentEngine(model or TinyDecoder(device="cpu"), config)
    engine.submit_trace(trace_requests)
    report = engine.run()
    engine.check_consistency()
    if check != "none":
        chosen = engine.requests if check == "all" else (
            [r for r in engine.requests if r.num_preemptions] + engine.requests[:1])
        result = engine.check_outputs(chosen)
        report.outputs_checked, report.preempted_outputs_checked = result["checked"], result["preempted_checked"]
        report.max_abs_logit_diff, report.logit_tolerance = result["max_abs_logit_diff"], result["tolerance"]
        report.outputs_match = result["match"]
    return report
