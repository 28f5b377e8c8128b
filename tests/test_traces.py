"""Trace loading: the format of REFERENCE.md section 2, errors that name the line, the generator."""
import hashlib
import json
import math
from pathlib import Path

import pytest

from kvsched_lab.traces import (Request, TraceFormatError, download, load_trace, save_trace,
                                sort_by_arrival, synthetic_trace)

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
