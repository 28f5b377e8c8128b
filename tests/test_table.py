"""`lab.row`: printed table lines that stay aligned when a header is Chinese."""
import pytest

from kvsched_lab.course.table import pad, row, yes_no
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
