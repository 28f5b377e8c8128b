"""PO files as the translators' tools write them (polib), for the notebook PO files and the runtime catalogue.

Authoring only: the lab itself reads its catalogue with `po.py` and needs no polib. Both the
notebook edition (`notebooks.py`) and the runtime catalogue (`catalogue.py`) open and create
their PO files here, so the two share one format (``wrapwidth=0``: one line per source line).
"""
from __future__ import annotations

from pathlib import Path

LOCALE = "zh_CN"
FUZZY = "fuzzy"


def polib_module():
    try:
        import polib
    except ImportError as e:  # authoring only: learners never run update/build
        raise ImportError("the i18n commands need polib: pip install -e '.[i18n]'") from e
    return polib


def new_po(name: str):
    polib = polib_module()
    po = polib.POFile(wrapwidth=0)  # wrapwidth 0: one line per source line, readable diffs
    po.metadata = {
        "Project-Id-Version": f"kvsched-lab {name}",
        "Language": LOCALE,
        "MIME-Version": "1.0",
        "Content-Type": "text/plain; charset=UTF-8",
        "Content-Transfer-Encoding": "8bit",
    }
    return po


def load_po(path: Path, name: str):
    polib = polib_module()
    return polib.pofile(str(path), wrapwidth=0) if path.exists() else new_po(name)
