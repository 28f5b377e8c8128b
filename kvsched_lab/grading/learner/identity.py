"""One learner, one name: the identity a row keeps from intake to journal, shards, merge and export.

A learner's name is its path relative to the **common root** of the command line's arguments,
each part shown escaped (writers.display_name: a tab as ``\\t``, a zero-width space as
``\\u200b``, a byte that is not UTF-8 as ``\\xe9``). One class folder is its own root, so its rows
stay ``alice``, ``bob.py``; ``kvsched grade sec1 sec2`` names them ``sec1/alice.py`` and
``sec2/alice.py``. The name depends only on where the files lie under that root, never on how
the arguments were spelled (relative, absolute, ``./``), so every shard of one class names its
learners alike.

The escaped name is injective, but two names can still *look* the same once written (``=a.py``
becomes the spreadsheet text ``'=a.py``, the name of a learner called ``'=a.py``; full-width and
composed forms fold to one under NFKC) or be the same path given twice. `refuse_lookalikes`
refuses such a class before any work, naming both learners: a grade never lands on the wrong row.
"""
from __future__ import annotations

import os
import unicodedata
from pathlib import PurePosixPath
from typing import Dict, Iterable, List, Sequence

from kvsched_lab.grading.learner.writers import bounded, csv_cell, display_name


def common_root(args: Sequence[str], is_dir: Sequence[bool]) -> str:
    """The folder the learners of `args` are named from: a folder argument counts as itself, a file
    argument as the folder holding it; "" for no arguments."""
    bases = [os.path.abspath(a) if d else os.path.dirname(os.path.abspath(a)) for a, d in zip(args, is_dir)]
    return os.path.commonpath(bases) if bases else ""


def learner_name(root: str, path: str) -> str:
    """`path`'s name relative to `root` (see the module docstring): POSIX separators, each part escaped."""
    rel = os.path.relpath(os.path.abspath(path), root) if root else os.path.basename(path)
    return str(PurePosixPath(*(display_name(part) for part in rel.split(os.sep) if part))) or display_name(path)


def shown_as(name: str) -> str:
    """What `name` looks like wherever it is written (grades.csv, an export, a feedback heading)."""
    return unicodedata.normalize("NFKC", csv_cell(name))


def lookalikes(names: Iterable[str]) -> List[List[str]]:
    """Groups (two or more) of `names` that would show the same, in first-seen order."""
    groups: Dict[str, List[str]] = {}
    for name in names:
        groups.setdefault(shown_as(name), []).append(name)
    return [group for group in groups.values() if len(group) > 1]


def refuse_lookalikes(names: Sequence[str], paths: Sequence[str] = ()) -> None:
    """ValueError naming every pair of learners that would show the same (or one given twice).

    `paths`, when given, are the learners' paths in the order of `names` (named in the message)."""
    where = dict(zip(names, paths)) if paths else {}
    problems = []
    for group in lookalikes(names):
        if len(set(group)) == 1:
            problems.append(f"{bounded(group[0])} is given {len(group)} times (the same learner twice: give each "
                            "folder or file once)")
        else:
            shown = "; ".join(bounded(n) + (f" ({bounded(where[n])})" if n in where else "") for n in group)
            problems.append(f"{shown} would show as the same name {bounded(shown_as(group[0]))!r}: rename one "
                            "of them (nothing was graded)")
    if problems:
        raise ValueError("learners that cannot be told apart: " + " | ".join(problems))
