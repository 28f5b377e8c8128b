"""The scheduling lab: caches of prefix blocks simulated on block ids, no tensors.

- scheduler.py: the chapter's given code (`CacheEntry`, `SchedulerSkeleton`, `build_scheduler`);
  the learner's five TODOs complete it.
- events.py: the event log every scheduler and policy writes (add, reuse, evict, skip).
- invariants.py: what any scheduler's state and log must satisfy (`check_invariants`).
- traces.py: Mooncake traces (shipped in ``kvsched_lab/data/traces``) and generated workloads.
- replay.py: the replay protocol (a trace through one policy at one capacity; the prefix-hit rate).
- replay_cache.py: ``KVSCHED_REPLAY_CACHE``: a library policy's replay computed once per key, shared through a folder.
- policies/: the policy zoo (LRU, FIFO, LFU, ARC, S3-FIFO, GDSF, Belady, vLLM's and SGLang's
  rules, the chapter's scheduler) behind one `Policy` API.
- serving/: tenants, service classes and deadlines on top of the replay: tenant-aware caches and a
  prefill server with queue orders and admission rules (notebook 10).

The policies live here, not beside ``sim``, because they are the same concern: a policy is a
scheduler on block ids that writes the lab's event log, and the replay runs policies, so a
separate folder would import ``sim`` and be imported by it. Nothing here imports torch, the KV
machinery (``kvsched_lab.kv``), the course, grading or the command line.
"""
