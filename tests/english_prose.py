"""Is a line of the Chinese edition's output English prose? (shared by the zh-output tests)

A learner of the zh edition reads Chinese with code words in it: names (``lru``, ``my_scheduler``,
``last_used``), the terms the glossary keeps in English (trace, token, prefill...), numbers and
units. English prose is anything else: a line with no Chinese that holds an English word
("ok", "loaded from", "stale: re-scored since"), or, inside a Chinese line, two English words in
a row ("chapter score (yours or seed)"). Printed Python source (a learner's own scheduler) and
quoted data (``'add:a'``) are not prose.
"""
from __future__ import annotations

import ast
import keyword
import re
from typing import List

from kvsched_lab.sim.policies import POLICIES
from kvsched_lab.sim.scheduler import ALL_TODO_METHODS
from kvsched_lab.course.todos import PRACTICE_FUNCTIONS

CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
# Words that stay English in the zh edition (docs/glossary.md's "kept in English", code words the
# Chinese text names, units); compared in lower case.
KEPT = {
    "lru", "lfu", "gdsf", "arc", "fifo", "belady", "pagedattention", "prefill", "vllm", "sglang", "mooncake",
    "trace", "traces", "token", "tokens", "gpu", "cpu", "flops", "gflops", "eflop", "todo", "kv", "logit", "logits",
    "recency", "priority", "hits", "prefix", "bytes", "entry", "entries", "queue", "heap", "log", "radix", "kimi",
    "conversation", "synthetic", "generated", "python", "torch", "jupyterlab", "ipywidgets", "matplotlib", "gpu",
    "cuda", "dtype", "float", "bf", "fp", "ms", "us", "kib", "mib", "gib", "gb", "tok", "pt", "id", "ids",
    "llama", "qwen", "mistral", "heads", "dim", "head", "true", "false", "none", "nan", "colab", "modelscope",
    "conv", "synth", "k", "m", "g", "x", "l", "bubblewrap", "bwrap", "api", "json", "csv", "jsonl", "zh", "en",
    "touch", "add", "reuse", "evict", "score", "snapshot", "stale", "system",
} | {name.lower() for name in POLICIES} | set(ALL_TODO_METHODS) | set(PRACTICE_FUNCTIONS)
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")
_PUNCT = ".,:;!?()[]{}<>|\"'*=+-/%#~"


def is_code(line: str) -> bool:
    """A line of printed Python source: a comment, or a statement that parses (a block header too)."""
    s = line.strip()
    if s.startswith("#"):
        return True
    first = s.split()[0].rstrip(":") if s else ""
    if not re.search(r"[=()\[\]:.]", s) and first not in keyword.kwlist:  # a bare word parses as a name: no code
        return False
    for candidate in (s, s + " pass"):
        try:
            ast.parse(candidate)
            return True
        except SyntaxError:
            continue
    return False


def _words(segment: str) -> List[List[str]]:
    """The runs of English prose words in a stretch of text without Chinese."""
    runs, run = [], []
    for token in segment.split():
        word = token.strip(_PUNCT)
        if _WORD.fullmatch(word) and word.lower() not in KEPT and not re.search(r"[a-z][A-Z]", word):
            run.append(word)
            continue
        if run:
            runs.append(run)
        run = []
    return runs + ([run] if run else [])


def english_prose(line: str) -> List[str]:
    """The English prose in one output line ([] when there is none)."""
    if is_code(line):
        return []
    text = re.sub(r"`[^`]*`|'[^'\n]*'|\"[^\"\n]*\"|https?://\S+|\S*[/\\]\S*|\S+@\S+", " ", line)
    runs = [run for segment in CJK.split(text) for run in _words(segment)]
    if not CJK.search(line):
        return [" ".join(run) for run in runs]
    return [" ".join(run) for run in runs if len(run) >= 2]
