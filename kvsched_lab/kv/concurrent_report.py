"""`ConcurrentReport`: what one run of the concurrent engine did, and its figures named for a learner.

The engine (`concurrent.py`) fills one at the end of a run; notebook 08 shows `summary_rows` as a
table and plots the per-step series (``blocks_in_use``, ``preemption_steps``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from kvsched_lab.i18n import N_, _
from kvsched_lab.i18n.width import display_width

# Largest |logit difference| accepted between a served token and a full recompute: the same fp32
# math in another order (chunked prefill + decode vs one pass) differs by ~1e-6 on CPU.
LOGIT_TOLERANCE_FP32 = 1e-4
LOGIT_TOLERANCE_HALF = 5e-2  # fp16 / bf16 on a GPU


@dataclass
class ConcurrentReport:
    """What one concurrent run did; ``blocks_in_use`` and ``preemption_steps`` feed the plot."""

    requests: int
    requests_finished: int
    steps: int
    preemptions: int
    requests_preempted: int
    tokens_recomputed: int  # tokens computed again after a preemption (their K/V had been computed)
    tokens_generated: int
    prefill_tokens_queried: int  # tokens of every prefill, resumes included (vLLM's prefix-cache queries)
    prefill_tokens_cached: int  # ... served from cached blocks (its hits)
    partial_prefills: int  # prefill passes that stopped short of a prompt's end (chunked under the token budget)
    prefix_hit_rate: float
    num_blocks: int
    peak_blocks_in_use: int  # most blocks pinned by running requests at once
    evictions: int  # cached blocks overwritten
    blocks_in_use: List[int]  # pinned blocks after each step
    running: List[int]  # running requests after each step
    preemption_steps: List[int]  # the step of each preemption
    preempted_requests: List[int]  # the request (index in submission order) of each preemption
    ttft_steps: List[Optional[int]] = field(default_factory=list)  # per request: first-token step - arrival step
    outputs_checked: int = 0  # finished requests compared with a full recompute
    preempted_outputs_checked: int = 0
    max_abs_logit_diff: float = 0.0
    logit_tolerance: float = LOGIT_TOLERANCE_FP32
    outputs_match: Optional[bool] = None  # tokens equal and logits within tolerance; None before checking

    def summary(self) -> Dict[str, Any]:
        """The scalar figures (no per-step series)."""
        return {k: v for k, v in vars(self).items() if not isinstance(v, list)}

    def summary_rows(self) -> List[Tuple[str, str]]:
        """`summary` as ``(figure, value)`` rows, each figure named in the learner's language
        (`SUMMARY_LABELS`); a notebook shows them with ``display(lab.table(rows, headers=...))``."""
        rows = []
        for key, value in self.summary().items():
            if isinstance(value, bool) or value is None:
                shown = {True: _("yes"), False: _("no"), None: _("not checked")}[value]
            else:
                shown = f"{value:.4g}" if isinstance(value, float) else str(value)
            rows.append((_(SUMMARY_LABELS[key]), shown))
        return rows

    def summary_text(self) -> str:
        """`summary_rows` as aligned lines (padded by on-screen width), for a terminal."""
        rows = self.summary_rows()
        width = max(display_width(label) for label, _value in rows) + 2
        return "\n".join(label + " " * (width - display_width(label)) + shown for label, shown in rows)


# What `ConcurrentReport.summary_text` calls each figure (English; shown translated).
SUMMARY_LABELS: Dict[str, str] = {
    "requests": N_("requests"), "requests_finished": N_("requests finished"), "steps": N_("engine steps"),
    "preemptions": N_("preemptions"),
    "partial_prefills": N_("prefill steps that stopped mid-prompt (chunked prefill)"),
    "requests_preempted": N_("requests preempted at least once"),
    "tokens_recomputed": N_("tokens recomputed after a preemption"), "tokens_generated": N_("tokens generated"),
    "prefill_tokens_queried": N_("prefill tokens, resumes included"),
    "prefill_tokens_cached": N_("... of them found in cached blocks"), "prefix_hit_rate": N_("prefix-hit rate"),
    "num_blocks": N_("blocks in the pool"), "peak_blocks_in_use": N_("most blocks in use at once"),
    "evictions": N_("cached blocks overwritten"), "outputs_checked": N_("outputs compared with a full recompute"),
    "preempted_outputs_checked": N_("... of them preempted"), "max_abs_logit_diff": N_("largest |logit difference|"),
    "logit_tolerance": N_("logit tolerance"), "outputs_match": N_("outputs match"),
}
