"""LRU: evict the least recently touched block, whichever cached block that is.

``entries`` itself is an `OrderedDict` ordered oldest touch first, so a hit is ``move_to_end``
and a victim is the first key: O(1) per touch. (A plain dict would also keep order, but popping
its first key repeatedly scans the deleted slots in front of it.) That is FIFO (fifo.py) plus the
``move_to_end`` on a hit, so LRU reuses FIFO's replay loop with ``refresh_hits`` on.

What it is *not*: the eviction of vLLM or SGLang, although both are least-recently-used orders.

- Here every cached block is a candidate, ordered by its last touch. A replay touches a
  request's blocks head to tail, so among one request's blocks the head is evicted first.
- vLLM v1 (``vllm/v1/core/block_pool.py``, ``kv_cache_utils.py``) evicts only blocks that no
  running request holds (reference count 0). They wait in a free-block queue, a doubly linked
  list whose front is evicted first; a finished request's blocks join its end tail block first
  (the request's block list reversed), so a request's tail goes before its head, and a hit by a
  new request takes a block back out of the queue.
- SGLang (``python/sglang/srt/mem_cache/radix_cache.py``) keeps a radix tree of token
  sequences and evicts only leaves that no running request locks, a whole leaf (a run of
  tokens) at a time, least recently accessed first by default (the strategy is configurable); a parent becomes a candidate once its
  children are gone, so what stays cached is always a whole prefix.
"""
from __future__ import annotations

from typing import Hashable, List, Tuple

from kvsched_lab.sim.policies.fifo import FIFOPolicy


class LRUPolicy(FIFOPolicy):
    """Least recently touched first out, among all cached blocks; ``entries`` is ordered oldest touch first."""

    name = "lru"
    refresh_hits = True  # the one difference from FIFO, in `_replay`; `on_hit` for `touch`

    def on_hit(self, key: Hashable) -> None:
        self.entries.move_to_end(key)

    def snapshot(self) -> List[Tuple[Hashable, int]]:
        """``(key, bytes)``, most recently touched first (the last to be evicted first)."""
        return list(reversed(self.entries.items()))
