"""The learner's language: the one piece of state every translated message reads.

The state IS the ``KVSCHED_LANG`` environment variable (``en`` or ``zh``; unset means ``en``).
`set_language` writes that variable, so an override in a notebook (``lab.set_language("zh")``)
also reaches what the kernel starts later (the grader's subprocesses), and nothing else holds a
copy: every message looks the language up when it is rendered.
"""
from __future__ import annotations

import os
from typing import Dict, Tuple

LANG_ENV = "KVSCHED_LANG"
LANGUAGES: Tuple[str, ...] = ("en", "zh")
# Spellings people type for the same language (locale names, BCP 47 tags).
_ALIASES: Dict[str, str] = {"en": "en", "en_us": "en", "en-us": "en", "zh": "zh", "zh_cn": "zh",
                            "zh-cn": "zh", "zh-hans": "zh", "zh_hans": "zh"}


def normalize(lang: str) -> str:
    """``"zh"`` for ``zh``/``zh_CN``/``zh-CN``..., ``"en"`` for ``en``...; ValueError otherwise."""
    key = str(lang).strip().lower()
    if key not in _ALIASES:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(LANGUAGES)}")
    return _ALIASES[key]


def get_language() -> str:
    """The current language: ``$KVSCHED_LANG`` (``en`` when unset or empty)."""
    value = os.environ.get(LANG_ENV, "")
    if not value:
        return "en"
    try:
        return normalize(value)
    except ValueError as e:
        raise ValueError(f"{LANG_ENV}={value!r}: {e}") from None


def set_language(lang: str) -> None:
    """Use `lang` (``"en"`` or ``"zh"``) from now on, in this process and its children.

    An unknown language raises ValueError and leaves the current one as it was. Returns None, so
    a notebook cell ending with it shows nothing more.
    """
    os.environ[LANG_ENV] = normalize(lang)
