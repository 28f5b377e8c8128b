"""Runtime messages: English templates in the source, their Chinese in a shipped PO catalogue.

Write a learner-facing message as ``_("{name}: passed ({cases} cases)", name=name, cases=n)``: the
first argument is a literal English template (the msgid, with named ``str.format`` fields), the
keywords fill it (write a literal brace as ``{{``). In Chinese the template comes from
``kvsched_lab/i18n/zh_CN.po`` (package
data); a message missing there falls back to English, and `tests/test_i18n_messages.py` fails.
``N_("...")`` marks a literal for extraction where the message is chosen first and translated
later (``_(label)`` with that value). `Deferred` is a message whose language is chosen only
when it is shown (the grader's feedback, `kvsched grade --lang`). `join` and `Joined` write a
list the way each language does (``a, b`` in English, ``a、b`` in Chinese); `Applied` bounds or
fences a `Deferred` without fixing its language. `kvsched i18n update` adds new
msgids to the catalogue.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable, Dict, Iterable, Optional

from kvsched_lab.i18n.language import get_language
from kvsched_lab.i18n.po import read_po

CATALOGUE_DIR = Path(__file__).resolve().parent
# Which catalogue file holds each non-English language.
CATALOGUE_FILES: Dict[str, str] = {"zh": "zh_CN.po"}


@functools.lru_cache(maxsize=None)
def catalogue(lang: str) -> Dict[str, str]:
    """``{English template: translation}`` for `lang` (empty for English); read once per process."""
    if lang not in CATALOGUE_FILES:
        return {}
    return {msgid: msgstr for (ctx, msgid), msgstr in read_po(CATALOGUE_DIR / CATALOGUE_FILES[lang]).items()}


def translate(lang: str, template: str, **fields: object) -> str:
    """`template` in `lang`, with `fields` filled in (``str.format`` style)."""
    return catalogue(lang).get(template, template).format(**fields)


def _(template: str, **fields: object) -> str:
    """`template` in the current language (`get_language`), with `fields` filled in."""
    return translate(get_language(), template, **fields)


class Deferred(str):
    """A message rendered in a language chosen later: as a `str` it is its English text.

    For text written before the reader's language is known (the grader writes feedback lines
    while grading, `kvsched grade --lang` picks their language when the files are written).
    A module marks its templates by importing it as ``_`` (``from ... import Deferred as _``).
    """

    def __new__(cls, template: str, **fields: object) -> "Deferred":
        self = super().__new__(cls, template.format(**fields))
        self.template, self.fields = template, fields
        return self

    def render(self, lang: str) -> str:
        """This message in `lang`."""
        return translate(lang, self.template, **{k: v.render(lang) if isinstance(v, Deferred) else v
                                                  for k, v in self.fields.items()})


# Between the items of a list: English ", ", Chinese the enumeration comma.
LIST_SEPARATORS: Dict[str, str] = {"en": ", ", "zh": "、"}
# Between items that hold commas of their own: English "; ", Chinese the full-width semicolon.
SEMICOLONS: Dict[str, str] = {"en": "; ", "zh": "；"}


def join(items: Iterable[object], lang: Optional[str] = None) -> str:
    """`items` as one list in `lang` (default: the current language)."""
    return LIST_SEPARATORS[lang or get_language()].join(map(str, items))


class Joined(Deferred):
    """A list of messages (`Deferred` or plain), joined in the language it is rendered in, by
    `separators` (language -> separator)."""

    def __new__(cls, items: Iterable[object], separators: Dict[str, str] = LIST_SEPARATORS) -> "Joined":
        items = list(items)
        self = str.__new__(cls, separators["en"].join(map(str, items)))
        self.template, self.fields, self.items, self.separators = str(self), {}, items, separators
        return self

    def render(self, lang: str) -> str:
        return self.separators[lang].join(i.render(lang) if isinstance(i, Deferred) else str(i) for i in self.items)


class Applied(Deferred):
    """`function` (text -> text) applied to `message` once it is rendered: a bound, a fence."""

    def __new__(cls, function: Callable[[str], str], message: str) -> "Applied":
        self = str.__new__(cls, function(str(message)))
        self.template, self.fields, self.function, self.message = str(self), {}, function, message
        return self

    def render(self, lang: str) -> str:
        return self.function(self.message.render(lang) if isinstance(self.message, Deferred) else self.message)


class Rendered(Deferred):
    """A message already rendered in every language (``{lang: text}``), e.g. read back from a file.

    For messages that are no template with fields (`Joined`, `Applied`, a mismatch's lines): their
    text in each language is kept, so they render as they would have when they were made."""

    def __new__(cls, by_language: Dict[str, str]) -> "Rendered":
        self = str.__new__(cls, by_language["en"])
        self.template, self.fields, self.by_language = str(self), {}, dict(by_language)
        return self

    def render(self, lang: str) -> str:
        return self.by_language.get(lang, str(self))


def N_(template: str) -> str:
    """Mark `template` for the catalogue without translating it now (it is passed to `_` later)."""
    return template
