"""Read a gettext PO file into ``{msgid: msgstr}`` without a compile step or extra dependency.

The runtime catalogue ships as a ``.po`` inside the package, and the lab must run where it is
installed with ``--no-deps`` (Colab, ModelScope), so this reads the PO format itself: it handles
``msgctxt``/``msgid``/``msgstr``, multi-line strings, the C escapes gettext writes, and skips
obsolete (``#~``) and fuzzy entries (a fuzzy translation is not trusted; English is shown).
Authoring (creating and updating catalogues) uses polib; a test checks both read the same.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _unquote(text: str, where: str) -> str:
    text = text.strip()
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        raise ValueError(f"{where}: expected a quoted string, got {text!r}")
    out, i, body = [], 0, text[1:-1]
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt not in _ESCAPES:
                raise ValueError(f"{where}: unknown escape \\{nxt}")
            out.append(_ESCAPES[nxt])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def read_po(path: Union[str, Path]) -> Dict[Tuple[Optional[str], str], str]:
    """``{(msgctxt or None, msgid): msgstr}`` for every translated, non-fuzzy, non-obsolete entry.

    Entries are separated by blank lines, as gettext and polib write them.
    """
    out: Dict[Tuple[Optional[str], str], str] = {}
    block: List[Tuple[int, str]] = []
    lines = Path(path).read_text(encoding="utf-8").splitlines() + [""]
    for number, line in enumerate(lines, 1):
        if line.strip():
            block.append((number, line.strip()))
            continue
        if block:
            entry = _entry(block, str(path))
            if entry is not None:
                key, msgstr = entry
                out[key] = msgstr
            block = []
    return out


def _entry(block: List[Tuple[int, str]], path: str) -> Optional[Tuple[Tuple[Optional[str], str], str]]:
    """One block's ``((msgctxt, msgid), msgstr)``, or None when it is obsolete, fuzzy or untranslated."""
    fields: Dict[str, str] = {}
    flags: List[str] = []
    field: Optional[str] = None
    for number, line in block:
        where = f"{path}:{number}"
        if line.startswith("#,"):
            flags += [f.strip() for f in line[2:].split(",")]
        elif line.startswith("#"):
            continue  # comments, references, previous msgids (#|) and obsolete entries (#~)
        elif line.startswith('"'):
            if field is None:
                raise ValueError(f"{where}: a continuation line outside any field")
            fields[field] += _unquote(line, where)
        else:
            keyword, _, rest = line.partition(" ")
            if keyword not in ("msgctxt", "msgid", "msgstr") or keyword in fields:
                raise ValueError(f"{where}: unexpected {keyword!r} (one msgctxt/msgid/msgstr per entry, no plurals)")
            field = keyword
            fields[field] = _unquote(rest, where)
    if not fields:
        return None  # a block of comments only (e.g. obsolete entries)
    if "msgid" not in fields or "msgstr" not in fields:
        raise ValueError(f"{path}:{block[0][0]}: an entry needs both msgid and msgstr")
    if not fields["msgid"] or not fields["msgstr"] or "fuzzy" in flags:
        return None  # the header, an untranslated or a fuzzy entry
    return (fields.get("msgctxt"), fields["msgid"]), fields["msgstr"]
