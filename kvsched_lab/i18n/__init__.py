"""Translations: the learner's language, runtime messages, and the Chinese notebook edition.

- `language`: which language messages use (``KVSCHED_LANG``; ``set_language`` overrides it).
- `messages`: ``_("English template {name}", name=...)``, looked up in a shipped PO catalogue.
- `po`: a small reader for the shipped catalogue (no compile step, no extra runtime dependency).
- `fonts`: a CJK font for Chinese plot labels, where the machine has one.
- Authoring side (needs ``polib``, in the ``i18n`` extra): `po_files` opens and creates PO files
  in the one format both catalogues use; `catalogue` keeps the runtime catalogue (``zh_CN.po``)
  in step with the ``_()`` literals of the package; `notebooks` and `code_shape` keep
  ``notebooks/zh`` in step with the English notebooks.

This is the lowest layer of the package: every other concern may use ``_``; nothing here imports
the scheduling lab, the KV machinery, the course, grading or the command line.
"""
from kvsched_lab.i18n.language import LANG_ENV, LANGUAGES, get_language, set_language
from kvsched_lab.i18n.messages import N_, _

__all__ = ["LANG_ENV", "LANGUAGES", "N_", "_", "get_language", "set_language"]
