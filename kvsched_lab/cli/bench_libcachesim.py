"""libCacheSim next to the policy zoo: its caches built as the course's, and its C loop timed.

libCacheSim (the simulator of the S3-FIFO authors, Python package ``libcachesim``) is GPL-3.0,
so it is never a dependency of the course: it comes with the optional test extra
(``pip install -e .[crosscheck]``). Where it is installed, ``kvsched bench`` times its C loop on
the trace and capacity of its speed section and reports each policy's speed against it;
tests/test_crosscheck_libcachesim.py checks the policies' decisions against it, access by access.

A cache is built with one byte per block (``capacity_blocks`` bytes, every request 1 byte) and a
hash table sized to it (`hashpower`): libCacheSim's default of 2**24 buckets costs more to
allocate and walk than the whole replay. Its C loop reads the trace from an ``oracleGeneral``
file (24 bytes a request: time, id, size, next access), written once to a temporary folder.
Belady's next access is the 0-based position of the block's next touch, or, for none, a position
past the end (``next_uses``, as the course's Belady counts).
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Dict, Hashable, Iterator, List, Optional, Sequence

from kvsched_lab.cli.bench_rounds import VERDICT_MARKS, spread
from kvsched_lab.sim.policies.belady import next_uses

LIBCACHESIM_VERSION = "0.3.5"  # the version the crosscheck extra pins, whose decisions the tests compare
# Course policy -> libCacheSim cache class. Same decisions: fifo, lru, lfu, arc (tests check every
# access). s3fifo: libCacheSim's rules, not the course's (s3fifo.py). belady: libCacheSim's always
# caches the missed block, the course's may bypass it.
# sieve, lecar, cacheus, wtinylfu: same decisions.
CACHES = {"fifo": "FIFO", "lru": "LRU", "lfu": "LFU", "arc": "ARC", "s3fifo": "S3FIFO", "belady": "Belady",
          "sieve": "Sieve", "lecar": "LeCaR", "cacheus": "Cacheus", "wtinylfu": "WTinyLFU"}


def libcachesim() -> Optional[ModuleType]:
    """The installed ``libcachesim`` package, or None (the crosscheck extra is optional)."""
    try:
        import libcachesim as lcs
    except ImportError:
        return None
    return lcs


def hashpower(capacity_blocks: int) -> int:
    """log2 of a hash table with at least twice as many buckets as the cache holds blocks."""
    return max(4, (2 * capacity_blocks).bit_length())


def make_cache(lcs: ModuleType, policy: str, capacity_blocks: int):
    """libCacheSim's cache for the course policy `policy`, holding `capacity_blocks` 1-byte blocks."""
    return getattr(lcs, CACHES[policy])(capacity_blocks, hashpower=hashpower(capacity_blocks))


def write_oracle_trace(keys: Sequence[int], path: str) -> None:
    """`keys` as an oracleGeneral trace: per touch ``<u4 time, <u8 id, <u4 size, <i8 next access``."""
    import numpy as np

    records = np.zeros(len(keys), dtype=[("time", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    records["time"] = np.arange(len(keys), dtype=np.uint32)
    records["id"] = np.asarray(keys, dtype=np.uint64)
    records["size"] = 1
    records["next"] = next_uses(keys)
    records.tofile(path)


class LibCacheSimTimer:
    """Times libCacheSim's C loop on one trace at one capacity, one pass of every cache per `run_once`."""

    def __init__(self, lcs: ModuleType, keys: Sequence[int], capacity_blocks: int, folder: str) -> None:
        self.lcs = lcs
        self.capacity_blocks = capacity_blocks
        self.num_touches = len(keys)
        self.path = os.path.join(folder, "trace.oracleGeneral.bin")
        write_oracle_trace(keys, self.path)
        self.runs: Dict[str, List[float]] = {name: [] for name in CACHES}
        self.hits: Dict[str, int] = {}

    def run_once(self) -> None:
        """One timed pass of every cache over the whole trace (a fresh cache and reader each)."""
        for name in CACHES:
            reader = self.lcs.TraceReader(self.path, self.lcs.TraceType.ORACLE_GENERAL_TRACE)
            cache = make_cache(self.lcs, name, self.capacity_blocks)
            start = time.process_time()  # CPU seconds, as the zoo's replays are timed (bench_policies.py)
            miss_ratio, _ = cache.process_trace(reader)
            self.runs[name].append(time.process_time() - start)
            self.hits[name] = round((1 - miss_ratio) * self.num_touches)

    def report(self, rows: Dict[str, Dict[str, Any]], ours: Dict[str, Sequence[float]]) -> Dict[str, Any]:
        """Median seconds of each cache; adds to `rows` ``vs_libcachesim``, the median over rounds of
        its seconds over ours (`ours`: each policy's seconds per round, the rounds of `run_once`), with
        those ratios and their band (``libcachesim_spread``)."""
        caches = {}
        for name, runs in self.runs.items():
            seconds = statistics.median(runs)
            caches[CACHES[name]] = {"policy": name, "seconds": seconds, "touches_per_s": self.num_touches / seconds,
                                    "block_hits": self.hits[name]}
            if name in rows:
                ratios = [theirs / mine for theirs, mine in zip(runs, ours[name])]
                rows[name].update(vs_libcachesim=statistics.median(ratios), vs_libcachesim_per_round=ratios,
                                  libcachesim_spread=list(spread(ratios)))
        return {"version": self.lcs.__version__, "hashpower": hashpower(self.capacity_blocks), "caches": caches}


@contextmanager
def libcachesim_timer(keys: Sequence[Hashable], capacity_blocks: int) -> Iterator[Optional[LibCacheSimTimer]]:
    """A `LibCacheSimTimer` for the bench, or None without the package (or for ids libCacheSim
    cannot read: it wants non-negative ints). Its trace file is removed on exit."""
    lcs = libcachesim()
    if lcs is None or not all(isinstance(k, int) and k >= 0 for k in keys):
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="kvsched-libcachesim-") as folder:
        yield LibCacheSimTimer(lcs, keys, capacity_blocks, folder)


# -- the bench's markdown: one more column in the speed table -----------------------------------
def markdown_header(speed: Dict[str, Any]) -> str:
    """The column's header cells (empty without libCacheSim)."""
    return " x libCacheSim |" if "libcachesim" in speed else ""


def markdown_rule(speed: Dict[str, Any]) -> str:
    return "---:|" if "libcachesim" in speed else ""


def markdown_cell(speed: Dict[str, Any], row: Dict[str, Any]) -> str:
    """Our speed over libCacheSim's (the median over rounds of its seconds / ours, their band in
    brackets), and the verdict where the policy has a target; blank for a policy it lacks."""
    if "libcachesim" not in speed:
        return ""
    ratio = row.get("vs_libcachesim")
    if ratio is None:
        return " |"
    low, high = row["libcachesim_spread"]
    cell = f" {ratio:.2f}x [{low:.2f}-{high:.2f}]"
    target = row.get("libcachesim_target")
    if target is None:
        return cell + " |"
    return cell + f" (>= {target:g}x{VERDICT_MARKS[row['libcachesim_verdict']]}) |"


def markdown_note(speed: Dict[str, Any]) -> List[str]:
    """A line under the table naming the version and what each compared cache decides."""
    lcs = speed.get("libcachesim")
    if lcs is None:
        return ["", "(x libCacheSim: install the crosscheck extra, `pip install -e .[crosscheck]`.)"]
    touches = ", ".join(f"{name} {c['touches_per_s'] / 1e6:.2f}M" for name, c in lcs["caches"].items())
    return ["", f"x libCacheSim: its C loop (libcachesim {lcs['version']}, process_trace on an oracleGeneral file, "
                f"hash table 2^{lcs['hashpower']}) over our replay, same trace and capacity, same run; touches/s "
                f"{touches}. Same decisions for fifo, lru, lfu, arc, sieve, lecar, cacheus, wtinylfu; its S3FIFO follows its own rules (s3fifo.py) "
                "and its Belady never bypasses."]
