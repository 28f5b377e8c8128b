"""The zh edition's machinery: PO update/build, the code-shape rule, the language setting.

These run on small notebooks in temporary folders; tests/test_i18n_edition.py checks the real
notebooks/zh, PO files and catalogue.
"""
from __future__ import annotations

import os

import polib
import pytest

from kvsched_lab.cli.main import main
from kvsched_lab.i18n import LANG_ENV, _, get_language, set_language
from kvsched_lab.i18n.code_shape import shape_difference
from kvsched_lab.i18n.notebooks import SETUP_LINE, build_notebook, update_po
from kvsched_lab.i18n.po import read_po
from kvsched_lab.notebook_files import read_notebook, write_notebook


def _nb(*cells):
    out = []
    for cid, kind, src, *tags in cells:
        cell = {"cell_type": kind, "id": cid, "metadata": {"tags": list(tags)} if tags else {}, "source": src}
        if kind == "code":
            cell.update(outputs=[], execution_count=None)
        out.append(cell)
    return {"cells": out, "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}


SETUP = 'import kvsched_lab.course as lab\nprint("loaded")  # the setup cell\n'


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "notebooks").mkdir()
    write_notebook(_nb(("t-00", "markdown", "# Title\n\nSome prose."),
                       ("t-01", "code", SETUP),
                       ("t-02", "code", "x = 1  # one\nprint(f\"x is {x}\")", "check:score"),
                       ("t-03", "code", "y = x + 1")), tmp_path / "notebooks" / "09_demo.ipynb")
    return tmp_path


def _po(repo):
    return polib.pofile(str(repo / "i18n" / "zh_CN" / "09_demo.po"))


def _translate(repo, texts):
    po = _po(repo)
    for e in po:
        if e.msgctxt in texts:
            e.msgstr = texts[e.msgctxt]
            e.flags = [f for f in e.flags if f != "fuzzy"]
    po.save()


ZH = {"t-00": "# 标题\n\n一段说明。",
      "t-01": 'import kvsched_lab.course as lab\nprint("已加载")  # 准备单元\n',
      "t-02": "x = 1  # 一\nprint(f\"x 是 {x}\")"}


def test_update_then_build_keeps_ids_tags_and_code(repo):
    nb = repo / "notebooks" / "09_demo.ipynb"
    po_path, out = repo / "i18n" / "zh_CN" / "09_demo.po", repo / "notebooks" / "zh" / "09_demo.ipynb"
    counts = update_po(nb, po_path)
    assert counts["new"] == 4 and counts["auto"] == 1  # t-03 has no prose: copied as is
    assert {e.msgctxt: e.msgstr for e in _po(repo)}["t-03"] == "y = x + 1"
    assert build_notebook(nb, po_path, out).stale == ["t-00: missing", "t-01: missing", "t-02: missing"]
    _translate(repo, ZH)
    report = build_notebook(nb, po_path, out)
    assert report.stale == []
    zh, en = read_notebook(out), read_notebook(nb)
    assert [c["id"] for c in zh["cells"]] == [c["id"] for c in en["cells"]]
    assert [c["metadata"] for c in zh["cells"]] == [c["metadata"] for c in en["cells"]]
    first = "".join(zh["cells"][0]["source"])
    assert first.splitlines()[0].startswith("*本文件由 `kvsched i18n build` 生成") and first.endswith(ZH["t-00"])
    assert "".join(zh["cells"][1]["source"]) == ZH["t-01"] + SETUP_LINE
    assert "".join(zh["cells"][2]["source"]) == ZH["t-02"]


def test_a_changed_english_cell_turns_fuzzy_and_is_built_in_english(repo):
    nb, po_path = repo / "notebooks" / "09_demo.ipynb", repo / "i18n" / "zh_CN" / "09_demo.po"
    update_po(nb, po_path)
    _translate(repo, ZH)
    data = read_notebook(nb)
    data["cells"][0]["source"] = "# Title\n\nSome corrected prose."
    del data["cells"][2]
    write_notebook(data, nb)
    counts = update_po(nb, po_path)
    assert counts["fuzzy"] == 1 and counts["obsolete"] == 1 and counts["kept"] == 2
    entry = {e.msgctxt: e for e in _po(repo)}["t-00"]
    assert "fuzzy" in entry.flags and entry.previous_msgid == "# Title\n\nSome prose." and entry.msgstr == ZH["t-00"]
    assert [e.msgctxt for e in _po(repo) if e.obsolete] == ["t-02"]
    report = build_notebook(nb, po_path, repo / "out.ipynb")
    assert report.stale == ["t-00: fuzzy"]
    assert "".join(read_notebook(repo / "out.ipynb")["cells"][0]["source"]).endswith("Some corrected prose.")
    # The CLI says so too: status and build --strict fail, a plain build writes (English fallback).
    assert main(["i18n", "status", "--root", str(repo)]) == 1
    assert main(["i18n", "build", "--strict", "--root", str(repo)]) == 1


def test_identical_text_is_taken_from_the_translation_memory(repo):
    nb, po_path = repo / "notebooks" / "09_demo.ipynb", repo / "i18n" / "zh_CN" / "09_demo.po"
    counts = update_po(nb, po_path, memory={SETUP: ZH["t-01"]})
    assert counts["memory"] == 1 and {e.msgctxt: e.msgstr for e in _po(repo)}["t-01"] == ZH["t-01"]


def test_build_refuses_a_translation_that_changes_code(repo):
    nb, po_path = repo / "notebooks" / "09_demo.ipynb", repo / "i18n" / "zh_CN" / "09_demo.po"
    update_po(nb, po_path)
    _translate(repo, {**ZH, "t-02": "x = 2  # 一\nprint(f\"x 是 {x}\")"})
    with pytest.raises(ValueError, match="t-02.*NUMBER"):
        build_notebook(nb, po_path, repo / "out.ipynb")


@pytest.mark.parametrize("en, zh, same", [
    ('print("hello world")  # say it', 'print("你好，世界")  # 打招呼', True),
    ('print(f"{n} blocks, {rate:.1%}")', 'print(f"{n} 个块，命中率 {rate:.1%}")', True),
    ("# NBVAL_IGNORE_OUTPUT\nx = 1", "# 忽略输出\nx = 1", False),  # an nbval marker is code
    ('print(f"{n} blocks")', 'print(f"{m} 个块")', False),  # an f-string field is code
    ('f(1, "a")', 'f(1, "a", 2)', False),
    ('x = "a"', "x = b'a'", False),
    ("# one comment\nx = 1", "# 一行\n# 两行注释\nx = 1", True),  # comment lines may be added
    ('print(f"{a} of {b}")', 'print(f"{b} 中的 {a}")', True),  # Chinese word order may reorder fields
])
def test_code_shape(en, zh, same):
    assert (shape_difference(en, zh) == "") == same


def test_runtime_reader_agrees_with_polib(tmp_path):
    po = polib.POFile()
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    po.append(polib.POEntry(msgid='a "quoted"\nline\twith tab {x}', msgstr='带"引号"\n的一行\t{x}'))
    po.append(polib.POEntry(msgid="fuzzy one", msgstr="模糊", flags=["fuzzy"]))
    po.append(polib.POEntry(msgid="untranslated", msgstr=""))
    po.append(polib.POEntry(msgid="gone", msgstr="已删除", obsolete=True))
    po.append(polib.POEntry(msgctxt="c1", msgid="x" * 200 + " wrapped", msgstr="长" * 100))
    po.save(str(tmp_path / "t.po"))
    want = {(e.msgctxt, e.msgid): e.msgstr for e in po.translated_entries() if not e.obsolete}
    assert read_po(tmp_path / "t.po") == want


def test_language_is_one_environment_variable(monkeypatch):
    monkeypatch.delenv(LANG_ENV, raising=False)
    assert get_language() == "en"
    set_language("zh_CN")
    assert os.environ[LANG_ENV] == "zh" and get_language() == "zh"
    assert _("✅ {name}: passed ({cases} cases)", name="score", cases=3).startswith("✅ score：")
    with pytest.raises(ValueError, match="unknown language 'fr'"):
        set_language("fr")
    assert get_language() == "zh"  # a rejected call changes nothing
    set_language("en")
    assert _("✅ {name}: passed ({cases} cases)", name="score", cases=3) == "✅ score: passed (3 cases)"
    monkeypatch.setenv(LANG_ENV, "klingon")
    with pytest.raises(ValueError, match="KVSCHED_LANG='klingon'"):
        get_language()


def test_a_rewritten_shared_cell_is_translated_once(repo):
    """The setup cell opens every notebook: after it changes, translating it in one PO is enough."""
    other = read_notebook(repo / "notebooks" / "09_demo.ipynb")
    for cell in other["cells"]:
        cell["id"] = cell["id"].replace("t-", "u-")
    write_notebook(other, repo / "notebooks" / "10_other.ipynb")
    assert main(["i18n", "update", "--root", str(repo)]) == 0
    for name in ("09_demo", "10_other"):
        po = polib.pofile(str(repo / "i18n" / "zh_CN" / f"{name}.po"))
        for e in po:
            e.msgstr = ZH.get(e.msgctxt.replace("u-", "t-"), e.msgstr)
        po.save()
    # The shared setup cell is rewritten in every English notebook.
    new_setup = SETUP.replace('print("loaded")', 'print("kvsched_lab is ready")')
    for name in ("09_demo", "10_other"):
        nb = read_notebook(repo / "notebooks" / f"{name}.ipynb")
        nb["cells"][1]["source"] = new_setup
        write_notebook(nb, repo / "notebooks" / f"{name}.ipynb")
    assert main(["i18n", "update", "--root", str(repo)]) == 0
    assert main(["i18n", "status", "--root", str(repo)]) == 1  # both setup cells are fuzzy now
    po = polib.pofile(str(repo / "i18n" / "zh_CN" / "09_demo.po"))
    entry = {e.msgctxt: e for e in po}["t-01"]
    entry.msgstr = ZH["t-01"].replace('print("已加载")', 'print("kvsched_lab 已就绪")')
    entry.flags.remove("fuzzy")
    po.save()
    assert main(["i18n", "update", "--root", str(repo)]) == 0  # the other notebook takes it from memory
    assert main(["i18n", "status", "--root", str(repo)]) == 0
    assert main(["i18n", "build", "--strict", "--root", str(repo)]) == 0
    built = read_notebook(repo / "notebooks" / "zh" / "10_other.ipynb")
    setup = "".join(built["cells"][1]["source"])
    assert setup.endswith('print("kvsched_lab 已就绪")  # 准备单元\n' + SETUP_LINE)
