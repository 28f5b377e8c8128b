"""kvsched-lab: KV-cache scheduling with real KV blocks, for the course notebooks.

One folder per concern, each importing only the ones listed before it:

- ``notebook_files``: reading and writing the course's .ipynb files (the one shared module).
- ``i18n``: the learner's language, runtime messages, the Chinese notebook edition.
- ``sim``: the scheduling lab on block ids: the chapter's scheduler skeleton, events, traces,
  the replay protocol, invariants and the policy zoo (``sim.policies``).
- ``kv``: the real KV machinery: block pool, tiny model, prefix-cache and concurrent engines.
- ``course``: what a learner's notebook touches (``import kvsched_lab.course as lab``): checks,
  hints, answers, widgets, plots, leaderboard and the challenge.
- ``grading``: instructor grading and the student release (left out of the student bundle).
- ``cli``: the ``kvsched`` command and its subcommands.

Scheduling code is torch-free; the real-KV parts (pool, model, engine) import torch on first
use, so ``import kvsched_lab`` stays fast for the grader and for CPU-only policy work. The names
below are the package's public API, each imported from its concern when first asked for.
"""
from importlib import import_module
from typing import Any

__version__ = "0.1.0"  # the distribution's version (pyproject.toml reads it); a tag v0.1.0 publishes it

from kvsched_lab.sim.events import EventLog, iter_events
from kvsched_lab.sim.invariants import check_invariants
from kvsched_lab.sim.scheduler import CacheEntry, SchedulerSkeleton, build_scheduler

# public name -> module that defines it, imported when first asked for
_LAZY = {
    "try_gpu": "kv.device", "default_dtype": "kv.device",
    "BlockAllocator": "kv.block_pool", "KVBlockPool": "kv.block_pool",
    "TinyDecoder": "kv.model", "TinyDecoderConfig": "kv.model",
    "PrefixCacheEngine": "kv.engine", "RequestResult": "kv.engine", "SchedulerEventError": "kv.engine",
    "real_kv_replay": "kv.real_kv",
    "MODEL_KV_SPECS": "kv.model_configs", "model_kv_bytes_per_token": "kv.model_configs",
    "model_kv_bytes_per_block": "kv.model_configs",
    "Request": "sim.traces", "load_trace": "sim.traces", "synthetic_trace": "sim.traces",
    "replay": "sim.replay", "ReplayResult": "sim.replay",
    "POLICIES": "sim.policies", "Policy": "sim.policies", "make_policy": "sim.policies",
}

__all__ = ["CacheEntry", "EventLog", "SchedulerSkeleton", "build_scheduler", "check_invariants",
           "iter_events", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f"kvsched_lab.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'kvsched_lab' has no attribute {name!r}")
