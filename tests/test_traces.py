"""Trace loading: the format of REFERENCE.md section 2, errors that name the line, the generator."""
import gzip
import hashlib
import json
import lzma
import math
from pathlib import Path

import pytest

import kvsched_lab.sim.traces as traces_module
from kvsched_lab.sim.traces import (MOONCAKE_TRACES, PACKAGED_TRACES_DIR, Request, TraceFormatError, download,
                                load_named_trace, load_trace, parse_request, resolve_trace, save_trace,
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


@pytest.mark.parametrize("line, message", [
    ("{not json", "not valid JSON (Expecting property name enclosed in double quotes at column 2)"),
    ("[1, 2]", "expected a JSON object, got list"),
    ('{"input_length": 600, "output_length": 3, "hash_ids": [7, 8]}', "missing field 'timestamp'"),
    ('{"timestamp": -1, "input_length": 600, "output_length": 3, "hash_ids": [7, 8]}',
     "field 'timestamp' must be a non-negative integer, got -1"),
    ('{"timestamp": 0, "input_length": true, "output_length": 3, "hash_ids": [7, 8]}',
     "field 'input_length' must be a non-negative integer, got True"),
    ('{"timestamp": 0, "input_length": 600, "hash_ids": [7, 8]}', "missing field 'output_length'"),
    ('{"timestamp": 0, "input_length": 600, "output_length": 3.5, "hash_ids": [7, 8]}',
     "field 'output_length' must be a non-negative integer, got 3.5"),
    ('{"timestamp": 0, "input_length": 600, "output_length": 3}', "missing field 'hash_ids'"),
    ('{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [7, true]}',
     "field 'hash_ids' must be a list of integers"),
    ('{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": "78"}',
     "field 'hash_ids' must be a list of integers"),
    ('{"timestamp": 0, "input_length": 1025, "output_length": 3, "hash_ids": [7, 8]}',
     "field 'hash_ids' has 2 ids but input_length=1025 needs ceil(1025/512) = 3"),
])
def test_each_format_error_in_full(line, message):
    with pytest.raises(TraceFormatError) as info:
        parse_request(line, "t.jsonl:9")
    assert str(info.value) == f"t.jsonl:9: {message}"


def test_edge_lengths_and_block_sizes():
    assert parse_request('{"timestamp": 0, "input_length": 0, "output_length": 0, "hash_ids": []}', "x") == \
        Request(0, 0, 0, ())
    line = '{"timestamp": 2, "input_length": 512, "output_length": 1, "hash_ids": [4]}'
    assert parse_request(line, "x") == Request(2, 512, 1, (4,))  # exactly one full block
    with pytest.raises(TraceFormatError, match=r"needs ceil\(512/256\) = 2"):
        parse_request(line, "x", block_tokens=256)


def test_synthetic_trace_follows_its_parameters():
    n = 3000
    trace = synthetic_trace(n, seed=1)
    assert len(trace) == n and synthetic_trace(0) == []
    with pytest.raises(ValueError, match="num_requests must be >= 0, got -1"):
        synthetic_trace(-1)
    gaps = [b.timestamp - a.timestamp for a, b in zip(trace, trace[1:])]
    assert 0.9 * 200 < sum(gaps) / len(gaps) < 1.1 * 200  # exponential gaps, mean_gap_ms=200
    assert all(r.timestamp == 0 for r in synthetic_trace(50, mean_gap_ms=0))
    for r in trace:
        tail = r.input_length - (len(r.hash_ids) - 1) * 512
        assert 1 <= tail <= 512 and 1 <= r.output_length <= 800
    # Ids are numbered in order of first use: the system prompts first, 2..12 blocks each.
    firsts = {r.hash_ids[0] for r in trace}
    starts = sorted(firsts)
    assert len(starts) == 8 and starts[0] == 0
    prompt_blocks = [b - a for a, b in zip(starts, starts[1:])]
    assert all(2 <= k <= 12 for k in prompt_blocks)
    # Zipf-like popularity: the first prompt is the most used, about 1/H(8) ~ 37% of requests.
    share = sum(r.hash_ids[0] == 0 for r in trace) / n
    assert 0.3 < share < 0.44
    # Sessions (share 0.6) re-send the last turn of a live conversation; documents are 4..40 new blocks.
    seen = set()
    extends = 0
    for r in trace:
        extends += r.hash_ids[:-1] in seen or any(r.hash_ids[:k] in seen for k in range(len(r.hash_ids) - 4,
                                                                                        len(r.hash_ids)))
        seen.add(r.hash_ids)
    assert 0.6 * 0.7 * 0.8 < extends / n < 0.6
    assert max(len(r.hash_ids) for r in trace) >= 40


def test_named_traces_are_found_before_any_download(tmp_path, monkeypatch):
    from kvsched_lab.sim import traces

    monkeypatch.setenv("KVSCHED_TRACES", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert traces.cache_dir() == tmp_path / "cache" / "kvsched-lab" / "traces"
    assert traces.trace_search_dirs()[0] == tmp_path / "mine"
    assert traces.trace_search_dirs()[-1] == traces.cache_dir()
    calls = []

    def offline(url, dest, sha256, timeout_s=30.0):
        calls.append((url, dest, sha256))
        raise OSError("no network")

    monkeypatch.setattr(traces, "download", offline)
    monkeypatch.setattr(traces, "trace_search_dirs", lambda: [tmp_path / "mine", traces.cache_dir()])
    with pytest.raises(FileNotFoundError) as info:
        traces.resolve_trace("synthetic")
    assert str(info.value) == ("could not find or download the Mooncake synthetic trace (no network). Offline? "
                               "Use the generated look-alike instead: --trace synthetic")
    rel, sha = traces.MOONCAKE_TRACES["synthetic"]
    assert calls == [(f"https://raw.githubusercontent.com/kvcache-ai/Mooncake/{traces.MOONCAKE_COMMIT}/{rel}",
                      traces.cache_dir() / "mooncake_synthetic_trace.jsonl", sha)]
    with pytest.raises(FileNotFoundError) as info:
        traces.resolve_trace("conversation", allow_download=False)
    assert str(info.value) == (f"mooncake_conversation_trace.jsonl not found in "
                               f"{[str(tmp_path / 'mine'), str(traces.cache_dir())]}")
    with pytest.raises(ValueError, match=r"unknown Mooncake trace 'x'; choose one of \['conversation', 'synthetic'\]"):
        traces.resolve_trace("x")
    (tmp_path / "mine").mkdir()
    _write(tmp_path / "mine", [GOOD]).rename(tmp_path / "mine" / "mooncake_synthetic_trace.jsonl")
    assert traces.resolve_trace("synthetic") == tmp_path / "mine" / "mooncake_synthetic_trace.jsonl"
    assert traces.load_named_trace("mooncake:synthetic") == [Request(0, 600, 3, (7, 8))]
    assert traces.load_named_trace(str(tmp_path / "mine" / "mooncake_synthetic_trace.jsonl"))[0].hash_ids == (7, 8)
    assert traces.load_named_trace("synthetic", seed=2, num_requests=30) == synthetic_trace(30, seed=2)
    assert len(traces.load_named_trace("synthetic")) == 2000
    assert len(calls) == 1  # found on disk: nothing downloaded


def test_default_search_dirs_without_the_environment(monkeypatch, tmp_path):
    from kvsched_lab.sim import traces

    monkeypatch.delenv("KVSCHED_TRACES", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    repo = Path(__file__).resolve().parents[1]  # this checkout, found independently of the module
    assert traces.trace_search_dirs() == [traces.PACKAGED_TRACES_DIR, repo.parent / "shared" / "traces",
                                          tmp_path / ".cache" / "kvsched-lab" / "traces"]


def test_synthetic_trace_defaults_are_the_documented_ones():
    assert synthetic_trace(60) == synthetic_trace(
        60, seed=0, num_system_prompts=8, system_prompt_blocks=(2, 12), session_share=0.6, turn_blocks=(1, 4),
        document_blocks=(4, 40), mean_gap_ms=200)
    assert len(synthetic_trace()) == 2000
    from kvsched_lab.sim.traces import load_named_trace

    assert load_named_trace("synthetic", num_requests=30) == synthetic_trace(30, seed=0)
    # Every last-block length and every output length can occur, ends included.
    trace = synthetic_trace(6000, seed=1)
    tails = [r.input_length - (len(r.hash_ids) - 1) * 512 for r in trace]
    assert (min(tails), max(tails)) == (1, 512)
    assert (min(r.output_length for r in trace), max(r.output_length for r in trace)) == (1, 800)
    # A 1 ms mean gap still moves the clock (only 0 means "all at once").
    assert synthetic_trace(50, mean_gap_ms=1)[-1].timestamp > 0


def test_load_trace_checks_the_block_size_it_is_given(tmp_path):
    p = _write(tmp_path, [json.dumps({"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1, 2, 3]})])
    assert load_trace(p, block_tokens=256)[0].hash_ids == (1, 2, 3)
    with pytest.raises(TraceFormatError, match=r"t.jsonl:1: .*needs ceil\(600/512\) = 2"):
        load_trace(p)


def test_download_creates_missing_folders(tmp_path):
    src = tmp_path / "src.jsonl"
    src.write_text(GOOD + "\n")
    dest = tmp_path / "a" / "b" / "x.jsonl"
    assert download(src.as_uri(), dest, hashlib.sha256(src.read_bytes()).hexdigest()) == dest
    assert sorted(p.name for p in dest.parent.iterdir()) == ["x.jsonl"]  # no temporary file left
