"""Prefix-aware LeCaR: LeCaR (lecar.py; Vietri et al., HotStorage'18) for whole requests.

LeCaR's rules are unchanged (an LRU and an LFU expert, ghost lists, weights learned from
regret, libCacheSim's draws). The two rules `arc-prefix` (arc_prefix.py) takes from
`s3fifo-prefix` (s3fifo_prefix.py) adapt it to chained KV-block prompts, where a cached block is
worth something only while its whole prefix is cached too:

1. **Tail first.** A replay touches a prompt head to tail, so both experts hold a request's
   head as its oldest block (LRU: the least recent; LFU: among equal counts, the first to reach
   its count) and evict it first, leaving the rest cached but unreachable: a prefix hit stops
   at the first missing block. Here, when the next request arrives, the finished request's
   cached blocks are refreshed tail to head, in the LRU list and within each count's bucket,
   so both experts evict a request's tail before its head, as vLLM's free queue (a finished
   request's blocks join it tail first) and SGLang's leaf-only eviction do. No count changes
   and no weight moves: the refresh only reorders one request's blocks among themselves.
2. **The last block of a prompt is not cached** (a bypass, logged ``skip``): Mooncake's last
   block is partial, so the next turn re-hashes it (s3fifo_prefix.py measures its reuse: under
   3%). A skipped block leaves LeCaR's state as it was: no regret, no ghost removed, no draw.

What the prefix structure changes is measured in docs/policy-notes.md. Request structure comes
from ``touch(key, bytes_, depth=d, last=...)`` (`PromptAwarePolicy`) and `begin_request`; a plain
``touch(key, bytes_)`` is LeCaR's. LeCaR's fast loop (lecar_replay.py) applies both rules
(``prefix_rules``).
"""
from __future__ import annotations

from kvsched_lab.sim.policies.base import PromptAwarePolicy
from kvsched_lab.sim.policies.lecar import LeCaRPolicy


class PrefixLeCaRPolicy(PromptAwarePolicy, LeCaRPolicy):
    """LeCaR with a request's blocks refreshed tail first when it ends, and prompts' last blocks bypassed.

    `LeCaRPolicy` carries both rules behind ``prefix_rules`` (its `begin_request` and `on_miss`,
    and its fast loop); `PromptAwarePolicy` tells it which block is a prompt's last."""

    name = "lecar-prefix"
    prefix_rules = True

    def _start_block(self, depth: int, last: bool) -> None:
        self._last = last
