"""Pairs of submissions whose five TODO methods are near-identical, for an instructor to review.

Winnowing (Schleimer, Wilkerson and Aiken, SIGMOD 2003; the idea behind MOSS), on Python tokens:

1. each TODO's method is cut out of the submission (a TODO cell or a whole .py) and tokenised with
   `tokenize`; comments, blank lines and layout are dropped, every name that is not an attribute,
   a keyword or a builtin becomes ``N``, every string ``S`` (renaming and reformatting change nothing);
2. each run of `K` tokens is hashed (BLAKE2, stable across runs); of every `WINDOW` consecutive
   hashes the smallest is kept: the method's fingerprints, each with the lines it covers;
3. fingerprints of code every learner is given or expected to write are dropped: the stubs (the
   skeleton's, the chapter exercise's, the course notebooks' TODO cells) and the reference's own
   methods, so two learners who both wrote the model answer share nothing; so is a fingerprint that
   more than `common_share` of the class has (code many write alike is no sign of copying);
4. a pair's similarity is the Jaccard index of what is left, over all five methods together.

A pair is listed when its similarity is at least `THRESHOLD` and it shares at least `MIN_SHARED`
fingerprints. A listed pair is a reason to read two submissions side by side, never a finding of
misconduct: docs/grading.md gives the threshold's measured false-positive rate on the course's own
right-but-different answers (tests/test_similarity.py measures it).
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import inspect
import io
import keyword
import textwrap
import tokenize
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from kvsched_lab.grading.stubs import CHAPTER_EXERCISE, class_methods, functions_in
from kvsched_lab.sim.scheduler import TODO_METHODS, SchedulerSkeleton

K = 6  # tokens per hashed run: shorter runs match by chance, longer ones miss small copied edits
WINDOW = 4  # hashes per winnowing window: any shared run of K + WINDOW - 1 tokens is always caught
THRESHOLD = 0.6  # Jaccard similarity from which a pair is listed (docs/grading.md: its false-positive rate)
MIN_SHARED = 6  # fingerprints a listed pair must share: one copied line is not "near-identical methods"
COMMON_SHARE = 0.25  # a fingerprint more than this share of the class holds is common code, not evidence
_KEEP_NAMES = set(dir(builtins)) | {"self", "heapq", "CacheEntry", "math"}
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
         tokenize.ENDMARKER}

Prints = Dict[int, Set[int]]  # fingerprint -> the method's lines (1-based) its tokens cover


@dataclass
class Pair:
    """Two submissions to read side by side."""

    a: str
    b: str
    similarity: float  # Jaccard index of their remaining fingerprints
    shared: int  # fingerprints they share
    lines: Dict[str, Tuple[List[int], List[int]]]  # TODO -> lines of a's and of b's method that match


def method_source(todo: str, source: str) -> str:
    """The TODO's method cut out of a TODO cell or a whole .py (the whole text when it is not found)."""
    method = TODO_METHODS[todo]
    node = (class_methods(source) or {}).get(method) or functions_in(source, [method]).get(method)
    segment = ast.get_source_segment(source, node) if node is not None else None
    return textwrap.dedent(segment) if segment else source


def tokens(code: str) -> List[Tuple[str, int]]:
    """Normalised tokens of `code` with their lines; [] where it does not tokenise."""
    out: List[Tuple[str, int]] = []
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    previous = ""
    for t in toks:
        if t.type in _SKIP:
            continue
        text = t.string
        if t.type == tokenize.NAME and previous != "." and not keyword.iskeyword(text) and text not in _KEEP_NAMES:
            text = "N"
        elif t.type == tokenize.STRING or t.type == getattr(tokenize, "FSTRING_START", -1):
            text = "S"
        out.append((text, t.start[0]))
        previous = t.string
    return out


def _hash(run: Iterable[str]) -> int:
    return int.from_bytes(hashlib.blake2b("\x1f".join(run).encode(), digest_size=8).digest(), "big")


def fingerprints(code: str) -> Prints:
    """Winnowed fingerprints of `code` (see the module docstring)."""
    toks = tokens(code)
    grams = [(_hash(t for t, _ in toks[i:i + K]), {line for _, line in toks[i:i + K]})
             for i in range(len(toks) - K + 1)]
    out: Prints = {}
    for i in range(max(1, len(grams) - WINDOW + 1)):
        window = grams[i:i + WINDOW]
        if not window:
            break
        h, lines = min(reversed(window), key=lambda g: g[0])  # the rightmost smallest, as the paper does
        out.setdefault(h, set()).update(lines)
    return out


def base_code(notebooks: Optional[Path] = None) -> Dict[str, Set[int]]:
    """TODO -> fingerprints of the code every learner starts from or is expected to write."""
    from kvsched_lab.course.todos import cell_source, read_notebook, reference_sources, tagged_cells

    given: Dict[str, List[str]] = {t: [reference_sources()[t]] for t in TODO_METHODS}
    for todo, method in TODO_METHODS.items():
        given[todo].append(textwrap.dedent(inspect.getsource(getattr(SchedulerSkeleton, method))))
        given[todo].append(method_source(todo, CHAPTER_EXERCISE))
    for path in sorted(notebooks.glob("*.ipynb")) if notebooks and notebooks.is_dir() else []:
        nb = read_notebook(path)
        for todo, idx in tagged_cells(nb, "todo").items():
            given.get(todo, []).extend(cell_source(nb["cells"][i]) for i in idx)
    return {t: {h for code in codes for h in fingerprints(method_source(t, code))} for t, codes in given.items()}


def submission_prints(sources: Mapping[str, str], base: Mapping[str, Set[int]]) -> Dict[str, Prints]:
    """TODO -> the fingerprints of one submission's method, the base code's removed."""
    out = {}
    for todo, source in sources.items():
        if todo in TODO_METHODS:
            prints = fingerprints(method_source(todo, source))
            out[todo] = {h: lines for h, lines in prints.items() if h not in base.get(todo, set())}
    return out


def similar_pairs(prints: Mapping[str, Dict[str, Prints]], threshold: float = THRESHOLD,
                  min_shared: int = MIN_SHARED, common_share: Optional[float] = COMMON_SHARE) -> List[Pair]:
    """The pairs to review among submissions (name -> `submission_prints`), most similar first.

    `common_share` None keeps every fingerprint (for measuring pairs outside a class)."""
    keys = {name: {(t, h) for t, ps in p.items() for h in ps} for name, p in prints.items()}
    holders: Dict[tuple, List[str]] = {}
    for name, ks in keys.items():
        for k in ks:
            holders.setdefault(k, []).append(name)
    cap = len(keys) if common_share is None else max(2, int(common_share * len(keys)))
    common = {k for k, names in holders.items() if len(names) > cap}
    shared: Dict[Tuple[str, str], int] = {}
    for k, names in holders.items():
        if k not in common:
            for a, b in combinations(sorted(names), 2):
                shared[(a, b)] = shared.get((a, b), 0) + 1
    out = []
    for (a, b), n in shared.items():
        size_a, size_b = len(keys[a] - common), len(keys[b] - common)
        similarity = n / (size_a + size_b - n)
        if similarity >= threshold and n >= min_shared:
            both = (keys[a] & keys[b]) - common
            lines = {t: (sorted({ln for tt, h in both if tt == t for ln in prints[a][t][h]}),
                         sorted({ln for tt, h in both if tt == t for ln in prints[b][t][h]}))
                     for t in TODO_METHODS if any(tt == t for tt, _ in both)}
            out.append(Pair(a, b, round(similarity, 3), n, lines))
    return sorted(out, key=lambda p: (-p.similarity, p.a, p.b))


def pair_similarity(a: Mapping[str, Prints], b: Mapping[str, Prints]) -> Tuple[float, int]:
    """(Jaccard similarity, shared fingerprints) of two submissions on their own (no class)."""
    ka = {(t, h) for t, ps in a.items() for h in ps}
    kb = {(t, h) for t, ps in b.items() for h in ps}
    n = len(ka & kb)
    return (n / len(ka | kb) if ka | kb else 0.0), n


def flagged(a: Mapping[str, Prints], b: Mapping[str, Prints], threshold: float = THRESHOLD,
            min_shared: int = MIN_SHARED) -> bool:
    similarity, n = pair_similarity(a, b)
    return similarity >= threshold and n >= min_shared


def review(sources: Mapping[str, Mapping[str, str]], notebooks: Optional[Path] = None) -> Tuple[List[Pair], Dict]:
    """The pairs to review in a class (submission -> TODO -> code graded), and each one's method texts."""
    base = base_code(notebooks)
    prints = {name: submission_prints(s, base) for name, s in sources.items()}
    methods = {name: {t: method_source(t, code) for t, code in s.items() if t in TODO_METHODS}
               for name, s in sources.items()}
    return similar_pairs(prints), methods

