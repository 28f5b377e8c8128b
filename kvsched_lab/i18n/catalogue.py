"""Keeping the runtime catalogue (``kvsched_lab/i18n/zh_CN.po``) in step with the source.

`extract` finds every ``_("...")`` and ``N_("...")`` literal in the package, and the comments
inside the reference's functions (``solutions/``, printed by ``lab.reveal`` with each comment
translated: `comment_messages`); `update_catalogue`
adds the new ones (untranslated) and marks the ones no longer used obsolete (kept at the end as
``#~`` lines, where a translator finds the old Chinese of a reworded message). References name
files, not lines, so moving code does not rewrite the catalogue.
"""
from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from kvsched_lab.i18n.messages import CATALOGUE_DIR, CATALOGUE_FILES
from kvsched_lab.i18n.po_files import FUZZY, load_po, new_po, polib_module

PACKAGE_DIR = CATALOGUE_DIR.parent
MARKERS = ("_", "N_")


def comment_messages(source: str) -> List[Tuple[str, int]]:
    """``[(text, line)]`` of the comments on indented lines of `source` (inside a function, the
    part ``lab.reveal`` prints), each without its ``#`` and surrounding blanks."""
    return [(tok.string[1:].strip(), tok.start[0])
            for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT and tok.line[:1].isspace()]


def extract(package_dir: Path = PACKAGE_DIR) -> Dict[str, List[str]]:
    """``{msgid: ["file.py:line", ...]}`` for every marked literal under `package_dir`.

    A call of ``_``/``N_`` whose first argument is not a string literal must pass on a value that
    was marked elsewhere (``_(label)`` for an ``N_`` label); it is not extracted.
    """
    found: Dict[str, List[str]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in MARKERS
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                where = f"{path.relative_to(package_dir.parent).as_posix()}:{node.lineno}"
                found.setdefault(node.args[0].value, []).append(where)
    revealed = package_dir.parent / "solutions"  # the instructor's reference: absent from the student release
    for path in sorted(revealed.glob("*.py")) if revealed.is_dir() else []:
        for text, line in comment_messages(path.read_text(encoding="utf-8")):
            found.setdefault(text, []).append(f"{path.relative_to(package_dir.parent).as_posix()}:{line}")
    return found


def catalogue_path(lang: str = "zh", package_dir: Path = PACKAGE_DIR) -> Path:
    return package_dir / "i18n" / CATALOGUE_FILES[lang]


def update_catalogue(lang: str = "zh", package_dir: Path = PACKAGE_DIR) -> Tuple[int, int]:
    """Merge the msgids extracted from `package_dir` into its catalogue; returns (new, obsoleted)."""
    polib = polib_module()
    path = catalogue_path(lang, package_dir)
    po = load_po(path, "runtime messages")
    msgids = extract(package_dir)
    by_id = {e.msgid: e for e in po if e.msgid}
    entries, new = [], 0
    for msgid, where in msgids.items():
        entry = by_id.pop(msgid, None)
        if entry is None:
            entry = polib.POEntry(msgid=msgid, msgstr="")
            new += 1
        entry.obsolete = False
        entry.occurrences = [(f, "") for f in sorted({w.rsplit(":", 1)[0] for w in where})]
        entries.append(entry)
    obsoleted = 0
    for entry in by_id.values():
        obsoleted += not entry.obsolete
        entry.obsolete = True
        entries.append(entry)
    out = new_po("runtime messages")
    out.metadata = po.metadata or out.metadata
    out.extend(entries)
    out.save(str(path))
    return new, obsoleted


def untranslated_messages(package_dir: Optional[Path] = None) -> List[str]:
    """Runtime msgids with no (or a fuzzy) Chinese translation, and catalogue entries no longer used."""
    package_dir = package_dir or PACKAGE_DIR
    po = load_po(catalogue_path("zh", package_dir), "runtime messages")
    done = {e.msgid for e in po if not e.obsolete and e.msgstr and FUZZY not in e.flags}
    used = extract(package_dir)
    return ([f"untranslated: {m!r}"[:160] for m in used if m not in done]
            + [f"unused: {e.msgid!r}"[:160] for e in po if e.msgid and not e.obsolete and e.msgid not in used])
