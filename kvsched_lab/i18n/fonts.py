"""Which language a figure can be drawn in: Chinese only where matplotlib has a CJK font.

Without one, Chinese labels would render as empty boxes, so `plot_language` falls back to
English; `font_rc` is the matplotlib setting that puts the CJK font first (DejaVu Sans after it
for the Latin glyphs and symbols it lacks).
"""
from __future__ import annotations

import functools
import os
import re
from typing import Dict, List, Optional

from kvsched_lab.i18n.language import get_language

# Font families with the Chinese glyphs, preferred first (Noto Sans CJK: fonts-noto-cjk on Debian).
CJK_FAMILIES = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN",
                "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Microsoft YaHei", "SimHei", "PingFang SC",
                "Heiti SC", "Noto Sans CJK JP", "Noto Serif CJK SC")


# File names of installed CJK fonts, for when matplotlib's font cache predates their install.
_CJK_FILE = re.compile(r"(cjk|wqy|sourcehan|simhei|msyh|pingfang)", re.I)


@functools.lru_cache(maxsize=None)
def cjk_font() -> Optional[str]:
    """The first of `CJK_FAMILIES` matplotlib knows, or None (looked up once per process).

    matplotlib caches the system's font list on first use; a CJK font installed after that
    (``apt-get install fonts-noto-cjk`` on a machine that already plotted) is not in the cache,
    so the system's font files are scanned once and any CJK file found is registered.
    """
    from matplotlib import font_manager

    def first_known() -> Optional[str]:
        known = {f.name for f in font_manager.fontManager.ttflist}
        return next((name for name in CJK_FAMILIES if name in known), None)

    found = first_known()
    if found is None:
        for path in font_manager.findSystemFonts():
            if _CJK_FILE.search(os.path.basename(path)):
                font_manager.fontManager.addfont(path)
        found = first_known()
    return found


def plot_language() -> str:
    """The current language, unless it is Chinese and no CJK font is installed: then English."""
    lang = get_language()
    return lang if lang != "zh" or cjk_font() else "en"


def font_rc(lang: str) -> Dict[str, List[str]]:
    """matplotlib rcParams for drawing text in `lang` (empty: matplotlib's defaults)."""
    if lang != "zh" or cjk_font() is None:
        return {}
    # Concrete family names, not "sans-serif": a text resolves a generic family when it is drawn,
    # after the plotting function (and its font setting) has returned.
    return {"font.family": [cjk_font(), "DejaVu Sans"]}
