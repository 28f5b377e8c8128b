"""GDSF: GreedyDual-Size-Frequency (Cherkasova, 1998), with a block's prefill cost.

Each cached block has the value ``H = L + freq * cost / size``; the block with the lowest H is
evicted and the floor ``L`` rises to its H. Raising L ages every resident block at once, so
a once-hot block that stops being used is eventually evicted (which LFU never does).

Cost: a cached block saves its prefill, and a block's prefill attends to every token before it,
so the compute it saves grows with its depth in the prompt. We take ``cost = depth`` (1 for a
request's first block), the attention term that dominates long prompts; the per-block MLP cost
is the same for every block and is left out. Depth is an explicit argument: ``touch(key,
bytes_, depth=d)``; a plain ``touch(key, bytes_)`` counts depth 1 (then GDSF is LFU with dynamic
aging). `replay_requests` passes each block's 1-based position in its request, which is its
depth because Mooncake ids are chained prefixes.

The heap is the bounded lazy heap of seed-compact: records ``(H, version, key)``, valid while
the version (the touch clock at the push) is the key's; rebuilt when stale records outnumber live.
"""
from __future__ import annotations

from heapq import heapify, heappop, heappush, heapreplace
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.events import ADD, EVICT, REUSE
from kvsched_lab.policies.base import Policy
from kvsched_lab.scheduler import require_positive_int


class GDSFPolicy(Policy):
    """GreedyDual-Size-Frequency with ``cost = depth``; ``meta[key] = [freq, cost, H, version]``."""

    name = "gdsf"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.floor = 0.0  # L
        self.meta: Dict[Hashable, list] = {}
        self.heap: List[Tuple[float, int, Hashable]] = []
        self._depth = 1  # depth of the touch in progress, for the hooks

    def touch(self, prefix: Hashable, bytes_: int, depth: int = 1) -> None:
        """Touch `prefix`, the `depth`-th block of its prompt (1 = the first)."""
        require_positive_int("depth", depth)
        self._depth = depth
        super().touch(prefix, bytes_)

    def _push(self, key: Hashable, freq: int, size: int) -> None:
        h = self.floor + freq * self._depth / size
        self.meta[key] = [freq, self._depth, h, self.time]
        heappush(self.heap, (h, self.time, key))
        if len(self.heap) > 2 * len(self.meta) + 64:  # stale records outnumber live ones
            self.heap = [(m[2], m[3], k) for k, m in self.meta.items()]
            heapify(self.heap)

    def on_hit(self, key: Hashable) -> None:
        self._push(key, self.meta[key][0] + 1, self.entries[key])

    def on_insert(self, key: Hashable, size: int) -> None:
        self._push(key, 1, size)

    def victim(self) -> Hashable:
        while True:
            _, version, key = heappop(self.heap)
            m = self.meta.get(key)
            if m is not None and m[3] == version:
                return key

    def on_evict(self, key: Hashable, size: int) -> None:
        self.floor = self.meta.pop(key)[2]

    def snapshot(self) -> List[Tuple[Hashable, int, float, int, int]]:
        """``(key, bytes, H, freq, cost)``, the last to be evicted first."""
        order = sorted(self.meta.items(), key=lambda kv: (kv[1][2], kv[1][3]), reverse=True)
        return [(k, self.entries[k], m[2], m[0], m[1]) for k, m in order]

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        entries, meta, heap = self.entries, self.meta, self.heap
        emit = self.log.append_event
        add, evict, reuse = ADD, EVICT, REUSE  # locals: faster than globals in the loop
        cap, cur, hits, time, floor = self.capacity_bytes, self.current_bytes, self.hits, self.time, self.floor
        push, pop, replace = heappush, heappop, heapreplace
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                n = 0
                for key in ids:
                    if key not in entries:
                        break
                    n += 1
                out.append(n)
                for depth, key in enumerate(ids, 1):
                    time += 1
                    m = meta.get(key)
                    if m is not None:
                        hits += 1
                        freq = m[0] + 1
                        h = floor + freq * depth / entries[key]
                        m[0], m[1], m[2], m[3] = freq, depth, h, time
                        push(heap, (h, time, key))
                        emit((reuse, key))
                    else:
                        pushed = False
                        while cur + bytes_ > cap:
                            h, version, old = heap[0]
                            m = meta.get(old)
                            if m is not None and m[3] == version:
                                del meta[old]
                                floor = h
                                cur -= entries.pop(old)
                                emit((evict, old))
                                if cur + bytes_ <= cap:  # last victim: one sift swaps its record for the new
                                    h = floor + depth / bytes_
                                    replace(heap, (h, time, key))
                                    pushed = True
                                    break
                            pop(heap)
                        if not pushed:
                            h = floor + depth / bytes_
                            push(heap, (h, time, key))
                        entries[key] = bytes_
                        meta[key] = [1, depth, h, time]
                        cur += bytes_
                        emit((add, key))
                    if len(heap) > 2 * len(meta) + 64:
                        self.heap = heap = [(m[2], m[3], k) for k, m in meta.items()]
                        heapify(heap)
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time, self.floor = cur, hits, time, floor
        return out
