"""Trace loading: the format of REFERENCE.md section 2, errors that name the line, the generator."""
import gzip
import hashlib
import json
import lzma
import math
from pathlib import Path

import pytest

import kvsched_lab.traces as traces_module
from kvsched_lab.traces import (MOONCAKE_TRACES, PACKAGED_TRACES_DIR, Request, TraceFormatError, download,
                                load_named_trace, load_trace, resolve_trace, save_trace, sort_by_arrival,
                                synthetic_trace)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"


def _write(tmp_path, lines):
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


GOOD = json.dumps({"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [7, 8]})


def test_loads_good_lines_and_skips_blank_ones(tmp_path):
    p = _write(tmp_path, [GOOD, "", GOOD.replace('"timestamp": 0', '"timestamp": 4')])
    reqs = load_trace(p)
    assert reqs == [Request(0, 600, 3, (7, 8)), Request(4, 600, 3, (7, 8))]


@pytest.mark.parametrize("bad, words", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"input_length": 600, "output_length": 3, "hash_ids": [7, 8]}', "missing field 'timestamp'"),
    ('{"timestamp": -1, "input_length": 600, "output_length": 3, "hash_ids": [7, 8]}', "'timestamp'"),
    ('{"timestamp": 0, "input_length": "600", "output_length": 3, "hash_ids": [7, 8]}', "'input_length'"),
    ('{"timestamp": 0, "input_length": 600, "output_length": 3}', "missing field 'hash_ids'"),
    ('{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [7, "8"]}', "list of integers"),
    ('{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [7]}', "needs ceil"),
])
def test_malformed_line_names_line_number_and_field(tmp_path, bad, words):
    p = _write(tmp_path, [GOOD, GOOD, bad])
    with pytest.raises(TraceFormatError) as info:
        load_trace(p)
    assert "t.jsonl:3" in str(info.value) and words in str(info.value)


def test_sort_is_stable_by_timestamp():
    a, b, c = Request(5, 1, 1, (1,)), Request(3, 1, 1, (2,)), Request(5, 1, 1, (3,))
    assert sort_by_arrival([a, b, c]) == [b, a, c]


def test_synthetic_trace_is_seeded_well_formed_and_shares_prefixes(tmp_path):
    t1, t2 = synthetic_trace(300, seed=3), synthetic_trace(300, seed=3)
    assert t1 == t2 and t1 != synthetic_trace(300, seed=4)
    for r in t1:
        assert len(r.hash_ids) == math.ceil(r.input_length / 512)
    assert [r.timestamp for r in t1] == sorted(r.timestamp for r in t1)
    refs = sum(len(r.hash_ids) for r in t1)
    unique = len({i for r in t1 for i in r.hash_ids})
    assert 0.2 < 1 - unique / refs < 0.8, "the look-alike should have Mooncake-like reuse"
    # Chained ids: an id always follows the same parent.
    parent = {}
    for r in t1:
        for prev, cur in zip((None,) + r.hash_ids, r.hash_ids):
            assert parent.setdefault(cur, prev) == prev
    save_trace(t1, tmp_path / "s.jsonl")
    assert load_trace(tmp_path / "s.jsonl") == t1


@pytest.mark.skipif(not SHARED.is_dir(), reason="real Mooncake traces not available")
@pytest.mark.parametrize("name, requests, refs, unique", [
    ("conversation", 12031, 288500, 182790), ("synthetic", 3993, 121877, 43924)])
def test_real_traces_match_reference_counts(name, requests, refs, unique):
    reqs = load_trace(SHARED / f"mooncake_{name}_trace.jsonl")
    assert len(reqs) == requests
    assert sum(len(r.hash_ids) for r in reqs) == refs
    assert len({i for r in reqs for i in r.hash_ids}) == unique


def test_download_checks_sha_and_leaves_nothing_on_mismatch(tmp_path):
    src = tmp_path / "src.jsonl"
    src.write_text(GOOD + "\n")
    good_sha = hashlib.sha256(src.read_bytes()).hexdigest()
    dest = tmp_path / "cache" / "x.jsonl"
    with pytest.raises(OSError, match="checksum mismatch"):
        download(src.as_uri(), dest, "0" * 64)
    assert not dest.exists() and list(dest.parent.iterdir()) == []
    assert download(src.as_uri(), dest, good_sha) == dest and load_trace(dest)[0].hash_ids == (7, 8)


# ------------------------------------------------------------------ the traces shipped in the package
@pytest.mark.parametrize("name, requests, refs, unique", [
    ("conversation", 12031, 288500, 182790), ("synthetic", 3993, 121877, 43924)])
def test_packaged_trace_matches_reference_counts_and_sha(name, requests, refs, unique):
    path = PACKAGED_TRACES_DIR / f"mooncake_{name}_trace.jsonl.xz"
    with lzma.open(path, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == MOONCAKE_TRACES[name][1], "not the pinned Mooncake file"
    reqs = load_trace(path)
    assert len(reqs) == requests
    assert sum(len(r.hash_ids) for r in reqs) == refs
    assert len({i for r in reqs for i in r.hash_ids}) == unique


@pytest.mark.skipif(not SHARED.is_dir(), reason="real Mooncake traces not available")
@pytest.mark.parametrize("name", ["conversation", "synthetic"])
def test_packaged_trace_loads_exactly_like_the_shared_jsonl(name):
    assert load_trace(PACKAGED_TRACES_DIR / f"mooncake_{name}_trace.jsonl.xz") == \
        load_trace(SHARED / f"mooncake_{name}_trace.jsonl")


def test_licence_and_attribution_ship_beside_the_traces():
    source = (PACKAGED_TRACES_DIR / "SOURCE.txt").read_text()
    assert "Apache License 2.0" in source and "kvcache-ai/Mooncake" in source and "FAST'25" in source
    for _, sha in MOONCAKE_TRACES.values():
        assert sha in source
    assert "Apache License" in (PACKAGED_TRACES_DIR / "LICENSE-Apache-2.0.txt").read_text()


def test_named_traces_resolve_offline_to_the_package(monkeypatch, tmp_path):
    monkeypatch.delenv("KVSCHED_TRACES", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))

    def no_network(*args, **kwargs):
        raise AssertionError("a packaged trace must not be downloaded")

    monkeypatch.setattr(traces_module, "download", no_network)
    for name in MOONCAKE_TRACES:
        assert resolve_trace(name, allow_download=False).parent == PACKAGED_TRACES_DIR
    assert len(load_named_trace("mooncake:synthetic")) == 3993


def test_kvsched_traces_env_wins_and_may_be_compressed(monkeypatch, tmp_path):
    mine = [Request(0, 600, 3, (7, 8)), Request(9, 10, 1, (7,))]
    save_trace(mine, tmp_path / "plain.jsonl")
    with gzip.open(tmp_path / "mooncake_synthetic_trace.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write((tmp_path / "plain.jsonl").read_text())
    monkeypatch.setenv("KVSCHED_TRACES", str(tmp_path))
    assert resolve_trace("synthetic") == tmp_path / "mooncake_synthetic_trace.jsonl.gz"
    assert load_named_trace("mooncake:synthetic") == mine
    # The same bad line is named in a compressed file as in a plain one.
    with lzma.open(tmp_path / "bad.jsonl.xz", "wt", encoding="utf-8") as f:
        f.write(GOOD + "\n{oops\n")
    with pytest.raises(TraceFormatError, match=r"bad\.jsonl\.xz:2: not valid JSON"):
        load_trace(tmp_path / "bad.jsonl.xz")
