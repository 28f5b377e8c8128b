"""`radix`: SGLang's radix cache (``mem_cache/radix_cache.py``, SGLang 0.5.23), one course block per page.

SGLang keeps cached prefixes in a **compressed** radix tree: a node holds a run of blocks that
no cached prompt branches inside, its children are keyed by their first block, and a running
request holds a lock (``lock_ref``) on its whole path to the root. Here one course block is one
SGLang page. Under the replay protocol (one request at a time) a request goes through the
steps SGLang takes for it:

1. **match** (``match_prefix``): walk from the root along the request's blocks. Every node the
   walk enters gets the match's access time, *including* the node where the match ends inside
   its run: SGLang sets that node's time first and then splits it, so the part the request
   matched becomes a new parent node (with a fresh time of its own) and the tail the request
   never read keeps the refreshed time: it looks recently used. The matched path is locked.
2. **allocate**: the request's first new block asks room for all of its new blocks at once;
   if the free room falls short by ``n`` bytes, ``evict(n)`` collects the unlocked leaves in a
   heap ordered by ``last_access_time`` and removes **whole leaves**, oldest first, until at
   least ``n`` bytes are free, so a leaf of many blocks goes even when one block is missing. A
   parent left without children and unlocked joins the heap. The new blocks form one new
   node under the matched one (locked while the request runs).
3. **finish** (``cache_finished_req``: ``insert`` then ``dec_lock_ref``): the insert walks the
   request's path again and gives every node on it a new access time; then the locks go.

SGLang reads ``time.monotonic()`` for each access time; ``clock`` counts those reads, so the
times keep SGLang's order: a request's match time, the split node's time, then its finish time.
(SGLang's new node takes one more read after the finish time; giving it the finish time instead
changes no decision, because it and the path above it are never leaves together.) Ties, which
the real clock makes impossible, go to the node made first.

What the course adds to SGLang:

- a prompt longer than everything the cache can free is computed but only its first blocks
  are cached (``skip`` for the rest). SGLang would never admit it: its scheduler admits a
  request only when its tokens fit in the free and evictable budget, and it refuses a prompt
  longer than the token pool when the request arrives. This is the sequential replay's
  simplification, the same as `vllm`'s;
- a plain ``touch`` outside a request is a one-block request of its own, so ``touch`` alone
  gives LRU;
- input whose block ids do not name their whole prefix (the traces' and the engine's ids do):
  a block id is cached once, in the node that first took it, and a later request that holds it
  elsewhere hits it there and locks that node's path; new blocks after it hang under it,
  splitting its node if needed. Sizes in bytes: a request's new blocks are assumed the size of
  its first new block when room is asked for; a larger one later evicts what it still needs.

Two of these rules are what `vllm` lacks, and each can be switched off: ``whole_leaves=False``
evicts only the blocks missing, from the oldest leaf's tail; ``refresh_split_tail=False`` leaves
a split's unread tail its old time. With both off, on chained ids, the tree makes exactly vLLM's
decisions (the same hits and evictions, in the same order; notebook 08 shows it).

``evictable`` is SGLang's ``evictable_leaves``: the set of unlocked leaves, kept up to date as
nodes are locked, unlocked, split and evicted. SGLang's ``evict`` builds a heap from that set
each time it runs, O(leaves) per request that needs room. Here the heap ``leaf_heap`` persists
between evictions with the chapter's lazy deletion: a leaf's record ``(access, serial, node)``
is pushed whenever it becomes evictable or its access time changes while it is, and a popped
record counts only if its node is still evictable with that access time. The first such record
is the oldest evictable leaf, the one SGLang's fresh heap gives: the same decisions.
"""
from __future__ import annotations

import heapq
from typing import Dict, Hashable, Iterable, List, Optional, Sequence, Set, Tuple

from kvsched_lab.sim.events import ADD, EVICT, REUSE, SKIP
from kvsched_lab.sim.policies.base import Policy, prefix_hits


class RadixNode:
    """One node of the tree: a run of blocks that no cached prompt branches inside."""

    __slots__ = ("blocks", "num_bytes", "parent", "children", "access", "serial", "lock_ref")

    def __init__(self, blocks: List[Hashable], num_bytes: int, parent: Optional["RadixNode"], access: int,
                 serial: int) -> None:
        self.blocks = blocks  # block keys, head first
        self.num_bytes = num_bytes  # the blocks' sizes added up
        self.parent = parent  # None for the root
        self.children: Dict[Hashable, RadixNode] = {}  # first block of each child -> child
        self.access = access  # SGLang's last_access_time, as a tick of `RadixPolicy.clock`
        self.serial = serial  # order of creation: breaks ties between equal access times
        self.lock_ref = 0  # running requests whose path holds this node

    def __repr__(self) -> str:
        return f"RadixNode(blocks={self.blocks!r}, access={self.access}, lock_ref={self.lock_ref})"


class RadixPolicy(Policy):
    """SGLang's radix cache, one request at a time; see the module docstring for the rules."""

    name = "radix"

    def __init__(self, capacity_bytes: int, *, future: Optional[Sequence[Hashable]] = None,
                 whole_leaves: bool = True, refresh_split_tail: bool = True) -> None:
        super().__init__(capacity_bytes, future=future)
        # SGLang's two rules that vLLM lacks, each of which can be switched off to see what it does:
        self.whole_leaves = whole_leaves  # False: evict only the blocks needed, from a leaf's tail
        self.refresh_split_tail = refresh_split_tail  # False: a split's unread tail keeps its old time
        self.root = RadixNode([], 0, None, 0, 0)
        self.root.lock_ref = 1  # as in SGLang: the root is never a leaf to evict
        self.where: Dict[Hashable, RadixNode] = {}  # cached block -> the node holding it
        self.evictable: Set[RadixNode] = set()  # unlocked leaves (SGLang's evictable_leaves)
        self.leaf_heap: List[Tuple[int, int, RadixNode]] = []  # (access, serial, node), stale ones included
        self.clock = 0  # reads of SGLang's time.monotonic(): access times
        self.num_nodes = 1  # nodes ever made, the root included: the next serial
        self.locked_bytes = 0  # bytes of the nodes the request in progress locks
        # The request in progress (None between requests).
        self._ids: Optional[List[Hashable]] = None
        self._depth = 0  # blocks of it touched so far
        self._matched = 0  # its blocks found along the tree at its arrival
        self._locks: List[RadixNode] = []  # nodes it locked (each lock covers the path to the root)
        self._prev: Tuple[RadixNode, int] = (self.root, -1)  # the node and index of its previous block
        self._run: Optional[RadixNode] = None  # the new node its latest new blocks went into
        self._stopped = False  # a block found no room: cache none of its later new blocks

    # -- the tree ---------------------------------------------------------------------------
    def _tick(self) -> int:
        self.clock += 1
        return self.clock

    def _new_node(self, blocks: List[Hashable], num_bytes: int, parent: RadixNode, access: int) -> RadixNode:
        node = RadixNode(blocks, num_bytes, parent, access, self.num_nodes)
        self.num_nodes += 1
        parent.children[blocks[0]] = node
        return node

    def _update_leaf(self, node: RadixNode) -> None:
        """Keep `evictable` true for `node` (SGLang's _update_leaf_status)."""
        if node.lock_ref == 0 and not node.children and node is not self.root:
            self._file(node)
        else:
            self.evictable.discard(node)

    def _file(self, node: RadixNode) -> None:
        """`node` is (still) an evictable leaf, with its current access time: record it."""
        self.evictable.add(node)
        heap = self.leaf_heap
        heapq.heappush(heap, (node.access, node.serial, node))
        if len(heap) > 2 * len(self.evictable) + 64:  # stale records outnumber current ones: rebuild
            self.leaf_heap = heap = [(n.access, n.serial, n) for n in self.evictable]
            heapq.heapify(heap)

    def _split(self, node: RadixNode, length: int) -> RadixNode:
        """Cut `node` after its first `length` blocks; the head becomes its new parent (returned).

        As SGLang's _split_node: the head takes the node's lock count and a fresh access time; the
        tail keeps the node's identity, children and access time."""
        head_blocks, node.blocks = node.blocks[:length], node.blocks[length:]
        entries = self.entries
        head_bytes = sum(entries[k] for k in head_blocks)
        parent = node.parent
        head = self._new_node(head_blocks, head_bytes, parent, self._tick())
        head.lock_ref = node.lock_ref
        head.children[node.blocks[0]] = node
        node.parent, node.num_bytes = head, node.num_bytes - head_bytes
        where = self.where
        for k in head_blocks:
            where[k] = head
        return head

    def _lock(self, node: RadixNode) -> None:
        """SGLang's inc_lock_ref: every node from `node` up to the root gains a lock."""
        self._locks.append(node)
        while node is not self.root:
            if node.lock_ref == 0:
                self.locked_bytes += node.num_bytes
                self.evictable.discard(node)
            node.lock_ref += 1
            node = node.parent

    def _unlock(self, node: RadixNode) -> None:
        """SGLang's dec_lock_ref."""
        while node is not self.root:
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self.locked_bytes -= node.num_bytes
                self._update_leaf(node)
            node = node.parent

    def evict(self, num_bytes: int) -> int:
        """SGLang's evict: whole unlocked leaves, oldest access first, until `num_bytes` are freed.

        The candidates are `evictable`, read through `leaf_heap` (stale records skipped); a parent
        left childless and unlocked joins them. Returns the bytes freed: more than asked when a
        leaf holds several blocks, less when the unlocked leaves run out."""
        entries, where, emit, root = self.entries, self.where, self.log.append_event, self.root
        evictable, freed = self.evictable, 0
        while freed < num_bytes and self.leaf_heap:
            access, _, leaf = heapq.heappop(self.leaf_heap)
            if leaf not in evictable or leaf.access != access:  # stale: locked, evicted or touched since
                continue
            if not self.whole_leaves:  # only what is missing, deepest first; the rest stays a leaf
                while freed < num_bytes and len(leaf.blocks) > 1:
                    key = leaf.blocks.pop()
                    size = entries.pop(key)
                    del where[key]
                    emit((EVICT, key))
                    leaf.num_bytes -= size
                    freed += size
                if freed >= num_bytes:
                    heapq.heappush(self.leaf_heap, (access, leaf.serial, leaf))  # what is left stays a leaf
                    break
            for key in reversed(leaf.blocks):  # logged deepest first, the order vLLM frees a prompt in
                del entries[key], where[key]
                emit((EVICT, key))
            freed += leaf.num_bytes
            evictable.discard(leaf)
            parent = leaf.parent
            del parent.children[leaf.blocks[0]]
            if not parent.children and parent.lock_ref == 0 and parent is not root:
                self._file(parent)
        self.current_bytes -= freed
        return freed

    # -- requests ----------------------------------------------------------------------------
    def begin_request(self, hash_ids: Sequence[Hashable]) -> None:
        """The request arrives: match its blocks along the tree (refresh, split) and lock the path."""
        ids = list(hash_ids)
        for key in ids:  # a TypeError for an unhashable id, before anything changes
            hash(key)
        self.end_request()
        self._ids, self._depth = ids, 0
        access = self._tick()
        node, matched = self.root, 0
        while matched < len(ids):
            child = node.children.get(ids[matched])
            if child is None:
                break
            before, child.access = child.access, access  # set before the split: the tail keeps it
            blocks, length = child.blocks, 1
            while length < len(blocks) and matched + length < len(ids) and blocks[length] == ids[matched + length]:
                length += 1
            if length < len(blocks) and not self.refresh_split_tail:
                child.access = before
            matched += length
            node = self._split(child, length) if length < len(blocks) else child
            if node is not child:
                if child.access != before and child in self.evictable:  # the unread tail's new time
                    self._file(child)
                break
        self._matched = matched
        self._lock(node)
        self._prev = (node, len(node.blocks) - 1)

    def end_request(self) -> None:
        """The request in progress finishes: its path gets the insert's access time, then its locks go."""
        if self._ids is None:
            return
        access, root = self._tick(), self.root
        for node in self._locks:
            while node is not root and node.access != access:
                node.access = access
                node = node.parent
        for node in self._locks:
            self._unlock(node)
        self._ids, self._locks, self._run, self._stopped = None, [], None, False
        self._prev = (root, -1)

    def touch(self, prefix: Hashable, bytes_: int) -> None:
        """Use `prefix` as a one-block request of its own (inside a request: `touch_in_request`)."""
        self.validate(prefix, bytes_)
        self.begin_request([prefix])
        self.touch_in_request(prefix, bytes_, 1, True)
        self.end_request()

    def touch_in_request(self, prefix: Hashable, bytes_: int, depth: int, last: bool) -> None:
        """Touch the `depth`-th block of the request announced by `begin_request`, head to tail."""
        self.validate(prefix, bytes_)
        ids = self._ids
        if ids is None or depth != self._depth + 1 or depth > len(ids) or ids[depth - 1] != prefix:
            raise ValueError(f"touch_in_request({prefix!r}, depth={depth}) does not follow the request "
                             "begin_request announced, head to tail")
        self._depth = depth
        self.time += 1
        if depth <= self._matched:  # on the matched path
            self.hits += 1
            self.log.emit(REUSE, prefix)
            return
        node = self.where.get(prefix)
        if node is not None:  # cached elsewhere in the tree: only on ids that do not name their prefix
            self.hits += 1
            self.log.emit(REUSE, prefix)
            self._lock(node)
            self._prev, self._run = (node, node.blocks.index(prefix)), None
            return
        if self._stopped or self.locked_bytes + bytes_ > self.capacity_bytes:
            self._stopped = True  # every cached byte is locked: nothing to evict
            self.log.emit(SKIP, prefix)
            return
        run = self._run
        if run is None:  # the first block of a run of new blocks: room for the whole run at once
            shortfall = self._run_length(depth) * bytes_ - (self.capacity_bytes - self.current_bytes)
            if shortfall > 0:
                self.evict(shortfall)
        if self.current_bytes + bytes_ > self.capacity_bytes:  # a block larger than the run's first
            self.evict(self.current_bytes + bytes_ - self.capacity_bytes)
        if run is None:
            parent, index = self._prev
            if index < len(parent.blocks) - 1:  # hang the run right after the previous block
                parent = self._split(parent, index + 1)
            run = self._run = self._new_node([prefix], bytes_, parent, self.clock)
            self.evictable.discard(parent)
            self._lock(run)
        else:
            run.blocks.append(prefix)
            run.num_bytes += bytes_
            self.locked_bytes += bytes_
        self.where[prefix] = run
        self.entries[prefix] = bytes_
        self.current_bytes += bytes_
        self._prev = (run, len(run.blocks) - 1)
        self.log.emit(ADD, prefix)

    def _run_length(self, depth: int) -> int:
        """New blocks from the `depth`-th on, up to the first cached or repeated one."""
        ids, where, seen = self._ids, self.where, set()
        n = depth - 1
        while n < len(ids) and ids[n] not in where and ids[n] not in seen:
            seen.add(ids[n])
            n += 1
        return n - depth + 1

    # -- what learners and tests read ----------------------------------------------------------
    def nodes(self) -> List[RadixNode]:
        """Every node but the root, parents before children (children in insertion order)."""
        out, stack = [], list(reversed(self.root.children.values()))
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(reversed(node.children.values()))
        return out

    def snapshot(self) -> List[Tuple[Tuple[Hashable, ...], int, Optional[Hashable], int, bool]]:
        """``(blocks, bytes, parent's last block or None, access time, locked)`` of every node,
        parents before children."""
        root = self.root
        return [(tuple(n.blocks), n.num_bytes, None if n.parent is root else n.parent.blocks[-1], n.access,
                 n.lock_ref > 0) for n in self.nodes()]

    # -- the replay: the same steps a request at a time, as SGLang takes them ------------------
    def _replay(self, hash_id_lists: Iterable[Sequence[Hashable]], bytes_: int) -> List[int]:
        # A request whose unmatched blocks are all new (always, on chained ids) is allocated and
        # inserted in one go; any other goes block by block through `touch_in_request`.
        contains, touch, emit = self.entries.__contains__, self.touch_in_request, self.log.append_event
        entries, where, cap = self.entries, self.where, self.capacity_bytes
        out: List[int] = []
        for ids in hash_id_lists:
            out.append(prefix_hits(contains, ids))  # before anything changes
            self.begin_request(ids)
            matched = self._matched
            for key in ids[:matched]:
                emit((REUSE, key))
            self.hits += matched
            self.time += matched
            self._depth = matched
            rest = ids[matched:]
            if not rest:
                continue
            if self._run_length(matched + 1) < len(rest):
                for depth in range(matched + 1, len(ids) + 1):
                    touch(ids[depth - 1], bytes_, depth, depth == len(ids))
                continue
            fit = 0
            if self.locked_bytes + bytes_ <= cap:
                shortfall = len(rest) * bytes_ - (cap - self.current_bytes)
                if shortfall > 0:
                    self.evict(shortfall)
                fit = min(len(rest), (cap - self.current_bytes) // bytes_)
            if fit:
                new = list(rest[:fit])
                parent = self._prev[0]
                run = self._run = self._new_node(new, fit * bytes_, parent, self.clock)
                self._lock(run)
                for key in new:
                    where[key] = run
                    entries[key] = bytes_
                    emit((ADD, key))
                self.current_bytes += fit * bytes_
                self._prev = (run, fit - 1)
            for key in rest[fit:]:
                emit((SKIP, key))
            self._stopped = fit < len(rest)
            self.time += len(rest)
            self._depth = len(ids)
        return out
