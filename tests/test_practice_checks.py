"""Notebook 08's practice checks (kvsched_lab/course/practice.py): wrong answers fail, right-but-different pass."""
from __future__ import annotations

import heapq
from collections import deque

import pytest

from kvsched_lab.course.checks import CheckFailed, NotAttempted
from kvsched_lab.course.practice import PRACTICE_FUNCTIONS, check_practice
from kvsched_lab.i18n import LANG_ENV
from kvsched_lab.course.todos import load_practice, practice_reference_sources
from i18n_helpers import assert_same_message_in_chinese


@pytest.fixture(params=["en", "zh"])
def lang(request, monkeypatch):
    """Run the test in English and in Chinese (the learner's KVSCHED_LANG)."""
    monkeypatch.setenv(LANG_ENV, request.param)
    return request.param


def failure(name, fn):
    """The `CheckFailed` that `check_practice(name, fn)` raises (the test fails if it passes)."""
    with pytest.raises(CheckFailed) as info:
        check_practice(name, fn)
    return info.value


def stub(*args):
    raise NotImplementedError("TODO")


# -- free_order -------------------------------------------------------------------------------------
def free_slice(free_queue, request_blocks):
    return list(free_queue) + list(request_blocks)[::-1]


def free_deque(free_queue, request_blocks):
    q = deque(free_queue)
    for block in reversed(request_blocks):
        q.append(block)
    return q  # any iterable, front first


def free_insert(free_queue, request_blocks):
    out = list(free_queue)
    at = len(out)
    for block in request_blocks:
        out.insert(at, block)  # each deeper block goes in front of its parent
    return out


FREE_WRONG = {
    "head first": (lambda q, b: list(q) + list(b), "prompt order"),
    "to the front": (lambda q, b: list(b)[::-1] + list(q), "keep their places"),
    "forgets the queue": (lambda q, b: list(b)[::-1], "each exactly once"),
    "in place": (lambda q, b: q.extend(reversed(b)), "changed its inputs"),
    "returns nothing": (lambda q, b: None, "return the new free queue"),
    "mutates": (lambda q, b: (q.extend(reversed(b)), q)[1], "changed its inputs"),
    "a number": (lambda q, b: len(q), "return a list"),
    "shuffled": (lambda q, b: list(q) + sorted(b, key=str, reverse=True)[1:] + sorted(b, key=str, reverse=True)[:1],
                 "not in the right order"),
}


# -- leaf_victim ------------------------------------------------------------------------------------
def leaf_heap(parent, last_access, locked):
    children = {}
    for block, p in parent.items():
        children[p] = children.get(p, 0) + 1
    heap = [(last_access[b], i, b) for i, b in enumerate(parent) if not children.get(b) and b not in locked]
    heapq.heapify(heap)
    return heap[0][2] if heap else None


def leaf_sorted(parent, last_access, locked):
    for block in sorted(parent, key=lambda b: last_access[b]):
        if block not in locked and all(p != block for p in parent.values()):
            return block
    return None


def oldest_node(parent, last_access, locked):
    free = [b for b in parent if b not in locked]
    return min(free, key=last_access.get) if free else None


def ignores_locks(parent, last_access, locked):
    leaves = [b for b in parent if b not in set(parent.values())]
    return min(leaves, key=last_access.get) if leaves else None


def newest_leaf(parent, last_access, locked):
    leaves = [b for b in parent if b not in set(parent.values()) and b not in locked]
    return max(leaves, key=last_access.get) if leaves else None


def never_none(parent, last_access, locked):
    return leaf_sorted(parent, last_access, locked) or next(iter(parent), "a")


def raises_when_empty(parent, last_access, locked):
    leaves = [b for b in parent if b not in set(parent.values()) and b not in locked]
    return min(leaves, key=last_access.get)  # ValueError on an empty list


def returns_a_list(parent, last_access, locked):
    return [leaf_sorted(parent, last_access, locked)]


LEAF_WRONG = {
    "oldest node": (oldest_node, "still has a child"),
    "ignores locks": (ignores_locks, "locked"),
    "newest leaf": (newest_leaf, "longest ago"),
    "never None": (never_none, "return None"),
    "raises": (raises_when_empty, "raised ValueError"),
    "a list": (returns_a_list, "not a node of the tree"),
}


@pytest.mark.parametrize("name, fn", [("free_order", free_slice), ("free_order", free_deque),
                                      ("free_order", free_insert), ("leaf_victim", leaf_heap),
                                      ("leaf_victim", leaf_sorted)])
def test_right_but_different_answers_pass(name, fn, lang, capsys):
    check_practice(name, fn)
    assert ("passed" if lang == "en" else "通过") in capsys.readouterr().out


@pytest.mark.parametrize("name, fn, message", [("free_order", *v) for v in FREE_WRONG.values()]
                         + [("leaf_victim", *v) for v in LEAF_WRONG.values()],
                         ids=[*FREE_WRONG, *LEAF_WRONG])
def test_wrong_answers_fail_with_a_message_that_names_the_problem(name, fn, message, lang, monkeypatch):
    error = failure(name, fn)
    assert not isinstance(error, NotAttempted)
    if lang == "en":
        assert message in str(error) and str(error).startswith(f"❌ {name}: failed: ")
    else:  # the same message, from the same templates, in Chinese
        monkeypatch.setenv(LANG_ENV, "en")
        english = str(failure(name, fn))
        assert message in english and english != str(error)
        assert str(error).startswith(f"❌ {name}：未通过：")
        assert_same_message_in_chinese(english, str(error))


@pytest.mark.parametrize("name", sorted(PRACTICE_FUNCTIONS))
def test_the_stub_is_not_attempted_and_the_reference_passes(name, lang, capsys):
    en = lang == "en"
    # Left alone, a practice check says so and returns, like 05's optional aging: Run All goes on.
    assert check_practice(name, stub) is None  # the cell shows the line only, no Out[] value
    line = capsys.readouterr().out
    assert line.startswith(f"⬜ {name}") and ("not attempted" if en else "尚未作答") in line
    assert ("goes on without it" if en else "不影响后面") in line
    check_practice(name, load_practice(name, practice_reference_sources()[name]))
    assert ("passed" if en else "通过") in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="pass the function itself" if en else "请传入函数本身"):
        check_practice(name, 3)
    with pytest.raises(ValueError, match="unknown practice" if en else "没有名为 'nope' 的练习"):
        check_practice("nope", stub)


# -- tier_choice (notebook 09) --------------------------------------------------------------------
def tier_by_saving(block):
    """Right, written differently: the tier that saves the most time, reserved by reuse."""
    options = {"drop": 0.0}
    if block.hits >= 2:
        options["host"] = block.recompute_s - block.load_s[1]
    elif block.num_tiers > 2:
        options["disk"] = block.recompute_s - block.load_s[-1]
    return max(options, key=options.get)


def tier_nested(block):
    reused = block.hits > 1
    if reused and block.recompute_s > block.load_s[1]:
        return "host"
    has_disk = len(block.load_s) == 3
    return "disk" if has_disk and block.recompute_s > block.load_s[2] else "drop"


TIER_WRONG = {
    "always host": (lambda b: "host", "used by one request on the host"),
    "always drop": (lambda b: "drop", "did not go to the host"),
    "ignores costs": (lambda b: "host" if b.hits >= 2 else ("disk" if b.num_tiers == 3 else "drop"),
                      "more slowly than it is recomputed"),
    "ignores the tiers": (lambda b: "host" if b.hits >= 2 and b.load_s[1] < b.recompute_s else "disk",
                          "without a disk tier"),
    "reuse is > 2": (lambda b: "host" if b.hits > 2 and b.load_s[1] < b.recompute_s else
                     ("disk" if b.num_tiers == 3 and b.load_s[2] < b.recompute_s else "drop"), "used by 2 requests"),
    "never the disk": (lambda b: "host" if b.hits >= 2 and b.load_s[1] < b.recompute_s else "drop",
                       "the disk gives back faster"),
    "a tier number": (lambda b: 1, "return 'host', 'disk' or 'drop'"),
    "returns nothing": (lambda b: None, "not None"),
}


@pytest.mark.parametrize("fn", [tier_by_saving, tier_nested])
def test_tier_choice_right_but_different_answers_pass(fn, lang, capsys):
    check_practice("tier_choice", fn)
    assert ("passed" if lang == "en" else "通过") in capsys.readouterr().out


@pytest.mark.parametrize("fn, message", TIER_WRONG.values(), ids=list(TIER_WRONG))
def test_tier_choice_wrong_answers_fail_with_a_message_that_names_the_problem(fn, message, lang, monkeypatch):
    test_wrong_answers_fail_with_a_message_that_names_the_problem("tier_choice", fn, message, lang, monkeypatch)


def _assert_hints_quote_the_check(name: str, check_file: str) -> None:
    """Tier 3 of `name`'s hints quotes at least three of its check's messages (as written in
    `check_file`), and every tier is in the runtime catalogue."""
    import re
    from pathlib import Path

    from kvsched_lab.course.hints import PRACTICE_HINTS
    from kvsched_lab.i18n.catalogue import extract

    source = (Path(__file__).resolve().parents[1] / "kvsched_lab" / "course" / check_file).read_text()
    source = re.sub(r"[\"']\s*\n\s*f?[\"']", "", source)  # adjacent literals joined, as Python does
    tiers = PRACTICE_HINTS[name]
    quotes = re.findall(r"“([^”]+)”", tiers[2])
    assert len(quotes) >= 3 and all(q in source for q in quotes)
    assert all(k in extract() for k in tiers)


def test_tier_choice_hints_quote_the_check_and_speak_both_languages(tmp_path, monkeypatch, capsys):
    import kvsched_lab.course as lab

    _assert_hints_quote_the_check("tier_choice", "practice_tiers.py")
    monkeypatch.setenv(lab.ANSWERS_ENV, str(tmp_path / "answers"))
    for tier in (1, 2, 3, 4):
        lab.hint("tier_choice")
        assert f"hint {tier}/4" in capsys.readouterr().out
    lab.reveal("tier_choice")
    assert "def place_evicted(block)" in capsys.readouterr().out
    monkeypatch.setenv(LANG_ENV, "zh")
    lab.hint("tier_choice", 3)
    out = capsys.readouterr().out
    assert "提示 3/4" in out and "“" in out


# -- admission (notebook 10) ----------------------------------------------------------------------
def admit_by_slack(info):
    """Right, written differently: the room left and the time left, each must not go negative."""
    room_left = info.free_blocks - info.blocks
    slack_s = info.deadline_s - (info.wait_s + info.prefill_s)
    return room_left >= 0 and slack_s >= 0


def admit_nested(info):
    if info.blocks <= info.free_blocks:
        if not info.wait_s + info.prefill_s > info.deadline_s:
            return True
    return False


ADMISSION_WRONG = {
    "admit all": (lambda i: True, "do not fit in the free blocks"),
    "refuse all": (lambda i: False, "fits and is predicted to meet"),
    "ignores the wait": (lambda i: i.blocks <= i.free_blocks and i.prefill_s <= i.deadline_s, "the wait counts too"),
    "ignores the room": (lambda i: i.wait_s + i.prefill_s <= i.deadline_s, "do not fit in the free blocks"),
    "strict room": (lambda i: i.blocks < i.free_blocks and i.wait_s + i.prefill_s <= i.deadline_s, "fit exactly"),
    "strict deadline": (lambda i: i.blocks <= i.free_blocks and i.wait_s + i.prefill_s < i.deadline_s,
                        "exactly at its deadline"),
    "a string": (lambda i: "admit", "return True (admit) or False"),
    "a number": (lambda i: 1, "return True (admit) or False"),
}


@pytest.mark.parametrize("fn", [admit_by_slack, admit_nested])
def test_admission_right_but_different_answers_pass(fn, lang, capsys):
    check_practice("admission", fn)
    assert ("passed" if lang == "en" else "通过") in capsys.readouterr().out


@pytest.mark.parametrize("fn, message", ADMISSION_WRONG.values(), ids=list(ADMISSION_WRONG))
def test_admission_wrong_answers_fail_with_a_message_that_names_the_problem(fn, message, lang, monkeypatch):
    test_wrong_answers_fail_with_a_message_that_names_the_problem("admission", fn, message, lang, monkeypatch)


def test_admission_hints_quote_the_check(tmp_path, monkeypatch, capsys):
    import kvsched_lab.course as lab

    _assert_hints_quote_the_check("admission", "practice_admission.py")
    monkeypatch.setenv(lab.ANSWERS_ENV, str(tmp_path / "answers"))
    lab.reveal("admission")
    assert "def admit(info)" in capsys.readouterr().out
