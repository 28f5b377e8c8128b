"""Translations: the learner's language, runtime messages, and the Chinese notebook edition.

- `language`: which language messages use (``KVSCHED_LANG``; ``set_language`` overrides it).
- `messages`: ``_("English template {name}", name=...)``, looked up in a shipped PO catalogue.
- `fonts`: which language a figure can be drawn in; `width`: on-screen width of text.
- `po`: a small reader for the shipped catalogue (no compile step, no extra runtime dependency).
- `code_shape` / `notebooks`: keeping ``notebooks/zh`` in step with the English notebooks
  (authoring side; needs ``polib``, in the ``i18n`` extra).
"""
from kvsched_lab.i18n.language import LANG_ENV, LANGUAGES, get_language, set_language
from kvsched_lab.i18n.messages import N_, _, join

__all__ = ["LANG_ENV", "LANGUAGES", "N_", "_", "get_language", "join", "set_language"]
