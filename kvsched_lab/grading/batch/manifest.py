"""The end of a run: feedback files, ``grades.csv`` (once, atomically) and ``manifest.json`` beside it.

`write_class` is the one writer for a whole class, a shard and a merge, so a merge of shards gives
the same bytes as one unsharded run. ``manifest.json`` (written last, atomically) says what the
folder holds: the version stamp (stamp.py), the options that change grades, the feedback
language, the shard (or none), the class's learners in row order (all of them, also in a
shard's manifest: merge.py checks the shards against it), the rows this folder holds, and the
SHA-256 of its ``grades.csv``. It records no time or host, so equal runs write equal manifests.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from kvsched_lab.grading.learner.writers import atomic_write
from kvsched_lab.grading.batch.grade import Grade, write_reports
from kvsched_lab.grading.classroom.overrides import Override
from kvsched_lab.grading.batch.shards import Shard
from kvsched_lab.grading.batch.stamp import Stamp, stamp_from

MANIFEST = "manifest.json"
FORMAT = 1


@dataclass
class Manifest:
    stamp: Stamp
    options: Dict[str, Any]  # what changes a grade: timeout, memory_mb, sandboxed
    lang: str  # the feedback files' language
    shard: Optional[Shard]  # (K, N); None for a whole class (an unsharded run or a merge)
    learners: List[str]  # the whole class, in row order (a name given twice appears twice)
    rows: List[str]  # the rows of this folder's grades.csv, in order
    grades_sha256: str = ""

    def as_dict(self) -> Dict[str, Any]:
        return {"kvsched_grades": FORMAT, "stamp": self.stamp.as_dict(), "options": self.options, "lang": self.lang,
                "shard": list(self.shard) if self.shard else None, "learners": self.learners, "rows": self.rows,
                "grades_csv_sha256": self.grades_sha256}


def read_manifest(folder: Path) -> Manifest:
    """`folder`'s manifest; ValueError saying why when it has none or a malformed one."""
    path = folder / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{folder} holds no {MANIFEST}: not a finished `kvsched grade` output "
                         "(a shard still running, or killed: rerun it with --resume)") from None
    except ValueError as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from None
    try:
        if data.get("kvsched_grades") != FORMAT:
            raise ValueError("not a kvsched grades manifest")
        shard = data["shard"]
        learners, rows = data["learners"], data["rows"]
        if not all(isinstance(x, str) for x in learners + rows):
            raise ValueError("learner names must be strings")
        return Manifest(stamp_from(data["stamp"]), dict(data["options"]), str(data["lang"]),
                        (int(shard[0]), int(shard[1])) if shard else None, learners, rows,
                        str(data["grades_csv_sha256"]))
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise ValueError(f"{path} is not a kvsched grades manifest ({e})") from None


def write_class(grades: List[Grade], out: Path, manifest: Manifest, overrides: Sequence[Override] = ()) -> str:
    """Feedback (in ``manifest.lang``, each stamped), ``grades.csv``, then ``manifest.json``; the CSV's SHA-256.

    `overrides` (overrides.py) are applied to the rows and shown in the feedback."""
    digest = write_reports(grades, out, manifest.lang, manifest.stamp, overrides)
    manifest.rows = [g.submission for g in grades]
    manifest.grades_sha256 = digest
    atomic_write(out / MANIFEST, (json.dumps(manifest.as_dict(), indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
    return digest
