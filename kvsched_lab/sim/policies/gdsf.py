"""GDSF: GreedyDual-Size-Frequency (Cherkasova, HP Labs 1998), priced by the prefill a block saves.

Each cached block has the value ``H = L + freq * cost / size``; the block with the lowest H is
evicted (ties: least recently touched) and the floor ``L`` rises to its H. Raising L ages every
resident block at once, so a once-hot block that stops being used is eventually evicted (which
LFU never does). With unit cost and size GDSF is LFU with dynamic aging (LFUDA).

Cost: a cached block saves its prefill FLOPs, which are a per-token constant (the linear layers:
2 FLOPs per weight) plus attention to every earlier token, so deep blocks cost more. For a block
of B tokens at 1-based depth d, per layer, query p (0-based) attends to p + 1 keys, and QK^T and
AV take ``4 * heads * head_dim`` FLOPs per query-key pair. In units of one block's linear FLOPs::

    cost(d) = 1 + (d - 1 + (B + 1) / (2B)) / D,    D = P / (2 * layers * heads * head_dim * B)

with P the weights one token goes through (q, k, v, o and the MLP of every layer; the embedding is
a lookup and the LM head runs only for the last token, so neither is saved by a cached block).
Llama-3-8B (32 layers, hidden 4096, 32 heads of 128, 8 KV heads, MLP 14336) with Mooncake's
512-token blocks: P = 32 * (2*4096*4096 + 2*4096*1024 + 3*4096*14336) = 6.98e9, D = 52.0, so a
block at depth 52 saves twice what a first block saves. `LLAMA3_8B_COST_SCALE` is computed, not
typed in. The older ``cost = depth`` priced tails ~50x above heads on long prompts, so GDSF kept
tails whose heads it had evicted (useless for prefix hits): 4.5% prefix hits at 8k blocks on the
Mooncake conversation trace, against LRU's 17.8%.

Depth is an explicit argument: ``touch(key, bytes_, depth=d)``; a plain ``touch(key, bytes_)``
counts depth 1. `replay_requests` passes each block's 1-based position in its request, which is
its depth because Mooncake ids are chained prefixes.

The heap holds records of ``(H, last_used)``, at most one live record per key (``meta[key][4]``
is its ``last_used``). A hit only raises H in the usual case (freq grows, L never falls), so it
pushes nothing: a popped record that is behind its block's current (H, last_used) is pushed again
with the current one instead of evicting (a lazy re-push). That is exact: every block's current
key is at least its record's, so the first popped record that is current holds the true minimum.
Only a hit at a smaller depth can lower H; it pushes a fresh record and the old one becomes
garbage, dropped when popped or by a rebuild once stale records outnumber live ones.

A record is one int (`record`): H's IEEE-754 bits, which order as non-negative doubles do, above
64 bits of the touch time. Comparing two costs one int comparison, where an ``(H, last_used, key)``
tuple costs two or three (half the cached blocks tie on H with another), and the heap's
comparisons are most of a replay. A record names no key: ``touched[t]`` is the key touched at
time t. ``meta[key]`` is a tuple ``(freq, cost, H, last_used, record's last_used)``, replaced
rather than changed, since a tuple is cheaper to make and free than a list.
"""
from __future__ import annotations

import struct
from heapq import heapify, heappop, heappush, heapreplace
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE
from kvsched_lab.sim.policies.base import Policy, prefix_hits
from kvsched_lab.sim.scheduler import require_positive_int

MOONCAKE_BLOCK_TOKENS = 512


def prefill_cost_scale(num_layers: int, hidden: int, num_heads: int, num_kv_heads: int, head_dim: int,
                       ffn_hidden: int, block_tokens: int) -> float:
    """D: the depth (in blocks) at which a block's attention FLOPs equal its linear-layer FLOPs."""
    q_dim, kv_dim = num_heads * head_dim, num_kv_heads * head_dim
    weights_per_token = num_layers * (2 * hidden * q_dim + 2 * hidden * kv_dim + 3 * hidden * ffn_hidden)
    return weights_per_token / (2 * num_layers * q_dim * block_tokens)


# meta-llama/Meta-Llama-3-8B config.json; 52.0 with 512-token blocks.
LLAMA3_8B_COST_SCALE = prefill_cost_scale(num_layers=32, hidden=4096, num_heads=32, num_kv_heads=8,
                                          head_dim=128, ffn_hidden=14336, block_tokens=MOONCAKE_BLOCK_TOKENS)
_DIAGONAL = (MOONCAKE_BLOCK_TOKENS + 1) / (2 * MOONCAKE_BLOCK_TOKENS)  # attention inside the block itself


def block_cost(depth: int, scale: float = LLAMA3_8B_COST_SCALE) -> float:
    """Prefill FLOPs a cached block at 1-based `depth` saves, in units of one block's linear FLOPs."""
    return 1.0 + (depth - 1 + _DIAGONAL) / scale


TIME_MASK = (1 << 64) - 1  # a record's low 64 bits: its touch time
_PACK = struct.Struct(">dQ").pack  # H as a double, then the time, most significant byte first


def record(h: float, t: int) -> int:
    """The heap record of H = `h` (>= 0) at touch time `t`: an int that orders as ``(h, t)`` does."""
    return int.from_bytes(_PACK(h, t), "big")


Meta = Tuple[int, float, float, int, int]  # freq, cost, H, last_used, last_used of its record


def _rebuilt(meta: Dict[Hashable, Meta]) -> List[int]:
    """A fresh heap of every block's current record (dropping garbage and re-push debts)."""
    for key, m in meta.items():  # same keys, new values: allowed while iterating
        meta[key] = m[:4] + (m[3],)
    heap = [record(m[2], m[3]) for m in meta.values()]
    heapify(heap)
    return heap


class GDSFPolicy(Policy):
    """GreedyDual-Size-Frequency; ``meta[key] = (freq, cost, H, last_used, record's last_used)``."""

    name = "gdsf"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None,
                 cost_scale: float = LLAMA3_8B_COST_SCALE) -> None:
        super().__init__(capacity_bytes, future=future)
        if not cost_scale > 0:
            raise ValueError(f"cost_scale must be > 0, got {cost_scale!r}")
        self.cost_scale = cost_scale  # D of `block_cost`: smaller prices depth higher
        self.floor = 0.0  # L
        self.meta: Dict[Hashable, Meta] = {}
        self.heap: List[int] = []  # records, stale ones included
        self.touched: List[Hashable] = [None]  # touched[t]: the key of touch t (1-based), for records
        self._depth = 1  # depth of the touch in progress, for the hooks

    @property
    def num_records(self) -> int:
        """Heap records, stale ones included."""
        return len(self.heap)

    def touch(self, prefix: Hashable, bytes_: int, depth: int = 1) -> None:
        """Touch `prefix`, the `depth`-th block of its prompt (1 = the first)."""
        require_positive_int("depth", depth)
        self._depth = depth
        super().touch(prefix, bytes_)

    def touch_in_request(self, prefix: Hashable, bytes_: int, depth: int, last: bool) -> None:
        self.touch(prefix, bytes_, depth=depth)

    def on_hit(self, key: Hashable) -> None:
        self.touched.append(key)
        freq, _, old_h, _, record_time = self.meta[key]
        cost = block_cost(self._depth, self.cost_scale)
        h = self.floor + (freq + 1) * cost / self.entries[key]
        if h < old_h:  # a shallower touch lowered H: the record must move down, push a new one
            heappush(self.heap, record(h, self.time))
            record_time = self.time
        self.meta[key] = (freq + 1, cost, h, self.time, record_time)
        if len(self.heap) > 2 * len(self.meta) + 64:  # stale records outnumber live ones
            self.heap = _rebuilt(self.meta)

    def on_insert(self, key: Hashable, size: int) -> None:
        self.touched.append(key)
        cost = block_cost(self._depth, self.cost_scale)
        h = self.floor + cost / size
        self.meta[key] = (1, cost, h, self.time, self.time)
        heappush(self.heap, record(h, self.time))  # evictions popped as many records as they freed

    def victim(self) -> Hashable:
        heap, meta = self.heap, self.meta
        while True:
            t = heap[0] & TIME_MASK
            key = self.touched[t]
            m = meta.get(key)
            if m is not None and m[3] == t:  # current: the minimum
                heappop(heap)
                return key
            if m is None or m[4] != t:  # garbage: superseded by an eager push
                heappop(heap)
            else:  # behind its block's current key: re-push the current one
                heapreplace(heap, record(m[2], m[3]))
                meta[key] = m[:4] + (m[3],)

    def on_evict(self, key: Hashable, size: int) -> None:
        self.floor = self.meta.pop(key)[2]

    def snapshot(self) -> List[Tuple[Hashable, int, float, int, float]]:
        """``(key, bytes, H, freq, cost)``, the last to be evicted first."""
        order = sorted(self.meta.items(), key=lambda kv: (kv[1][2], kv[1][3]), reverse=True)
        return [(k, self.entries[k], m[2], m[0], m[1]) for k, m in order]

    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        # The hooks inlined for blocks of one size, as replays have (other sizes take the hooks):
        # then a miss in a full cache evicts exactly one block and the cache stays as full, so
        # neither the victim loop nor the add counts bytes.
        if not {bytes_}.issuperset(self.entries.values()):
            return Policy._replay(self, hash_id_lists, bytes_)
        entries, meta, heap, touched = self.entries, self.meta, self.heap, self.touched
        contains, note_request, lookup = entries.__contains__, touched.extend, meta.get
        emit = self.log.append_event
        add, evict, reuse, mask = ADD, EVICT, REUSE, TIME_MASK  # locals: faster than globals in the loop
        cap, cur, hits, time, floor = self.capacity_bytes, self.current_bytes, self.hits, self.time, self.floor
        push, pop, replace, pack, from_bytes = heappush, heappop, heapreplace, _PACK, int.from_bytes
        gone = (0, 0.0, 0.0, -1, -1)  # the meta of an evicted block: no record's time matches it
        costs = [0.0]  # costs[d] = block_cost(d), grown on demand: the same floats as `touch`
        fresh = [0.0]  # fresh[d] = costs[d] / bytes_: H - L of a new block at depth d
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                n = prefix_hits(contains, ids)
                out.append(n)
                note_request(ids)  # touched[time + i] = ids[i - 1]
                while len(costs) <= len(ids):
                    costs.append(block_cost(len(costs), self.cost_scale))
                    fresh.append(costs[-1] / bytes_)
                for depth, key in enumerate(ids, 1):
                    m = lookup(key)  # first: an unhashable id raises before it counts as a touch
                    time += 1
                    cost = costs[depth]
                    if m is not None:
                        hits += 1
                        freq = m[0] + 1
                        h = floor + freq * cost / bytes_
                        if h < m[2]:  # a shallower touch lowered H: push a new record
                            push(heap, from_bytes(pack(h, time), "big"))
                            meta[key] = (freq, cost, h, time, time)
                            if len(heap) > 2 * len(meta) + 64:
                                self.heap = heap = _rebuilt(meta)
                        else:
                            meta[key] = (freq, cost, h, time, m[4])
                        emit((reuse, key))
                        continue
                    if cur + bytes_ > cap:
                        while True:
                            t = heap[0] & mask
                            old = touched[t]
                            m = lookup(old, gone)
                            if m[3] == t:  # current: the victim (the common case first)
                                del meta[old]
                                del entries[old]
                                floor = m[2]
                                break
                            if m[4] != t:  # garbage
                                pop(heap)
                            else:  # behind: re-push the current key
                                replace(heap, from_bytes(pack(m[2], m[3]), "big"))
                                meta[old] = m[:4] + (m[3],)
                        h = floor + fresh[depth]
                        replace(heap, from_bytes(pack(h, time), "big"))  # swaps out the victim's record
                        emit((evict, old, add, key))  # the victim and the add, in one call
                    else:
                        h = floor + fresh[depth]
                        push(heap, from_bytes(pack(h, time), "big"))
                        emit((add, key))
                        cur += bytes_
                    entries[key] = bytes_
                    meta[key] = (1, cost, h, time, time)
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time, self.floor = cur, hits, time, floor
            del touched[time + 1:]  # an interrupted request noted keys it never touched
        return out
