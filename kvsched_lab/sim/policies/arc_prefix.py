"""Prefix-aware ARC: ARC (arc.py; Megiddo & Modha, FAST'03), the course's robust reference, for whole requests.

ARC's rules are unchanged (T1/T2, the ghost lists B1/B2, the learned target p). Two rules of
`s3fifo-prefix` (s3fifo_prefix.py) adapt it to chained KV-block prompts, where a cached block is
worth something only while its whole prefix is cached too:

1. **Tail first.** A replay touches a prompt head to tail, so ARC's two LRU lists hold a
   request's head as its oldest block and evict it first, leaving the rest of the prompt cached
   but unreachable (a prefix hit stops at the first missing block). Here, when the next request
   arrives, the finished request's cached blocks are refreshed tail to head, so within one
   request the head is the most recent: a list evicts a request's tail before its head, as
   vLLM's free queue (a finished request's blocks join it tail first) and SGLang's leaf-only
   eviction do. The refresh only reorders blocks of one request among themselves (they were
   all touched during it); no block changes list and p does not move.
2. **The last block of a prompt is not cached** (a bypass, logged ``skip``): Mooncake's last
   block is partial, so the next turn re-hashes it (s3fifo_prefix.py measures its reuse: under
   3%). A skipped block leaves ARC's state as it was: it is no ghost hit and trims no ghost.

What the prefix structure changes, measured in docs/policy-notes.md: the order in which one
request's blocks leave, and which blocks enter at all; ARC's split between recency and frequency
is learned as before. Request structure comes from ``touch(key, bytes_, depth=d, last=...)``
(`PromptAwarePolicy`) and `begin_request`; a plain ``touch(key, bytes_)`` is ARC's.
ARC's inlined replay loop applies both rules (``prefix_rules``).
"""
from __future__ import annotations

from typing import Hashable, Optional, Sequence

from kvsched_lab.sim.policies.arc import ARCPolicy
from kvsched_lab.sim.policies.base import PromptAwarePolicy


class PrefixARCPolicy(PromptAwarePolicy, ARCPolicy):
    """ARC with a request's blocks refreshed tail first when it ends, and prompts' last blocks bypassed."""

    name = "arc-prefix"
    prefix_rules = True  # ARC's replay loop applies both rules (arc.py)

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.finished: Sequence[Hashable] = ()  # the block ids of the request in progress
        self._last = False  # the block being touched is its prompt's last (bypassed on a miss)

    def begin_request(self, hash_ids: Sequence[Hashable]) -> None:
        self._refresh_tail_first(self.finished)  # the previous request ended: its head becomes the newest
        self.finished = tuple(hash_ids)

    def _start_block(self, depth: int, last: bool) -> None:
        self._last = last

    def on_miss(self, key: Hashable, size: int) -> bool:
        if self._last:
            return False
        return super().on_miss(key, size)
