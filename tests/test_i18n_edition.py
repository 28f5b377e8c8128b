"""The Chinese edition as committed: complete, current, same structure, glossary terms, plots.

- every notebook cell and runtime message has a current (non-fuzzy) Chinese translation, and an
  English cell edited by hand makes that fail until its translation is updated;
- `notebooks/zh` is exactly what `kvsched i18n build` writes now (no hand edits, no stale build);
- each zh notebook has the English one's cells, ids, tags and code (only comments and string
  text differ; the setup cell adds `lab.set_language("zh")`);
- the zh notebooks use `docs/glossary.md`'s term wherever the English cell uses the English one;
- every plot renders under KVSCHED_LANG=zh with warnings as errors (no missing glyphs).
The nbval runs over notebooks/zh are in tests/test_notebooks.py.
"""
from __future__ import annotations

import io
import re
import shutil
import string
import tokenize
from pathlib import Path

import polib
import pytest
from english_prose import english_prose

from kvsched_lab.i18n.catalogue import catalogue_path, extract, untranslated_messages
from kvsched_lab.i18n.code_shape import shape_difference
from kvsched_lab.i18n.notebooks import (
    REPORT_PREFIX, build_notebook, check_notebook, english_notebooks, generated_note, is_setup_cell, po_path_for,
    remove_setup_line, zh_path_for,
)
from kvsched_lab.i18n.po import read_po
from kvsched_lab.notebook_files import cell_source, read_notebook, write_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = english_notebooks(ROOT)
PO_FILES = sorted((ROOT / "i18n" / "zh_CN").glob("*.po")) + [catalogue_path()]


def stale_entries(root: Path) -> list:
    """Every notebook cell of `root` without a current translation ("<notebook> <id>: <why>")."""
    out = []
    for nb in english_notebooks(root):
        out += [f"{nb.name} {s}" for s in check_notebook(nb, po_path_for(root, nb)).stale]
    return out


# --------------------------------------------------------------------------- complete and current


def test_every_notebook_cell_has_a_current_translation():
    assert stale_entries(ROOT) == [], \
        "run `kvsched i18n update`, translate the listed entries, then `kvsched i18n build`"


def test_editing_an_english_cell_makes_its_translation_stale(tmp_path):
    for folder in ("notebooks", "i18n"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("zh"))
    nb_path = tmp_path / "notebooks" / NOTEBOOKS[2].name
    nb = read_notebook(nb_path)
    cell = nb["cells"][0]
    cell["source"] = cell_source(cell) + "\n\nA sentence added by hand."
    write_notebook(nb, nb_path)
    assert stale_entries(tmp_path) == [f"{nb_path.name} {cell['id']}: stale"]
    # `kvsched i18n update` then marks it fuzzy, keeping the old English for the translator.
    from kvsched_lab.i18n.notebooks import update_po

    update_po(nb_path, po_path_for(tmp_path, nb_path))
    entry = {e.msgctxt: e for e in polib.pofile(str(po_path_for(tmp_path, nb_path)))}[cell["id"]]
    assert "fuzzy" in entry.flags and entry.previous_msgid and entry.msgstr
    assert stale_entries(tmp_path) == [f"{nb_path.name} {cell['id']}: fuzzy"]


def test_every_runtime_message_has_chinese_and_every_entry_is_used():
    assert untranslated_messages() == []
    assert extract(), "no _() messages found: the extractor is broken"


def test_translated_messages_keep_their_fields():
    fields = lambda s: sorted(f for _, f, _, _ in string.Formatter().parse(s) if f is not None)  # noqa: E731
    po = polib.pofile(str(catalogue_path()))
    bad = [e.msgid for e in po.translated_entries() if fields(e.msgid) != fields(e.msgstr)]
    assert bad == []


@pytest.mark.parametrize("path", PO_FILES, ids=lambda p: p.name)
def test_runtime_reader_reads_what_polib_reads(path):
    po = polib.pofile(str(path))
    want = {(e.msgctxt, e.msgid): e.msgstr for e in po.translated_entries() if not e.obsolete}
    assert read_po(path) == want


# --------------------------------------------------------------------------- built, same structure


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_zh_notebook_is_what_the_build_writes(path, tmp_path):
    out = tmp_path / path.name
    build_notebook(path, po_path_for(ROOT, path), out)
    committed = zh_path_for(ROOT, path)
    assert committed.exists(), "run `kvsched i18n build`"
    assert committed.read_bytes() == out.read_bytes(), "notebooks/zh is out of date: run `kvsched i18n build`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_zh_notebook_has_the_english_structure(path):
    en, zh = read_notebook(path), read_notebook(zh_path_for(ROOT, path))
    assert {k: v for k, v in zh.items() if k != "cells"} == {k: v for k, v in en.items() if k != "cells"}
    assert len(zh["cells"]) == len(en["cells"])
    setups = 0
    for e, z in zip(en["cells"], zh["cells"]):
        assert {k: v for k, v in z.items() if k != "source"} == {k: v for k, v in e.items() if k != "source"}
        src = cell_source(z)
        if e["cell_type"] != "code":
            continue
        if is_setup_cell(e) and remove_setup_line(src) is not None:
            src, setups = remove_setup_line(src), setups + 1
            assert src.split("\n")[-1].startswith(REPORT_PREFIX), "the language is set before the report line"
        assert shape_difference(cell_source(e), src) == "", e["id"]
    assert setups == 1, "the zh setup cell must hold lab.set_language(\"zh\")"
    assert cell_source(zh["cells"][0]).startswith(generated_note(path.name))


# --------------------------------------------------------------------------- glossary


def glossary() -> list:
    """``[(english, chinese)]`` from docs/glossary.md's table, longest English first."""
    rows = []
    for line in (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8").splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cols) >= 2 and cols[0] not in ("English", "") and not set(cols[0]) <= set("-"):
            rows.append((cols[0], cols[1]))
    return sorted(rows, key=lambda r: -len(r[0]))


def prose(cell: dict) -> str:
    """What a learner reads as prose: markdown without code, or a code cell's comments."""
    src = cell_source(cell)
    if cell["cell_type"] == "markdown":
        src = re.sub(r"```.*?```", " ", src, flags=re.S)
        src = re.sub(r"`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|https?://\S+", " ", src, flags=re.S)
        return src
    tokens = tokenize.generate_tokens(io.StringIO(src).readline)
    return "\n".join(t.string for t in tokens if t.type == tokenize.COMMENT)


def _term(english: str) -> re.Pattern:
    return re.compile(rf"(?<![\w-]){re.escape(english)}(?:s|es|ed|d|ing|ion|ions)?(?![\w-])", re.I)


def test_glossary_has_the_chapters_terms():
    chinese = {zh for _, zh in glossary()}
    chapter = ("KV Cache 调度", "前缀缓存", "缓存条目", "命中复用", "驱逐", "容量驱逐", "保留优先级", "复用次数",
               "最近访问时间", "堆队列", "刷新队列", "懒删除", "过期堆项", "状态导出", "热路径", "显存",
               "解码调度", "降级路径")
    for term in chapter:
        assert term in chinese, term
    english = [en.lower() for en, _ in glossary()]
    assert len(english) == len(set(english)), "one Chinese term per English term"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_zh_notebook_uses_the_glossary_terms(path):
    terms = [(_term(en), en, zh) for en, zh in glossary()]
    missing = []
    for e, z in zip(read_notebook(path)["cells"], read_notebook(zh_path_for(ROOT, path))["cells"]):
        text, zh_text = prose(e), prose(z)
        for pattern, en, zh in terms:  # longest first; a matched term hides the shorter ones inside it
            if pattern.search(text):
                text = pattern.sub(" ", text)
                if zh not in zh_text:
                    missing.append(f"{e['id']}: {en!r} -> {zh!r}")
    assert missing == []


# --------------------------------------------------------------------------- figure text


FIGURE_TEXT_NAMES = {"title", "xlabel", "ylabel", "label", "set_title", "set_xlabel", "set_ylabel", "suptitle"}


def figure_texts(source: str) -> list:
    """The string literals a code cell passes as a figure's title, axis label or legend label."""
    out, last = [], []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            continue
        if tok.type == tokenize.STRING and len(last) == 2 and last[0].type == tokenize.NAME \
                and last[0].string in FIGURE_TEXT_NAMES and last[1].string in ("=", "("):
            body = tok.string.lstrip("rbfRBF").strip("\"'")
            out.append(re.sub(r"\{[^{}]*\}", " ", body))
        last = (last + [tok])[-2:]
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_zh_figures_drawn_by_notebook_code_have_chinese_text(path):
    # The zh setup cell selects a CJK font for every figure (lab.set_language), so a title or label
    # a cell draws is translated like any string; the course's own plots: tests/test_i18n_plots.py.
    zh = read_notebook(zh_path_for(ROOT, path))
    english = [(c["id"], text) for c in zh["cells"] if c["cell_type"] == "code"
               for text in figure_texts(cell_source(c)) if english_prose(text)]
    assert english == []


def test_figure_texts_finds_titles_and_labels_and_the_judge_flags_english_ones():
    src = 'ax.set(xlabel="requests served", title=f"Prefill on {TRACE}")\nax.plot(x, y, label="a preemption")\n'
    texts = figure_texts(src)
    assert texts == ["requests served", "Prefill on  ", "a preemption"]
    assert all(english_prose(t) for t in texts)
    assert not any(english_prose(t) for t in figure_texts('ax.set(title="使用中的块数")\nax.legend(loc="lower left")'))


# --------------------------------------------------------------------------- setup cell, READMEs


def _clone_line(setup: str) -> str:
    lines = [line.strip() for line in setup.splitlines() if line.strip().startswith("clone = ")]
    if len(lines) != 1:
        raise LookupError("the setup cell no longer has one `clone = ...` line: update this test")
    return lines[0]


def test_zh_setup_cell_finds_the_clone_from_notebooks_zh(monkeypatch):
    setup = cell_source(next(c for c in read_notebook(zh_path_for(ROOT, NOTEBOOKS[0]))["cells"] if is_setup_cell(c)))
    monkeypatch.chdir(ROOT / "notebooks" / "zh")
    scope = {"Path": Path}
    exec(_clone_line(setup), scope)
    assert scope["clone"] == ROOT


def test_readmes_link_each_other_and_zh_lists_every_notebook():
    en, zh = (ROOT / "README.md").read_text(encoding="utf-8"), (ROOT / "README.zh.md").read_text(encoding="utf-8")
    assert "(README.zh.md)" in en.splitlines()[2] and "(README.md)" in zh
    for cmd in ("make lab", "make test"):
        assert cmd in zh
    for path in NOTEBOOKS:
        assert f"zh/{path.stem}" in zh, path.stem
    assert zh.index("ModelScope") < zh.index("Colab") < zh.index("kvsched grade")


def test_a_zh_submission_gets_the_same_grade_row_as_the_same_answers_in_english(tmp_path):
    import csv

    from kvsched_lab.grading import grade_main
    from kvsched_lab.course.todos import fill_todos, reference_sources

    refs = reference_sources()
    answer_sets = {"full": refs, "partial": {k: refs[k] for k in ("score", "stale")}}
    for lang, paths in (("en", NOTEBOOKS), ("zh", [zh_path_for(ROOT, p) for p in NOTEBOOKS])):
        for label, answers in answer_sets.items():
            folder = tmp_path / "subs" / f"{label}-{lang}"
            folder.mkdir(parents=True)
            for p in paths:
                write_notebook(fill_todos(read_notebook(p), answers), folder / p.name)
    out = tmp_path / "out"
    assert grade_main([str(tmp_path / "subs"), "--out", str(out), "--jobs", "2"]) == 0
    rows = {Path(r.pop("submission")).name: r for r in csv.DictReader(open(out / "grades.csv"))}
    assert rows["full-zh"] == rows["full-en"] and rows["full-en"]["total"] == "100"
    assert rows["partial-zh"] == rows["partial-en"] and rows["partial-en"]["total"] == "40"


def test_zh_09_tier_walkthrough_names_the_tiers_in_chinese(capsys):
    # The walk-through prints tier names where the prose says 设备 / 主机内存; it printed
    # "device"/"host" (the tuple of names is a string literal the zh edition translates).
    zh = read_notebook(ROOT / "notebooks" / "zh" / "09_kv_tiers_hot_path.ipynb")
    source = next(cell_source(c) for c in zh["cells"] if c.get("id") == "nb09-04")
    exec(compile(source, "nb09-04", "exec"), {})
    out = capsys.readouterr().out
    assert "主机内存" in out and "设备" in out
    assert not re.search(r"\b(device|host|disk)\b", out), out
