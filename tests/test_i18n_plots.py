"""Every course plot under KVSCHED_LANG=zh: Chinese text where a CJK font is installed, English
otherwise, and never a missing glyph (matplotlib warns "Glyph ... missing"; warnings are errors)."""
import re
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from kvsched_lab.course import plots, widgets  # noqa: E402
from kvsched_lab.i18n import LANG_ENV  # noqa: E402
from kvsched_lab.i18n.fonts import cjk_font, font_rc, plot_language  # noqa: E402
from kvsched_lab.sim.traces import synthetic_trace  # noqa: E402
from solutions import KVCacheSchedulerSim  # noqa: E402

CHAPTER = [("a", 40), ("b", 48), ("a", 40), ("c", 56), ("d", 48), ("a", 40)]
CJK = re.compile(r"[\u4e00-\u9fff]")


def _figures():
    """Each course plot, built now (in the current language)."""
    def rescore(e, now, cap):
        return e.hits + 0.5 / (1 + max(now - e.last_used, 0)) - 0.25 * e.bytes / cap  # the chapter's score

    hist = plots.record_priorities(KVCacheSchedulerSim(128), CHAPTER, ["a", "b"], rescore=rescore)
    ids = [r.hash_ids for r in synthetic_trace(200, seed=1)]
    rows = [{"trace": "t", "policy": p, "capacity": c, "hit_rate": r}
            for p, base in (("lru", 0.1), ("belady", 0.3)) for c, r in ((10, base), (100, 2 * base))]
    return {
        "priority": plots.plot_priority_over_time(hist),
        "heap growth": plots.plot_heap_growth(plots.record_heap_growth(ids, capacity_blocks=100, samples=20)),
        "nothing to plot": plots.plot_heap_growth({}),
        "occupancy": plots.plot_occupancy(plots.record_occupancy(KVCacheSchedulerSim(128), CHAPTER)),
        "hit rate": plots.plot_hit_rate_vs_capacity(rows, trace="t"),
        "explorer": plots.plot_explorer_state(widgets.explorer_state(segments=widgets.explorer_trace(150, seed=0))),
    }


def _texts(fig):
    out = []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()] + [t.get_text() for t in ax.texts]
        if ax.get_legend() is not None:
            out += [t.get_text() for t in ax.get_legend().get_texts()]
    return [t for t in out if t]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_every_plot_renders_without_missing_glyphs(lang, monkeypatch, tmp_path):
    monkeypatch.setenv(LANG_ENV, lang)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph 20013 (...) missing from font(s) DejaVu Sans" fails the test
        for name, fig in _figures().items():
            fig.savefig(tmp_path / f"{name}.png", dpi=60)
            texts = _texts(fig)
            assert texts, name
            chinese = any(CJK.search(t) for t in texts)
            assert chinese == (plot_language() == "zh"), (name, texts)


def test_chinese_needs_a_cjk_font(monkeypatch):
    monkeypatch.setenv(LANG_ENV, "zh")
    assert plot_language() == ("zh" if cjk_font() else "en")
    assert font_rc("zh") == ({"font.family": [cjk_font(), "DejaVu Sans"]} if cjk_font() else {})
    assert font_rc("en") == {}


def test_without_a_cjk_font_chinese_plots_fall_back_to_english(monkeypatch, tmp_path):
    monkeypatch.setenv(LANG_ENV, "zh")
    monkeypatch.setattr(plots, "plot_language", lambda: "en")  # as on a machine with no CJK font
    monkeypatch.setattr(plots, "font_rc", lambda lang: {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = plots.plot_occupancy(plots.record_occupancy(KVCacheSchedulerSim(128), CHAPTER))
        fig.savefig(tmp_path / "occupancy.png", dpi=60)
    assert fig.axes[0].get_title() == "Cache occupancy, with evictions marked"


@pytest.mark.skipif(cjk_font() is None, reason="no CJK font installed (make test installs fonts-noto-cjk as root)")
def test_a_chinese_title_is_drawn_with_the_cjk_font(monkeypatch):
    monkeypatch.setenv(LANG_ENV, "zh")
    fig = plots.plot_occupancy(plots.record_occupancy(KVCacheSchedulerSim(128), CHAPTER))
    title = fig.axes[0].title
    assert title.get_text() == "缓存占用，标出驱逐"
    assert title.get_fontproperties().get_family()[0] == cjk_font()  # kept after the plot function returned


def test_widgets_leaderboard_and_doctor_speak_the_learners_language(monkeypatch):
    from kvsched_lab.course import leaderboard as lb
    from kvsched_lab.cli.doctor import diagnose, report

    segments = widgets.explorer_trace(150, seed=0)
    reqs = lb.trace_requests([[k] for k in "abcabcabc"])
    seen = {}
    for lang in ("en", "zh"):
        monkeypatch.setenv(LANG_ENV, lang)
        box = widgets.score_explorer(segments)
        viewer = widgets.heap_viewer()
        board = lb.leaderboard(["lru", "belady"], {"hand": reqs}, [2], progress=False)
        seen[lang] = {
            "sliders": [c.description for row in box.children[:2] for c in row.children],
            "buttons": [viewer.children[0].children[0].description, viewer.children[0].children[2].description],
            "heap view": viewer.children[1].value,
            "explorer text": widgets.describe_state(widgets.explorer_state(segments=segments)),
            "board": board.to_text() + board._repr_html_(),
            "doctor": report(diagnose()),
        }
        plt.close("all")
    en, zh = seen["en"], seen["zh"]
    assert en["sliders"][0] == "reuse weight" and zh["sliders"][0] == "复用权重"
    assert zh["buttons"] == ["◀ 上一步", "下一步 ▶"]
    assert "stale" in en["heap view"] and "过期" in zh["heap view"] and "stale" not in zh["heap view"]
    assert "prefix-hit rate" in en["explorer text"] and "前缀命中率" in zh["explorer text"]
    assert "gap closed" in en["board"] and "差距弥合" in zh["board"] and "gap closed" not in zh["board"]
    assert ("all set" in en["doctor"]) == ("一切就绪" in zh["doctor"])
    # Every doctor row's mark and the rows' names of its own in Chinese (python, torch... are names).
    assert all(line.startswith(("ok ", "NO ")) for line in en["doctor"].splitlines()[:-1])
    assert all(line.startswith(("正常 ", "有问题 ")) for line in zh["doctor"].splitlines()[:-1])
    assert "参考实现" in zh["doctor"] and "reference solutions" not in zh["doctor"]
