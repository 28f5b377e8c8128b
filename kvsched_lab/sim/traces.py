"""Request traces: the Mooncake JSONL format, a loader that names bad lines, and a generator.

One request a line::

    {"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [block ids]}

Each id stands for one 512-token block and ids are already chained: equal ids mean equal
prefixes up to and including that block, and ``len(hash_ids) == ceil(input_length / 512)``.
The two public Mooncake traces ship inside the package, xz-compressed (``data/traces/``, with
their Apache-2.0 licence and attribution in ``SOURCE.txt`` there), so named traces load offline;
`resolve_trace` also finds other copies on disk or downloads the files (pinned by commit and
checked by SHA-256). `load_trace` reads plain, ``.xz`` and ``.gz`` JSONL alike.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import math
import os
import random
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterable, List, Optional, Sequence, Tuple

MOONCAKE_BLOCK_TOKENS = 512


@dataclass(frozen=True)
class Request:
    timestamp: int  # arrival time, ms since the trace start
    input_length: int  # prompt tokens
    output_length: int  # generated tokens (not replayed: prefix caching concerns the prompt)
    hash_ids: Tuple[int, ...]  # chained block ids, one per 512-token block of the prompt


class TraceFormatError(ValueError):
    """A trace line that does not follow the format; the message names file, line and field."""


def _field(obj: dict, name: str, where: str) -> int:
    if name not in obj:
        raise TraceFormatError(f"{where}: missing field '{name}'")
    value = obj[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TraceFormatError(f"{where}: field '{name}' must be a non-negative integer, got {value!r}")
    return value


def parse_request(line: str, where: str, block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> Request:
    """Parse one JSONL line; `where` (e.g. ``"trace.jsonl:12"``) prefixes every error."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise TraceFormatError(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict):
        raise TraceFormatError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    timestamp = _field(obj, "timestamp", where)
    input_length = _field(obj, "input_length", where)
    output_length = _field(obj, "output_length", where)
    if "hash_ids" not in obj:
        raise TraceFormatError(f"{where}: missing field 'hash_ids'")
    ids = obj["hash_ids"]
    if not isinstance(ids, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
        raise TraceFormatError(f"{where}: field 'hash_ids' must be a list of integers")
    expected = math.ceil(input_length / block_tokens)
    if len(ids) != expected:
        raise TraceFormatError(
            f"{where}: field 'hash_ids' has {len(ids)} ids but input_length={input_length} "
            f"needs ceil({input_length}/{block_tokens}) = {expected}"
        )
    return Request(timestamp, input_length, output_length, tuple(ids))


def open_text(path: Path) -> IO[str]:
    """`path` opened for reading text; ``.xz`` and ``.gz`` files are decompressed on the fly."""
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open("r", encoding="utf-8")


def load_trace(path: os.PathLike | str, block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> List[Request]:
    """Read a Mooncake-format JSONL file (plain, .xz or .gz) in file order (blank lines are skipped)."""
    path = Path(path)
    requests = []
    with open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            if line.strip():
                requests.append(parse_request(line, f"{path.name}:{lineno}", block_tokens))
    return requests


def save_trace(requests: Iterable[Request], path: os.PathLike | str) -> None:
    with Path(path).open("w", encoding="utf-8") as f:
        for r in requests:
            row = {"timestamp": r.timestamp, "input_length": r.input_length,
                   "output_length": r.output_length, "hash_ids": list(r.hash_ids)}
            f.write(json.dumps(row) + "\n")


def sort_by_arrival(requests: Sequence[Request]) -> List[Request]:
    """Replay order: by timestamp, stable, so ties keep file order (`kvsched_lab.sim.replay`, item 1)."""
    return sorted(requests, key=lambda r: r.timestamp)


def synthetic_trace(
    num_requests: int = 2000,
    seed: int = 0,
    num_system_prompts: int = 8,
    system_prompt_blocks: Tuple[int, int] = (2, 12),
    session_share: float = 0.6,
    turn_blocks: Tuple[int, int] = (1, 4),
    document_blocks: Tuple[int, int] = (4, 40),
    mean_gap_ms: int = 200,
) -> List[Request]:
    """A seeded look-alike of the Mooncake traces, for offline use.

    Three kinds of request, all starting with one of a few shared system prompts (popular
    ones more often, Zipf-like): multi-turn sessions whose every turn re-sends the whole
    conversation so far plus a few new blocks (the prefix grows); and one-off documents
    that share only the system prompt. Ids are chained like Mooncake's: a block id is
    reused exactly when the whole prefix up to it is the same.
    """
    if num_requests < 0:
        raise ValueError(f"num_requests must be >= 0, got {num_requests}")
    rng = random.Random(seed)
    next_id = 0

    def fresh(n: int) -> List[int]:
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return ids

    prompts = [fresh(rng.randint(*system_prompt_blocks)) for _ in range(num_system_prompts)]
    weights = [1.0 / (k + 1) for k in range(num_system_prompts)]
    sessions: List[List[int]] = []  # live conversations: each is its full block-id prefix
    requests = []
    clock = 0
    for _ in range(num_requests):
        clock += int(rng.expovariate(1.0 / mean_gap_ms)) if mean_gap_ms > 0 else 0
        if rng.random() < session_share:
            if sessions and rng.random() < 0.7:
                k = rng.randrange(len(sessions))
                ids = sessions[k] + fresh(rng.randint(*turn_blocks))
                sessions[k] = ids
            else:
                ids = rng.choices(prompts, weights)[0] + fresh(rng.randint(*turn_blocks))
                sessions.append(ids)
                if len(sessions) > 64:  # old conversations end
                    sessions.pop(rng.randrange(len(sessions)))
        else:
            ids = rng.choices(prompts, weights)[0] + fresh(rng.randint(*document_blocks))
        tail = rng.randint(1, MOONCAKE_BLOCK_TOKENS)  # last block is partial
        input_length = (len(ids) - 1) * MOONCAKE_BLOCK_TOKENS + tail
        requests.append(Request(clock, input_length, rng.randint(1, 800), tuple(ids)))
    return requests


# Public Mooncake traces (kvcache-ai/Mooncake, Apache-2.0), pinned to one commit and checked.
MOONCAKE_COMMIT = "3b5a594133958449a1feaf1c9e0fc1b553e34a28"
MOONCAKE_TRACES = {
    "conversation": ("FAST25-release/traces/conversation_trace.jsonl",
                     "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df"),
    "synthetic": ("FAST25-release/traces/synthetic_trace.jsonl",
                  "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131"),
}


# The package's own copies of MOONCAKE_TRACES, xz-compressed (licence and attribution beside them).
PACKAGED_TRACES_DIR = Path(__file__).resolve().parents[1] / "data" / "traces"
# A named trace may sit in a search folder plain or compressed; the first match wins.
TRACE_SUFFIXES = ("", ".xz", ".gz")


def trace_search_dirs() -> List[Path]:
    """Where named traces are looked for, in order: $KVSCHED_TRACES, the package, ../shared/traces, the cache."""
    dirs = []
    if os.environ.get("KVSCHED_TRACES"):
        dirs.append(Path(os.environ["KVSCHED_TRACES"]))
    dirs.append(PACKAGED_TRACES_DIR)
    repo = Path(__file__).resolve().parents[2]
    dirs.append(repo.parent / "shared" / "traces")
    dirs.append(cache_dir())
    return dirs


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "kvsched-lab" / "traces"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download(url: str, dest: Path, sha256: str, timeout_s: float = 30.0) -> Path:
    """Fetch `url` to `dest` atomically; a wrong checksum or a broken transfer leaves no file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout_s) as resp:
            for chunk in iter(lambda: resp.read(1 << 20), b""):
                out.write(chunk)
        got = _sha256(Path(tmp))
        if got != sha256:
            raise OSError(f"checksum mismatch for {url}: expected sha256 {sha256}, got {got}")
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest


def resolve_trace(name: str, allow_download: bool = True) -> Path:
    """Path of the Mooncake trace `name` ("conversation" or "synthetic"), downloading if needed.

    The package ships both, so this finds them offline; a copy in ``$KVSCHED_TRACES`` wins.
    The path may end in ``.xz`` or ``.gz``: read it with `load_trace`.
    """
    if name not in MOONCAKE_TRACES:
        raise ValueError(f"unknown Mooncake trace {name!r}; choose one of {sorted(MOONCAKE_TRACES)}")
    rel, sha = MOONCAKE_TRACES[name]
    filename = f"mooncake_{name}_trace.jsonl"
    for d in trace_search_dirs():
        for suffix in TRACE_SUFFIXES:
            if (d / (filename + suffix)).is_file():
                return d / (filename + suffix)
    if not allow_download:
        raise FileNotFoundError(f"{filename} not found in {[str(d) for d in trace_search_dirs()]}")
    url = f"https://raw.githubusercontent.com/kvcache-ai/Mooncake/{MOONCAKE_COMMIT}/{rel}"
    try:
        return download(url, cache_dir() / filename, sha)
    except OSError as e:
        raise FileNotFoundError(
            f"could not find or download the Mooncake {name} trace ({e}). Offline? "
            "Use the generated look-alike instead: --trace synthetic"
        ) from e


def load_named_trace(spec: str, seed: int = 0, num_requests: Optional[int] = None) -> List[Request]:
    """`spec` is a file path, ``synthetic`` (generated), or ``mooncake:conversation`` / ``mooncake:synthetic``."""
    if spec == "synthetic":
        return synthetic_trace(num_requests if num_requests is not None else 2000, seed=seed)
    if spec.startswith("mooncake:"):
        return load_trace(resolve_trace(spec.split(":", 1)[1]))
    return load_trace(spec)
