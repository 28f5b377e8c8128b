"""The Chinese edition keeps its unified terms: none of the words docs/glossary.md bans comes back.

`test_i18n_edition.py` checks that each English term's Chinese term is *present*; this checks that
the variants a translator reaches for first (生成的 trace, tiny 模型, prompt, touch as a verb, 碰...)
are *absent*, in everything a learner reads in Chinese: the prose, comments and string literals of
`notebooks/zh`, the runtime catalogue's translations and README.zh.md. Code (`...` spans, fenced
blocks, f-string fields, identifiers) is left alone. It also checks full-width punctuation after
Chinese text, and that notebook 09 never calls the device tier 显存 in what its cells print.
"""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from kvsched_lab.i18n.po import read_po
from kvsched_lab.notebook_files import cell_source, read_notebook

ROOT = Path(__file__).resolve().parents[1]
ZH_NOTEBOOKS = sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))
SECTION = "## Words the Chinese edition does not use"


def banned_words() -> list:
    """``[(word, instead)]`` from the glossary's list of words the Chinese edition does not use."""
    text = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    assert SECTION in text, f"docs/glossary.md lost its section {SECTION!r}"
    words = []
    for line in text.split(SECTION, 1)[1].splitlines():
        if line.startswith("- ") and "→" in line:
            banned, instead = line[2:].split("→", 1)
            words += [(w, instead.strip()) for w in re.findall(r"`([^`]+)`", banned)]
    return words


def _pattern(word: str) -> re.Pattern:
    if word.isascii():  # an English word inside Chinese text: whole word, not a method call or attribute
        return re.compile(rf"(?<![A-Za-z_.\-]){re.escape(word)}(?![A-Za-z_(\-])")
    return re.compile(re.escape(word))


def _strip_code(text: str) -> str:
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`|\$\$.*?\$\$|https?://\S+", " ", text, flags=re.S)
    return re.sub(r"\{[^{}\n]*\}", " ", text)  # f-string / format fields are code


def readable_text(cell: dict) -> str:
    """What a learner reads in a cell: markdown without code, or a code cell's comments and strings."""
    src = cell_source(cell)
    if cell["cell_type"] == "markdown":
        return _strip_code(src)
    kinds = {tokenize.COMMENT, tokenize.STRING}
    parts = [t.string for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type in kinds]
    return _strip_code("\n".join(parts))


def zh_texts() -> list:
    """``[(where, text)]`` for every piece of the Chinese edition a learner reads."""
    out = []
    for path in ZH_NOTEBOOKS:
        for cell in read_notebook(path)["cells"]:
            out.append((f"{path.name}:{cell.get('id')}", readable_text(cell)))
    catalogue = ROOT / "kvsched_lab" / "i18n" / "zh_CN.po"
    for (_, msgid), msgstr in read_po(catalogue).items():
        if msgid:
            out.append((f"zh_CN.po:{msgid[:40]!r}", _strip_code(msgstr)))
    out.append(("README.zh.md", _strip_code((ROOT / "README.zh.md").read_text(encoding="utf-8"))))
    return out


def find_banned(texts: list, words: list) -> list:
    found = []
    for word, instead in words:
        pattern = _pattern(word)
        for where, text in texts:
            for m in pattern.finditer(text):
                context = text[max(0, m.start() - 15): m.end() + 15].replace("\n", " ")
                found.append(f"{where}: {word!r} (write {instead}): ...{context}...")
    return found


def test_glossary_lists_the_words_it_bans():
    words = dict(banned_words())
    for word in ("生成的 trace", "tiny 模型", "prompt", "touch", "碰", "诚实的分数", "先头后尾"):
        assert word in words, word


def test_the_checker_finds_a_banned_word_in_prose_and_strings_but_not_in_code():
    words = banned_words()
    md = {"cell_type": "markdown", "source": "用一条生成的 trace 回放，每个 prompt 都 touch 一次 `touch(key)`。"}
    code = {"cell_type": "code", "source": 'x = prompt.touch(1)  # tiny 模型\nprint(f"{t.touch} 每块 {s:.1f} us")\n'}
    hits = find_banned([("md", readable_text(md)), ("code", readable_text(code))], words)
    assert [h.split(":")[0] + ":" + h.split("'")[1] for h in hits] == [
        "md:生成的 trace", "code:tiny 模型", "md:prompt", "md:touch", "code:us"], hits
    clean = {"cell_type": "code", "source": 'sim.touch(prompt, 1)  # 访问一次\nprint(f"{steps[0].touch}")\n'}
    assert find_banned([("clean", readable_text(clean))], words) == []


def test_the_chinese_edition_uses_none_of_the_banned_words():
    assert find_banned(zh_texts(), banned_words()) == []


CJK = "\u4e00-\u9fff"


def test_chinese_text_takes_full_width_punctuation():
    # "KV 张量:" and "（逻辑块 -> 池块）:" were printed with an ASCII colon after Chinese text.
    pattern = re.compile(rf"[{CJK}）][:;,?!](?=\s|$|[{CJK}])", re.M)
    bad = [f"{where}: ...{text[max(0, m.start() - 12): m.end() + 8]}..." for where, text in zh_texts()
           for m in pattern.finditer(text)]
    assert bad == []


@pytest.mark.parametrize("name", ["09_kv_tiers_hot_path.ipynb"])
def test_09_prints_the_device_tier_as_device_not_gpu_memory(name):
    # The device tier is the CPU's memory where there is no GPU: what 09's cells print says 设备.
    cells = read_notebook(ROOT / "notebooks" / "zh" / name)["cells"]
    printed = [(c.get("id"), readable_text(c)) for c in cells if c["cell_type"] == "code"]
    assert [where for where, text in printed if "显存" in text] == []
