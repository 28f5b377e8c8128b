"""``kvsched grade merge OUT_0 ... OUT_N-1 --out OUT``: one class's shards put back together.

Each shard folder (``kvsched grade CLASS --shard K/N --out OUT_K``) holds a manifest (the class's
learners, its rows, the version stamp, the options) and the journal with every row's grade.
`merge_shards` refuses, naming the folders, shards that do not share the stamp, the options,
the feedback language or the class; a shard missing or given twice; a learner missing from its
shard or held by the wrong one. Then the rows are put in the class's order and `write_class`
writes feedback, ``grades.csv`` and the manifest with the writer an unsharded run uses, so the
bytes are the same as one run over the whole class; the merged journal makes OUT usable as an
unsharded run's output (``--resume``).

An overrides file (``--overrides``, overrides.py) is applied at merge time: it is read and its
names checked against the class before anything is written, then `write_class` applies it to
the merged rows (`apply_overrides`) and shows it in the feedback.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from kvsched_lab.grading.learner.identity import refuse_lookalikes
from kvsched_lab.grading.learner.writers import csv_cell
from kvsched_lab.grading.batch.grade import Grade
from kvsched_lab.grading.batch.journal import JOURNAL, Entry, Header, read_journal, write_journal
from kvsched_lab.grading.batch.journal_key import journal_key, state_dir
from kvsched_lab.grading.batch.manifest import Manifest, read_manifest, write_class
from kvsched_lab.grading.classroom.overrides import Override, read_overrides, resolve
from kvsched_lab.grading.batch.shards import split
from kvsched_lab.i18n.language import LANGUAGES


def _few(names: List[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _check_alike(folders: List[Path], manifests: List[Manifest]) -> int:
    """N, after checking that every manifest is a shard of the same run; ValueError otherwise."""
    first, where = manifests[0], folders[0]
    for folder, m in zip(folders, manifests):
        if m.shard is None:
            raise ValueError(f"{folder} is not a shard (it graded a whole class): merge only --shard outputs")
        why = first.stamp.differences(m.stamp)
        if why:
            raise ValueError(f"{folder} and {where} were graded by different graders or cases ({why}): "
                             "regrade one of them with the same checkout")
        if m.options != first.options:
            raise ValueError(f"{folder} and {where} were graded with different options "
                             f"({m.options} vs {first.options})")
        if m.learners != first.learners:
            only = [x for x in m.learners if x not in set(first.learners)]
            other = [x for x in first.learners if x not in set(m.learners)]
            detail = "; ".join(x for x in (only and f"only {folder} lists {_few(only)}",
                                           other and f"only {where} lists {_few(other)}") if x) or "another order"
            raise ValueError(f"{folder} and {where} graded different classes ({detail}): every shard must be "
                             "given the same CLASS arguments")
        if m.shard[1] != first.shard[1]:
            raise ValueError(f"{folder} is shard {m.shard[0]}/{m.shard[1]} but {where} is of "
                             f"{first.shard[1]} shards")
    return first.shard[1]


def merge_shards(folders: List[Path], lang: Optional[str] = None) -> Tuple[List[Grade], Manifest, Dict[str, Entry]]:
    """The class's rows in order, the merged manifest and the journal entries; ValueError naming any problem."""
    if not folders:
        raise ValueError("give the shard folders to merge")
    manifests = [read_manifest(f) for f in folders]
    n = _check_alike(folders, manifests)
    by_k: Dict[int, Path] = {}
    for folder, m in zip(folders, manifests):
        if m.shard[0] in by_k:
            raise ValueError(f"shard {m.shard[0]}/{n} is given twice: {by_k[m.shard[0]]} and {folder}")
        by_k[m.shard[0]] = folder
    missing = [str(k) for k in range(n) if k not in by_k]
    if missing:
        raise ValueError(f"shard(s) {', '.join(missing)} of {n} missing: merge needs every shard's folder")
    langs = sorted({m.lang for m in manifests})
    if lang is None and len(langs) > 1:
        raise ValueError(f"the shards' feedback is in {' and '.join(langs)}: choose one with --lang")
    learners = manifests[0].learners
    refuse_lookalikes(learners)  # one name, one learner: else a row's grade could land on another
    expected = split(learners, n)
    key = journal_key()
    entries: Dict[str, Entry] = {}
    for folder, m in zip(folders, manifests):
        k = m.shard[0]
        rows = set(m.rows)
        extra, absent = sorted(rows - expected[k]), sorted(expected[k] - rows)
        if extra:
            raise ValueError(f"{folder} (shard {k}/{n}) holds {_few(extra)}, which belong to another shard: "
                             "graded twice")
        if absent:
            raise ValueError(f"{folder} (shard {k}/{n}) lacks {_few(absent)}: rerun that shard with --resume")
        read = read_journal(folder / JOURNAL, key)
        header, journal = read.header, read.entries
        if header.stamp != m.stamp or header.shard != m.shard or header.options != m.options:
            raise ValueError(f"{folder / JOURNAL} is not the journal of that folder's grades (regrade the shard)")
        untrusted = sorted(x for x in rows if x in read.rejected)
        if untrusted:
            raise ValueError(f"{folder / JOURNAL}: the entries of {_few(untrusted)} do not check "
                             f"({read.rejected[untrusted[0]]}): rerun that shard with --resume, which grades them "
                             f"again (a merge needs the journal key the shards were graded with, {state_dir()})")
        lost = sorted(x for x in rows if x not in journal)
        if lost:
            raise ValueError(f"{folder / JOURNAL} has no grade for {_few(lost)}: rerun that shard with --resume")
        entries.update((x, journal[x]) for x in sorted(rows))
    first = manifests[0]
    rows_in_order = [entries[x].grade for x in learners]
    merged = Manifest(first.stamp, first.options, lang or langs[0], None, list(learners), [])
    return rows_in_order, merged, {x: entries[x] for x in dict.fromkeys(learners)}


def merge(folders: List[Path], out: Path, lang: Optional[str] = None, overrides: Sequence[Override] = ()) -> str:
    """Merge the shards in `folders` into `out` (see the module docstring); the merged grades.csv's SHA-256."""
    if any(out.resolve() == f.resolve() for f in folders):
        raise ValueError(f"--out {out} is one of the shards: merge into a folder of its own")
    rows, manifest, entries = merge_shards(folders, lang)
    resolve(overrides, [csv_cell(g.submission) for g in rows])  # a name no row has: refused before any write
    write_journal(out, Header(manifest.stamp, manifest.options, None), entries)
    return write_class(rows, out, manifest, overrides)


def merge_main(argv: List[str]) -> int:
    """``kvsched grade merge OUT_0 ... OUT_N-1 --out OUT [--lang zh]``; 0 when merged, 2 when refused."""
    p = argparse.ArgumentParser(prog="kvsched grade merge", description=(
        "Put the shards of one class (kvsched grade CLASS --shard K/N --out OUT_K) back together: the "
        "same grades.csv and feedback as one unsharded run. See docs/grading.md."))
    p.add_argument("shards", nargs="+", metavar="OUT_K", help="every shard's --out folder")
    p.add_argument("--out", required=True, help="where the merged grades.csv, feedback/ and manifest.json go")
    p.add_argument("--lang", default=None, choices=LANGUAGES,
                   help="language of the feedback files (default: the shards')")
    p.add_argument("--overrides", metavar="CSV", help="corrections (submission,todo,points,reason) applied to "
                                                      "the merged rows and shown in the feedback")
    args = p.parse_args(argv)
    try:
        overrides = read_overrides(Path(args.overrides)) if args.overrides else []
        digest = merge([Path(s) for s in args.shards], Path(args.out), args.lang, overrides)
    except ValueError as e:
        print(f"kvsched grade merge: {e}", file=sys.stderr)
        return 2
    print(f"merged {len(args.shards)} shard(s) -> {Path(args.out) / 'grades.csv'}\ngrades.csv sha256 {digest}")
    return 0
