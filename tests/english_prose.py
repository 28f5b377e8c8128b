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
import html
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
    "touch", "add", "reuse", "evict", "score", "snapshot", "stale", "system", "demote",
} | {name.lower() for name in POLICIES} | set(ALL_TODO_METHODS) | set(PRACTICE_FUNCTIONS)
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")
_PUNCT = ".,:;!?()[]{}<>|\"'*=+-/%#~"


def is_code(line: str) -> bool:
    """A line of printed Python source: a comment, or a statement that parses (a block header too)."""
    s = line.strip()
    if s.startswith("##"):  # a Markdown heading, not a comment
        return False
    if s.startswith("#") or re.fullmatch(r"(else|try|finally)\s*:|(elif|except)\b.*:", s):
        return True  # a comment, or a block clause that does not parse alone
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
    # Code spans, quoted data, paths, trace@capacity cells and object reprs (<Legend at 0x7f...>) are no prose.
    text = re.sub(r"`[^`]*`|'[^'\n]*'|\"[^\"\n]*\"|https?://\S+|\S*[/\\]\S*|\S+@\S+|<[\w.]+(?: object)? at 0x[0-9a-f]+>",
                  " ", line)
    runs = [run for segment in CJK.split(text) for run in _words(segment)]
    if not CJK.search(line):
        return [" ".join(run) for run in runs]
    return [" ".join(run) for run in runs if len(run) >= 2]


def _text(value) -> str:
    return value if isinstance(value, str) else "".join(value)


def output_lines(outputs: List[dict]) -> List[str]:
    """The lines a learner reads in a cell's nbformat outputs: printed text, rich text, errors.

    HTML is read without its tags (a table's cells become separate words); a figure, a widget
    and the text/plain stand-in of either are not text to read (figures: the static zh tests).
    """
    lines: List[str] = []
    for out in outputs:
        kind = out.get("output_type")
        if kind == "stream":
            text = _text(out.get("text", ""))
            lines += [part.rsplit("\r", 1)[-1] for part in text.split("\n")]  # a progress bar's last state
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            if "text/html" in data:
                body = re.sub(r"<(br|tr|p|div|li|h\d|table|thead|tbody)\b[^>]*>", "\n", _text(data["text/html"]))
                lines += html.unescape(re.sub(r"<[^>]+>", "  ", body)).splitlines()
            elif "text/markdown" in data:
                lines += _text(data["text/markdown"]).splitlines()
            elif "text/plain" in data and not {"image/png", "application/vnd.jupyter.widget-view+json"} & set(data):
                lines += _text(data["text/plain"]).splitlines()
        elif kind == "error":
            lines.append(f"{out.get('ename', '')}: {out.get('evalue', '')}")
    return [line for line in lines if line.strip()]
