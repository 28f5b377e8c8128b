"""Public checks of the practice TODOs (notebooks 08, 09 and 10): not graded, outside the chapter's 100 points.

- ``free_order``: ``free_queue_after(free_queue, request_blocks)``, vLLM's free-block queue after
  a request ends: its blocks join the back, tail block first.
- ``leaf_victim``: ``radix_victim(parent, last_access, locked)``, SGLang's radix-tree victim: the
  unlocked leaf node with the oldest access time, or None when there is none. A node stands for a
  run of blocks; SGLang frees all of them, but the choice of node is all the exercise asks.
- ``tier_choice`` (notebook 09, its cases in practice_tiers.py): ``place_evicted(block)``, where a
  block evicted from the GPU goes: ``"host"``, ``"disk"`` or ``"drop"``.
- ``admission`` (notebook 10, its cases in practice_admission.py): ``admit(info)``, whether an
  arriving request is admitted or refused at once.

``check_practice(name, fn)`` runs the cases, prints one line when all pass and raises
`CheckFailed` when one fails. The untouched stub only prints its "not attempted" line, like the
optional ``aging`` check of notebook 05: a practice TODO left alone never stops Run All. Messages say what is wrong,
never the expected answer. Nothing is saved: these exercises do not feed the grader.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, List, Optional, Set, Tuple

from kvsched_lab.course.checks import CheckFailed
from kvsched_lab.course.practice_base import Wrong as _Wrong
from kvsched_lab.course.practice_base import call_on_copies as _call
from kvsched_lab.course.practice_admission import check_admission
from kvsched_lab.course.practice_tiers import check_tier_choice
from kvsched_lab.i18n import _, join
from kvsched_lab.course.todos import PRACTICE_FUNCTIONS


# --------------------------------------------------------------------------- free_order
# (free queue before, the request's blocks head to tail)
_FREE_CASES: List[Tuple[List[Hashable], List[Hashable]]] = [
    ([], ["a"]),
    ([], ["a", "b", "c"]),
    (["x", "y"], ["a", "b", "c"]),
    ([7, 3], [10, 11, 12, 13]),
    (["x"], []),
]


def _check_free_order(fn: Callable) -> int:
    for before, blocks in _FREE_CASES:
        out = _call(fn, before, blocks)
        if out is None:
            raise _Wrong(_("return the new free queue (a list, front first)"))
        try:
            got = list(out)
        except TypeError:
            raise _Wrong(_("return a list of blocks, front first, not {type_name}", type_name=type(out).__name__)) from None
        if sorted(map(str, got)) != sorted(map(str, before + blocks)):
            raise _Wrong(_("the queue after the request must hold the blocks that were free plus the request's "
                         "blocks, each exactly once"))
        if got[:len(before)] != before:
            raise _Wrong(_("blocks that were already free keep their places at the front: the request's "
                         "blocks join at the back"))
        tail = got[len(before):]
        if len(blocks) > 1 and tail == blocks:
            raise _Wrong(_("the request's blocks are in prompt order; which of them should be evicted first, "
                         "a prompt's first block or its last?"))
        if tail != blocks[::-1]:
            raise _Wrong(_("the request's blocks are at the back but not in the right order"))
    return len(_FREE_CASES)


# --------------------------------------------------------------------------- leaf_victim
# (parent of each node, last access time, locked nodes, the node to name)
_LEAF_CASES: List[Tuple[Dict[Hashable, Optional[Hashable]], Dict[Hashable, int], Set[Hashable], str]] = [
    # one chain a -> b -> c: only its tail is a leaf, although its head is older
    ({"a": None, "b": "a", "c": "b"}, {"a": 1, "b": 2, "c": 3}, set(), "c"),
    # two branches under a; the older leaf goes
    ({"a": None, "b": "a", "c": "a"}, {"a": 5, "b": 3, "c": 4}, set(), "b"),
    # the oldest leaf is locked (a running request reads it): the next one goes
    ({"a": None, "b": "a", "d": None}, {"a": 1, "b": 2, "d": 6}, {"a", "b"}, "d"),
    # first blocks of separate prompts are leaves too
    ({1: None, 2: None, 3: 2}, {1: 9, 2: 1, 3: 4}, set(), 3),
    # everything is locked: nothing can go
    ({"a": None, "b": "a"}, {"a": 1, "b": 2}, {"a", "b"}, "none"),
    # an empty tree
    ({}, {}, set(), "none"),
]


def _check_leaf_victim(fn: Callable) -> int:
    for parent, access, locked, want in _LEAF_CASES:
        got = _call(fn, parent, access, locked)
        if want == "none":
            if got is not None:
                raise _Wrong(_("when every leaf is locked (or the tree is empty), return None: nothing may be evicted"))
            continue
        if got is None:
            raise _Wrong(_("returned None although an unlocked leaf exists"))
        if not isinstance(got, Hashable) or got not in parent:
            raise _Wrong(_("returned {got!r}, which is not a node of the tree", got=got))
        if got in locked:
            raise _Wrong(_("named a locked node: a running request is reading its blocks"))
        if got in parent.values():
            raise _Wrong(_("named a node that still has a child: evicting it would cut the child's prefix"))
        if got != want:
            raise _Wrong(_("named an unlocked leaf, but not the one accessed longest ago"))
    return len(_LEAF_CASES)


_CHECKS: Dict[str, Callable[[Callable], int]] = {"free_order": _check_free_order, "leaf_victim": _check_leaf_victim,
                                                 "tier_choice": check_tier_choice,  # notebook 09
                                                 "admission": check_admission}  # notebook 10


def check_practice(name: str, fn: Any) -> None:
    """Check practice TODO `name` on `fn` (not graded): one line when it passes or is not attempted
    (the stub: the notebook goes on, returning None so the cell shows only the line); `CheckFailed`
    on a wrong answer."""
    if name not in _CHECKS:
        raise ValueError(_("unknown practice TODO {name!r}; they are {todos}", name=name, todos=join(_CHECKS)))
    fn_name = PRACTICE_FUNCTIONS[name]
    if not callable(fn):
        raise CheckFailed(_("❌ {name}: pass the function itself, e.g. check_practice({name!r}, {fn_name})",
                            name=name, fn_name=fn_name))
    try:
        cases = _CHECKS[name](fn)
    except NotImplementedError:
        print(_("⬜ {name}: not attempted (practice, not graded; the notebook goes on without it). To try it, "
                "write {fn_name} in the cell above, run it, then run this cell again", name=name, fn_name=fn_name))
        return
    except _Wrong as e:
        raise CheckFailed(_("❌ {name}: failed: {message}", name=name, message=e)) from None
    except Exception as e:  # the learner's code crashed: say where, briefly
        raise CheckFailed(_("❌ {name}: failed: your function raised {e_type}: {e}",
                              name=name, e_type=type(e).__name__, e=e)) from None
    print(_("✅ {name}: passed ({cases} cases; practice, not graded)", name=name, cases=cases))
