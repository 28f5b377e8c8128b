"""The replay cache: a library policy's replay, computed once per key and shared through a folder.

Set ``KVSCHED_REPLAY_CACHE=<folder>`` and `kvsched_lab.sim.replay.replay` stores and loads the
`ReplayResult` of a *library policy given by name* in that folder. Unset (the default), nothing
is cached; `kvsched bench` switches it off (`switched_off`), since it times computing. A
learner's class, factory or instance is never cached, nor a name the registry maps to a class
defined outside this package: their code is not in the key.

The key is a SHA-256 of everything that determines the result: the bytes of every
``kvsched_lab/sim/**.py`` (the replay, the traces and every policy), the policy name and its
arguments (capacity in blocks and bytes), ``metric``, ``block_tokens``, ``per_request``, and each
request's timestamp, lengths and block ids in the order given. Change any of them and the key
changes: a miss, never a stale hit.

One key is computed once across processes: ``<key>.lock`` is held (``fcntl.flock``, released by
the kernel even if the holder dies) while a process computes, so a second kernel asking for the
same key waits, then reads the first one's result. Where ``fcntl`` is missing (Windows) there is
no lock: two processes may compute the same key, and each file is still written whole (written to
a temporary name, then renamed).

A cache folder is shared data, so a file read back is checked, never trusted: its format tag, its
key, each field's type, and every count the requests fix (requests, block references, prompt
tokens, the rate as hits over references, the per-request hits' sum) must match. A corrupt,
foreign or inconsistent file is recomputed and overwritten. A result read back says so
(``from_cache=True``); its ``wall_seconds`` is the computing run's, not a measurement of this one.

`cached` (the lock, the check, the atomic write) and `hash_requests` serve other trace-level
simulations too: `kvsched_lab.kv.tiers.replay_cache` keys and checks ``tier_replay`` with them.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import tempfile
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional, Sequence

ENV = "KVSCHED_REPLAY_CACHE"  # the folder; unset or empty: no cache
FORMAT = "kvsched-replay-cache/1"  # the tag every cache file carries; bump it when the layout changes
SIM_FOLDER = Path(__file__).resolve().parent  # kvsched_lab/sim: its sources are part of every key
PLAIN = frozenset((int, str))  # the only field types keyed: their repr is exact and the same in every process


def cache_folder() -> Optional[Path]:
    """The folder named by ``KVSCHED_REPLAY_CACHE``, created if missing; None when unset."""
    raw = os.environ.get(ENV, "")
    if not raw:
        return None
    folder = Path(raw).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{ENV}={raw!r} is not a folder; point it at a folder, or unset it to replay without a cache")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def switched_off() -> Iterator[None]:
    """No cache inside: ``KVSCHED_REPLAY_CACHE`` is unset, then put back as it was.

    For what times a replay (`kvsched bench`): a result read back would time a file read, not the
    policy, and a computing run would time its writes too."""
    saved = os.environ.pop(ENV, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[ENV] = saved


def source_digest(folder: Path = SIM_FOLDER) -> str:
    """SHA-256 of every ``*.py`` under `folder`, each with its path relative to `folder`, in path order."""
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(folder).as_posix().encode()
        data = path.read_bytes()
        h.update(b"%d:%s%d:" % (len(rel), rel, len(data)))
        h.update(data)
    return h.hexdigest()


def is_library_policy(name: Any) -> bool:
    """True when `name` is a registry name whose class is defined in this package's ``sim/`` sources."""
    if not isinstance(name, str):
        return False
    from kvsched_lab.sim.policies import POLICIES

    cls = POLICIES.get(name)
    if cls is None:
        return False
    try:
        where = Path(inspect.getfile(cls)).resolve()
    except (TypeError, OSError):
        return False
    return SIM_FOLDER in where.parents


def replay_key(name: str, capacity_blocks: int, requests: Sequence[Any], *, block_bytes: int, metric: str,
               block_tokens: int, per_request: bool, sources: str) -> Optional[str]:
    """The cache key of one replay, or None when a request's fields are not plain ints and strings
    (an id whose repr could differ between processes, or match another id's, is never keyed)."""
    h = hashlib.sha256()
    args = {"format": FORMAT, "sources": sources, "policy": name, "capacity_blocks": capacity_blocks,
            "block_bytes": block_bytes, "metric": metric, "block_tokens": block_tokens, "per_request": per_request}
    h.update(json.dumps(args, sort_keys=True).encode())
    return h.hexdigest() if hash_requests(h, requests) else None


def plain_fields(obj: Any, cls: type) -> Optional[list]:
    """`obj`'s field values in order when it is exactly a `cls` (a subclass could answer otherwise)
    whose fields are ints, floats or strings, the values a key can hold; else None (never keyed)."""
    if type(obj) is not cls:
        return None
    values = [getattr(obj, f.name) for f in fields(cls)]
    return values if all(type(v) in (int, float, str) for v in values) else None


def hash_requests(h: Any, requests: Sequence[Any]) -> bool:
    """Feed each request's timestamp, lengths and block ids, in the order given, to the hash `h`;
    False (the call is not to be keyed) when a field is not a plain int or string."""
    for r in requests:
        head = (r.timestamp, r.input_length, r.output_length)
        if type(r.hash_ids) is not tuple or not PLAIN.issuperset(map(type, head)) or not PLAIN.issuperset(map(type, r.hash_ids)):
            return False
        h.update(repr((head, r.hash_ids)).encode())
        h.update(b"\n")
    return True


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing); no lock where fcntl is missing."""
    try:
        import fcntl
    except ImportError:  # Windows: no cross-process lock (see the docstring)
        yield
        return
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _checked(raw: bytes, key: str, expect: Dict[str, Any], result_type: type, *, per_request: bool,
             block_tokens: int) -> Optional[Any]:
    """The result stored in `raw` when it is this key's and agrees with `expect`; else None."""
    data = read_result(raw, key)
    if not isinstance(data, dict) or set(data) != {f.name for f in fields(result_type)} - {"from_cache"}:
        return None
    number = (int, float)
    if (any(type(data[n]) is not int for n in ("capacity_blocks", "requests", "block_refs", "prefix_hits", "block_hits"))
            or any(data[n] is not None and type(data[n]) is not int for n in ("prompt_tokens", "prefix_hit_tokens"))
            or any(type(data[n]) not in number for n in ("prefix_hit_rate", "block_hit_rate", "wall_seconds"))):
        return None
    if any(data[n] != v for n, v in expect.items()):
        return None
    hits, refs, block_hits = data["prefix_hits"], data["block_refs"], data["block_hits"]
    if (not 0 <= hits <= block_hits <= refs or data["wall_seconds"] < 0
            or data["block_hit_rate"] != (block_hits / refs if refs else 0.0)):
        return None
    tokens, total = data["prefix_hit_tokens"], data["prompt_tokens"]
    if data["metric"] == "vllm-tokens":
        rate = tokens / total if tokens is not None and total else 0.0
        if tokens is None or not 0 <= tokens <= total or tokens % block_tokens or data["prefix_hit_rate"] != rate:
            return None
    elif tokens is not None or data["prefix_hit_rate"] != (hits / refs if refs else 0.0):
        return None
    per = data["hits_per_request"]
    if per_request:
        if (not isinstance(per, list) or len(per) != data["requests"] or any(type(h) is not int or h < 0 for h in per)
                or sum(per) != hits):
            return None
    elif per is not None:
        return None
    return result_type(**data, from_cache=True)


def cached_replay(key: str, folder: Path, expect: Dict[str, Any], result_type: type, compute: Callable[[], Any], *,
                  per_request: bool, block_tokens: int) -> Any:
    """The result stored under `key` in `folder` if it checks out (`expect`: the fields the requests
    and arguments fix), else ``compute()``, stored there for the next process."""
    def load(raw: bytes) -> Optional[Any]:
        return _checked(raw, key, expect, result_type, per_request=per_request, block_tokens=block_tokens)

    def dump(result: Any) -> Dict[str, Any]:
        return {f.name: getattr(result, f.name) for f in fields(result_type) if f.name != "from_cache"}

    return cached(key, folder, load, compute, dump)


def read_result(raw: bytes, key: str) -> Optional[Any]:
    """The ``result`` part of a cache file's bytes when they parse and carry this format and `key`; else None."""
    try:
        stored = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("format") != FORMAT or stored.get("key") != key:
        return None
    return stored.get("result")


def cached(key: str, folder: Path, load: Callable[[bytes], Optional[Any]], compute: Callable[[], Any],
           dump: Callable[[Any], Any]) -> Any:
    """``load(<key>.json's bytes)`` when it gives a result (it checks them), else ``compute()``,
    stored as ``dump(result)`` for the next process.

    Holds ``<key>.lock`` throughout, so a second process asking for `key` waits and then reads."""
    target = folder / f"{key}.json"
    with _locked(folder / f"{key}.lock"):
        try:
            found = load(target.read_bytes())
        except FileNotFoundError:
            found = None
        if found is not None:
            return found
        result = compute()
        body = json.dumps({"format": FORMAT, "key": key, "result": dump(result)}).encode()
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{key[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(body)
            os.replace(tmp, target)  # atomic: a reader sees the old file or the whole new one
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return result
