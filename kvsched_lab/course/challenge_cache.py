"""`challenge`'s replays in the replay cache (`kvsched_lab.sim.replay_cache`, ``KVSCHED_REPLAY_CACHE``).

Notebook 07's board replays each contender on every workload and capacity, and computes the bound
(Belady's MIN, warmed by the public part) for each: about 7 CPU s, the same in every kernel that
shows the board. With the cache folder set, each of those numbers is computed once and read back
by the next kernel, by the same rules as `replay`:

- only a library policy given by name is cached (never a learner's class or factory: its code is
  not in the key); the bound is library code throughout;
- the key is a SHA-256 of the bytes of every ``kvsched_lab/sim/**.py`` and of this file and
  challenge.py (the replay protocol, every policy, the warm-up and the bound's renaming), the kind
  of number, the policy, the capacity, and every request of both parts, in order, as `replay` keys
  them (`replay_cache.hash_requests`: a request whose fields are not plain ints and strings is never
  keyed);
- what is read back is checked: two ints, each at most its part's block references, else it is
  recomputed and overwritten.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Tuple

from kvsched_lab.sim import replay_cache
from kvsched_lab.sim.traces import Request

COURSE_FILES = tuple(Path(__file__).resolve().parent / name for name in ("challenge.py", "challenge_cache.py"))


def parts_digest(public: Sequence[Request], private: Sequence[Request]) -> Optional[str]:
    """SHA-256 of the sources and of both parts' requests (`replay_cache.hash_requests`), or None
    when nothing is to be cached (no cache folder, or a request it does not key)."""
    if replay_cache.cache_folder() is None:
        return None
    h = hashlib.sha256(replay_cache.source_digest().encode())
    for path in COURSE_FILES:
        h.update(hashlib.sha256(path.read_bytes()).digest())
    for part in (public, private):
        h.update(b"part\n")  # no request's line starts so: the parts cannot run into each other
        if not replay_cache.hash_requests(h, part):
            return None
    return h.hexdigest()


def cached_hits(digest: Optional[str], kind: str, policy: Any, capacity_blocks: int, refs: Tuple[int, int],
                compute: Callable[[], Tuple[int, int]]) -> Tuple[int, int]:
    """``compute()``'s hits on (public, private), read back from the cache when `digest` and `policy`
    allow it (`kind`: "policy" for a contender, "bound" for the bound, `policy` None then)."""
    if digest is None or type(capacity_blocks) is not int or (kind == "policy" and not replay_cache.is_library_policy(policy)):
        return compute()
    head = {"format": replay_cache.FORMAT, "kind": f"challenge-{kind}", "parts": digest, "policy": policy,
            "capacity_blocks": capacity_blocks}
    key = hashlib.sha256(json.dumps(head, sort_keys=True).encode()).hexdigest()

    def load(raw: bytes) -> Optional[Tuple[int, int]]:
        data = replay_cache.read_result(raw, key)
        if (isinstance(data, list) and len(data) == 2
                and all(type(h) is int and 0 <= h <= n for h, n in zip(data, refs))):
            return data[0], data[1]
        return None

    return replay_cache.cached(key, replay_cache.cache_folder(), load, compute, list)
