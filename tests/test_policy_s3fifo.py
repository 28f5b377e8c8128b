"""S3-FIFO's snapshot and its documented bookkeeping (``freq``, the ghost clocks), worked out by hand.

tests/test_policies.py checks S3-FIFO's log against a brute-force model; a log cannot show the
snapshot's queue names and frequencies, nor how ``freq`` and G hold their state. These follow
the module docstring: ``freq`` holds only keys whose frequency is not 0, and G maps each key to
the bytes evicted from S before it entered G. Each scenario runs through ``touch`` (the hooks)
and through ``replay_requests`` (the inlined loop), which must end in the same state.
"""
import pytest

from kvsched_lab.sim.policies import make_policy


def run(policy, keys, path):
    """Touch each key (1 byte), one touch at a time or as one-block requests of a replay."""
    if path == "touch":
        policy.schedule([(key, 1) for key in keys])
    else:
        policy.replay_requests([[key] for key in keys], 1)


def test_s3fifo_snapshot_names_each_queue_and_its_frequencies():
    """Snapshot rows are (key, "main"|"small", bytes, freq), M newest first then S newest first."""
    s3 = make_policy("s3fifo", 4)  # S's share: 4 // 10 = 0 bytes, so S is always evicted first
    s3.schedule([(k, 1) for k in "abcdab"])  # a and b hit once while in S
    s3.touch("e", 1)  # S's oldest a and b were hit: both move to M (freq 0); then c goes to G
    s3.schedule([("b", 1), ("e", 1)])  # one hit each: b in M, e in S
    assert s3.snapshot() == [("b", "main", 1, 1), ("a", "main", 1, 0), ("e", "small", 1, 1), ("d", "small", 1, 0)]
    s3.schedule([("b", 1), ("b", 1), ("b", 1)])  # frequencies are capped at 3 (two bits)
    assert s3.snapshot()[0] == ("b", "main", 1, 3)


@pytest.mark.parametrize("path", ["touch", "replay"])
def test_s3fifo_keeps_only_non_zero_frequencies_and_ghost_clocks_in_bytes(path):
    """A CLOCK pass from 1 leaves the key out of ``freq``; G's clocks count bytes evicted from S."""
    s3 = make_policy("s3fifo", 4)  # S's share is 0 bytes; G remembers 4 - 0 = 4 bytes
    # a, b, c, d fill S; a and b hit. e: a, b move to M (freq 0), c -> G at clock 0. a hits (in M).
    # f: d -> G at 1. c: a ghost (2 - 0 <= 4), e -> G at 2, c enters M. d: a ghost (3 - 1 <= 4),
    # f -> G at 3, d enters M. S is now empty and M = [a (freq 1), b, c, d].
    # g: M's oldest a has freq 1: reinserted at M's head with freq 0; b (freq 0) is evicted.
    run(s3, "abcdabeafcdg", path)
    assert list(s3.log)[-2:] == ["evict:b", "add:g"]
    assert s3.snapshot() == [("a", "main", 1, 0), ("d", "main", 1, 0), ("c", "main", 1, 0), ("g", "small", 1, 0)]
    assert s3.freq == {}  # a's spent frequency is dropped, not kept as a 0
    assert s3.ghost == {"e": 2, "f": 3} and s3.ghost_clock == 4  # c and d left G when they came back
