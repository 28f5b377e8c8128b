"""Interactive explorers for the notebooks: a score-weights explorer and a step-through heap viewer.

Each widget is a thin layer of core ipywidgets (they work on Colab without a custom widget
manager) over a plain function that does all the work and is tested headless:

* `explorer_state(weights, capacity)` replays a small trace through `WeightedScorePolicy`, a
  weighted version of the chapter's score, and says what the hit rate is and what got evicted;
  `score_explorer()` puts sliders in front of it.
* `record_heap_steps(touches)` records the chapter scheduler's heap after every touch and
  `heap_view(steps, i)` lists step `i`'s heap records in pop order, each marked live or stale;
  `heap_viewer()` steps through them with prev/next buttons.

No module-level mutable state: every widget keeps its own state in its closure, so re-running
a cell builds a fresh, independent widget.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple

from kvsched_lab.i18n import N_, _
from kvsched_lab.sim.policies.base import Policy

Weights = Tuple[float, float, float]  # (reuse, recency, size)
CHAPTER_WEIGHTS: Weights = (1.0, 0.5, 0.25)  # the chapter's score: 1*reuse + 0.5*recency - 0.25*size
Segments = List[List[Tuple[Hashable, int]]]  # per request: (entry key, size in blocks), head to tail


class WeightedScorePolicy(Policy):
    """Evict the entry with the lowest weighted score (ties: older last use first).

    The score is ``w_reuse*hits + w_recency/(1+age) - w_size*size/capacity``, `age` the touches since
    the entry's last use. It is computed inside `victim` only, over all live entries at once: the
    library hands out no function that scores one entry, which with the chapter's weights would be
    the answer to TODO score.

    ``rescore=False`` is the chapter's scheme: the score is the one an entry got when it was last
    touched (recency is then 1 for everybody), so the recency weight adds the same constant to
    every entry and cannot change a single decision. ``rescore=True`` evaluates every live entry's
    score at eviction time, with its real age, the way Marconi rescores.
    Either way the victim is found by a scan of the live entries, O(live entries) per eviction:
    fine for the explorer's small traces, and it keeps the chapter's heap (your TODOs) out of
    this module. Evictions are recorded in ``evicted`` as ``(key, size, hits, age)``.
    """

    name = "weighted-score"

    def __init__(self, capacity_bytes: int, *, weights: Weights = CHAPTER_WEIGHTS, rescore: bool = False,
                 future: Optional[Sequence[Hashable]] = None) -> None:
        super().__init__(capacity_bytes, future=future)
        self.weights = tuple(float(w) for w in weights)
        if len(self.weights) != 3:
            raise ValueError(f"weights must be (reuse, recency, size), got {weights!r}")
        self.rescore = bool(rescore)
        self.meta: Dict[Hashable, List[int]] = {}  # key -> [hits, last_used]
        self.evicted: List[Tuple[Hashable, int, int, int]] = []

    def on_hit(self, key: Hashable) -> None:
        meta = self.meta[key]
        meta[0] += 1
        meta[1] = self.time

    def on_insert(self, key: Hashable, size: int) -> None:
        self.meta[key] = [1, self.time]

    def victim(self) -> Hashable:
        now, cap, w, meta, entries = self.time, self.capacity_bytes, self.weights, self.meta, self.entries
        rescore = self.rescore

        w_reuse, w_recency, w_size = w
        per_byte = w_size / max(cap, 1)

        def rank(k: Hashable) -> Tuple[float, int]:
            hits, last_used = meta[k]
            age = max(now - last_used, 0) if rescore else 0
            return w_reuse * hits + w_recency / (1.0 + age) - per_byte * entries[k], last_used

        return min(meta, key=rank)

    def on_evict(self, key: Hashable, size: int) -> None:
        hits, last_used = self.meta.pop(key)
        self.evicted.append((key, size, hits, self.time - last_used))


# -- the score-weights explorer ------------------------------------------------------------------
def segment_requests(requests: Sequence[Any]) -> Segments:
    """Cut each request's chained block ids into radix-tree-like entries of several blocks.

    A run of blocks stays one entry as long as no request branches off or stops inside it, the
    way a radix tree (SGLang) keeps one node per unbranched run of tokens. The cut is computed
    from the whole list at once (a real radix tree splits a node when a branch first appears),
    which keeps every entry's size fixed. Entries then differ in size (a system prompt, a turn,
    a long one-off document), which is what gives the chapter's size penalty something to do:
    with one block per entry every size is the same and the penalty changes nothing.
    """
    children: Dict[Hashable, set] = {}
    ends = set()
    for req in requests:
        ids = req.hash_ids
        for parent, child in zip(ids, ids[1:]):
            children.setdefault(parent, set()).add(child)
        if ids:
            ends.add(ids[-1])
    out: Segments = []
    for req in requests:
        segs: List[Tuple[Hashable, int]] = []
        for i, block in enumerate(req.hash_ids):
            parent = req.hash_ids[i - 1] if i else None
            if i == 0 or parent in ends or len(children[parent]) > 1:
                segs.append((block, 1))  # a new entry starts here; keyed by its first block
            else:
                key, n = segs[-1]
                segs[-1] = (key, n + 1)
        out.append(segs)
    return out


def explorer_trace(num_requests: int = 300, seed: int = 0) -> Segments:
    """The explorer's default workload: the seeded synthetic trace, cut into radix-like entries."""
    from kvsched_lab.sim.traces import synthetic_trace

    return segment_requests(synthetic_trace(num_requests, seed=seed))


def replay_segments(policy: Policy, segments: Segments) -> Tuple[int, int]:
    """The replay protocol over variable-size entries; returns (prefix-hit blocks, block refs).

    A request's prefix hit is the blocks of its leading run of cached entries at arrival; then
    each entry is touched head to tail with its size in blocks (capacity is in blocks too).
    """
    entries, touch = policy.entries, policy.touch
    hits = refs = 0
    for segs in segments:
        for key, n in segs:
            if key not in entries:
                break
            hits += n
        for key, n in segs:
            refs += n
            touch(key, n)
    return hits, refs


def explorer_state(weights: Weights = CHAPTER_WEIGHTS, capacity: int = 400, *, rescore: bool = False,
                   segments: Optional[Segments] = None, baseline: str = "lru") -> Dict[str, Any]:
    """Replay `segments` (default `explorer_trace()`) through the weighted score; what happened.

    Keys: weights, capacity (blocks), rescore, hit_rate, baseline, baseline_hit_rate (the
    library policy `baseline` on the same entries), evictions, evicted (a list of dicts
    ``key, blocks, hits, age``, in eviction order), mean_evicted_blocks, mean_evicted_hits,
    mean_evicted_age (touches since last use, at eviction).
    """
    from kvsched_lab.sim.policies import make_policy

    segments = explorer_trace() if segments is None else segments
    largest = max((n for segs in segments for _, n in segs), default=1)
    if capacity < largest:
        raise ValueError(f"capacity={capacity} blocks cannot hold the largest entry ({largest} blocks)")
    policy = WeightedScorePolicy(capacity, weights=weights, rescore=rescore)
    hits, refs = replay_segments(policy, segments)
    base_hits, _refs = replay_segments(make_policy(baseline, capacity), segments)
    evicted = [{"key": k, "blocks": n, "hits": h, "age": a} for k, n, h, a in policy.evicted]

    def mean(field: str) -> float:
        return sum(e[field] for e in evicted) / len(evicted) if evicted else 0.0

    return {
        "weights": tuple(policy.weights), "capacity": capacity, "rescore": policy.rescore,
        "hit_rate": hits / refs if refs else 0.0,
        "baseline": baseline, "baseline_hit_rate": base_hits / refs if refs else 0.0,
        "evictions": len(evicted), "evicted": evicted,
        "mean_evicted_blocks": mean("blocks"), "mean_evicted_hits": mean("hits"),
        "mean_evicted_age": mean("age"),
    }


def describe_state(state: Dict[str, Any]) -> str:
    """One paragraph of plain text about an `explorer_state` result."""
    w = state["weights"]
    mode = _("re-scored at eviction") if state["rescore"] else _("frozen at touch time (the chapter)")
    return _("weights reuse={reuse:g}, recency={recency:g}, size={size:g}; score {mode}; capacity {capacity} "
             "blocks\nprefix-hit rate {hit_rate:.1%} ({baseline}: {baseline_hit_rate:.1%}); {evictions} "
             "evictions; evicted entries average {blocks:.1f} blocks, {hits:.2f} hits, unused for {age:.0f} "
             "touches", reuse=w[0], recency=w[1], size=w[2], mode=mode, capacity=state["capacity"],
             hit_rate=state["hit_rate"], baseline=state["baseline"], baseline_hit_rate=state["baseline_hit_rate"],
             evictions=state["evictions"], blocks=state["mean_evicted_blocks"], hits=state["mean_evicted_hits"],
             age=state["mean_evicted_age"])


def grid_bounds(value: float, lowest: float, highest: float, step: float) -> Tuple[float, float]:
    """``(min, max)`` for a slider of `step` whose grid holds `value`, within ``[lowest, highest]``.

    A browser slider snaps its value to ``min + k * step``; a default off that grid is moved at
    the first render and sends a change back, so the widget would redraw and disagree with a
    static cell run at the default. Both ends are whole steps away from `value`.
    """
    if not lowest <= value <= highest or step <= 0:
        raise ValueError(f"need lowest <= value <= highest and step > 0, got {lowest}, {value}, {highest}, {step}")
    below = int((value - lowest) // step)
    above = int((highest - value) // step)
    return value - below * step, value + above * step


def render_png(fig: Any) -> bytes:
    """`fig` as PNG bytes, and the figure closed (so the inline backend does not show it again)."""
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return buffer.getvalue()


def score_explorer(segments: Optional[Segments] = None, capacity: int = 400):
    """Sliders for the three weights and the capacity, a re-score toggle, and the result plotted.

    Every default sits on its slider's grid, so the browser never moves a value at the first
    render. The figure is a PNG inside an `Image` widget and the text an `HTML` widget, both set
    before the widget is shown: they travel with the widget's state, so the first render (or a
    saved notebook) shows them with no kernel round trip, and a slider change replaces them.
    """
    import html

    import ipywidgets as w
    from kvsched_lab.course.plots import plot_explorer_state

    segments = explorer_trace() if segments is None else segments
    largest = max(n for segs in segments for _, n in segs)
    capacity = max(capacity, largest)
    style = {"description_width": "initial"}
    reuse = w.FloatSlider(value=CHAPTER_WEIGHTS[0], min=0, max=3, step=0.25, description=_("reuse weight"), style=style)
    recency = w.FloatSlider(value=CHAPTER_WEIGHTS[1], min=0, max=100, step=0.5, description=_("recency weight"),
                            style=style)
    size = w.FloatSlider(value=CHAPTER_WEIGHTS[2], min=0, max=20, step=0.25, description=_("size weight"), style=style)
    cap_min, cap_max = grid_bounds(capacity, largest, max(4 * capacity, 2 * largest), 25)
    cap = w.IntSlider(value=capacity, min=int(cap_min), max=int(cap_max), step=25,
                      description=_("capacity (blocks)"), style=style)
    rescore = w.Checkbox(value=False, description=_("re-score at eviction"), indent=False)
    text = w.HTML()
    figure = w.Image(format="png", layout=w.Layout(width="100%", max_width="820px"))
    shown: Dict[str, Any] = {}  # the inputs now drawn: a repeated change of the same value draws nothing

    def update(_change=None) -> None:
        inputs = (reuse.value, recency.value, size.value, cap.value, rescore.value)
        if shown.get("inputs") == inputs:
            return
        state = explorer_state(inputs[:3], cap.value, rescore=rescore.value, segments=segments)
        text.value = f"<pre style='margin:0'>{html.escape(describe_state(state))}</pre>"
        figure.value = render_png(plot_explorer_state(state))
        shown["inputs"] = inputs

    for control in (reuse, recency, size, cap, rescore):
        control.observe(update, names="value")
    update()
    box = w.VBox([w.HBox([reuse, recency, size]), w.HBox([cap, rescore]), text, figure])
    return box


# -- the step-through heap viewer ----------------------------------------------------------------
# The chapter's six requests (notebook 00's first look), then more hits so stale records pile up.
DEFAULT_TOUCHES: Tuple[Tuple[str, int], ...] = (
    ("a", 40), ("b", 48), ("a", 40), ("c", 56), ("d", 48), ("a", 40),
    ("d", 48), ("a", 40), ("e", 32), ("d", 48), ("a", 40), ("f", 24), ("e", 32), ("a", 40),
)


@dataclass(frozen=True)
class HeapStep:
    """The scheduler after touch number `index` (0: before any touch)."""

    index: int
    touch: Optional[Tuple[Hashable, int]]  # the (prefix, bytes) just touched; None at step 0
    events: Tuple[str, ...]  # the log lines that touch wrote
    records: Tuple[Tuple[float, int, Hashable], ...]  # the heap's records, in heap (array) order
    entries: Tuple[Tuple[Hashable, float, int, int, int], ...]  # (prefix, priority, last_used, hits, bytes)


def record_heap_steps(touches: Sequence[Tuple[Hashable, int]] = DEFAULT_TOUCHES, capacity_bytes: int = 128,
                      scheduler: Any = None) -> List[HeapStep]:
    """Touch each ``(prefix, bytes)`` in turn and record the heap and the live entries after each.

    `scheduler` is any chapter-style scheduler with ``queue`` and ``entries`` (values with
    ``priority``, ``last_used``, ``hits``, ``bytes``): the reference, yours, or by default the
    library's `seed` policy, which keeps the same heap records as the chapter's scheduler.
    The student release withholds `seed`; there a missing `scheduler` is a ValueError.
    """
    if scheduler is None:
        from kvsched_lab.sim.policies import POLICIES, WITHHELD_MESSAGE

        if "seed" not in POLICIES:
            raise ValueError("record_heap_steps needs a chapter-style scheduler, e.g. lab.my_scheduler()(128): "
                             + WITHHELD_MESSAGE.format(name="seed"))
        scheduler = POLICIES["seed"](capacity_bytes)

    def snap(index: int, touch: Optional[Tuple[Hashable, int]], events: Sequence[str]) -> HeapStep:
        entries = tuple((k, e.priority, e.last_used, e.hits, e.bytes) for k, e in scheduler.entries.items())
        return HeapStep(index, touch, tuple(events), tuple(scheduler.queue), entries)

    steps = [snap(0, None, ())]
    for i, (prefix, bytes_) in enumerate(touches, start=1):
        before = len(scheduler.log)
        scheduler.touch(prefix, bytes_)
        steps.append(snap(i, (prefix, bytes_), [str(x) for x in scheduler.log[before:]]))
    return steps


# A record's status (compared by the code) and, translated, its label in a printed table.
LIVE, STALE_RESCORED, STALE_EVICTED = N_("live"), N_("stale: re-scored since"), N_("stale: entry evicted")


def heap_view(steps: Sequence[HeapStep], step: int) -> List[Dict[str, Any]]:
    """Step `step`'s heap records in pop order (lowest first), each with its status.

    A record is live when it matches its prefix's entry (same priority and last_used); stale
    when the entry was re-scored after the push (a newer record exists) or was evicted.
    Popping skips stale records, so the first live row is the next victim. ``label`` is the
    status in the learner's language.
    """
    s = steps[step]
    live = {k: (p, t) for k, p, t, _, _ in s.entries}
    rows = []
    for priority, last_used, prefix in sorted(s.records, key=lambda r: (r[0], r[1])):
        if prefix not in live:
            status = STALE_EVICTED
        elif live[prefix] != (priority, last_used):
            status = STALE_RESCORED
        else:
            status = LIVE
        rows.append({"priority": priority, "last_used": last_used, "prefix": prefix, "status": status,
                     "label": _(status)})
    return rows


def heap_view_html(steps: Sequence[HeapStep], step: int) -> str:
    """Step `step` as HTML: what happened, the heap records (stale ones struck through) and the entries."""
    import html

    s = steps[step]
    rows = heap_view(steps, step)
    stale = sum(r["status"] != LIVE for r in rows)
    what = _("before any touch") if s.touch is None else \
        _("touch #{index}: {prefix!r} ({size} bytes) &rarr; {events}", index=s.index, prefix=s.touch[0],
          size=s.touch[1], events=html.escape(", ".join(s.events)))
    head = _("<b>{what}</b><br>heap: {records} records, {live} live, <b>{stale} stale</b> (marked STALE and struck "
             "through); live entries: {entries}", what=what, records=len(rows), live=len(rows) - stale,
             stale=stale, entries=len(s.entries))
    body = []
    for r in rows:
        cells = (f"{r['priority']:.4f}", r["last_used"], html.escape(repr(r["prefix"])))
        if r["status"] == LIVE:
            body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "<td>" + _("live") + "</td></tr>")
        else:
            body.append("<tr style='color:#777'>" + "".join(f"<td><s>{c}</s></td>" for c in cells)
                        + "<td>" + (_("STALE (re-scored since)") if r["status"] == STALE_RESCORED
                                    else _("STALE (entry evicted)")) + "</td></tr>")
    records = ("<table><tr><th>priority</th><th>last_used</th><th>prefix</th><th>" + _("status") + "</th></tr>"
               + "".join(body) + "</table>")
    entries = "".join(f"<tr><td>{html.escape(repr(k))}</td><td>{p:.4f}</td><td>{t}</td><td>{h}</td><td>{b}</td></tr>"
                      for k, p, t, h, b in sorted(s.entries, key=lambda e: (e[1], e[2])))
    entries = ("<table><tr><th>prefix</th><th>priority</th><th>last_used</th><th>hits</th><th>bytes</th></tr>"
               + entries + "</table>")
    return (f"<div>{head}<div style='display:flex;gap:2em'><div><i>{_('heap records, pop order')}</i>{records}"
            f"</div><div><i>{_('live entries')}</i>{entries}</div></div></div>")


def heap_viewer(touches: Sequence[Tuple[Hashable, int]] = DEFAULT_TOUCHES, capacity_bytes: int = 128,
                scheduler: Any = None):
    """Prev/next buttons and a slider over `record_heap_steps(...)`, showing `heap_view_html`.

    Without `scheduler` it shows the library's `seed` policy; where that is withheld (the student
    release) it prints one line saying so and returns None.
    """
    import ipywidgets as w

    from kvsched_lab.sim.policies import POLICIES

    if scheduler is None and "seed" not in POLICIES:
        print(_("heap viewer skipped: it needs the chapter's scheduler; 'seed' is withheld in the student "
                "release. Pass yours once notebooks 02-05 pass: heap_viewer(scheduler=lab.my_scheduler()(128))."))
        return None
    steps = record_heap_steps(touches, capacity_bytes, scheduler)
    prev_b = w.Button(description=_("◀ prev"), layout=w.Layout(width="6em"))
    next_b = w.Button(description=_("next ▶"), layout=w.Layout(width="6em"))
    slider = w.IntSlider(value=0, min=0, max=len(steps) - 1, description=_("step"))
    view = w.HTML()

    def show(_change=None) -> None:
        view.value = heap_view_html(steps, slider.value)

    prev_b.on_click(lambda _b: setattr(slider, "value", max(slider.value - 1, 0)))
    next_b.on_click(lambda _b: setattr(slider, "value", min(slider.value + 1, len(steps) - 1)))
    slider.observe(show, names="value")
    show()
    box = w.VBox([w.HBox([prev_b, slider, next_b]), view])
    return box
