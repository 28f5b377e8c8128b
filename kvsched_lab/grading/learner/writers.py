"""Learner-supplied text made safe for every place the grader writes it.

A learner controls file names (any bytes, from an LMS zip: not UTF-8, newlines, bidi overrides,
U+2028) and exception messages (lone surrogates, HTML, Markdown headings, links). Every such
string goes out through one of these:

* `bounded`: one line of plain text (control, format and surrogate characters become ``?``);
* `inline` / `fenced`: a Markdown code span / block that nothing inside can close, so text in the
  feedback is shown, never rendered (no fake "Total: 100/100" heading, no HTML, no link);
* `csv_cell`: a cell a spreadsheet shows as text, never runs as a formula;
* `feedback_file_name`: an injective name (two submissions never share a feedback file);
* `display_name`: a path's name as text (undecodable bytes shown as ``\\xe9``);
* `atomic_write`, `encoded`: bytes that any string can become, written whole or not at all.

Every file of a class folder (grades.csv, feedback, report, exports, journal, manifest) gets the
mode a plain ``open()`` would give it, ``0666`` less the umask (`umask_mode`), like the report's
figures and the folders beside it: a TA or a sync job that can read one output can read them
all. ``mkstemp`` alone would leave them ``0600``. A secret (a key) passes ``private=True``.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
import unicodedata
from pathlib import Path
from typing import Any, Set

from kvsched_lab.i18n.messages import Applied, Deferred

TEXT_CAP = 300  # characters of one learner-controlled message in one line of feedback
HEAD_CAP = 2000  # characters of a learner's printed output shown in feedback
NAME_CAP = 150  # characters of a feedback file's stem

# Characters that move, hide or break text: C0/C1 controls (tab and newline are handled by each
# writer), zero-width and bidi formatting, line/paragraph separators, BOM, lone surrogates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
                     "\ufeff\ufff9-\ufffb\ud800-\udfff]")
_FORMULA_START = ("=", "+", "-", "@", "|", "%")


def scrub(text: Any) -> str:
    """`text` as a string without unsafe characters (tabs and newlines kept)."""
    if not isinstance(text, str):
        text = str(text)
    return _UNSAFE.sub("?", text)


def bounded(text: Any, limit: int = TEXT_CAP) -> str:
    """Learner-controlled text for one line: no unsafe characters, no line breaks, at most `limit`."""
    if isinstance(text, Deferred):  # bounded in whichever language it is rendered
        return Applied(lambda t: bounded(t, limit), text)
    text = scrub(text).replace("\n", " ").replace("\t", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def inline(text: Any, limit: int = TEXT_CAP) -> str:
    """`text` as a Markdown code span: shown as it is (bounded), never rendered."""
    if isinstance(text, Deferred):
        return Applied(lambda t: inline(t, limit), text)
    body = bounded(text, limit)
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {body} {fence}"


def fenced(text: Any, limit: int = HEAD_CAP) -> str:
    """`text` as a Markdown code block that nothing inside it can close (bounded, unsafe characters replaced)."""
    if isinstance(text, Deferred):
        return Applied(lambda t: fenced(t, limit), text)
    body = scrub(str(text)[:limit].replace("\r\n", "\n"))  # a CRLF is a line end; a lone CR is shown as ?
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{body}\n{fence}"


def display_name(name: str) -> str:
    """A file name as text, escaped so that no two names display the same (a learner's identity).

    A backslash of the name itself is doubled; bytes that are not UTF-8 (kept by the OS as
    surrogates) are shown as ``\\xe9``; a tab, line break, control, zero-width or bidi character
    as ``\\t``, ``\\n``, ``\\x07`` (below U+0080) or ``\\u200b``, so ``a<TAB>b.py`` never shows as
    ``a b.py`` and nothing in a name moves or hides text."""
    doubled = name.replace("\\", "\\\\")
    try:
        raw = os.fsencode(doubled)
    except UnicodeEncodeError:  # a lone surrogate no file system gave: its UTF-8 bytes, escaped
        raw = doubled.encode("utf-8", "surrogatepass")
    return _NAME_UNSAFE.sub(_escape, raw.decode("utf-8", "backslashreplace"))


_NAME_UNSAFE = re.compile(f"[\t\n\r{_UNSAFE.pattern[1:-1]}]")
_NAMED_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(m: "re.Match[str]") -> str:
    ch = m.group(0)
    # below U+0080 as \xNN; above as \uNNNN, never \xNN, which is a byte that is not UTF-8
    return _NAMED_ESCAPES.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x80 else f"\\u{ord(ch):04x}")


def csv_cell(text: Any) -> str:
    """A cell a spreadsheet shows as text: unsafe characters replaced, a formula start quoted.

    Spreadsheets skip leading spaces and line breaks and fold full-width forms (``＝``) before
    deciding that a cell is a formula, so the test looks at the cell as they would."""
    raw = text if isinstance(text, str) else str(text)
    text = bounded(raw, len(raw) + 3)  # one line: line breaks and tabs become spaces
    folded = unicodedata.normalize("NFKC", text).lstrip(" \u3000")
    return "'" + text if folded.startswith(_FORMULA_START) else text


def feedback_file_name(name: str, used: Set[str]) -> str:
    """The feedback file of submission `name`: injective (no two names share one), safe on any filesystem.

    Letters and digits (any script), ``-``, ``_`` and inner ``.`` stay; every other character is
    written as its bytes, ``%XX`` each, so ``a b.py`` and ``a_b.py`` stay apart. A name
    too long keeps its start and gains a hash of the whole name. `used` guards what is left: a
    repeated submission name (two rows of one path) gets ``~2``, ``~3`` (``~`` never comes out of
    the escaping)."""
    out = []
    for k, ch in enumerate(name):
        keep = ch.isalnum() or ch in "-_" or (ch == "." and k > 0)  # a lone surrogate is not alnum
        out.append(ch if keep else "".join(f"%{b:02X}" for b in os.fsencode(ch)))
    stem = "".join(out) or "%"
    if len(stem) > NAME_CAP:
        stem = stem[: NAME_CAP - 17] + "%" + hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
    candidate, k = stem, 1
    while candidate in used:
        k += 1
        candidate = f"{stem}~{k}"
    used.add(candidate)
    return candidate + ".md"


def encoded(text: str) -> bytes:
    """UTF-8 bytes of any string (a surrogate left anywhere becomes ``?`` rather than an exception)."""
    return text.encode("utf-8", "replace")


_UMASK_LOCK = threading.Lock()


def umask_mode() -> int:
    """``0o666`` less this process's umask: the mode ``open()`` gives a new file.

    Read from /proc where Linux shows it; elsewhere by setting and restoring it, under a lock (a
    thread creating a file in between would otherwise get the temporary umask)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path: Path, data: bytes, private: bool = False) -> None:
    """Write `data` to `path` whole or not at all (a temporary file, fsync, rename), with the mode
    `umask_mode` gives (``0600`` when `private`)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600 if private else umask_mode())
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
