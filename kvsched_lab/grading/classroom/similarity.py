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

A pair is listed when every TODO agrees (both methods have nothing left, or their own Jaccard index
is at least `THRESHOLD`), at least `MIN_TODOS` of them on code of their own, with `MIN_SHARED`
fingerprints shared in all: near-identical five methods, not one popular method alike. A listed
pair is a reason to read two submissions side by side, never a finding of misconduct:
docs/grading.md gives the threshold's measured false-positive rate on the course's own
right-but-different answers (tests/test_class_tools.py measures it).
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
from typing import Dict, Iterable, List, Mapping, Optional, Set, Tuple

from kvsched_lab.grading.judging.stubs import CHAPTER_EXERCISE, class_methods, functions_in
from kvsched_lab.sim.scheduler import TODO_METHODS, SchedulerSkeleton

K = 6  # tokens per hashed run: shorter runs match by chance, longer ones miss small copied edits
WINDOW = 4  # hashes per winnowing window: any shared run of K + WINDOW - 1 tokens is always caught
THRESHOLD = 0.6  # Jaccard similarity from which a pair is listed (docs/grading.md: its false-positive rate)
MIN_SHARED = 6  # fingerprints a listed pair must share: one copied line is not "near-identical methods"
MIN_TODOS = 2  # TODOs whose own code a listed pair must share: one popular method alike is not five
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
    from kvsched_lab.course.todos import reference_sources, tagged_cells
    from kvsched_lab.notebook_files import cell_source, read_notebook

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


def judge_pair(a: Mapping[str, Set[int]], b: Mapping[str, Set[int]], threshold: float = THRESHOLD,
               min_shared: int = MIN_SHARED) -> Tuple[float, int, bool]:
    """(Jaccard similarity over the five methods, shared fingerprints, listed?) of two submissions.

    `a`, `b`: TODO -> fingerprints left (base and common code removed). Listed: every TODO agrees
    (both methods have nothing left, or their own Jaccard index is at least `threshold`), at least
    `MIN_TODOS` TODOs agree on code of their own, and `min_shared` fingerprints are shared in all.
    """
    shared = union = evidence = 0
    agree = True
    for t in TODO_METHODS:
        ka, kb = a.get(t, set()), b.get(t, set())
        n, u = len(ka & kb), len(ka | kb)
        shared, union = shared + n, union + u
        if u:
            agree = agree and n / u >= threshold
            evidence += n > 0
    similarity = shared / union if union else 0.0
    return similarity, shared, agree and evidence >= MIN_TODOS and shared >= min_shared


def similar_pairs(prints: Mapping[str, Dict[str, Prints]], threshold: float = THRESHOLD,
                  min_shared: int = MIN_SHARED, common_share: Optional[float] = COMMON_SHARE) -> List[Pair]:
    """The pairs to review among submissions (name -> `submission_prints`), most similar first.

    `common_share` None keeps every fingerprint (for measuring pairs outside a class)."""
    holders: Dict[tuple, List[str]] = {}
    for name, p in prints.items():
        for t, ps in p.items():
            for h in ps:
                holders.setdefault((t, h), []).append(name)
    cap = len(prints) if common_share is None else max(2, int(common_share * len(prints)))
    common = {k for k, names in holders.items() if len(names) > cap}
    left = {name: {t: {h for h in ps if (t, h) not in common} for t, ps in p.items()} for name, p in prints.items()}
    candidates = {pair for k, names in holders.items() if k not in common for pair in combinations(sorted(names), 2)}
    out = []
    for a, b in candidates:
        similarity, n, listed = judge_pair(left[a], left[b], threshold, min_shared)
        if listed:
            lines = {t: (sorted({ln for h in left[a][t] & left[b][t] for ln in prints[a][t][h]}),
                         sorted({ln for h in left[a][t] & left[b][t] for ln in prints[b][t][h]}))
                     for t in TODO_METHODS if left[a].get(t, set()) & left[b].get(t, set())}
            out.append(Pair(a, b, round(similarity, 3), n, lines))
    return sorted(out, key=lambda p: (-p.similarity, p.a, p.b))


def pair_similarity(a: Mapping[str, Prints], b: Mapping[str, Prints]) -> Tuple[float, int]:
    """(Jaccard similarity, shared fingerprints) of two submissions on their own (no class)."""
    return judge_pair({t: set(p) for t, p in a.items()}, {t: set(p) for t, p in b.items()})[:2]


def flagged(a: Mapping[str, Prints], b: Mapping[str, Prints]) -> bool:
    """Whether two submissions on their own (no class, so no common code removed) would be listed."""
    return judge_pair({t: set(p) for t, p in a.items()}, {t: set(p) for t, p in b.items()})[2]


def review(sources: Mapping[str, Mapping[str, str]], notebooks: Optional[Path] = None) -> Tuple[List[Pair], Dict]:
    """The pairs to review in a class (submission -> TODO -> code graded), and each one's method texts."""
    base = base_code(notebooks)
    prints = {name: submission_prints(s, base) for name, s in sources.items()}
    methods = {name: {t: method_source(t, code) for t, code in s.items() if t in TODO_METHODS}
               for name, s in sources.items()}
    return similar_pairs(prints), methods

