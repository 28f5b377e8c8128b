"""The "beat LRU" challenge: the public/private split, the private bound and the two-column board."""
import json
import math
import random

import pytest

from kvsched_lab.course import challenge as ch, challenge_cache, leaderboard as lb
from kvsched_lab.sim import replay_cache
from kvsched_lab.sim.policies import POLICIES
from kvsched_lab.sim.traces import Request, save_trace, synthetic_trace
from policy_helpers import MostRecent


@pytest.fixture(autouse=True)
def small_challenge(monkeypatch):
    """Small generated stand-ins for the Mooncake traces and small caches: the same code, in a second."""
    traces = {"conversation": tuple(synthetic_trace(400, seed=21)), "synthetic": tuple(synthetic_trace(300, seed=22))}
    monkeypatch.setattr(ch, "_mooncake", lambda name: (name, traces[name]))
    monkeypatch.setattr(ch, "MOONCAKE_CAPACITIES", (60, 200))
    monkeypatch.setattr(ch, "GENERATED_CAPACITIES", (40,))
    monkeypatch.setattr(ch, "GENERATED_REQUESTS", 200)
    monkeypatch.delenv(ch.PRIVATE_TRACE_ENV, raising=False)
    monkeypatch.delenv(ch.PRIVATE_CAPACITIES_ENV, raising=False)
    return traces


def reqs(*timestamps):
    return [Request(t, 512, 1, (i,)) for i, t in enumerate(timestamps)]


# -- the split ------------------------------------------------------------------------------------
def test_split_is_a_cut_in_time_that_keeps_ties_together():
    public, private = ch.split_public_private(reqs(3, 1, 3, 3, 3, 9, 7, 8))
    assert [r.timestamp for r in public] == [1]  # request #4 (from 0) in time arrives at 3: every 3 is private
    assert [r.timestamp for r in private] == [3, 3, 3, 3, 7, 8, 9]
    public, private = ch.split_public_private(reqs(5, 1, 3, 3, 3, 9, 7, 8))
    assert [r.timestamp for r in public] == [1, 3, 3, 3] and [r.timestamp for r in private] == [5, 7, 8, 9]
    public, private = ch.split_public_private(reqs(*range(10)), public_share=0.3)
    assert [r.timestamp for r in public] == [0, 1, 2] and len(private) == 7
    assert ch.split_public_private([]) == ([], [])
    for bad in (0, 1, 1.5, -0.1):
        with pytest.raises(ValueError, match="public_share"):
            ch.split_public_private(reqs(1, 2), public_share=bad)


def test_public_traces_hold_no_private_request(small_challenge):
    workloads = {w.name: w for w in ch._private_workloads(None, None)}
    public = ch.public_traces()
    assert set(public) == {"conversation", "synthetic", "generated"}
    for name in ("conversation", "synthetic"):
        w = workloads[name]
        assert sorted(w.public + w.private, key=lambda r: r.timestamp) == list(small_challenge[name])
        assert public[name] == list(w.public) and w.private
        assert max(r.timestamp for r in public[name]) < min(r.timestamp for r in w.private)
    private_ids = {k for w in workloads.values() for r in w.private for k in r.hash_ids}
    other = {k for r in workloads["generated-other"].private for k in r.hash_ids}
    public_ids = {k for rs in public.values() for r in rs for k in r.hash_ids}
    assert other and not other & public_ids  # the generated private workload shares no block id
    assert private_ids - public_ids  # the held-back ranges bring blocks the public part never had


def test_tuning_through_the_public_api_never_touches_a_private_only_block():
    touched = set()

    class Spy(MostRecent):
        def touch(self, prefix, bytes_):
            touched.add(prefix)
            super().touch(prefix, bytes_)

    board = ch.public_leaderboard({"spy": Spy}, progress=False)
    assert board["spy"]["rates"] and touched
    workloads = ch._private_workloads(None, None)
    public_ids = {k for rs in ch.public_traces().values() for r in rs for k in r.hash_ids}
    private_only = {k for w in workloads for r in w.private for k in r.hash_ids} - public_ids
    assert touched <= public_ids and not touched & private_only


# -- the bound on the private part ------------------------------------------------------------------
def best_window_hits(flat, start, capacity):
    """Exhaustive search: the most hits at positions >= start, over every eviction and bypass choice."""
    states = {frozenset(): 0}
    for i, key in enumerate(flat):
        nxt = {}
        for cache, hits in states.items():
            if key in cache:
                options = [(cache, hits + (i >= start))]
            else:
                options = [(cache, hits)]  # bypass
                if len(cache) < capacity:
                    options.append((cache | {key}, hits))
                options += [((cache - {v}) | {key}, hits) for v in cache]
            for c, h in options:
                if nxt.get(c, -1) < h:
                    nxt[c] = h
        states = nxt
    return max(states.values())


def test_private_bound_is_the_exact_optimum_on_small_sequences():
    rng = random.Random(5)
    for _ in range(150):
        flat = [rng.choice("abcde") for _ in range(rng.randint(2, 11))]
        start, cap = rng.randint(0, len(flat)), rng.randint(1, 3)
        got = ch.bound_hits([[k] for k in flat[:start]], [[k] for k in flat[start:]], cap)
        assert got == best_window_hits(flat, start, cap), (flat, start, cap)


def test_belady_on_the_whole_sequence_is_not_a_bound_on_its_second_part():
    # One block of cache: MIN keeps a (used again at 4) and bypasses b (used again at 6), so it
    # has no hit after the split at 5; keeping b instead wins the one hit that counts.
    flat = ["a", "b", "x", "a", "y", "b"]
    from kvsched_lab.sim.policies.belady import BeladyPolicy

    sim = BeladyPolicy(1, future=flat)
    sim.replay_requests([[k] for k in flat[:5]], 1)
    before = sim.hits
    sim.replay_requests([[k] for k in flat[5:]], 1)
    assert sim.hits - before == 0
    assert ch.bound_hits([[k] for k in flat[:5]], [[k] for k in flat[5:]], 1) == 1 == best_window_hits(flat, 5, 1)


# -- the board ------------------------------------------------------------------------------------
def test_challenge_scores_public_as_the_public_board_and_private_under_the_bound():
    online = [name for name in ("lru", "fifo", "s3fifo", "s3fifo-prefix", "s3fifo-repeat") if name in POLICIES]
    board = ch.challenge([*online, MostRecent], progress=False)
    public = ch.public_leaderboard([*online, MostRecent], progress=False)
    # an online policy's public hits do not depend on what comes after: same rates as the public board
    for row in public:
        assert board.public[row["policy"]]["rates"] == pytest.approx(row["rates"])
    cells = board.private.cells
    # A Mooncake trace's private cells are its held-back second half, named apart from its public cells.
    assert "generated-other@40" in cells and "conversation (second half)@60" in cells and "generated@40" not in cells
    assert "conversation@60" in board.public.cells and "conversation@60" not in cells
    bound = board.private["belady"]["rates"]
    for label in [*online, "MostRecent"]:
        for cell, rate in board.private[label]["rates"].items():
            assert 0 <= rate <= bound[cell] + 1e-12, (label, cell)
    rows = {r["policy"]: r for r in board.rows}
    assert rows["lru"]["public"] == 0 and rows["lru"]["private"] == 0 and rows["belady"]["private"] == 1
    assert [r["public_rank"] for r in board.rows] == sorted(r["public_rank"] for r in board.rows)
    assert "private" in board.to_text() and "<th>private</th>" in board._repr_html_()


def test_lead_kept_is_private_over_public_lead():
    def board(public, private):
        rows = {"public": [], "private": []}
        for column, rates in (("public", public), ("private", private)):
            rows[column] = [{"trace": "t", "policy": p, "capacity": 1, "hit_rate": r} for p, r in rates.items()]
        return ch.ChallengeBoard(lb.rank(rows["public"]), lb.rank(rows["private"]))

    b = board({"lru": 0.2, "belady": 0.6, "tuned": 0.4, "bad": 0.1}, {"lru": 0.3, "belady": 0.7, "tuned": 0.35, "bad": 0.4})
    assert b["tuned"]["public"] == pytest.approx(0.5) and b["tuned"]["private"] == pytest.approx(0.125)
    assert b.lead_kept("tuned") == pytest.approx(0.25)
    assert math.isnan(b.lead_kept("bad"))  # no public lead to keep
    assert b["bad"]["private_rank"] < b["tuned"]["private_rank"] and b["tuned"]["public_rank"] < b["bad"]["public_rank"]
    with pytest.raises(KeyError):
        b["nobody"]


# -- an instructor's private trace ------------------------------------------------------------------
def test_an_instructors_trace_counts_in_the_private_column_only(tmp_path, monkeypatch):
    path = tmp_path / "final_exam.jsonl"
    save_trace(synthetic_trace(150, seed=99), path)
    monkeypatch.setenv(ch.PRIVATE_TRACE_ENV, str(path))
    monkeypatch.setenv(ch.PRIVATE_CAPACITIES_ENV, "30,90")
    board = ch.challenge(["lru"], progress=False)
    assert {"instructor@30", "instructor@90"} <= set(board.private.cells)
    assert not any(c.startswith("instructor") for c in board.public.cells)
    assert "instructor" not in ch.public_traces()
    # an argument wins over the environment
    given = ch.challenge(["lru"], private_trace=synthetic_trace(100, seed=98), private_capacities=[25], progress=False)
    assert [c for c in given.private.cells if c.startswith("instructor")] == ["instructor@25"]


def test_bad_private_settings_say_what_is_wrong(tmp_path, monkeypatch):
    monkeypatch.setenv(ch.PRIVATE_TRACE_ENV, str(tmp_path / "exam.jsonl"))
    save_trace(synthetic_trace(20, seed=1), tmp_path / "exam.jsonl")
    monkeypatch.setenv(ch.PRIVATE_CAPACITIES_ENV, "2000;8000")
    with pytest.raises(ValueError, match=ch.PRIVATE_CAPACITIES_ENV):
        ch.challenge(["lru"], progress=False)
    with pytest.raises(ValueError, match="positive"):
        ch.challenge(["lru"], private_capacities=[0], progress=False)
    with pytest.raises(ValueError, match="no requests"):
        ch.challenge(["lru"], private_trace=[], progress=False)
    (tmp_path / "broken.jsonl").write_text('{"timestamp": 1}\n')
    with pytest.raises(ValueError, match="broken.jsonl:1"):
        ch.challenge(["lru"], private_trace=str(tmp_path / "broken.jsonl"), progress=False)


def test_the_private_generated_workload_differs_in_its_parameters():
    changed = {k for k in ch.PRIVATE_GENERATED if ch.PRIVATE_GENERATED[k] != ch.PUBLIC_GENERATED.get(k)}
    assert {"seed", "session_share", "num_system_prompts", "document_blocks", "mean_gap_ms"} <= changed


# -- the replay cache (challenge_cache.py) ---------------------------------------------------------
@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "replay-cache"
    monkeypatch.setenv(replay_cache.ENV, str(folder))
    return folder


def _refuse(*args, **kwargs):
    raise AssertionError("computed, where the cache holds the result")


def test_a_cached_board_equals_an_uncached_one_and_the_next_kernel_reads_it_back(tmp_path, monkeypatch):
    names = ["lru", "arc", "s3fifo-prefix"]
    uncached = ch.challenge(names, progress=False)
    folder = tmp_path / "replay-cache"
    monkeypatch.setenv(replay_cache.ENV, str(folder))
    computed = ch.challenge(names, progress=False)
    jobs = sum(len(w.capacities) for w in ch._private_workloads(None, None))
    assert len(list(folder.glob("*.json"))) == jobs * (len(names) + 1)  # each policy and the bound, per cell
    monkeypatch.setattr(ch, "_part_hits", _refuse)
    monkeypatch.setattr(ch, "bound_hits", _refuse)
    read_back = ch.challenge(names, progress=False)
    for board in (computed, read_back):
        assert board.rows == uncached.rows and board.to_text() == uncached.to_text()
        assert board.public.results == uncached.public.results and board.private.results == uncached.private.results


def test_a_learners_policy_is_replayed_every_time(cache, monkeypatch):
    """A class, or a registry name bound to a class defined outside the library, is never cached."""
    monkeypatch.setitem(POLICIES, "mine", MostRecent)
    calls = []
    real = ch._part_hits
    monkeypatch.setattr(ch, "_part_hits", lambda spec, *a: calls.append(spec) or real(spec, *a))
    for _ in range(2):
        ch.challenge(["lru", MostRecent, "mine"], progress=False)
    jobs = sum(len(w.capacities) for w in ch._private_workloads(None, None))
    assert calls.count(MostRecent) == calls.count("mine") == 2 * jobs and calls.count("lru") == jobs


def _count(digest, kind="policy", policy="lru", capacity=8, refs=(9, 9)):
    calls = []
    challenge_cache.cached_hits(digest, kind, policy, capacity, refs, lambda: calls.append(1) or (3, 4))
    return len(calls)


def _digest(public, private):
    """`parts_digest` of two parts given as block-id lists, a request each, numbered in time across
    both (as a trace cut in two): moving a request from one part to the other changes only the cut."""
    stamps = iter(range(len(public) + len(private)))
    return challenge_cache.parts_digest(*([Request(next(stamps), 512, 1, tuple(ids)) for ids in part]
                                          for part in (public, private)))


def test_a_changed_part_policy_kind_or_capacity_misses(cache):
    parts = ([[1, 2], [3]], [[4]])
    digest = _digest(*parts)
    assert _count(digest) == 1 and _count(digest) == 0  # computed once, then read back
    others = [([[1, 2], [3]], [[5]]), ([[1, 2]], [[3], [4]]), ([[1], [2, 3]], [[4]]), ([[1, 2], ["3"]], [[4]]),
              ([[2, 1], [3]], [[4]]), ([[1, 2], [3], []], [[4]])]
    assert len({digest, *(_digest(*o) for o in others)}) == len(others) + 1
    for other in others:
        assert _count(_digest(*other)) == 1
    assert _count(digest, policy="arc") == 1 and _count(digest, capacity=9) == 1
    assert _count(digest, kind="bound", policy=None) == 1 and _count(digest, kind="bound", policy=None) == 0


def test_ids_that_are_not_plain_or_no_folder_are_never_keyed(cache, monkeypatch):
    for ids in ([1.0], [True], [(1, 2)], [None]):
        assert _digest([ids], []) is None
        assert _count(None) == 1 and _count(None) == 1
    monkeypatch.delenv(replay_cache.ENV)
    assert _digest([[1]], []) is None


@pytest.mark.parametrize("body", [b"not json", b'{"format": "other"}', "wrong key", [3, 4, 5], [3.0, 4],
                                  [True, 4], [-1, 4], [3, 10], {"public": 3}, None])
def test_a_corrupt_or_foreign_file_is_recomputed_not_trusted(cache, body):
    digest = _digest([[1, 2]], [[3]])
    assert _count(digest, refs=(9, 9)) == 1
    (target,) = cache.glob("*.json")
    stored = json.loads(target.read_text())
    if isinstance(body, bytes):
        target.write_bytes(body)
    else:
        stored["key" if body == "wrong key" else "result"] = "0" * 64 if body == "wrong key" else body
        target.write_text(json.dumps(stored))
    assert _count(digest, refs=(9, 9)) == 1  # recomputed ...
    assert json.loads(target.read_text())["result"] == [3, 4]  # ... and overwritten
