"""The Chinese notebook edition, from the English notebooks and one PO file per notebook.

English ``notebooks/NN_name.ipynb`` is the source. ``i18n/zh_CN/NN_name.po`` holds one entry per
cell: msgctxt = the cell's nbformat ``id``, msgid = the English cell source, msgstr = the Chinese.

- `update_po` merges the current English into the PO: a new cell gets an untranslated entry, a
  changed cell turns fuzzy (its old translation and previous msgid are kept, for the translator),
  a removed cell turns obsolete. A code cell with no prose (no comment, no sentence in a string)
  is filled with its own source: nothing in it to translate.
- `build_notebook` writes ``notebooks/zh/NN_name.ipynb``: the same cells, ids, tags and NBVAL
  markers, each cell's translation, a generated-file note at the top of the first (markdown)
  cell, and ``lab.set_language("zh")`` appended to the setup cell. A cell whose translation is
  missing or fuzzy is written in English and reported as stale (tests fail on any stale cell);
  a code translation whose code differs from the English (beyond comments and string text) is an
  error, never written.
"""
from __future__ import annotations

import copy
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from kvsched_lab.i18n.code_shape import _MARKER, shape_difference
from kvsched_lab.i18n.po_files import FUZZY, LOCALE, load_po, new_po, polib_module
from kvsched_lab.notebook_files import Notebook, cell_source, read_notebook, write_notebook

# The one line the zh setup cell adds to the English one (the structure test's only exception).
SETUP_LINE = 'lab.set_language("zh")'
SETUP_MARK = "import kvsched_lab.course as lab"  # how the setup cell is recognised
# Words in a string literal that make it prose (a sentence to translate), not a key like "a".
_PROSE = re.compile(r"[A-Za-z]{2,}[^A-Za-z{}]+[A-Za-z]{2,}")


def generated_note(name: str) -> str:
    """The line that opens every generated notebook (markdown, then a blank line)."""
    return (f"*本文件由 `kvsched i18n build` 生成，请勿直接修改：英文原文在 `notebooks/{name}`，"
            f"中文译文在 `i18n/{LOCALE}/{Path(name).stem}.po`。*\n\n")


@dataclass
class BuildReport:
    """What `build_notebook` did: the cells still in English and why."""

    notebook: str
    stale: List[str] = field(default_factory=list)  # "<cell id>: <reason>"


def has_prose(cell: dict) -> bool:
    """Does this cell hold text a learner reads (markdown, a comment, a sentence in a string)?"""
    src = cell_source(cell)
    if cell["cell_type"] != "code":
        return bool(src.strip())
    try:
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type == tokenize.COMMENT and not _MARKER.match(tok.string):
                return True
            if tok.type == tokenize.STRING and _PROSE.search(tok.string):
                return True
    except (tokenize.TokenError, SyntaxError):
        return True  # a translator should look at it
    return False


def translation_memory(po_paths: List[Path]) -> Dict[str, str]:
    """``{English source: translation}`` over the current, non-fuzzy entries of `po_paths`."""
    memory: Dict[str, str] = {}
    for path in po_paths:
        if path.exists():
            for e in load_po(path, path.name):
                if not e.obsolete and e.msgstr and FUZZY not in e.flags:
                    memory.setdefault(e.msgid, e.msgstr)
    return memory


def update_po(notebook: Path, po_path: Path, memory: Optional[Dict[str, str]] = None) -> dict:
    """Merge the English `notebook` into `po_path` (created if missing); returns counts per outcome.

    A new or changed cell whose English is translated word for word elsewhere (`memory`, e.g. the
    setup cell every notebook shares) takes that translation, not fuzzy: it is the same text.
    """
    memory = memory or {}
    polib = polib_module()
    nb = read_notebook(notebook)
    po = load_po(po_path, notebook.name)
    by_ctx = {e.msgctxt: e for e in po}
    counts = {"new": 0, "fuzzy": 0, "kept": 0, "obsolete": 0, "auto": 0, "memory": 0}
    entries = []
    for cell in nb["cells"]:
        cid, src = cell["id"], cell_source(cell)
        entry = by_ctx.pop(cid, None)
        prose = has_prose(cell)
        if entry is None:
            entry = polib.POEntry(msgctxt=cid, msgid=src, msgstr="")
            counts["new"] += 1
        elif entry.msgid != src or entry.obsolete:
            if entry.msgid != src and entry.msgstr:
                entry.previous_msgid = entry.previous_msgid or entry.msgid
                if FUZZY not in entry.flags:
                    entry.flags.append(FUZZY)
            entry.msgid = src
            entry.obsolete = False
            counts["fuzzy"] += 1
        else:
            counts["kept"] += 1
        if src in memory and (FUZZY in entry.flags or not entry.msgstr):
            entry.msgstr, entry.previous_msgid = memory[src], None
            entry.flags = [f for f in entry.flags if f != FUZZY]
            counts["memory"] += 1
        entry.comment = f"{cell['cell_type']} cell" + ("" if prose else ", no prose: copied as is")
        if not prose:
            entry.msgstr, entry.previous_msgid = src, None
            entry.flags = [f for f in entry.flags if f != FUZZY]
            counts["auto"] += 1
        entries.append(entry)
    for entry in by_ctx.values():
        if not entry.obsolete:
            entry.obsolete = True
            counts["obsolete"] += 1
        entries.append(entry)
    out = new_po(notebook.name)
    out.metadata = po.metadata or out.metadata
    out.extend(entries)
    po_path.parent.mkdir(parents=True, exist_ok=True)
    out.save(str(po_path))
    return counts


def translated_source(entry, src: str) -> Optional[str]:
    """The entry's translation of `src`, or None when it is missing, fuzzy or for another source."""
    if entry is None or entry.obsolete or entry.msgid != src or not entry.msgstr or FUZZY in entry.flags:
        return None
    return entry.msgstr


def _as_lines(text: str) -> List[str]:
    return text.splitlines(keepends=True)


def is_setup_cell(cell: dict) -> bool:
    return cell["cell_type"] == "code" and SETUP_MARK in cell_source(cell)


def build_notebook(notebook: Path, po_path: Path, out_path: Path) -> BuildReport:
    """Write the zh edition of `notebook` to `out_path`; see the module docstring."""
    nb = read_notebook(notebook)
    po = load_po(po_path, notebook.name)
    by_ctx = {e.msgctxt: e for e in po if not e.obsolete}
    report = BuildReport(notebook.name)
    out: Notebook = copy.deepcopy(nb)
    if not out["cells"] or out["cells"][0]["cell_type"] != "markdown":
        raise ValueError(f"{notebook.name}: the first cell must be markdown (it carries the generated-file note)")
    setup_done = False
    for cell in out["cells"]:
        src = cell_source(cell)
        entry = by_ctx.get(cell["id"])
        text = translated_source(entry, src)
        if text is None:
            why = "missing" if entry is None or not entry.msgstr else ("fuzzy" if FUZZY in entry.flags else "stale")
            report.stale.append(f"{cell['id']}: {why}")
            text = src
        if cell["cell_type"] == "code":
            diff = shape_difference(src, text)
            if diff:
                raise ValueError(f"{po_path.name}, cell {cell['id']}: the translated code differs from the English "
                                 f"beyond comments and string text: {diff}")
            if not setup_done and is_setup_cell(cell):
                text = text.rstrip("\n") + "\n" + SETUP_LINE
                setup_done = True
        cell["source"] = _as_lines(text)
    out["cells"][0]["source"] = _as_lines(generated_note(notebook.name) + cell_source(out["cells"][0]))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_notebook(out, out_path)
    return report


def check_notebook(notebook: Path, po_path: Path) -> BuildReport:
    """Like `build_notebook` without writing: which cells would be stale (and shape errors raise)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return build_notebook(notebook, po_path, Path(tmp) / notebook.name)


def english_notebooks(root: Path) -> List[Path]:
    return sorted((root / "notebooks").glob("*.ipynb"))


def po_path_for(root: Path, notebook: Path) -> Path:
    return root / "i18n" / LOCALE / f"{notebook.stem}.po"


def zh_path_for(root: Path, notebook: Path) -> Path:
    return root / "notebooks" / "zh" / notebook.name
