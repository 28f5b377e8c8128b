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
    with pytest.raises(NotAttempted, match="not attempted" if en else "尚未作答"):
        check_practice(name, stub)
    check_practice(name, load_practice(name, practice_reference_sources()[name]))
    assert ("passed" if en else "通过") in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="pass the function itself" if en else "请传入函数本身"):
        check_practice(name, 3)
    with pytest.raises(ValueError, match="unknown practice" if en else "没有名为 'nope' 的练习"):
        check_practice("nope", stub)
