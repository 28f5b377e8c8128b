"""Which language a figure can be drawn in: Chinese only where matplotlib has a CJK font.

Without one, Chinese labels would render as empty boxes, so `plot_language` falls back to
English; `font_rc` is the matplotlib setting that puts the CJK font first (DejaVu Sans after it
for the Latin glyphs and symbols it lacks).
"""
from __future__ import annotations

import functools
from typing import Dict, List, Optional

from kvsched_lab.i18n.language import get_language

# Font families with the Chinese glyphs, preferred first (Noto Sans CJK: fonts-noto-cjk on Debian).
CJK_FAMILIES = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN",
                "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Microsoft YaHei", "SimHei", "PingFang SC",
                "Heiti SC", "Noto Sans CJK JP", "Noto Serif CJK SC")


@functools.lru_cache(maxsize=None)
def cjk_font() -> Optional[str]:
    """The first of `CJK_FAMILIES` matplotlib knows, or None (looked up once per process)."""
    from matplotlib import font_manager

    known = {f.name for f in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FAMILIES if name in known), None)


def plot_language() -> str:
    """The current language, unless it is Chinese and no CJK font is installed: then English."""
    lang = get_language()
    return lang if lang != "zh" or cjk_font() else "en"


def font_rc(lang: str) -> Dict[str, List[str]]:
    """matplotlib rcParams for drawing text in `lang` (empty: matplotlib's defaults)."""
    if lang != "zh" or cjk_font() is None:
        return {}
    return {"font.family": ["sans-serif"], "font.sans-serif": [cjk_font(), "DejaVu Sans"]}
