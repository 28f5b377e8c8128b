"""LRU: evict the least recently touched block, like vLLM v1's free-block queue.

vLLM keeps free blocks (``ref_cnt == 0``) in an intrusive doubly linked list and reuses the
least recently freed one first (``vllm/v1/core/block_pool.py``). Here ``entries`` itself is an
`OrderedDict` ordered oldest touch first, so a hit is ``move_to_end`` and a victim is the first
key: O(1) per touch. (A plain dict would also keep order, but popping its first key repeatedly
scans the deleted slots in front of it.) That is FIFO (fifo.py) plus the ``move_to_end`` on a hit,
so LRU reuses FIFO's replay loop with ``refresh_hits`` on.
"""
from __future__ import annotations

from typing import Hashable, List, Tuple

from kvsched_lab.policies.fifo import FIFOPolicy


class LRUPolicy(FIFOPolicy):
    """Least recently used first out; ``entries`` is ordered oldest touch first."""

    name = "lru"
    refresh_hits = True  # the one difference from FIFO, in `_replay`; `on_hit` for `touch`

    def on_hit(self, key: Hashable) -> None:
        self.entries.move_to_end(key)

    def snapshot(self) -> List[Tuple[Hashable, int]]:
        """``(key, bytes)``, most recently touched first (the last to be evicted first)."""
        return list(reversed(self.entries.items()))
