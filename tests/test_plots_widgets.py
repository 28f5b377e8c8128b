"""Plots, the widgets' update functions (headless) and the leaderboard."""
import html
import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from kvsched_lab.course import leaderboard as lb  # noqa: E402
from kvsched_lab.course import plots, widgets  # noqa: E402
from kvsched_lab.sim.policies import make_policy  # noqa: E402
from kvsched_lab.sim.policies.seed import SeedPolicy  # noqa: E402
from kvsched_lab.sim.traces import synthetic_trace  # noqa: E402
from i18n_helpers import assert_same_message_in_chinese  # noqa: E402
from policy_helpers import MostRecent  # noqa: E402
from solutions import KVCacheSchedulerSim  # noqa: E402

CHAPTER = [("a", 40), ("b", 48), ("a", 40), ("c", 56), ("d", 48), ("a", 40)]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def segments():
    return widgets.explorer_trace(300, seed=0)


def labels(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


# -- plots ------------------------------------------------------------------------------------------
def test_priority_over_time_records_the_chapter_staircase():
    hist = plots.record_priorities(KVCacheSchedulerSim(128), CHAPTER, ["a", "b"])
    assert hist["time"] == [1, 2, 3, 4, 5, 6]
    a = hist["stored"]["a"]
    assert a[0] < a[2] < a[5] and a[2] == a[3] == a[4]  # rises only when 'a' is hit
    assert hist["stored"]["b"][3:] == [None, None, None] and hist["evicted"]["b"] == [4]
    assert round(a[-1], 4) == 3.4219  # the chapter's snapshot value
    fig = plots.plot_priority_over_time(hist)
    ax = fig.axes[0]
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    assert "b: evicted" in labels(ax)
    markers = {line.get_marker() for line in ax.get_lines() if not line.get_label().endswith("evicted")}
    assert len(markers) == 2  # each prefix its own marker, not just its own colour


def test_priority_rescored_shows_decay():
    def now_score(e, now, cap):
        return e.hits + 0.5 / (1 + max(now - e.last_used, 0)) - 0.25 * e.bytes / cap  # the chapter's score

    hist = plots.record_priorities(SeedPolicy(128), CHAPTER, ["a"], rescore=now_score)
    stored, rescored = hist["stored"]["a"], hist["rescored"]["a"]
    assert rescored[2] == pytest.approx(stored[2])  # at its own touch, recency is 1: equal
    assert rescored[4] < stored[4]  # two touches later the re-evaluated score has decayed
    fig = plots.plot_priority_over_time(hist)
    assert any(line.get_linestyle() == ":" for line in fig.axes[0].get_lines())


def test_heap_growth_seed_grows_compact_stays_flat():
    ids = [r.hash_ids for r in synthetic_trace(300, seed=1)]
    growth = plots.record_heap_growth(ids, capacity_blocks=200, samples=50)
    seed, compact = growth["seed"], growth["seed-compact"]
    assert seed["live"] == compact["live"]  # same decisions
    assert seed["records"][-1] > 5 * seed["live"][-1]  # one record per touch, live or not
    assert all(r <= 2 * n + 64 for r, n in zip(compact["records"], compact["live"]))
    fig = plots.plot_heap_growth(growth)
    assert labels(fig.axes[0]) == ["seed: heap records", "seed-compact: heap records", "live entries (cached blocks)"]
    styles = {(line.get_marker(), str(line.get_linestyle())) for line in fig.axes[0].get_lines()}
    assert len(styles) == 3


def test_occupancy_marks_each_eviction():
    tl = plots.record_occupancy(KVCacheSchedulerSim(128), CHAPTER)
    assert [key for _, key, _ in tl["evictions"]] == ["b", "c"]
    assert [t for t, _, _ in tl["evictions"]] == [4, 5] and tl["hits"] == [3, 6]
    assert max(tl["used"]) <= tl["capacity"] == 128
    fig = plots.plot_occupancy(tl)
    ax = fig.axes[0]
    assert "eviction (2)" in labels(ax) and "capacity" in labels(ax)
    assert {t.get_text() for t in ax.texts} == {"b", "c"}


def test_hit_rate_vs_capacity_draws_the_bound_apart():
    rows = [{"trace": "t", "policy": p, "capacity": c, "hit_rate": r}
            for p, base in (("lru", 0.1), ("fifo", 0.08), ("belady", 0.3)) for c, r in ((10, base), (100, 2 * base))]
    fig = plots.plot_hit_rate_vs_capacity(rows, trace="t")
    ax = fig.axes[0]
    assert "belady: optimal bound (offline)" in labels(ax) and "unreachable" in labels(ax)
    bound = next(line for line in ax.get_lines() if line.get_label().startswith("belady"))
    assert bound.get_color() == "black" and bound.get_linewidth() > 2
    assert list(bound.get_ydata()) == pytest.approx([30, 60])
    others = [line for line in ax.get_lines() if line is not bound]
    assert len({line.get_marker() for line in others}) == 2
    assert ax.get_xscale() == "log" and "%" in ax.get_ylabel()


def test_hit_rate_vs_capacity_names_a_curve_drawn_over_an_equal_one():
    # lfu and "mine" have the same points: mine hides lfu, and its legend entry says so.
    rows = [{"trace": "t", "policy": p, "capacity": c, "hit_rate": r}
            for p, base in (("lfu", 0.1), ("lru", 0.12), ("mine", 0.1), ("belady", 0.3))
            for c, r in ((10, base), (100, 2 * base))]
    got = labels(plots.plot_hit_rate_vs_capacity(rows, trace="t").axes[0])
    assert "mine (same as lfu, drawn over it)" in got and "lfu" in got and "lru" in got
    assert not any("same as" in label for label in got if not label.startswith("mine"))


def test_plot_explorer_state(segments):
    fig = plots.plot_explorer_state(widgets.explorer_state(segments=segments))
    assert len(fig.axes) == 2 and "evicted" in fig.axes[1].get_title()


# -- the score explorer ---------------------------------------------------------------------------
def test_segments_cover_every_block_and_have_fixed_sizes(segments):
    reqs = synthetic_trace(300, seed=0)
    size = {}
    for req, segs in zip(reqs, segments):
        assert sum(n for _, n in segs) == len(req.hash_ids)
        pos = 0
        for key, n in segs:
            assert key == req.hash_ids[pos]
            assert size.setdefault(key, n) == n
            pos += n
    assert max(size.values()) > 5 > min(size.values())  # variable sizes: the size weight matters


def test_weighted_score_policy_matches_seed_on_block_traces():
    # With the chapter's weights and one size, frozen scores decide exactly like the chapter.
    ids = [r.hash_ids for r in synthetic_trace(80, seed=2)]
    a, b = widgets.WeightedScorePolicy(150), make_policy("seed", 150)
    assert a.replay_requests(ids, 1) == b.replay_requests(ids, 1)
    assert list(a.log) == list(b.log)


def test_recency_weight_needs_rescoring(segments):
    def rate(rec, rescore):
        return widgets.explorer_state((1.0, rec, 0.25), 200, rescore=rescore, segments=segments)["hit_rate"]

    assert rate(0.0, False) == rate(0.5, False) == rate(20.0, False)  # frozen: a constant, no effect
    assert len({rate(0.0, True), rate(0.5, True), rate(20.0, True)}) > 1  # re-scored: it matters


def test_pure_recency_is_lru(segments):
    for rescore in (False, True):
        st = widgets.explorer_state((0.0, 1.0, 0.0), 300, rescore=rescore, segments=segments)
        assert st["hit_rate"] == st["baseline_hit_rate"]


def test_weights_move_evictions_in_the_expected_direction(segments):
    def state(weights, rescore=False):
        return widgets.explorer_state(weights, 300, rescore=rescore, segments=segments)

    # More weight on size: bigger entries go first.
    assert state((1, 0.5, 0.0))["mean_evicted_blocks"] < state((1, 0.5, 5.0))["mean_evicted_blocks"]
    # More weight on reuse: often-hit entries are kept, the evicted ones were hit less.
    assert state((1.0, 0.5, 0.0), True)["mean_evicted_hits"] < state((0.0, 0.5, 0.0), True)["mean_evicted_hits"]
    # With re-scoring, more weight on recency turns the score into LRU: the hit rate moves
    # towards LRU's and often-hit entries are no longer protected.
    low, high = state((1, 0.0, 0.25), True), state((1, 1000.0, 0.25), True)
    assert abs(high["hit_rate"] - high["baseline_hit_rate"]) < abs(low["hit_rate"] - low["baseline_hit_rate"])
    assert high["mean_evicted_hits"] > low["mean_evicted_hits"]


def test_explorer_state_is_pure(segments):
    a = widgets.explorer_state((1, 2, 3), 250, rescore=True, segments=segments)
    b = widgets.explorer_state((1, 2, 3), 250, rescore=True, segments=segments)
    assert a == b
    assert a["evictions"] == len(a["evicted"]) > 0
    assert "re-scored at eviction" in widgets.describe_state(a)
    with pytest.raises(ValueError, match="largest entry"):
        widgets.explorer_state(capacity=3, segments=segments)


def test_grid_bounds_put_the_value_on_the_grid():
    assert widgets.grid_bounds(400, 40, 1600, 25) == (50, 1600)
    assert widgets.grid_bounds(400, 400, 400, 25) == (400, 400)
    low, high = widgets.grid_bounds(0.5, 0, 100, 0.5)
    assert (low, high) == (0, 100)
    with pytest.raises(ValueError):
        widgets.grid_bounds(30, 40, 100, 25)


def _explorer_controls(box):
    return [c for row in box.children[:2] for c in row.children]


@pytest.mark.parametrize("capacity", [400, 333, 40])
def test_explorer_defaults_sit_on_their_slider_grid(segments, capacity):
    # A browser snaps an off-grid value and sends the change back: the widget then redraws at a
    # value the static cell never used (issue 9: 400 became 390). On the grid, nothing moves.
    box = widgets.score_explorer(segments, capacity=capacity)
    largest = max(n for segs in segments for _, n in segs)
    for control in _explorer_controls(box):
        if hasattr(control, "step"):
            steps = (control.value - control.min) / control.step
            assert abs(steps - round(steps)) < 1e-9, (control.description, control.value, control.min)
            span = (control.max - control.min) / control.step
            assert abs(span - round(span)) < 1e-9 and control.min <= control.value <= control.max
    cap = _explorer_controls(box)[3]
    assert cap.value == max(capacity, largest) and cap.min >= largest


def test_explorer_draws_its_first_figure_before_any_front_end_and_agrees_with_the_static_cell(segments):
    box = widgets.score_explorer(segments)
    text, figure = box.children[2], box.children[3]
    # What the notebook's static cell prints at the defaults is what the widget shows first.
    static = widgets.describe_state(widgets.explorer_state(widgets.CHAPTER_WEIGHTS, 400, segments=segments))
    assert static in html.unescape(text.value)
    assert figure.format == "png" and bytes(figure.value).startswith(b"\x89PNG") and len(figure.value) > 10_000


def test_explorer_redraws_on_a_change_and_only_then(segments):
    box = widgets.score_explorer(segments)
    text, figure = box.children[2], box.children[3]
    first_text, first_png = text.value, figure.value
    controls = _explorer_controls(box)
    controls[1].value = 7.0  # the recency weight: frozen score, same decisions, new text
    assert text.value != first_text and "recency=7" in text.value
    controls[4].value = True  # re-score at eviction: different evictions, a different figure
    assert figure.value != first_png and "re-scored at eviction" in text.value
    drawn = figure.value
    controls[4].value = True  # no change: nothing redrawn
    assert figure.value is drawn


def test_score_explorer_shows_the_state_of_the_weights_it_was_moved_to(segments):
    box = widgets.score_explorer(segments)
    controls = {c.description: c for row in box.children[:2] for c in row.children}
    shown = lambda: html.unescape(box.children[2].value)  # noqa: E731  (the explorer's text widget)
    weights = lambda: tuple(controls[f"{w} weight"].value for w in ("reuse", "recency", "size"))  # noqa: E731
    capacity = controls["capacity (blocks)"].value
    assert widgets.describe_state(widgets.explorer_state(weights(), capacity, segments=segments)) in shown()
    controls["size weight"].value = 5.0  # triggers an update without a front end
    want = widgets.explorer_state((weights()[0], weights()[1], 5.0), capacity, segments=segments)
    assert widgets.describe_state(want) in shown() and "size=5;" in shown()
    controls["re-score at eviction"].value = True
    want = widgets.explorer_state(weights(), capacity, rescore=True, segments=segments)
    assert widgets.describe_state(want) in shown()


def test_heap_viewer_steps_headless():
    box = widgets.heap_viewer()
    prev_b, slider, next_b = box.children[0].children
    next_b.click()
    next_b.click()
    steps = widgets.record_heap_steps()
    assert slider.value == 2 and box.children[1].value == widgets.heap_view_html(steps, 2)
    assert "touch #2" in box.children[1].value
    prev_b.click()
    assert slider.value == 1 and box.children[1].value == widgets.heap_view_html(steps, 1)
    prev_b.click()
    prev_b.click()  # stops at the first step
    assert slider.value == 0 and box.children[1].value == widgets.heap_view_html(steps, 0)


# -- the heap viewer ------------------------------------------------------------------------------
def test_heap_view_marks_exactly_the_stale_records():
    touches = list(widgets.DEFAULT_TOUCHES)
    ref_steps = widgets.record_heap_steps(touches, 128, KVCacheSchedulerSim(128))
    lib_steps = widgets.record_heap_steps(touches, 128)  # library seed: the same records
    ref = KVCacheSchedulerSim(128)
    for i, step in enumerate(ref_steps):
        if i:
            ref.touch(*touches[i - 1])
        rows = widgets.heap_view(ref_steps, i)
        assert [(r["priority"], r["last_used"], r["prefix"], r["status"]) for r in rows] == \
               [(r["priority"], r["last_used"], r["prefix"], r["status"]) for r in widgets.heap_view(lib_steps, i)]
        live = [r for r in rows if r["status"] == widgets.LIVE]
        # Exactly one live record per cached entry, matching it; every other record is stale.
        assert sorted((r["prefix"], r["priority"], r["last_used"]) for r in live) == \
               sorted((k, e.priority, e.last_used) for k, e in ref.entries.items())
        assert len(rows) - len(live) == len(ref.queue) - len(ref.entries)
        for r in rows:
            entry = ref.entries.get(r["prefix"])
            expected = widgets.STALE_EVICTED if entry is None else (
                widgets.LIVE if (entry.priority, entry.last_used) == (r["priority"], r["last_used"])
                else widgets.STALE_RESCORED)
            assert r["status"] == expected
        # The next eviction the reference makes is the first live row in pop order.
        if i < len(touches):
            nxt = ref_steps[i + 1].events
            evicts = [e.split(":", 1)[1] for e in nxt if e.startswith("evict:")]
            if evicts:
                assert live[0]["prefix"] == evicts[0]
    assert sum(r["status"] != widgets.LIVE for r in widgets.heap_view(ref_steps, len(touches))) > 3


def test_heap_growth_names_a_policy_drawn_over_an_equal_one():
    rec = {"touches": [1, 2, 3], "records": [1, 2, 3], "live": [1, 1, 1]}
    got = labels(plots.plot_heap_growth({"seed": rec, "mine": dict(rec), "compact": {**rec, "records": [1, 1, 1]}}).axes[0])
    assert "mine: heap records (same as seed, drawn over it)" in got
    assert "seed: heap records" in got and "compact: heap records" in got


def test_heap_view_labels_each_status_in_the_learners_language(monkeypatch):
    steps = widgets.record_heap_steps(list(widgets.DEFAULT_TOUCHES), 128)
    monkeypatch.setenv("KVSCHED_LANG", "zh")
    rows = widgets.heap_view(steps, 11)
    assert {r["status"] for r in rows} == {widgets.LIVE, widgets.STALE_RESCORED}  # compared by code: English
    for r in rows:
        assert_same_message_in_chinese(r["status"], r["label"])


def test_heap_view_html_marks_stale_without_colour():
    steps = widgets.record_heap_steps()
    page = widgets.heap_view_html(steps, 6)
    assert page.count("<td>STALE") == sum(r["status"] != widgets.LIVE for r in widgets.heap_view(steps, 6)) > 0
    assert "<s>" in page and "touch #6" in page


# -- leaderboard ----------------------------------------------------------------------------------
def test_leaderboard_gap_shares_on_a_hand_trace():
    # Capacity 2 blocks, one block per request: a b c a b c ... LRU and FIFO never hit;
    # Belady keeps a and b and bypasses every c: 3 misses, then one in every 3 touches.
    reqs = lb.trace_requests([[k] for k in "abcabcabcabc"])
    board = lb.leaderboard(["fifo", "lru", "belady"], {"hand": reqs}, [2], progress=False)
    cell = "hand@2"
    assert board["lru"]["rates"][cell] == 0.0 and board["fifo"]["rates"][cell] == 0.0
    bound = board["belady"]["rates"][cell]
    assert bound == pytest.approx(6 / 12)  # misses: a, b, c, then every later c
    assert board["belady"]["mean_gap_closed"] == 1.0 and board["lru"]["mean_gap_closed"] == 0.0
    assert board["belady"]["rank"] == 1
    assert "gap closed" in board.to_text() and "<table>" in board._repr_html_()


def test_gap_closed_arithmetic_and_ranking():
    results = [{"trace": t, "policy": p, "capacity": 1, "hit_rate": r}
               for t, rates in (("x", {"lru": 0.2, "belady": 0.6, "mine": 0.4, "bad": 0.1}),
                                ("y", {"lru": 0.3, "belady": 0.3, "mine": 0.3, "bad": 0.3}))
               for p, r in rates.items()]
    board = lb.rank(results)
    assert board["mine"]["gaps"]["x@1"] == pytest.approx(0.5)
    assert board["bad"]["gaps"]["x@1"] == pytest.approx(-0.25)
    assert math.isnan(board["mine"]["gaps"]["y@1"])  # no gap to close: left out of the mean
    assert board["mine"]["mean_gap_closed"] == pytest.approx(0.5)
    assert [r["policy"] for r in board] == ["belady", "mine", "lru", "bad"]
    with pytest.raises(ValueError, match="belady"):
        lb.rank([r for r in results if r["policy"] != "belady"])


def test_leaderboard_takes_a_learner_class_and_labels_it():
    reqs = lb.trace_requests([[k] for k in "abcabcabcabc"])
    board = lb.leaderboard([MostRecent], {"hand": reqs}, [2], progress=False)
    assert {r["policy"] for r in board} == {"MostRecent", "lru", "belady"}
    assert board["MostRecent"]["rates"]["hand@2"] == pytest.approx(5 / 12)  # MRU hits every other touch from #4
    assert "seed-compact" not in lb.default_policies() and "lru" in lb.default_policies()


def test_heap_growth_takes_labelled_classes_and_skips_withheld_names(monkeypatch, capsys):
    import kvsched_lab.sim.policies as policies

    ids = [r.hash_ids for r in synthetic_trace(60, seed=1)]
    growth = plots.record_heap_growth(ids, capacity_blocks=100, samples=10, policies={"mine": SeedPolicy})
    assert list(growth) == ["mine"] and growth["mine"]["records"][-1] >= growth["mine"]["live"][-1]
    # as in the student release, where seed and seed-compact are withheld
    monkeypatch.setattr(policies, "WITHHELD", ("seed", "seed-compact"))
    assert plots.record_heap_growth(ids, capacity_blocks=100) == {}
    assert "skipped seed, seed-compact: withheld in the student release" in capsys.readouterr().out
    assert plots.plot_heap_growth({}).axes[0].get_legend() is None  # "nothing to plot", no crash


def test_a_plot_keeps_what_the_backend_set_while_it_drew(monkeypatch):
    """A kernel's first figure loads the inline backend, which turns interactive mode on. The font
    wrapper used to restore every rcParam afterwards, turning it off again, so notebook 03's last
    figure never showed (failed before the fix). It must put back only the font it set."""
    monkeypatch.setattr(plots, "font_rc", lambda lang: {"font.family": ["DejaVu Sans"]})
    family = list(plt.rcParams["font.family"])
    was = matplotlib.is_interactive()

    @plots._localized
    def first_figure():
        matplotlib.interactive(True)  # what loading the inline backend does
        assert plt.rcParams["font.family"] == ["DejaVu Sans"]
        return plt.figure()

    try:
        matplotlib.interactive(False)
        first_figure()
        assert matplotlib.is_interactive() and plt.rcParams["font.family"] == family
    finally:
        matplotlib.interactive(was)
