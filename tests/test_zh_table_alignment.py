"""The zh notebooks' printed tables line up: no Chinese text is padded by its character count.

Python's ``f"{name:<8}"`` and ``str.ljust`` count characters, but a Chinese character takes two
terminal columns, so a row labelled ``B（再次）`` or ``你的调度器`` pushes every column after it to
the right of the rows labelled in ASCII. A zh code cell pads a value that may hold Chinese with
``lab.row`` or ``lab.pad`` (kvsched_lab/course/table.py), which count columns. This test reads each zh
notebook's code and flags a width spec or ``ljust``/``rjust``/``center`` applied to a name whose
value comes (through assignments anywhere in the notebook) from a Chinese string literal.
A padded field that ends a printed line is left alone: trailing blanks line nothing up.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Set

import pytest

from kvsched_lab.notebook_files import cell_source, read_notebook

ROOT = Path(__file__).resolve().parents[1]
ZH_NOTEBOOKS = sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
WIDTH = re.compile(r"^[<>^]?\d+$")  # a format spec that pads to a width (no precision, no type)


def _names(node: ast.AST) -> Set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _has_cjk_literal(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and CJK.search(n.value)
               for n in ast.walk(node))


def _tainted(node: ast.AST, tainted: Set[str]) -> bool:
    return _has_cjk_literal(node) or bool(_names(node) & tainted)


def chinese_names(trees: List[ast.AST]) -> Set[str]:
    """Names whose value may hold Chinese text, assigned (``x = ...``, ``x[k] = ...``) anywhere in
    the notebook from an expression with a Chinese literal or another such name."""
    sources: Dict[str, List[ast.AST]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                        sources.setdefault(target.value.id, []).extend([target.slice, node.value])  # key or value
                    elif isinstance(target, ast.Name):
                        sources.setdefault(target.id, []).append(node.value)
    tainted: Set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, values in sources.items():
            if name not in tainted and any(_tainted(v, tainted) for v in values):
                tainted.add(name)
                changed = True
    return tainted


def loop_names(tree: ast.AST, tainted: Set[str]) -> Set[str]:
    """The loop variables of one cell that take Chinese text: by position in a literal of tuples
    (``for name, p in (("B（再次）", b), ...)``), else the first target of a loop over such a
    name (``for name, v in rows.items()``: the keys)."""
    out: Set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.For, ast.comprehension)):
            continue
        targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        it = node.iter
        if isinstance(it, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Tuple) for e in it.elts):
            for i, target in enumerate(targets):
                if isinstance(target, ast.Name) and any(
                        i < len(e.elts) and _tainted(e.elts[i], tainted | out) for e in it.elts):
                    out.add(target.id)
        elif isinstance(targets[0], ast.Name) and _tainted(it, tainted | out):
            out.add(targets[0].id)
    return out


def padded_by_characters(source: str, tainted: Set[str]) -> List[str]:
    """The padded fields and ljust/rjust/center calls of `source` whose text may be Chinese."""
    out = []
    tree = ast.parse(source)
    tainted = tainted | loop_names(tree, tainted)
    # f-strings printed as they are, last argument: their final field's padding ends the line
    printed = {id(c.args[-1]) for c in ast.walk(tree) if isinstance(c, ast.Call) and c.args
               and isinstance(c.func, ast.Name) and c.func.id == "print"}
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            for i, part in enumerate(node.values):
                if not isinstance(part, ast.FormattedValue) or part.format_spec is None:
                    continue
                spec = "".join(v.value for v in part.format_spec.values if isinstance(v, ast.Constant))
                last = i == len(node.values) - 1 and id(node) in printed
                if WIDTH.match(spec) and not last and _tainted(part.value, tainted):
                    out.append(f"{{{ast.unparse(part.value)}:{spec}}}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("ljust", "rjust", "center"):
            receiver = node.func.value
            if _tainted(receiver, tainted):
                out.append(f"{ast.unparse(receiver)}.{node.func.attr}(...)")
    return out


def zh_code_cells(path: Path) -> Dict[str, str]:
    nb = read_notebook(path)
    return {c["id"]: cell_source(c) for c in nb["cells"] if c["cell_type"] == "code"}


def test_the_judge_flags_character_padding_of_chinese_and_passes_lab_row():
    cells = {
        "loop": 'for name in ("A", "B（再次）"):\n    print(f"{name:<8} {len(name):>5} 个")\n',
        "indirect": 'ME = "我的调度器"\nrows = {ME: 1, "lru": 2}\nfor n, v in rows.items():\n    print(f"{n:<10}{v:>4}")\n',
        "ljust": 'print("前缀命中率".ljust(24) + "x")\n',
        "row": 'for name in ("A", "B（再次）"):\n    print(f"{lab.row([name, len(name)], [-8, 6])} 个")\n',
        "ascii": 'for name in ("lru", "arc"):\n    print(f"{name:<8}{1:>4}")\n',
        "last": 'for name in ("本章", "LRU"):\n    print(f"  {0.5:.2%}  {name:<25}")\n',
        "joined": 'for name in ("本章", "LRU"):\n    print(f"{name:<24}" + "".join(["1"]))\n',
    }
    tainted = chinese_names([ast.parse(s) for s in cells.values()])
    flagged = {k for k, s in cells.items() if padded_by_characters(s, tainted)}
    assert flagged == {"loop", "indirect", "ljust", "joined"}


@pytest.mark.parametrize("path", ZH_NOTEBOOKS, ids=lambda p: p.name)
def test_zh_tables_pad_chinese_by_display_width(path):
    cells = zh_code_cells(path)
    tainted = chinese_names([ast.parse(s) for s in cells.values()])
    bad = {cid: found for cid, s in cells.items() if (found := padded_by_characters(s, tainted))}
    assert bad == {}, "pad these with lab.row (display columns), not a character count"
