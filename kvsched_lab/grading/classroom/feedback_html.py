"""A feedback file as one self-contained HTML page, made from its Markdown (grade.feedback_text).

The Markdown the grader writes uses a small, fixed subset: ``#`` and ``##`` headings, paragraphs,
inline code, and fenced code blocks that hold everything the learner's code controls (fenced
so nothing inside can close them). This turns exactly that subset into HTML: every piece of text
is escaped (nothing the learner wrote becomes markup), fenced blocks become ``<pre>``, a TODO's
heading (``## score (_score): passed, 20/20``) gets a coloured status badge. The page loads
nothing (inline style; a Content-Security-Policy forbids scripts and fetches), so it opens the
same from a disk, an LMS attachment or an e-mail.
"""
from __future__ import annotations

import html
import re
from typing import List

from kvsched_lab.sim.scheduler import TODO_METHODS

_FENCE = re.compile(r"^(`{3,})$")
_TODO_HEAD = re.compile(r"^## (?P<todo>\w+) \((?P<method>\w+)\): (?P<status>[a-z ]+), (?P<points>\d+)/(?P<max>\d+)$")
_INLINE_CODE = re.compile(r"`([^`]+)`")
STATUS_COLOURS = {"passed": "#1a7f37", "failed": "#b35900", "not attempted": "#57606a", "error": "#cf222e",
                  "timed out": "#8250df"}
STYLE = """
body { font: 15px/1.5 system-ui, "Noto Sans", "PingFang SC", "Microsoft YaHei", sans-serif; max-width: 52em;
       margin: 2em auto; padding: 0 1em; color: #1f2328; }
h1 { font-size: 1.5em; border-bottom: 1px solid #d0d7de; padding-bottom: .3em; }
h2 { font-size: 1.15em; margin-top: 1.6em; }
pre { background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 6px; padding: .7em; overflow-x: auto;
      white-space: pre-wrap; word-break: break-word; }
code { background: #eff1f3; border-radius: 4px; padding: 0 .25em; }
.badge { display: inline-block; color: #fff; border-radius: 1em; padding: 0 .7em; font-size: .85em; }
.points { float: right; font-variant-numeric: tabular-nums; }
"""


def _inline(text: str) -> str:
    """Escaped text, with `code` spans marked up (their content escaped too)."""
    return _INLINE_CODE.sub(lambda m: f"<code>{m.group(1)}</code>", html.escape(text, quote=True))


def _heading(line: str) -> str:
    level = 1 if line.startswith("# ") else 2
    text = line[level + 1:]
    m = _TODO_HEAD.match(line) if level == 2 else None
    if m and m["todo"] in TODO_METHODS:
        colour = STATUS_COLOURS.get(m["status"], "#57606a")
        return (f'<h2 id="todo-{m["todo"]}">{html.escape(m["todo"])} <code>{html.escape(m["method"])}</code> '
                f'<span class="badge" style="background:{colour}">{html.escape(m["status"])}</span>'
                f'<span class="points">{m["points"]} / {m["max"]}</span></h2>')
    return f"<h{level}>{_inline(text)}</h{level}>"


def render(markdown: str, lang: str = "en") -> str:
    """The page for one feedback file's `markdown`, in `lang` (``en``, ``zh``: sets the page's language)."""
    body: List[str] = []
    paragraph: List[str] = []
    fence, block = "", []

    def flush() -> None:
        if paragraph:
            body.append("<p>" + "<br>".join(_inline(p) for p in paragraph) + "</p>")
            paragraph.clear()

    for line in markdown.split("\n"):
        if fence:
            if line == fence:
                body.append("<pre>" + html.escape("\n".join(block), quote=True) + "</pre>")
                fence, block = "", []
            else:
                block.append(line)
            continue
        m = _FENCE.match(line)
        if m:
            flush()
            fence = m.group(1)
        elif line.startswith(("# ", "## ")):
            flush()
            body.append(_heading(line))
        elif line.strip():
            paragraph.append(line)
        else:
            flush()
    flush()
    if fence:  # never left open by the grader; shown as text rather than lost
        body.append("<pre>" + html.escape("\n".join(block), quote=True) + "</pre>")
    title = html.escape(markdown.split("\n", 1)[0].lstrip("# "), quote=True)
    return ("<!DOCTYPE html>\n"
            f'<html lang="{"zh-CN" if lang == "zh" else "en"}"><head><meta charset="utf-8">\n'
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{title}</title><style>{STYLE}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n")
