"""The robust reference (docs/policy-notes.md, "The reference"): arc-prefix (ARC with two prefix
rules) never falls more than 0.2 points of prefix-hit rate below LRU and closes at least 10% of
the LRU-to-bound gap.

docs/policy-notes.md reports every cell (``kvsched bench``'s table, notebook 07's public and
private boards, and a held-out generated family nobody tuned on); this pins the property on a
small, fast subset: the held-out family (its parameters below, as in the notes) at both of its
cache sizes and the private generated workload of notebook 07 at 500 blocks, each cut to its
first requests so that the test takes seconds.
"""
import pytest

from kvsched_lab.course.challenge import PRIVATE_GENERATED, bound_hits
from kvsched_lab.sim.policies import make_policy
from kvsched_lab.sim.traces import synthetic_trace

# The held-out family of docs/policy-notes.md: chosen before any policy ran on it, never tuned on.
HELDOUT = dict(num_system_prompts=3, system_prompt_blocks=(4, 20), session_share=0.45, turn_blocks=(1, 6),
               document_blocks=(10, 80), mean_gap_ms=50)
REFERENCE = "arc-prefix"
MAX_LOSS = 0.002  # 0.2 points of hit rate
MIN_GAP_CLOSED = 0.10


def rate(name, lists, capacity):
    policy = make_policy(name, capacity)
    return sum(policy.replay_requests(lists, 1)) / sum(map(len, lists))


CELLS = [
    ("held-out seed 101", dict(seed=101, **HELDOUT), 300),
    ("held-out seed 102", dict(seed=102, **HELDOUT), 1500),
    ("notebook 07 private generated", PRIVATE_GENERATED, 500),
]


@pytest.mark.parametrize("label, params, capacity", CELLS, ids=[c[0] for c in CELLS])
def test_the_reference_never_loses_to_lru_and_closes_a_tenth_of_the_gap(label, params, capacity):
    lists = [r.hash_ids for r in synthetic_trace(1200, **params)]
    lru, ours = rate("lru", lists, capacity), rate(REFERENCE, lists, capacity)
    bound = bound_hits([], lists, capacity) / sum(map(len, lists))
    assert bound > lru + 0.01, (label, lru, bound)  # a real gap to close
    assert ours >= lru - MAX_LOSS, (label, ours, lru)
    assert (ours - lru) / (bound - lru) >= MIN_GAP_CLOSED, (label, ours, lru, bound)


def test_the_check_fails_for_a_policy_that_loses():
    """The same check rejects SIEVE on notebook 07's private generated workload, where it falls
    several points below LRU: the assertion can fail."""
    lists = [r.hash_ids for r in synthetic_trace(1200, **PRIVATE_GENERATED)]
    assert rate("sieve", lists, 500) < rate("lru", lists, 500) - MAX_LOSS
