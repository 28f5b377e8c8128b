"""The version stamp of a grading run: which grader, which hidden cases, in every output.

A stamp names the grader's release (the ``kvsched-lab`` package version), the SHA-256 of the
grader's code with the reference (``solutions/*.py`` and ``kvsched_lab/grading/*.py``), and the
SHA-256 of the hidden cases as graded (their canonical JSON). It goes into ``manifest.json``
beside ``grades.csv``, into each feedback file's last line and into the journal's header, so a
resumed run, a shard and a merge can refuse to mix grades from two graders.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Dict

import kvsched_lab
from kvsched_lab.i18n.messages import Deferred as _  # the feedback's stamp line: rendered in --lang's language

PACKAGE = Path(kvsched_lab.__file__).resolve().parent
REPO = PACKAGE.parent


@dataclass(frozen=True)
class Stamp:
    grader_version: str  # the kvsched-lab release that graded
    grader_sha256: str  # the grader's code and the reference, hashed (`grader_fingerprint`)
    cases_sha256: str  # the hidden cases' canonical JSON, hashed (`cases_digest`)

    def as_dict(self) -> Dict[str, str]:
        return asdict(self)

    def feedback_line(self) -> str:
        """The line that ends every feedback file (a `Deferred`: rendered in the feedback's language)."""
        return _("Graded by kvsched-lab {version} (grader {grader}), hidden cases sha256 {cases}.",
                 version=self.grader_version, grader=self.grader_sha256[:12], cases=self.cases_sha256)

    def differences(self, other: "Stamp") -> str:
        """"" when equal, else which fields differ, for an error message."""
        return "; ".join(f"{k} {a} vs {b}" for (k, a), b in zip(self.as_dict().items(), other.as_dict().values())
                         if a != b)


def grader_fingerprint() -> str:
    """SHA-256 of the reference and the grader's code (also used to notice a submission that rewrote them)."""
    h = hashlib.sha256()
    for path in sorted((REPO / "solutions").glob("*.py")) + sorted((PACKAGE / "grading").rglob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())  # every room of grading/, not only its top
    return h.hexdigest()


def cases_digest(cases: list) -> str:
    """SHA-256 of `cases` as canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(cases, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def grader_version() -> str:
    try:
        return metadata.version("kvsched-lab")
    except metadata.PackageNotFoundError:  # a checkout used without installing it
        return "unknown"


def current_stamp(cases: list) -> Stamp:
    return Stamp(grader_version(), grader_fingerprint(), cases_digest(cases))


def stamp_from(data: object) -> Stamp:
    """A stamp read back from JSON; ValueError when it is not one."""
    fields = list(Stamp.__dataclass_fields__)
    if not isinstance(data, dict) or sorted(data) != sorted(fields) \
            or not all(isinstance(data[k], str) for k in fields):
        raise ValueError(f"not a version stamp: {str(data)[:200]}")
    return Stamp(**{k: data[k] for k in fields})
