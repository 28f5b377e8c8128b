"""Serving on top of the cache: tenants, service classes, deadlines and overload (notebook 10).

The replays of ``sim`` ask which blocks a cache keeps; a server also asks *whose* blocks, and
*when* each request gets its first token. This folder adds what the chapter's engineering notes
name and the traces lack, on block ids, with no tensors:

- tenants.py: service classes (interactive, batch: priority and TTFT deadline), tenants, a
  deterministic tenant for every trace request, and a noisy neighbour's flood of unique prompts.
- tenant_cache.py: tenant-aware caches (static quotas, SGLang's priority eviction, a fair share
  in the spirit of the Virtual Token Counter, the chapter's score weighted by tenant) and
  `tenant_replay`: per-tenant hit rates and Jain's fairness index.
- server.py: `serve`, a discrete-event prefill server with a stated cost per uncached token:
  queue disciplines (FCFS, vLLM's and SGLang's priority rules, EDF), admission rules (admit all,
  the chapter's refuse-if-it-cannot-fit, bypass, Mooncake-style early rejection) and a cache that
  protects the blocks of queued requests; SLO attainment, goodput and wasted prefill work.
- serve_cache.py: when `serve` is cached (``KVSCHED_REPLAY_CACHE``): its key, and the checks a
  result read back must pass.

Nothing here imports torch, the KV machinery, the course, grading or the command line.
"""
