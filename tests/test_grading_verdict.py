"""The grader's comparison, hidden cases and scoring, in this process (no sandbox, no kernel).

compare.py says where a learner's observations first part from the reference's, cases.py holds
the hidden cases, verdict.py turns observations into points. The batch tests (test_grading.py)
reach them through sandboxes; these tests pin each of them directly, fast enough for mutation
testing (`make mutation`), with the observations a sandbox would send back made here by
`observe.run_case`, as the kernel makes them.
"""
from __future__ import annotations

import hashlib
import json
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

from kvsched_lab.grading.kernel import observe
from kvsched_lab.grading.judging.cases import hidden_cases
from kvsched_lab.i18n.messages import translate
from kvsched_lab.grading.judging.compare import Mismatch, describe_op, error_of, errors_in, first_mismatch, same
from kvsched_lab.grading.judging.verdict import POINTS, Reference, families, family_points, judge, validate
from kvsched_lab.grading.learner.writers import HEAD_CAP, TEXT_CAP, bounded, fenced
from kvsched_lab.sim.scheduler import TODO_METHODS
from kvsched_lab.course.todos import load_method

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
import variants as v  # noqa: E402

CHAPTER = hidden_cases()[0]


@pytest.fixture
def reference() -> Reference:
    # Built per test (0.2 s): mutation testing links a function to the tests that call it, and a
    # module-wide fixture would link `Reference.build` to the first of them only.
    return Reference.build()


def _observe(todo: str, source: str, cases: list) -> dict:
    """What the sandbox sends back for `todo` answered by `source`: every case's observations."""
    cls = observe.graded_class(TODO_METHODS[todo], load_method(todo, source))
    return {"cases": {str(i): {"obs": observe.run_case(cls, c)} for i, c in enumerate(cases)},
            "out": 0, "head": "", "review": []}


def _judged(reference: Reference, todo: str, source: str):
    return judge(todo, _observe(todo, source, reference.cases), reference)


def _full_reference_run(case: dict) -> list:
    from solutions import KVCacheSchedulerSim

    return json.loads(json.dumps(observe.run_case(KVCacheSchedulerSim, case, catch=False)))


# --------------------------------------------------------------------------- compare.same

@pytest.mark.parametrize("a, b, tol, equal", [
    (True, True, 0.0, True), (False, False, 0.0, True), (True, False, 0.0, False),
    (True, 1, 0.0, False), (1, True, 0.0, False), (0, False, 0.0, False),  # a bool is never a number here
    (3, 3, 0.0, True), (3, 4, 0.0, False),
    (10 ** 20, 10 ** 20 + 1, 0.0, False),  # ints compare exactly, not within the float tolerance
    (1, 1.0, 0.0, True), (0.1 + 0.2, 0.3, 0.0, True),  # written in another order: within 1e-9
    (10 ** 16, 1e16 + 2, 0.0, True), (1e16 + 2, 10 ** 16, 0.0, True),  # an int against a float: the tolerance
    (1.0, 1.0 + 5e-10, 0.0, True), (1.0, 1.0 + 2e-9, 0.0, False),
    (0.0, 5e-13, 0.0, True), (0.0, 2e-12, 0.0, False),  # the absolute floor near zero is 1e-12
    (2.5, 2.5 + 1e-4, 1.0001e-4, True), (2.5, 2.5 + 1.1e-4, 1.0001e-4, False), (2.5, 2.5 + 1e-4, 0.0, False),
    ([1, [2.0, "a"]], [1, [2.0, "a"]], 0.0, True), ([1, [2.0, "a"]], [1, [2.5, "a"]], 0.0, False),
    ([1], [1, 2], 0.0, False), ([1, 2], [1], 0.0, False), ([], [], 0.0, True),
    ([2.5], [2.5 + 1e-4], 1.0001e-4, True),  # the tolerance reaches inside lists
    ("a", "a", 0.0, True), ("a", "b", 0.0, False), (None, None, 0.0, True), (1, "1", 0.0, False),
    ((1,), [1], 0.0, False), ({"a": 1}, {"a": 1}, 0.0, True), ({"a": 1}, {"a": 2}, 0.0, False),
])
def test_same_compares_plain_data(a, b, tol, equal):
    assert same(a, b, tol) is equal


# --------------------------------------------------------------------------- compare: what a mismatch says

def test_each_operation_is_described_for_a_learner():
    assert describe_op(["touch", "a", 40]) == "touch('a', 40)"
    assert describe_op(["evict", 128]) == "_evict_until_fit(128)"
    assert describe_op(["snapshot"]) == "snapshot()"
    assert describe_op(["score", 3, 40, 2]) == "_score(hits=3, size=40, last_used=time-2)"
    assert describe_op(["stale", "a", -0.25, 1]) == (
        "a stale heap record pushed for 'a' (priority -0.25, last_used +1 from its entry's)")
    assert describe_op(["stale", "a", 0.0625, -1000]) == (
        "a stale heap record pushed for 'a' (priority +0.0625, last_used -1000 from its entry's)")
    assert describe_op(["orphan", "gone", -5.0, 0]) == "a heap record pushed for 'gone', which is not cached"
    assert describe_op(["unqueue", "k"]) == "the live heap record of 'k' removed"
    assert describe_op(["retime", "e", 2]) == "'e''s last_used set to time-2, then _refresh_queue('e')"
    assert describe_op(["mystery", 1]) == "['mystery', 1]"


def test_a_mismatch_reads_as_observed_over_expected():
    m = Mismatch("ties #1", "phase 1 (capacity 60), operation 3 of 9: touch('t1', 10)", "log events",
                 "['add:t1']", "['evict:t0', 'add:t1']", reveal=True)
    assert m.text() == ("case 'ties #1', phase 1 (capacity 60), operation 3 of 9: touch('t1', 10)\n"
                        "  log events: observed ['add:t1']\n"
                        "              expected ['evict:t0', 'add:t1']")


def test_a_mismatch_keeps_the_reference_value_back_unless_revealed():
    """Before (issue 28): every first difference showed the reference's value, so a learner resubmitting
    could read the hidden expectations one case at a time. By default it names what differs and shows the
    learner's own value; the reference's appears only with --reveal-expected."""
    m = Mismatch("ties #1", "phase 1 (capacity 60), operation 3 of 9: touch('t1', 10)", "log events",
                 "['add:t1']", "['evict:t0', 'add:t1']")
    assert m.text() == ("case 'ties #1', phase 1 (capacity 60), operation 3 of 9: touch('t1', 10)\n"
                        "  log events: observed ['add:t1']\n"
                        "  this differs from what the reference shows there (its value is not shown)")
    zh = m.text().render("zh")
    assert "log events：实际 ['add:t1']" in zh and "不显示参考实现的值" in zh and "evict:t0" not in zh


def _chapter_obs() -> list:
    return _full_reference_run(CHAPTER)


def test_the_reference_matches_itself_on_every_case():
    for case in hidden_cases():
        obs = _full_reference_run(case)
        assert first_mismatch(case, obs, json.loads(json.dumps(obs))) is None, case["name"]


def test_a_different_step_is_named_with_its_operation_and_part():
    want = _chapter_obs()
    where4 = "phase 1 (capacity 128), operation 4 of 7: touch('c', 56)"
    got = json.loads(json.dumps(want))
    got[0]["steps"][3][1] = ["add:c"]  # no eviction where the reference evicted b
    m = first_mismatch(CHAPTER, got, want)
    assert (m.case, m.where, m.what) == ("chapter example", where4, "log events")
    assert (m.observed, m.expected) == ("['add:c']", "['evict:b', 'add:c']")
    got = json.loads(json.dumps(want))
    got[0]["steps"][3][2] = 144
    m = first_mismatch(CHAPTER, got, want)
    assert (m.where, m.what, m.observed, m.expected) == (where4, "current_bytes", "144", "96")
    got = json.loads(json.dumps(want))
    got[0]["steps"][3] = ["error", "KeyError: 'b'"]  # the learner's code raised here
    m = first_mismatch(CHAPTER, got, want)
    assert (m.where, m.what, m.observed, m.expected) == (where4, "result", "raised KeyError: 'b'",
                                                         "[['evict:b', 'add:c'], 96]")
    got = json.loads(json.dumps(want))
    got[0]["steps"][3] = ["snapshot", []]  # another kind of step
    m = first_mismatch(CHAPTER, got, want)
    assert (m.what, m.observed, m.expected) == ("result", "['snapshot', []]", repr(want[0]["steps"][3]))
    got[0]["steps"][3] = 5  # not a step at all
    m = first_mismatch(CHAPTER, got, want)
    assert (m.where, m.what, m.observed, m.expected) == (where4, "result", "5", repr(want[0]["steps"][3]))
    got = json.loads(json.dumps(want))
    del got[0]["steps"][4:]  # the phase stopped early
    m = first_mismatch(CHAPTER, got, want)
    assert m.where.startswith("phase 1 (capacity 128), operation 5 of 7: touch('d', 48)")
    assert (m.what, m.observed) == ("result", "['missing']")


def test_a_step_result_of_one_value_is_shown_bare_when_it_raised():
    case = {"name": "probe", "family": "score probes", "phases": [{"capacity": 10, "ops": [["score", 1, 2, 0]]}]}
    want = [{"steps": [["score", 1.25]], "final": {}}]
    m = first_mismatch(case, [{"steps": [["error", "ZeroDivisionError: x"]], "final": {}}], want)
    assert (m.what, m.observed, m.expected) == ("result", "raised ZeroDivisionError: x", "1.25")
    m = first_mismatch(case, [{"steps": [["score", 1.5]], "final": {}}], want)
    assert (m.what, m.observed, m.expected) == ("score", "1.5", "1.25")
    m = first_mismatch(case, [{"steps": [["score"]], "final": {}}], want)  # a part missing from the step
    assert (m.what, m.observed) == ("score", "None")


def test_a_crafted_steps_result_is_compared_whole():
    """Operations that craft heap states (stale, orphan, unqueue, retime) have one result part."""
    case = next(c for c in hidden_cases() if c["family"] == "crafted heap records and ties")
    want = _full_reference_run(case)
    k = next(i for i, op in enumerate(case["phases"][0]["ops"]) if op[0] == "stale")
    got = json.loads(json.dumps(want))
    got[0]["steps"][k] = [want[0]["steps"][k][0], "something else"]
    m = first_mismatch(case, got, want)
    assert (m.case, m.what, m.observed) == (case["name"], "result", "'something else'")
    assert m.where.endswith(describe_op(case["phases"][0]["ops"][k]))


def test_snapshot_priorities_get_one_rounding_unit_for_the_score_todo_only():
    want = _chapter_obs()
    got = json.loads(json.dumps(want))
    row = got[0]["steps"][6][1][0]  # ['a', 40, 3.4219, 3]
    row[2] = round(row[2] + 1e-4, 4)
    assert first_mismatch(CHAPTER, got, want, score_todo=True) is None
    m = first_mismatch(CHAPTER, got, want)
    assert (m.what, m.observed, m.expected) == ("snapshot", repr(got[0]["steps"][6][1]), repr(want[0]["steps"][6][1]))
    row[2] = round(row[2] + 1e-4, 4)  # two units: wrong for every TODO
    assert first_mismatch(CHAPTER, got, want, score_todo=True).what == "snapshot"
    for field, other in ((0, "b"), (1, 41), (3, 5)):  # prefix, bytes and hits stay exact
        got = json.loads(json.dumps(want))
        got[0]["steps"][6][1][0][field] = other
        assert first_mismatch(CHAPTER, got, want, score_todo=True).what == "snapshot", field
    got = json.loads(json.dumps(want))
    got[0]["steps"][6][1][0] = ["a", 40, 4.5939]  # not a row of four: compared exactly
    assert first_mismatch(CHAPTER, got, want, score_todo=True).what == "snapshot"
    got[0]["steps"][6][1] = got[0]["steps"][6][1][:1]  # a row missing
    assert first_mismatch(CHAPTER, got, want, score_todo=True).what == "snapshot"


def test_a_different_final_state_names_the_item_and_its_fields():
    want = _chapter_obs()
    final = "phase 1 (capacity 128), final state"
    for key, what in (("log", "log"), ("current_bytes", "current_bytes"), ("queue", "heap records (sorted)"),
                      ("heap", "queue is a valid heap"), ("time", "time")):
        got = json.loads(json.dumps(want))
        got[0]["final"][key] = 7
        m = first_mismatch(CHAPTER, got, want)
        assert (m.where, m.what, m.observed, m.expected) == (final, what, "7", repr(want[0]["final"][key])), key
    got = json.loads(json.dumps(want))
    got[0]["final"]["entries"][1][3] = 9  # d's hits
    m = first_mismatch(CHAPTER, got, want)
    assert m.what == "entries item 1 [prefix, priority, last_used, hits, bytes, entry.prefix]"
    assert (m.observed, m.expected) == (repr(got[0]["final"]["entries"][1]), repr(want[0]["final"]["entries"][1]))
    got = json.loads(json.dumps(want))
    got[0]["final"]["log"].append("evict:a")  # one event too many
    m = first_mismatch(CHAPTER, got, want)
    assert (m.what, m.observed, m.expected) == ("log item 8", "'evict:a'", "'<none>'")
    got[0]["final"]["log"] = got[0]["final"]["log"][:-2]  # one too few
    m = first_mismatch(CHAPTER, got, want)
    assert (m.what, m.observed, m.expected) == ("log item 7", "'<none>'", "'reuse:a'")
    got = json.loads(json.dumps(want))
    got[0]["final"] = {"error": "AttributeError: no queue"}
    m = first_mismatch(CHAPTER, got, want)
    assert (m.what, m.observed, m.expected) == ("final state", "'AttributeError: no queue'", "a readable state")
    assert m.case == "chapter example"
    got[0]["final"] = "junk"
    assert (first_mismatch(CHAPTER, got, want).what, first_mismatch(CHAPTER, got, want).observed) == (
        "final state", "'junk'")


def test_observations_of_the_wrong_shape_are_one_mismatch():
    want = _chapter_obs()
    for got in ("all passed", [], want + want):
        m = first_mismatch(CHAPTER, got, want)
        assert (m.case, m.where, m.what, m.expected) == ("chapter example", "the whole case", "observations",
                                                         "1 phases")
    m = first_mismatch(CHAPTER, "x" * 1000, want)
    assert m.observed == repr("x" * 1000)[:237] + "..."  # learner data is shown bounded, 240 characters
    assert first_mismatch(CHAPTER, "x" * 238, want).observed == repr("x" * 238)  # 240 with its quotes: whole
    assert first_mismatch(CHAPTER, [{"final": want[0]["final"]}], want).observed == "['missing']"


def test_the_exception_a_case_ended_with_is_found():
    raised = [{"steps": [["touch", ["add:a"], 4], ["error", "ValueError: boom"]], "final": {}}]
    fine = [{"steps": [["touch", ["add:a"], 4]], "final": {}}]
    assert error_of(raised) == "ValueError: boom"
    assert error_of(fine) is None and error_of([{"steps": []}]) is None and error_of("junk") is None
    assert error_of(["junk", {"steps": [["error", "E: 2"]]}]) == "E: 2"  # a later phase counts too
    assert errors_in([fine, raised, raised]) == ["ValueError: boom", "ValueError: boom"]


# --------------------------------------------------------------------------- cases.py

def test_hidden_cases_are_fixed_and_leave_the_global_rng_alone():
    random.seed(5)
    before = random.random()
    random.seed(5)
    cases = hidden_cases()
    assert random.random() == before
    assert cases == hidden_cases()
    assert len({c["name"] for c in cases}) == len(cases) == 42


def test_hidden_cases_are_the_published_set():
    """Grades must not move between grader versions: an instructor who regrades an appeal with a
    newer grader, or two TAs on two versions, must get the same grade for the same code. A change
    to the cases is then deliberate: update this digest, and say so in the release notes."""
    digest = hashlib.sha256(json.dumps(hidden_cases(), sort_keys=True).encode()).hexdigest()
    assert digest == "e171effd39de9887a52d0fa174a3dfd1b318922aa1ef7275ab4c155a47709fb9"


def _events(obs: list) -> list:
    """Per touch: (its key, the keys it evicted, current_bytes after it)."""
    out = []
    for phase in obs:
        for step in phase["steps"]:
            if step[0] == "touch":
                log = step[1]
                out.append(([e.split(":", 1)[1] for e in log if not e.startswith("evict:")],
                            [e.split(":", 1)[1] for e in log if e.startswith("evict:")], step[2]))
    return out


FAMILIES = {"chapter example": 1, "random sequences": 12, "ties in priority": 3, "entry exactly at capacity": 2,
            "several evictions for one add": 2, "stale records and reuse after eviction": 3, "tiny capacities": 3,
            "large capacities": 3, "score probes": 3, "crafted heap records and ties": 6, "precision": 4}


def test_each_family_holds_what_its_name_promises():
    """Run by the reference, every family shows the situation it is named for."""
    cases = hidden_cases()
    assert Counter(c["family"] for c in cases) == FAMILIES
    evicting: Counter = Counter()
    chapter = [op for op in CHAPTER["phases"][0]["ops"]]
    assert chapter == [["touch", "a", 40], ["touch", "b", 48], ["touch", "a", 40], ["touch", "c", 56],
                       ["touch", "d", 48], ["touch", "a", 40], ["snapshot"]] and CHAPTER["phases"][0]["capacity"] == 128
    for case in cases:
        (phase,) = case["phases"]
        capacity, ops = phase["capacity"], phase["ops"]
        obs = _full_reference_run(case)
        events = _events(obs)
        evicted = [k for _, ev, _ in events for k in ev]
        kinds = Counter(op[0] for op in ops)
        family, name = case["family"], case["name"]
        if family in ("random sequences", "ties in priority", "tiny capacities", "large capacities"):
            assert kinds["snapshot"] >= 2 and kinds["score"] >= 1 and ops[-1] == ["snapshot"], name
        if family in ("random sequences", "ties in priority", "stale records and reuse after eviction"):
            assert kinds["touch"] >= 20, name
            evicting[family] += bool(evicted)
        if family == "ties in priority":
            sizes = {op[2] for op in ops if op[0] == "touch"}
            assert sizes == {capacity // 6}, name
            snaps = [s[1] for s in obs[0]["steps"] if s[0] == "snapshot"]
            assert any(len({row[2] for row in snap}) < len(snap) for snap in snaps), f"{name}: no tie shown"
        if family == "entry exactly at capacity":
            assert any(b == capacity for _, _, b in events), name
            assert any(op[0] == "touch" and op[2] == capacity for op in ops), name
        if family == "several evictions for one add":
            assert max(len(ev) for _, ev, _ in events) >= 2, name
        if family in ("stale records and reuse after eviction", "crafted heap records and ties"):
            gone = set()
            came_back = False
            for added, ev, _ in events:
                came_back = came_back or bool(gone & set(added))
                gone |= set(ev)
            assert came_back, f"{name}: no key comes back after its eviction"
        if family == "tiny capacities":
            assert capacity <= 3 and evicted, name
        if family == "large capacities":
            assert capacity >= 10 ** 6, name
        if family == "score probes":
            probes = [op for op in ops if op[0] == "score"]
            assert len(probes) == 48 and {p[1] for p in probes} == {0, 1, 3, 10}, name
            assert {p[3] for p in probes} == {0, 1, 4, 99} and kinds["retime"] == 2, name
        if family == "crafted heap records and ties":
            assert {"stale", "orphan", "unqueue", "retime", "evict"} <= set(kinds), name
            assert obs[0]["steps"][-1][1] == [] and obs[0]["final"]["current_bytes"] == 0, name
        if family == "precision":
            older, newer = ops[0][1], ops[1][1]
            p = {row[0]: row[1] for row in obs[0]["final"]["entries"]}
            assert p[newer] > p[older] and round(p[newer], 4) == round(p[older], 4), f"{name}: rounding must hide it"
            first_snapshot = next(s[1] for s in obs[0]["steps"] if s[0] == "snapshot")
            assert [row[0] for row in first_snapshot] == [newer, older], name
            assert any(op[0] == "score" and op[3] < 0 for op in ops), name
    # random #1 (capacity 64) happens never to fill up; every other case of these families evicts
    assert evicting == {"random sequences": 11, "ties in priority": 3, "stale records and reuse after eviction": 3}


def test_the_crafted_states_make_the_evictions_their_comments_promise():
    """`_edge_phase`: the touch after the two stale records evicts b (skipping a and c's stale
    records), the touch after the orphan evicts c, and the final evict empties the cache."""
    for case in hidden_cases():
        if case["family"] != "crafted heap records and ties":
            continue
        ops = case["phases"][0]["ops"]
        f, b, a, c = (ops[i][1] for i in (0, 2, 3, 4))
        steps = _full_reference_run(case)[0]["steps"]
        d_touch = steps[ops.index(["snapshot"]) + 3]
        assert d_touch[1][:1] == [f"evict:{b}"], case["name"]
        orphan_at = next(i for i, op in enumerate(ops) if op[0] == "orphan")
        assert steps[orphan_at + 1][1][:1] == [f"evict:{c}"], case["name"]
        assert len({f, b, a, c}) == 4, case["name"]


# --------------------------------------------------------------------------- verdict.py: the expected results

def test_the_reference_expectations_are_the_reference_among_the_stand_ins(reference):
    from solutions import KVCacheSchedulerSim

    assert reference.cases == hidden_cases()
    for todo, method in TODO_METHODS.items():
        cls = observe.graded_class(method, getattr(KVCacheSchedulerSim, method))
        for i in (0, 17, 41):
            assert reference.expected[todo][i] == json.loads(json.dumps(observe.run_case(cls, reference.cases[i])))


def test_the_expectations_never_swallow_an_error_of_the_reference_or_the_stand_ins(monkeypatch):
    """The reference must never raise on a hidden case; if it did, grading against its error text
    would be wrong for everyone, so building the expectations fails loudly instead."""
    import solutions
    from kvsched_lab.grading.judging import verdict

    too_big = {"name": "too big", "family": "x", "phases": [{"capacity": 8, "ops": [["touch", "a", 9]]}]}
    monkeypatch.setattr(verdict, "hidden_cases", lambda: [CHAPTER, too_big])
    with pytest.raises(ValueError, match="exceeds capacity"):
        Reference.build()  # everything raises here
    monkeypatch.setattr(verdict, "hidden_cases", lambda: [CHAPTER])
    snapshot = observe.FakeScheduler.snapshot

    def stand_in_breaks(self):  # only the stand-ins' own class, not the classes graded with it
        if type(self) is observe.FakeScheduler:
            raise LookupError("the stand-in's snapshot broke")
        return snapshot(self)

    monkeypatch.setattr(observe.FakeScheduler, "snapshot", stand_in_breaks)
    with pytest.raises(LookupError, match="the stand-in's snapshot broke"):
        Reference.build()
    monkeypatch.setattr(observe.FakeScheduler, "snapshot", snapshot)

    def broken(self, hits, size, last_used):
        raise ArithmeticError("the reference's score broke")

    monkeypatch.setattr(solutions.KVCacheSchedulerSim, "_score", broken)
    with pytest.raises(ArithmeticError, match="the reference's score broke"):
        Reference.build()  # the stand-ins are fine; the reference's method raises


def test_the_expectations_know_every_stub_of_the_course(reference):
    """A notebook's own stub counts as "not attempted", as do the chapter's and the skeleton's."""
    from kvsched_lab.grading.judging.stubs import known_stubs

    notebooks = Path(__file__).resolve().parents[1] / "notebooks"
    assert reference.stubs == known_stubs(notebooks)
    assert all(known_stubs(None)[todo] < reference.stubs[todo] for todo in TODO_METHODS)


def test_only_cases_that_tell_an_answer_from_its_stand_in_are_graded(reference):
    stand_ins = [json.loads(json.dumps(observe.run_case(observe.FakeScheduler, c))) for c in reference.cases]
    for todo in TODO_METHODS:
        for i, case in enumerate(reference.cases):
            differs = stand_ins[i] != reference.expected[todo][i]
            assert (i in reference.graded[todo]) is differs, (todo, case["name"])
    assert len(reference.graded["score"]) == 42 and len(reference.graded["stale"]) < 42


# --------------------------------------------------------------------------- verdict.py: points

def test_points_follow_families_rounded_down():
    assert family_points({"a": [3, 3], "b": [2, 2]}) == POINTS == 20
    assert family_points({"a": [1, 3], "b": [2, 2]}) == 13  # 20 * (1/3 + 1) / 2 = 13.33...
    assert family_points({"a": [0, 1], "b": [1, 1], "c": [1, 1]}) == 13  # a missed family costs its share
    assert family_points({"a": [2, 3], "b": [0, 2]}) == 6  # 6.67 rounds down
    assert family_points({"a": [0, 3], "b": [0, 2]}) == 0
    # exact arithmetic: 20 * (1/3 + 2/3) / 2 is 10, where floats give 9.999...
    assert family_points({"a": [1, 3], "b": [2, 3]}) == 10
    assert family_points({"a": [29, 30]}) == 19 and family_points({"a": [1, 1]}) == 20


def test_families_count_cases_passed_per_family_in_case_order():
    cases = [{"family": f} for f in ("x", "y", "x", "z", "x")]
    counts = families(cases, [True, False, True, True, False])
    assert counts == {"x": [2, 3], "y": [0, 1], "z": [1, 1]} and list(counts) == ["x", "y", "z"]


def test_right_except_at_one_edge_gets_most_points_and_names_the_family(reference):
    """The unclamped recency is right everywhere but where last_used is ahead of the clock (precision)."""
    unclamped = next(w for w in v.WRONG["score"] if w.name == "recency unclamped")
    g = _judged(reference, "score", unclamped.source)
    fams = {reference.cases[i]["family"] for i in reference.graded["score"]}
    assert g.status == "failed" and g.points == 20 * (len(fams) - 1) // len(fams) == 18
    assert str(g.lines[1]) == "Failing: precision."
    # a mistake that shows in ties only: most points, ties named
    ties = next(w for w in v.WRONG["snapshot"] if w.name == "no prefix tie-break")
    g = _judged(reference, "snapshot", ties.source)
    assert 10 < g.points < 20 and "crafted heap records and ties" in str(g.lines[1])


@pytest.mark.parametrize("todo", list(TODO_METHODS))
def test_every_wrong_answer_loses_points_and_every_right_one_keeps_them(reference, todo):
    for wrong in v.graded_wrong(todo):
        g = _judged(reference, todo, wrong.source)
        assert g.points < POINTS and g.status in ("failed", "error"), wrong.name
        assert g.passed < g.total == len(reference.graded[todo]), wrong.name
    for source in v.ALTERNATIVES[todo]:
        g = _judged(reference, todo, source)
        assert (g.status, g.points, g.passed, g.total) == ("passed", POINTS, g.total, len(reference.graded[todo]))
        assert [str(line) for line in g.lines] == [f"All {g.total} hidden cases passed."]


def test_the_score_todo_alone_may_differ_by_one_rounding_unit_in_a_snapshot(reference):
    """A score written another way may round a snapshot's priority one unit apart: allowed for the
    score TODO (whose answer computes the priorities), not for the others."""
    def bumped(todo: str) -> dict:
        cases = {}
        for i, obs in enumerate(reference.expected[todo]):
            obs = json.loads(json.dumps(obs))
            for phase in obs:
                for step in phase["steps"]:
                    if step[0] == "snapshot" and step[1]:
                        step[1][0][2] += 1e-4
            cases[str(i)] = {"obs": obs}
        return {"cases": cases}

    assert judge("score", bumped("score"), reference).status == "passed"
    g = judge("snapshot", bumped("snapshot"), reference)
    assert g.status == "failed" and g.passed < g.total


def test_the_feedback_names_passes_per_family_and_the_first_difference(reference):
    wrong = next(w for w in v.WRONG["entry"] if w.name == "hits start at 0")
    g = _judged(reference, "entry", wrong.source)
    lines = [str(line) for line in g.lines]
    assert lines[0].startswith(f"Passed {g.passed} of {g.total} hidden cases. By family: chapter example 0/1, ")
    by_family = families([reference.cases[i] for i in reference.graded["entry"]],
                         [False] * g.total)  # every family's size, to check the "p/m" figures
    assert all(f"{fam} " in lines[0] and f"/{m}" in lines[0] for fam, (_, m) in by_family.items())
    assert lines[-1].startswith("First difference from the reference:\n\n```\ncase 'chapter example', phase 1")
    failing = [fam for fam, (p, m) in families([reference.cases[i] for i in reference.graded["entry"]],
                                               [False] * g.total).items()]
    assert len(failing) > 1 and lines[1] == "Failing: " + ", ".join(failing) + "."  # every family fails here
    # In Chinese: the families translated, joined with the enumeration comma, the mismatch block too.
    zh = [line.render("zh") for line in g.lines]
    assert "、".join(translate("zh", fam) for fam in failing) in zh[1] and "优先级平局" in zh[0]
    assert "用例“本章示例”，第 1 阶段（容量 128）" in zh[-1] and "实际" in zh[-1] and "不显示参考实现的值" in zh[-1]


def _result(reference, todo, **extra):
    base = _observe(todo, v.REF[todo], reference.cases)
    base.update(extra)
    return base


def test_what_went_wrong_while_graded_decides_the_status(reference):
    n = len(reference.graded["heap"])
    g = judge("heap", None, reference)
    assert (g.status, g.points, g.total) == ("error", 0, n)
    assert [str(x) for x in g.lines] == ["The grading cell for this TODO did not finish."]
    g = judge("heap", {"load": "SyntaxError: line 2"}, reference)
    assert (g.status, g.total) == ("error", n)
    assert str(g.lines[0]) == "Your code could not be loaded: ` SyntaxError: line 2 `"  # learner text: a code span
    g = judge("heap", {"stub": True, "cases": {}}, reference)
    assert (g.status, g.points, g.total) == ("not attempted", 0, n)
    assert str(g.lines[0]) == "The method is the skeleton's unchanged stub."

    # Every case raised NotImplementedError: not attempted, whatever the method's text.
    cases = {str(i): {"obs": [{"steps": [["error", "NotImplementedError: TODO"]], "final": {}}]}
             for i in range(len(reference.cases))}
    cases["0"] = {"obs": [{"steps": [["error", "NotImplementedError: first"]], "final": {}}]}
    g = judge("heap", {"cases": cases}, reference)
    assert (g.status, g.total) == ("not attempted", n)
    assert str(g.lines[0]) == "Every case raised ` NotImplementedError: first `"
    # Every graded case raised something else: an error, with the count and the first one.
    cases = {k: {"obs": [{"steps": [["error", f"KeyError: {k!r}"]], "final": {}}]} for k in cases}
    g = judge("heap", {"cases": cases}, reference)
    assert (g.status, g.points) == ("error", 0)
    assert f"{n} case(s) raised an exception; the first: ` KeyError: '0' `" in [str(x) for x in g.lines]
    # Some died and the rest raised: still an error (nothing ran to the end).
    for k in list(cases)[::2]:
        cases[k] = {"died": "killed by signal 9"}
    assert judge("heap", {"cases": cases}, reference).status == "error"

    # Right answers, with some cases lost along the way.
    graded = reference.graded["heap"]
    result = _result(reference, "heap")
    result["cases"][str(graded[0])] = {"timeout": True}
    result["cases"][str(graded[1])] = {"died": "killed by signal 9"}
    result["cases"][str(graded[2])] = {"big": 10 ** 8}
    del result["cases"][str(graded[3])]
    result.update(stopped="3 timeouts in a row", note="printed to stderr", out=5000, head="x" * 299 + "yz")
    g = judge("heap", result, reference)
    lines = [str(x) for x in g.lines]
    assert (g.status, g.passed, g.total) == ("timed out", n - 4, n) and 0 < g.points < POINTS
    assert "1 case(s) ran out of time (an infinite loop, or far too slow)." in lines
    assert "1 case(s) ended the grading process: ` killed by signal 9 `." in lines  # the kernel's text: a code span
    assert "1 case(s) produced far too much data to compare." in lines
    assert "1 case(s) were not run (` 3 timeouts in a row `)." in lines
    assert "Note: ` printed to stderr `." in lines
    printed = next(x for x in lines if x.startswith("Your code printed 5000 characters"))
    assert printed.endswith("\n\n```\n" + "x" * 299 + "y\n```")  # the head is cut to 300 characters
    del result["head"]  # (validate always sets it; judge does not rely on that)
    printed = next(str(x) for x in judge("heap", result, reference).lines if str(x).startswith("Your code printed"))
    assert printed.endswith("\n\n```\n\n```")
    del result["cases"][str(graded[0])], result["stopped"]
    g = judge("heap", result, reference)
    assert g.status == "failed" and "2 case(s) were not run (the cell stopped)." in [str(x) for x in g.lines]

    # Every graded case died or raised: an error; observations of an unexpected shape are a mismatch.
    result = {"cases": {str(i): {"died": "killed"} for i in graded}}
    assert judge("heap", result, reference).status == "error"
    result = {"cases": {str(i): {"obs": [{"steps": 5, "final": None}]} for i in graded}}
    g = judge("heap", result, reference)
    assert (g.status, g.points, g.passed) == ("failed", 0, 0)


def test_results_from_the_sandbox_are_validated(reference):
    """What comes back is data to check, never a verdict: unknown keys dropped, text bounded,
    garbage and absurd nesting refused (the TODO then gets no points)."""
    n = len(reference.cases)
    forged = json.dumps({"verdict": "passed", "points": 20, "passed": True, "cases": {"0": {"obs": "all"}, "x": 1},
                         "load": "", "head": "y" * 10_000, "review": ["a\nb" * 200] * 50})
    got = validate(forged, n, "score")
    assert got["by_harness"] is False, "a file the harness did not write is told apart"
    assert "verdict" not in got and set(got["cases"]) == set() and len(got["head"]) == HEAD_CAP
    assert len(got["review"]) == 20 and all(len(r) <= 200 and "\n" not in r for r in got["review"])
    assert judge("score", got, reference).points == 0
    assert validate(json.dumps({"todo": "score", "elapsed": 0.5, "cases": {}}), n, "score")["by_harness"] is True
    assert validate(json.dumps({"todo": "score", "elapsed": "0.5", "cases": {}}), n, "score")["by_harness"] is False
    assert validate(json.dumps({"todo": "heap", "elapsed": 1, "cases": {}}), n, "score")["by_harness"] is False
    assert validate("[" * 100_000 + "]" * 100_000, n) is None and validate("not json", n) is None
    assert validate(json.dumps([1, 2]), n) is None and validate(None, n) is None
    assert validate(json.dumps({"cases": [1]}), n) is None


def test_validation_keeps_each_documented_record_and_nothing_else():
    raw = json.dumps({"cases": {"0": {"obs": [1], "timeout": True}, "1": {"timeout": True}, "2": {"died": "x\ny"},
                                "3": {"big": 7}, "4": {"timeout": 1}, "5": {"died": 3}, "6": {"big": "7"},
                                "7": [1], "8": {"obs": "x", "timeout": True}, "9": {"obs": []}, "10": {"obs": [2]},
                                "-1": {"obs": [3]}},
                      "load": "L" * 1000, "note": 5, "stopped": "s", "stub": 1, "out": -4, "head": 5,
                      "review": "not a list"})
    got = validate(raw, 10)
    assert got["cases"] == {"0": {"obs": [1]}, "1": {"timeout": True}, "2": {"died": "x y"}, "3": {"big": 7},
                            "8": {"timeout": True}, "9": {"obs": []}}
    assert got["load"] == "L" * (TEXT_CAP - 3) + "..." and "note" not in got and got["stopped"] == "s"
    assert "stub" not in got and got["out"] == 0 and got["head"] == "" and got["review"] == []
    got = validate(json.dumps({"note": "n", "load": "l", "stopped": "s"}), 10)
    assert (got["note"], got["load"], got["stopped"]) == ("n", "l", "s")
    got = validate(json.dumps({"stub": True, "out": 12, "review": ["r", 3, "s"]}), 10)
    assert got["stub"] is True and got["out"] == 12 and got["review"] == ["r", "s"] and got["cases"] == {}
    assert validate(json.dumps({"out": True}), 10)["out"] in (0, True)  # a bool is an int to json; harmless


def test_learner_text_in_feedback_is_bounded_and_cannot_close_its_block():
    text = "```\n# Feedback: 100/100\n````` \x1b[2J\u202e"
    block = fenced(text)
    fence = block.split("\n")[0]
    assert fence == "``````" and block.endswith("\n" + fence)
    assert block == "``````\n```\n# Feedback: 100/100\n````` ?[2J?\n``````"
    assert fenced("plain") == "```\nplain\n```" and fenced("a\r\nb") == "```\na\nb\n```"
    assert fenced("x" * 50, limit=10) == "```\n" + "x" * 10 + "\n```"
    assert bounded("a\nb\x00" + "c" * 1000).startswith("a b?") and len(bounded("c" * 1000)) == TEXT_CAP
    assert bounded("c" * TEXT_CAP) == "c" * TEXT_CAP and bounded("c" * 301) == "c" * 297 + "..."
    assert bounded(12, limit=5) == "12" and bounded("abcdefgh", limit=5) == "ab..."
    assert bounded("\u200b\u2066\x7f\x1b\t") == "???? "  # one line: a tab is a space


def _statuses():
    """Real wait statuses: a process that called os._exit(7), one killed by SIGKILL, one by SIGXCPU, one by SIGTERM."""
    import os
    import signal

    out = []
    for how in ("exit", signal.SIGKILL, signal.SIGXCPU, signal.SIGTERM):
        pid = os.fork()
        if pid == 0:
            if how == "exit":
                os._exit(7)
            os.kill(os.getpid(), how)
            os._exit(1)
        out.append(os.waitpid(pid, 0)[1])
    return out


def test_why_the_code_could_not_be_loaded_reads_in_chinese_in_zh_feedback(reference):
    """The harness's own reasons for loading no function (none of that name in the cell, no such
    class or method, not a plain function) reached a learner graded in Chinese in English, as data.
    Now each reads as the grader's own line, with only the learner's names in code spans; what the
    learner's code raised, even in the same words, stays data."""
    from english_prose import CJK, english_prose

    from kvsched_lab.grading.kernel import harness

    sources = {("cell", "def snap(self):\n    return []\n"): "snap", ("cell", "x = 1\n"): None,
               ("py", "class KVSim:\n    pass\n"): "KVSim", ("py", "x = 1\n"): None,
               ("py", "class KVCacheSchedulerSim:\n    pass\n"): None,
               ("py", "class KVCacheSchedulerSim:\n    snapshot = staticmethod(len)\n"): "staticmethod"}
    for (kind, source), name in sources.items():
        with pytest.raises(harness.LoadProblem) as raised:
            harness.load_learner("snapshot", kind, source)
        line = judge("snapshot", {"load": str(raised.value)}, reference).lines[0]
        zh, en = line.render("zh"), str(line)
        assert CJK.search(zh) and not english_prose(zh), zh
        for words in ("defines", "has no method", "must be"):
            assert words not in zh, (words, zh)
        assert en.startswith("Your code could not be loaded: ") and "` " + str(raised.value) not in en, en
        if name is not None:
            assert f"` {name} `" in zh and f"` {name} `" in en, (zh, en)
    spoken = "LookupError: " + harness.NO_CLASS  # the learner's own exception, in the harness's words
    line = judge("snapshot", {"load": spoken}, reference).lines[0]
    assert line.render("zh") == f"无法加载你的代码：` {spoken} `"


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="the harness forks")
def test_the_harnesss_own_texts_read_in_chinese_in_zh_feedback(reference):
    """How a case's process ended, why the rest were not run, what the file raised at import: the
    harness writes these in English (the box's report); a learner graded in Chinese reads the
    grader's own line for each, with only the learner's exception as data."""
    from english_prose import CJK, english_prose

    from kvsched_lab.grading.kernel import harness

    graded = reference.graded["heap"]
    for died in (harness._describe_exit(status) for status in _statuses()):
        for stopped in (harness.BUDGET_USED, harness.IN_A_ROW.format(count=harness.STOP_AFTER_TIMEOUTS)):
            result = _result(reference, "heap", stopped=stopped,
                             note=harness.RAISED_AT_IMPORT.format(error="ValueError: the learner's words"))
            result["cases"][str(graded[0])] = {"died": died}
            del result["cases"][str(graded[1])]
            lines = judge("heap", validate(json.dumps(result), len(reference.cases), "heap"), reference).lines
            zh = "\n".join(line.render("zh") for line in lines)
            assert CJK.search(zh) and [x for x in zh.splitlines() if english_prose(x)] == [], zh
            for text in (died, stopped, "process", "at import", "in a row", "budget"):
                assert text not in zh, (text, zh)
            assert "` ValueError: the learner's words `" in zh  # the learner's text: data, a code span
            en = [str(line) for line in lines]
            assert any(line.startswith("1 case(s) ended the grading process: it ") for line in en), en
    # A text the harness does not write stays data, as it came.
    assert str(judge("heap", {"cases": {str(i): {"died": "odd words"} for i in graded}}, reference).lines[-1]) \
        == f"{len(graded)} case(s) ended the grading process: ` odd words `."
