"""The frequency sketch behind W-TinyLFU (wtinylfu.py): a counting Bloom filter, as libCacheSim builds it.

TinyLFU (Einziger et al., ACM ToS 2017) estimates how often each key was seen recently with a
few counters per key shared by all keys: adding a key increments its ``hashes`` counters, its
estimate is the smallest of them (an over-estimate only, when other keys share all of them), and
every ``decay_every`` additions all counters are halved, so the counts forget old traffic.

The sizes and hashes are libCacheSim 0.3.5's (``dataStructure/minimalIncrementCBF.c``), so that
W-TinyLFU admits exactly what its ``WTinyLFU`` admits: for ``entries`` keys and error 0.001,
``-ln(0.001) / ln(2)**2`` = 14.4 counters a key and ``ceil(ln 2 * 14.4)`` = 10 hashes; key ``k``'s
i-th counter is ``(a + i * b) mod counters`` in 32-bit arithmetic, ``a`` and ``b`` the low 32 bits
of XXH64 of its 8 bytes with seeds 0x12345678 and 0x12344321. (Its name says "minimal increment",
but every one of the 10 counters is incremented, not only the smallest: the same here.)

XXH64 (Collet's xxHash, 64-bit) is written out below for an 8-byte input only, which is all
libCacheSim hashes. A key that is a non-negative int below 2**64 is hashed as its own 8 bytes
(libCacheSim's object id); any other key as the first 8 bytes of a BLAKE2b digest of its
``repr``, stable across processes (Python's own ``hash`` of a str is not). A key's counter
positions are computed once and remembered.

The fast replay (wtinylfu_replay.py) hashes whole arrays of keys at once with `positions`: the
same arithmetic on numpy arrays (``uint64`` products wrap modulo 2**64, as XXH64's do; ``uint32``
sums and products modulo 2**32, as libCacheSim's positions do); `xxh64_u64`, one key at a time,
is the specification it is tested against.
"""
from __future__ import annotations

import hashlib
import math
from typing import Any, Dict, Hashable, List, Sequence

import numpy as np

MASK64 = (1 << 64) - 1
MASK32 = (1 << 32) - 1
P1, P2, P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
P4, P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
SEED_A, SEED_B = 0x12345678, 0x12344321
ERROR_RATE = 0.001


def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & MASK64


def xxh64_u64(value: int, seed: int) -> int:
    """XXH64 of the 8 little-endian bytes of `value` (0 <= value < 2**64)."""
    h = (seed + P5 + 8) & MASK64
    k = _rotl64((value * P2) & MASK64, 31) * P1 & MASK64  # one round on a zero accumulator
    h = (_rotl64(h ^ k, 27) * P1 + P4) & MASK64
    h ^= h >> 33
    h = h * P2 & MASK64
    h ^= h >> 29
    h = h * P3 & MASK64
    return h ^ (h >> 32)


def _rotl64_array(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def xxh64_u64_array(values: np.ndarray, seed: int) -> np.ndarray:
    """`xxh64_u64` of every element of a ``uint64`` array, step for step."""
    p1, p2, p3, p4 = np.uint64(P1), np.uint64(P2), np.uint64(P3), np.uint64(P4)
    with np.errstate(over="ignore"):  # wrapping products are the point
        k = _rotl64_array(values * p2, 31) * p1
        h = _rotl64_array(np.uint64((seed + P5 + 8) & MASK64) ^ k, 27) * p1 + p4
        h ^= h >> np.uint64(33)
        h *= p2
        h ^= h >> np.uint64(29)
        h *= p3
        return h ^ (h >> np.uint64(32))


def _u64_array(keys: Sequence[object]) -> np.ndarray:
    """`key_u64` of every key, as a ``uint64`` array: at once when all are ints in range."""
    if set(map(type, keys)) <= {int}:  # bools and floats would convert silently: not them
        try:
            return np.array(keys, dtype=np.uint64)
        except OverflowError:  # a negative or too big int: it is digested, as `key_u64` does
            pass
    return np.fromiter(map(key_u64, keys), dtype=np.uint64, count=len(keys))


def key_u64(key: object) -> int:
    """The 8 bytes hashed for `key`: itself for a non-negative int below 2**64, else a stable digest."""
    if isinstance(key, int) and not isinstance(key, bool) and 0 <= key <= MASK64:
        return key
    return int.from_bytes(hashlib.blake2b(repr(key).encode(), digest_size=8).digest(), "little")


class CountingBloomFilter:
    """Counters for about `entries` keys; ``add`` counts a key, ``estimate`` reads its count."""

    def __init__(self, entries: int) -> None:
        per_key = -math.log(ERROR_RATE) / 0.480453013918201  # ln(2)**2
        self.hashes = int(math.ceil(0.693147180559945 * per_key))
        self.num_counters = max(int(math.ceil(per_key * entries)), 2 * self.hashes)
        # numpy, so that the fast replay adds a whole stretch of counts at once (wtinylfu_replay.py)
        self.counters = np.zeros(self.num_counters, dtype=np.int64)  # changed in place only, so ...
        self._cells = memoryview(self.counters)  # ... one view serves every touch (a new one each cost a third more)
        self._slots: Dict[Hashable, List[int]] = {}

    def __getstate__(self) -> Dict[str, Any]:  # a memoryview neither copies nor pickles: made again
        return {k: v for k, v in vars(self).items() if k != "_cells"}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        vars(self).update(state)
        self._cells = memoryview(self.counters)

    def slots(self, key: Hashable) -> List[int]:
        """The counter positions of `key` (computed once)."""
        got = self._slots.get(key)
        if got is None:
            v = key_u64(key)
            a, b, n = xxh64_u64(v, SEED_A) & MASK32, xxh64_u64(v, SEED_B) & MASK32, self.num_counters
            got = self._slots[key] = [((a + i * b) & MASK32) % n for i in range(self.hashes)]
        return got

    def positions(self, keys: Sequence[object]) -> np.ndarray:
        """The counter positions of every key in `keys` (repeats included), one column each (row i:
        every key's i-th position), as `slots` computes them one key at a time. A key need not be
        hashable: it is hashed by its bytes. Columns, because the fast replay takes a key's smallest
        counter over its positions: numpy reduces ten long rows three times faster than many short ones."""
        values = _u64_array(keys)
        a = xxh64_u64_array(values, SEED_A).astype(np.uint32)  # the low 32 bits
        b = xxh64_u64_array(values, SEED_B).astype(np.uint32)
        steps = np.arange(self.hashes, dtype=np.uint32)
        # uint32 sums and products wrap modulo 2**32, as libCacheSim's unsigned ints do
        return ((a + steps[:, None] * b) % np.uint32(self.num_counters)).astype(np.intp)

    # One key's ten counters are read and written through a memoryview of the array: its items
    # are Python ints, about twice as fast as numpy's per-call `add.at` or fancy indexing on ten.
    def add(self, key: Hashable) -> None:
        cells = self._cells
        for i in self.slots(key):  # one at a time: a position twice is counted twice
            cells[i] += 1

    def estimate(self, key: Hashable) -> int:
        return min(map(self._cells.__getitem__, self.slots(key)))

    def decay(self) -> None:
        """Halve every counter (integer halving, as libCacheSim's shift)."""
        self.counters >>= 1
