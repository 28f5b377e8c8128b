"""A code cell's shape: its tokens with comments and the text of string literals left out.

A translated code cell may differ from the English one only in comments and in what its string
literals say (what is printed to the learner); everything else (names, numbers, operators,
f-string fields, NBVAL markers, statements) must be identical; comment lines may be added or
removed (the line numbers only serve error messages). Comparing the shapes of
the two sources enforces that.
"""
from __future__ import annotations

import io
import re
import string
import tokenize
from typing import List, Tuple

# A comment that tells nbval or the course something is code, not prose: kept verbatim.
_MARKER = re.compile(r"#\s*(NBVAL_\w+|noqa\b.*)")
_STRING_PREFIX = re.compile(r"^([A-Za-z]*)(\"\"\"|'''|\"|')")
_SKIP = {tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}


def _string_shape(text: str) -> tuple:
    """A literal's prefix and quotes, plus its f-string fields in any order (the text itself is free)."""
    m = _STRING_PREFIX.match(text)
    prefix, quote = (m.group(1), m.group(2)) if m else ("", "")
    fields: Tuple[str, ...] = ()
    if "f" in prefix.lower():
        body = text[len(prefix) + len(quote): len(text) - len(quote)]
        try:
            # Sorted: a translation may reorder the fields (Chinese word order), not change them.
            fields = tuple(sorted((name or "") + ("!" + conv if conv else "") + (":" + spec if spec else "")
                                  for _, name, spec, conv in string.Formatter().parse(body) if name is not None))
        except ValueError:
            fields = (body,)  # an unusual f-string: then its whole text must match
    return ("STRING", prefix.lower(), quote, fields)


def code_shape(source: str) -> List[tuple]:
    """``[(token kind, text or shape, line)]``; SyntaxError-like errors raise ``tokenize.TokenError``."""
    out: List[tuple] = []
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    for tok in tokens:
        if tok.type in _SKIP:
            continue
        line = tok.start[0]
        if tok.type == tokenize.COMMENT:
            marker = _MARKER.match(tok.string)
            if marker:
                out.append(("MARKER", marker.group(0), line))
            continue
        if tok.type == tokenize.STRING:
            out.append(_string_shape(tok.string) + (line,))
        elif getattr(tokenize, "FSTRING_MIDDLE", None) == tok.type:
            continue  # Python 3.12+: the text between an f-string's fields
        else:
            out.append((tokenize.tok_name[tok.type], tok.string, line))
    return out


def shape_difference(english: str, translated: str) -> str:
    """"" when the two sources have the same shape, else where they first differ."""
    try:
        a, b = code_shape(english), code_shape(translated)
    except (tokenize.TokenError, SyntaxError, IndentationError) as e:
        return f"cannot tokenize: {e}"
    for x, y in zip(a, b):
        if x[:-1] != y[:-1]:
            return f"English line {x[-1]} has {x[:-1]}, the translation's line {y[-1]} has {y[:-1]}"
    if len(a) != len(b):
        return f"the English has {len(a)} code tokens, the translation {len(b)}"
    return ""
