"""`lab.table`: notebook tables shown as real tables; `lab.row`/`lab.pad`: plain-text lines that stay aligned when a header is Chinese."""
import json
import re
from pathlib import Path

import pytest

from kvsched_lab.course.table import Table, pad, row, table, yes_no
from kvsched_lab.i18n.width import display_width


def test_a_chinese_header_takes_the_columns_of_its_display_width():
    assert display_width("策略") == 4 and display_width("lru") == 3 and display_width("命中率 %") == 8
    en = [row(["policy", "hits"], [-8, 6]), row(["lru", "12.5%"], [-8, 6])]
    zh = [row(["策略", "命中率"], [-8, 8]), row(["lru", "12.5%"], [-8, 8])]
    assert [display_width(line) for line in en] == [14, 14]
    assert [display_width(line) for line in zh] == [16, 16]  # the right edges line up
    assert zh[0] == "策略      命中率"


def test_a_cell_wider_than_its_column_is_kept_whole_and_spacer_cells_work():
    assert row(["a very long name", "1"], [-4, 3]) == "a very long name  1"
    assert row(["p", "", "status"], [3, 2, 0]) == "  p  status"


def test_cells_and_widths_must_match():
    with pytest.raises(ValueError, match="2 cells but 3 widths"):
        row(["a", "b"], [1, 2, 3])


def test_pad_keeps_its_trailing_spaces_so_a_chinese_row_label_lines_up_mid_line():
    labels = ["A", "B（再次）", "recompute"]
    lines = [f"{pad(name, -10)}{12:>4} ms" for name in labels]
    assert {display_width(line[: line.index("ms")]) for line in lines} == {15}
    assert [f"{name:<10}{12:>4} ms".index("12") for name in labels] == [12, 12, 12]  # characters, not columns
    assert pad("策略", 6) == "  策略" and pad("a very long", -3) == "a very long"


def test_a_printed_flag_reads_yes_or_no_in_the_readers_language(monkeypatch):
    """Before: cells printed `{flag}` or `{flag!s:>5}`, and the zh edition showed True / False (6 places in 08, 09)."""
    import json
    from pathlib import Path

    from kvsched_lab.i18n import LANG_ENV

    monkeypatch.setenv(LANG_ENV, "en")
    assert (yes_no(True), yes_no(False), yes_no(0), yes_no([1])) == ("yes", "no", "no", "yes")
    monkeypatch.setenv(LANG_ENV, "zh")
    assert (yes_no(True), yes_no(False)) == ("是", "否")
    assert pad(yes_no(True), 4) == "  是"  # one wide character: two columns
    root = Path(__file__).resolve().parents[1]
    for name in ("08_pinning_free_queue_radix_preemption", "09_kv_tiers_hot_path"):
        for path in (root / "notebooks" / f"{name}.ipynb", root / "notebooks" / "zh" / f"{name}.ipynb"):
            for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
                src = "".join(cell["source"])
                if cell["cell_type"] == "code":  # a bool field in an f-string prints True / False in any language
                    for flag in ("match']}", "!s:", "identical']}", "exact']}", "'pinned' if"):
                        assert flag not in src, (path.name, flag)


ROOT = Path(__file__).resolve().parents[1]


def test_a_table_renders_as_html_with_numbers_right_and_text_left(monkeypatch):
    from kvsched_lab.i18n import LANG_ENV

    monkeypatch.setenv(LANG_ENV, "zh")
    t = table([["lru", "12.5%", 1234, True], ["你的调度器", "-3.0%", 5, False], ["arc", "", 7, True]],
              headers=["策略", "命中率", "块", "一致"], note="块：8,000 个中的")
    assert t.numeric == (False, True, True, False)  # an empty cell does not make a column text
    assert t.rows[0] == ("lru", "12.5%", "1,234", "是") and t.rows[1][3] == "否"
    html = t._repr_html_()
    assert '<th style="text-align:left">策略</th><th style="text-align:right">命中率</th>' in html
    assert '<td style="text-align:right">1,234</td>' in html and "<small>块：8,000 个中的</small>" in html
    lines = t.to_text().splitlines()
    assert lines[-1] == "块：8,000 个中的" and repr(t) == str(t) == t.to_text()
    # the plain text (nbval, a terminal) lines up by display width: the numbers' right edges agree
    ends = {display_width(line[: line.index(num) + len(num)]) for line, num in zip(lines[1:3], ("12.5%", "-3.0%"))}
    assert len(ends) == 1


def test_a_cell_is_shown_as_text_never_as_html():
    """A learner's policy name is data: `<b>` or `&` in a cell stays visible text."""
    html = table([["<b>mine</b> & co", "1"]], headers=["policy", "n"])._repr_html_()
    assert "&lt;b&gt;mine&lt;/b&gt; &amp; co" in html and "<b>" not in html


def test_a_row_of_the_wrong_length_names_itself():
    with pytest.raises(ValueError, match="row 2 has 1 cells but there are 2 headers"):
        table([["a", "1"], ["b"]], headers=["x", "y"])
    assert table([], headers=["x", "y"]).numeric == (False, False)


def test_no_notebook_prints_a_table_padded_with_spaces():
    """Before: 25 cells of notebooks 01-10 printed their tables with lab.row / lab.pad or f-string
    widths, and in a browser the Chinese columns drifted (up to 8 columns in zh/08). Each now
    shows `display(lab.table(...))`, in both editions."""
    step_log = {"nb04-08"}  # the chapter's step-by-step log, not a table: ASCII event names only
    padded = re.compile(r"lab\.(row|pad)\(|\{[^{}]*:[<>^]\d+[^{}]*\}")
    found = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "notebooks" / "zh").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            src = "".join(cell["source"])
            if cell["cell_type"] == "code" and cell.get("id") not in step_log and (lines := [l for l in src.splitlines() if padded.search(l)]):
                found.append((path.relative_to(ROOT).as_posix(), cell.get("id"), lines[0].strip()[:70]))
    assert found == [], found
    assert any("display(lab.table(" in p.read_text(encoding="utf-8") for p in (ROOT / "notebooks" / "zh").glob("*.ipynb"))
