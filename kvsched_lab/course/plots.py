"""Figures for the course notebooks, readable without colour.

Every series gets its own marker and line style as well as a colour, every axis a label, every
figure a title and a fixed size, so a figure reads the same printed in grey or seen by a
colour-blind learner. Each ``plot_*`` function draws on a new figure (or on ``ax`` if given) and
returns the `Figure`; the ``record_*`` functions compute what they plot, so a notebook can
print the numbers behind a figure and the tests can check them without drawing.

Titles and labels follow the learner's language (``KVSCHED_LANG``) where a CJK font is installed
for Chinese, and stay English otherwise (`kvsched_lab.i18n.fonts`): never boxes for glyphs.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Hashable, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter, SymmetricalLogLocator

from kvsched_lab.sim.events import EVICT, iter_events
from kvsched_lab.i18n.fonts import font_rc, plot_language
from kvsched_lab.i18n.language import get_language
from kvsched_lab.i18n.messages import N_, translate

# (marker, linestyle) per series, in order; colours come from the default cycle on top.
STYLES: Tuple[Tuple[str, Any], ...] = (
    ("o", "-"), ("s", "--"), ("^", ":"), ("D", "-."), ("v", (0, (5, 1))), ("P", (0, (3, 1, 1, 1))),
    ("X", "-"), ("*", "--"), ("<", ":"), (">", "-."), ("h", (0, (1, 1))), ("p", (0, (5, 2, 1, 2))),
)
BOUND_STYLE = dict(color="black", linestyle=(0, (6, 3)), linewidth=2.5, marker=None)
FIGSIZE = (7.0, 4.2)


def _(template: str, **fields: Any) -> str:
    """A figure's text in the language it is drawn in (see `plot_language`)."""
    return translate(plot_language(), template, **fields)


def _localized(plot: Callable[..., Figure]) -> Callable[..., Figure]:
    """Draw `plot` with the font its language needs (text keeps the font it was created with).

    Only the font settings are set and put back, not every rcParam as ``plt.rc_context`` does:
    a kernel's first figure loads the inline backend, which turns interactive mode on; restoring
    all of rcParams after it turned it off again, so later figures were never shown.
    """
    @functools.wraps(plot)
    def wrapper(*args: Any, **kwargs: Any) -> Figure:
        font = font_rc(plot_language())
        before = {key: plt.rcParams[key] for key in font}
        plt.rcParams.update(font)
        try:
            return plot(*args, **kwargs)
        finally:
            plt.rcParams.update(before)
    return wrapper


def _finish(ax: Axes, xlabel: str, ylabel: str, title: str, legend_loc: str) -> None:
    """The labels, light grid and small legend every figure here ends with."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc=legend_loc)


def style(i: int) -> Dict[str, Any]:
    """Marker and line style of series `i` (cycling)."""
    marker, linestyle = STYLES[i % len(STYLES)]
    return {"marker": marker, "linestyle": linestyle}


def _axes(ax: Optional[Axes], figsize: Tuple[float, float] = FIGSIZE) -> Tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    return fig, ax


# -- priority over time ---------------------------------------------------------------------------
def record_priorities(scheduler: Any, touches: Sequence[Tuple[Hashable, int]], prefixes: Sequence[Hashable],
                      rescore: Optional[Callable[[Any, int, int], float]] = None) -> Dict[str, Any]:
    """Touch each ``(prefix, bytes)`` and record the stored priority of `prefixes` after every touch.

    `scheduler` is chapter-style (``entries[prefix].priority``, ``.last_used``, ``.hits``,
    ``.bytes``): the reference, yours, or the library ``seed`` policy (see
    ``kvsched_lab.course.is_chapter_scheduler``). A prefix that is not
    cached has priority None. With `rescore` (``f(entry, now, capacity_bytes) -> float``), the
    score the entry *would* have if it were re-evaluated now is recorded too.
    Returns ``{"time": [...], "stored": {prefix: [...]}, "rescored": {prefix: [...]} or None,
    "evicted": {prefix: [times]}}``.
    """
    stored: Dict[Hashable, List[Optional[float]]] = {p: [] for p in prefixes}
    rescored: Optional[Dict[Hashable, List[Optional[float]]]] = {p: [] for p in prefixes} if rescore else None
    evicted: Dict[Hashable, List[int]] = {p: [] for p in prefixes}
    times: List[int] = []
    for prefix, bytes_ in touches:
        start = len(scheduler.log)
        scheduler.touch(prefix, bytes_)
        for op, key in iter_events(scheduler.log, start):
            for p in prefixes:
                if op == EVICT and str(key) == str(p):
                    evicted[p].append(scheduler.time)
        times.append(scheduler.time)
        for p in prefixes:
            entry = scheduler.entries.get(p)
            stored[p].append(None if entry is None else entry.priority)
            if rescored is not None:
                rescored[p].append(None if entry is None else rescore(entry, scheduler.time, scheduler.capacity_bytes))
    return {"time": times, "stored": stored, "rescored": rescored, "evicted": evicted}


@_localized
def plot_priority_over_time(history: Mapping[str, Any], ax: Optional[Axes] = None,
                            title: Optional[str] = None) -> Figure:
    """Stored priorities as steps (solid, markers), re-evaluated scores dashed, evictions as 'x'."""
    fig, ax = _axes(ax)
    t = history["time"]
    colours: Dict[Hashable, str] = {}
    for i, (prefix, values) in enumerate(history["stored"].items()):
        st = style(i)
        line, = ax.step(t, [float("nan") if v is None else v for v in values], where="post",
                        marker=st["marker"], linestyle="-", label=_("{prefix}: stored priority", prefix=prefix))
        if history.get("rescored"):
            ax.plot(t, [float("nan") if v is None else v for v in history["rescored"][prefix]],
                    linestyle=":", marker=st["marker"], markerfacecolor="none", color=line.get_color(),
                    label=_("{prefix}: score if re-evaluated now", prefix=prefix))
        colours[prefix] = line.get_color()
    floor = ax.get_ylim()[0]
    for i, (prefix, times) in enumerate(history.get("evicted", {}).items()):
        if times:
            ax.plot(times, [floor] * len(times), marker="x", markersize=10, color=colours[prefix],
                    linestyle="none", clip_on=False, label=_("{prefix}: evicted", prefix=prefix))
    _finish(ax, _("scheduler time (touches)"), _("priority (higher = kept longer)"),
            title or _("Stored priority of each prefix, touch by touch"), legend_loc="best")
    return fig


# -- heap records against live entries -------------------------------------------------------------
def record_heap_growth(id_lists: Sequence[Sequence[Hashable]], capacity_blocks: int,
                       policies: Union[Iterable[str], Mapping[str, Any]] = ("seed", "seed-compact"),
                       samples: int = 200, heap_attr: str = "queue") -> Dict[str, Dict[str, List[int]]]:
    """Touch every block of `id_lists` (one block = one byte) and sample heap and cache sizes.

    `policies` are library names, or a mapping ``{label: name or class}`` (a class is built with
    the capacity, e.g. your scheduler). A name withheld in the student release (``seed``,
    ``seed-compact``) is skipped with one printed line.
    Returns ``{label: {"touches": [...], "records": [...], "live": [...]}}``: records is the
    heap's length (live and stale records), live the number of cached entries.
    """
    from kvsched_lab.sim.policies import WITHHELD, make_policy

    specs = dict(policies) if isinstance(policies, Mapping) else {name: name for name in policies}
    skipped = [label for label, spec in specs.items() if isinstance(spec, str) and spec in WITHHELD]
    if skipped:
        # A printed line, not a figure's text: the learner's language, whatever font is installed.
        print(translate(get_language(), N_("skipped {names}: withheld in the student release (the chapter's answers)"),
                        names=", ".join(skipped)))
    flat = [k for ids in id_lists for k in ids]
    every = max(1, len(flat) // samples)
    out: Dict[str, Dict[str, List[int]]] = {}
    for label, spec in specs.items():
        if label in skipped:
            continue
        policy = make_policy(spec, capacity_blocks, future=flat) if isinstance(spec, str) else spec(capacity_blocks)
        rec: Dict[str, List[int]] = {"touches": [], "records": [], "live": []}
        for i, key in enumerate(flat, start=1):
            policy.touch(key, 1)
            if i % every == 0 or i == len(flat):
                rec["touches"].append(i)
                rec["records"].append(len(getattr(policy, heap_attr)))
                rec["live"].append(len(policy.entries))
        out[label] = rec
    return out


@_localized
def plot_heap_growth(growth: Mapping[str, Mapping[str, Sequence[int]]], ax: Optional[Axes] = None,
                     title: Optional[str] = None) -> Figure:
    """One line per policy for its heap records, and the live entries (the same for all) in black."""
    fig, ax = _axes(ax)
    title = title or _("Heap records vs live entries")
    if not growth:  # every policy was skipped (e.g. withheld in the student release)
        ax.text(0.5, 0.5, _("nothing to plot"), ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        return fig
    every = None
    for i, (name, rec) in enumerate(growth.items()):
        every = max(1, len(rec["touches"]) // 12)
        ax.plot(rec["touches"], rec["records"], markevery=every, label=_("{name}: heap records", name=name), **style(i))
    first = next(iter(growth.values()))
    ax.plot(first["touches"], first["live"], color="black", linewidth=2, linestyle="-", marker="|",
            markevery=every or 1, label=_("live entries (cached blocks)"))
    _finish(ax, _("touches so far"), _("count"), title, legend_loc="upper left")
    return fig


# -- cache occupancy -------------------------------------------------------------------------------
def record_occupancy(scheduler: Any, touches: Sequence[Tuple[Hashable, int]]) -> Dict[str, Any]:
    """Touch each ``(prefix, bytes)``; record bytes in use after each touch and every eviction.

    Returns ``{"time": [...], "used": [...], "capacity": int, "evictions": [(time, key,
    used_before_eviction_round)], "hits": [times]}``.
    """
    times, used, evictions, hits = [], [], [], []
    for prefix, bytes_ in touches:
        start, before = len(scheduler.log), scheduler.current_bytes
        scheduler.touch(prefix, bytes_)
        for op, key in iter_events(scheduler.log, start):
            if op == EVICT:
                evictions.append((scheduler.time, key, before))
            elif op == "reuse":
                hits.append(scheduler.time)
        times.append(scheduler.time)
        used.append(scheduler.current_bytes)
    return {"time": times, "used": used, "capacity": scheduler.capacity_bytes, "evictions": evictions, "hits": hits}


@_localized
def plot_occupancy(timeline: Mapping[str, Any], ax: Optional[Axes] = None, label_evictions: bool = True,
                   title: Optional[str] = None) -> Figure:
    """Bytes in use as a step line, the capacity dashed, each eviction a downward triangle."""
    fig, ax = _axes(ax)
    ax.step(timeline["time"], timeline["used"], where="post", color="tab:blue", linestyle="-", marker="o",
            markersize=3, label=_("bytes in use"))
    ax.axhline(timeline["capacity"], color="black", linestyle="--", linewidth=1.5, label=_("capacity"))
    ev = timeline["evictions"]
    if ev:
        ax.plot([t for t, _, _ in ev], [u for _, _, u in ev], linestyle="none", marker="v", markersize=9,
                color="tab:red", label=_("eviction ({count})", count=len(ev)))
        if label_evictions and len(ev) <= 30:
            for t, key, u in ev:
                ax.annotate(str(key), (t, u), textcoords="offset points", xytext=(4, 6), fontsize=8)
    if timeline.get("hits"):
        top = timeline["capacity"]
        ax.plot(timeline["hits"], [top * 1.04] * len(timeline["hits"]), linestyle="none", marker="|",
                markersize=10, color="tab:green", label=_("hit ({count})", count=len(timeline["hits"])))
    ax.set_ylim(0, timeline["capacity"] * 1.12)
    _finish(ax, _("scheduler time (touches)"), _("bytes cached"), title or _("Cache occupancy, with evictions marked"),
            legend_loc="lower right")
    return fig


# -- hit rate against capacity ---------------------------------------------------------------------
@_localized
def plot_hit_rate_vs_capacity(results: Iterable[Mapping[str, Any]], bound: str = "belady",
                              trace: Optional[str] = None, ax: Optional[Axes] = None,
                              title: Optional[str] = None) -> Figure:
    """Prefix-hit rate against capacity, one line per policy; the bound thick, black and dashed.

    `results` are dicts with ``policy``, ``capacity`` and ``hit_rate`` (and ``trace``, to pick
    one with `trace`), e.g. `kvsched_lab.course.leaderboard.sweep` rows. The region above the bound is
    shaded: no online policy gets there.
    """
    fig, ax = _axes(ax, figsize=(7.0, 5.0))
    series: Dict[str, List[Tuple[int, float]]] = {}
    for r in results:
        if trace is None or r.get("trace") == trace:
            series.setdefault(r["policy"], []).append((r["capacity"], r["hit_rate"]))
    i = 0
    for name, points in series.items():
        points.sort()
        xs, ys = [p[0] for p in points], [100 * p[1] for p in points]
        if name == bound:
            ax.plot(xs, ys, label=_("{name}: optimal bound (offline)", name=name), **BOUND_STYLE)
            ax.fill_between(xs, ys, [100] * len(ys), color="0.85", hatch="//", edgecolor="0.6", linewidth=0,
                            label=_("unreachable"))
        else:
            ax.plot(xs, ys, label=name, **style(i))
            i += 1
    if series:
        top = max(100 * v for pts in series.values() for _, v in pts)
        ax.set_ylim(0, min(100, top * 1.15 + 1))
    ax.set_xscale("log")
    ax.set_xlabel(_("cache capacity (blocks, log scale)"))
    ax.set_ylabel(_("prefix-hit rate (%)"))
    ax.set_title(title or (_("Hit rate against capacity: {trace}", trace=trace) if trace
                           else _("Hit rate against capacity")))
    ax.grid(alpha=0.3, which="both")
    # Below the axes: inside, it would hide the curves it names.
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3, frameon=False)
    return fig


# -- the score-weights explorer --------------------------------------------------------------------
@_localized
def plot_explorer_state(state: Mapping[str, Any], figsize: Tuple[float, float] = (9.0, 3.6)) -> Figure:
    """Left: hit rate of the weighted score against the baseline. Right: every evicted entry,
    placed by how long it had been unused and how often it was hit, sized by its blocks."""
    fig, (left, right) = plt.subplots(1, 2, figsize=figsize, layout="constrained",
                                      gridspec_kw={"width_ratios": [1, 2.2]})
    names = [_("weighted score"), state["baseline"]]
    values = [100 * state["hit_rate"], 100 * state["baseline_hit_rate"]]
    bars = left.bar(names, values, color=["tab:blue", "0.7"], hatch=["", "//"], edgecolor="black")
    for bar, v in zip(bars, values):
        left.annotate(f"{v:.1f}%", (bar.get_x() + bar.get_width() / 2, v), ha="center", va="bottom")
    left.set_ylim(0, max(values + [1]) * 1.25)
    left.set_ylabel(_("prefix-hit rate (%)"))
    left.set_title(_("hit rate"))
    ev = state["evicted"]
    if ev:
        right.scatter([e["age"] for e in ev], [e["hits"] for e in ev], s=[8 + 6 * e["blocks"] for e in ev],
                      marker="o", facecolors="none", edgecolors="tab:red", alpha=0.6)
    right.set_ylim(0.5, max([4] + [e["hits"] for e in ev]) + 0.5)  # fixed floor: comparable across updates
    right.yaxis.get_major_locator().set_params(integer=True)
    right.set_xscale("symlog", linthresh=10)
    right.xaxis.set_major_locator(SymmetricalLogLocator(base=10, linthresh=10, subs=[1.0, 3.0]))
    right.xaxis.set_major_formatter(ScalarFormatter())  # 10, 30, 100, 300, ... not 10^k alone
    right.set_xlim(left=-1)  # ages are never negative
    right.set_xlabel(_("touches since last use, at eviction"))
    right.set_ylabel(_("hits at eviction"))
    right.set_title(_("{count} evicted entries (circle area ~ blocks)", count=len(ev)))
    right.grid(alpha=0.3)
    return fig
