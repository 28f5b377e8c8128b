"""`radix`: a prefix tree with locks that evicts the least recently used unlocked leaf, like SGLang's RadixCache.

SGLang keeps cached prefixes in a radix tree; a running request holds a lock on its path, and
eviction takes leaves that no running request locks, least recently accessed first. Here the
tree has one node per block: a node's children are keyed by their block id, and a request's
first block hangs under the root. Under the replay protocol (`kvsched_lab.sim.replay`, one
request at a time), each request gets the next access time and:

1. matches its longest cached path (its prefix hits: the leading run of cached ids);
2. head to tail, a cached block is refreshed to the request's access time and locked; a
   missing one is inserted under the request's previous block (the root for the first), so the
   new blocks form a chain under the matched node. An insert that would exceed the capacity
   first evicts the unlocked leaf with the oldest access time (a parent whose last child went
   becomes a leaf); when no unlocked leaf is left, the rest of the request is not cached
   (``skip``). New nodes take the request's access time and are locked;
3. when the request ends, its locks are released.

A request ends when the next one begins (`begin_request`) or at `end_request`. A plain
``touch`` outside a request is a one-block request of its own (under the root), so a
``touch``-only caller sees LRU. Locking a node locks its whole path to the root (SGLang's lock
reference walks up the same way), so every unlocked node can become a leaf: with sizes in bytes,
a miss is skipped when the locked bytes plus its own exceed the capacity. Mooncake ids (and the
engine's keys) are chained, so a block id has one place in the tree; on other input a node
sits where it was first inserted, and a cached id is a hit wherever it sits. Ties between
leaves of equal access time (only possible on unchained input) go to the node inserted first.

Unlike SGLang, which builds a heap over all leaves at eviction time, the leaves that may be
evicted wait in a heap with lazy deletion: a node is pushed when it becomes an unlocked leaf
(at its request's end, or when its last child is evicted) as ``(access << 40 | serial, key)``;
a popped record is used only if its node is still cached with that access time and serial, and
still an unlocked leaf. At a request's end the heap is compacted if stale records outnumber the
nodes: O(log n) a touch. A leaf that becomes a candidate while evicting, older than every record
in the heap, is the next victim anyway: the replay loop keeps it aside instead of pushing it.
"""
from __future__ import annotations

import heapq
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP
from kvsched_lab.sim.policies.base import Policy, prefix_hits

ROOT = None  # parent of a request's first block; keys are never None (entries would clash)
SERIAL_BITS = 40  # a heap record is access << 40 | serial: nodes inserted before 2**40 stay ordered


class RadixPolicy(Policy):
    """SGLang-style radix cache; ``node[key] = [parent, num_children, access, serial]``."""

    name = "radix"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.node: Dict[Hashable, list] = {}  # key -> [parent key or ROOT, children, access time, serial]
        self.locked: Dict[Hashable, None] = {}  # nodes the request in progress locks (root paths)
        self.locked_bytes = 0
        self.heap: List[Tuple[int, Hashable]] = []  # candidate leaves (access << 40 | serial, key); stale ones too
        self.request = 0  # access time: requests begun so far
        self.num_inserted = 0  # nodes ever inserted: the serial of the next one
        self._prev: Hashable = ROOT  # the request's previous block: where a new block hangs
        self._stopped = False  # a block of the request in progress found no room: cache no more

    @property
    def num_records(self) -> int:
        """Records in the leaf heap, stale ones included."""
        return len(self.heap)

    def validate(self, prefix: Hashable, bytes_: int) -> None:
        if prefix is ROOT:
            raise TypeError("None is the radix tree's root and cannot be a block key")
        super().validate(prefix, bytes_)

    # -- requests ----------------------------------------------------------------------------
    def begin_request(self, hash_ids: Sequence[Hashable]) -> None:
        for key in hash_ids:  # reject the request before anything changes
            if key is ROOT:
                raise TypeError("None is the radix tree's root and cannot be a block key")
            hash(key)
        self.end_request()
        self.request += 1

    def end_request(self) -> None:
        """The request in progress ends: its locks are released and its leaves may be evicted."""
        node = self.node
        for key in self.locked:
            if node[key][1] == 0:
                self._push(key)
        self.locked.clear()
        self.locked_bytes = 0
        self._prev, self._stopped = ROOT, False
        if len(self.heap) > 2 * len(self.node) + 64:
            self._compact()

    def touch(self, prefix: Hashable, bytes_: int) -> None:
        """Use `prefix` as a one-block request of its own (inside a request: `touch_in_request`)."""
        self.validate(prefix, bytes_)
        self.end_request()
        self.request += 1
        super().touch(prefix, bytes_)
        self.end_request()

    def touch_in_request(self, prefix: Hashable, bytes_: int, depth: int, last: bool) -> None:
        Policy.touch(self, prefix, bytes_)

    # -- the tree and the leaf heap ------------------------------------------------------------
    def _record(self, key: Hashable) -> int:
        n = self.node[key]
        return (n[2] << SERIAL_BITS) | n[3]

    def _is_candidate(self, record: int, key: Hashable) -> bool:
        """A heap record still names an unlocked leaf with that access time and serial."""
        n = self.node.get(key)
        return n is not None and not n[1] and (n[2] << SERIAL_BITS) | n[3] == record and key not in self.locked

    def _push(self, key: Hashable) -> None:
        heapq.heappush(self.heap, (self._record(key), key))

    def _compact(self) -> None:
        # In place: the replay loop holds the heap as a local. Duplicates of a record go too.
        self.heap[:] = {item for item in self.heap if self._is_candidate(*item)}
        heapq.heapify(self.heap)

    def _pop_leaf(self) -> Hashable:
        """The unlocked leaf with the oldest access time (earliest inserted on a tie), out of the heap."""
        while True:
            record, key = heapq.heappop(self.heap)
            if self._is_candidate(record, key):
                return key

    def _lock_path(self, key: Hashable) -> None:
        locked, node, entries = self.locked, self.node, self.entries
        while key is not ROOT and key not in locked:
            locked[key] = None
            self.locked_bytes += entries[key]
            key = node[key][0]

    # -- the hooks -------------------------------------------------------------------------------
    def on_hit(self, key: Hashable) -> None:
        self.node[key][2] = self.request
        self._lock_path(key)
        self._prev = key

    def on_miss(self, key: Hashable, size: int) -> bool:
        if not self._stopped and self.locked_bytes + size > self.capacity_bytes:
            self._stopped = True  # every cached byte is locked: no leaf to evict
        return not self._stopped

    def victim(self) -> Hashable:
        return self._pop_leaf()

    def on_evict(self, key: Hashable, size: int) -> None:
        parent = self.node.pop(key)[0]
        if parent is not ROOT:
            p = self.node[parent]
            p[1] -= 1
            if p[1] == 0 and parent not in self.locked:
                self._push(parent)

    def on_insert(self, key: Hashable, size: int) -> None:
        parent = self._prev
        if parent is not ROOT:
            self.node[parent][1] += 1
        self.node[key] = [parent, 0, self.request, self.num_inserted]
        self.num_inserted += 1
        self.locked[key] = None
        self.locked_bytes += size
        self._prev = key

    def snapshot(self) -> List[Tuple[Hashable, int, Hashable, int, bool]]:
        """``(key, bytes, parent, access time, locked)`` of every node, in insertion order."""
        node, entries, locked = self.node, self.entries, self.locked
        return [(k, entries[k], n[0], n[2], k in locked) for k, n in sorted(node.items(), key=lambda kv: kv[1][3])]

    # -- the replay fast path: begin_request, touch_in_request and the hooks, inlined -------------
    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        entries, node, locked, heap, emit = self.entries, self.node, self.locked, self.heap, self.log.append_event
        heappush, heappop, contains = heapq.heappush, heapq.heappop, entries.__contains__
        add, evict, reuse, skip, root, shift = ADD, EVICT, REUSE, SKIP, ROOT, SERIAL_BITS
        cap, cur, hits, time, serial = self.capacity_bytes, self.current_bytes, self.hits, self.time, self.num_inserted
        out: List[int] = []
        try:
            for ids in hash_id_lists:
                n = prefix_hits(contains, ids)  # before anything changes
                if root in ids:  # `begin_request`'s checks: None is the root ...
                    self.begin_request(ids)
                hash(tuple(ids))  # ... and a TypeError for an unhashable id, before anything changes
                out.append(n)
                # The previous request ends (`end_request`, inlined): its unlocked leaves may go.
                for key in locked:
                    nd = node[key]
                    if not nd[1]:
                        heappush(heap, ((nd[2] << shift) | nd[3], key))
                locked.clear()
                if len(heap) > 2 * len(node) + 64:
                    self._compact()
                self.request = request = self.request + 1
                time += len(ids)
                locked_bytes, prev, stopped = 0, root, False
                next_leaf = None  # a new leaf older than every heap record: the next victim, kept out of the heap
                for key in ids:
                    nd = node.get(key)
                    if nd is not None:  # a hit: refresh, lock its path
                        hits += 1
                        emit((reuse, key))
                        nd[2] = request
                        if key not in locked:
                            locked[key] = None
                            locked_bytes += entries[key]
                            k = nd[0]
                            while k is not root and k not in locked:
                                locked[k] = None
                                locked_bytes += entries[k]
                                k = node[k][0]
                        prev = key
                        continue
                    if stopped or locked_bytes + bytes_ > cap:
                        stopped = True
                        emit((skip, key))
                        continue
                    last = None  # the latest victim, logged with the add in one call
                    while cur + bytes_ > cap:  # evict the oldest unlocked leaf (`_pop_leaf`, inlined)
                        if next_leaf is not None and next_leaf not in locked:  # a lock is all that can change it
                            old, next_leaf = next_leaf, None
                            nd = node[old]
                        else:
                            next_leaf = None
                            record, old = heappop(heap)
                            nd = node.get(old)
                            if nd is None or nd[1] or (nd[2] << shift) | nd[3] != record or old in locked:
                                continue  # a stale record
                        del node[old]
                        cur -= entries.pop(old)
                        if last is not None:
                            emit((evict, last))
                        last = old
                        parent = nd[0]
                        if parent is not root:
                            p = node[parent]
                            p[1] -= 1
                            if not p[1] and parent not in locked:  # a new leaf (`_push`, inlined)
                                record = (p[2] << shift) | p[3]
                                if heap and heap[0][0] < record:
                                    heappush(heap, (record, parent))
                                else:
                                    next_leaf = parent
                    if prev is not root:
                        node[prev][1] += 1
                    node[key] = [prev, 0, request, serial]
                    serial += 1
                    entries[key] = bytes_
                    cur += bytes_
                    locked[key] = None
                    locked_bytes += bytes_
                    prev = key
                    emit((add, key) if last is None else (evict, last, add, key))
                if next_leaf is not None and next_leaf not in locked:  # the heap holds every candidate between requests
                    nd = node[next_leaf]
                    heappush(heap, ((nd[2] << shift) | nd[3], next_leaf))
                self.locked_bytes, self._prev, self._stopped = locked_bytes, prev, stopped
        finally:  # keep the counters true even if the replay is interrupted
            self.current_bytes, self.hits, self.time, self.num_inserted = cur, hits, time, serial
        return out
