"""Why a submission could not be graded, read back into the feedback's language.

A submission's error is an English text written where the problem was found: the intake copying a
learner's files (learner/intake.py: links, special files, sizes, an ambiguous folder), the readers
of a notebook or a .py file (learner/learner_files.py: not UTF-8, not JSON, not a notebook, a cell
of the wrong shape), parsing (submissions.py) and the batch (`GRADER_FAILURE`, the grader's own
fault). It is kept as written: grades.csv's status and the journal are the same bytes in every
language. The feedback file a learner reads says it in the feedback's language: an error of a known
template becomes a `Deferred`, what it quotes (a file name, a cell, the system's reason, an
exception's type) in a code span; any other text is shown as data, as before.
"""
from __future__ import annotations

from typing import Callable, Dict, Tuple

from kvsched_lab.grading.judging.box_texts import cell_words, read_back
from kvsched_lab.grading.judging.submissions import NOT_A_SUBMISSION, TOO_MANY_NOTEBOOKS, UNREADABLE
from kvsched_lab.grading.learner import intake
from kvsched_lab.grading.learner import learner_files as lf
from kvsched_lab.grading.learner.writers import inline
from kvsched_lab.i18n.messages import Deferred as _  # feedback lines: rendered in --lang's language when written

GRADER_FAILURE = "grader failure: {error}"

# What intake.py calls a file that is not a regular one (`NOT_REGULAR`), and the words for each.
KIND_WORDS: Dict[str, str] = {"folder": _("folder"), "FIFO": _("FIFO"), "device": _("device"), "socket": _("socket"),
                              "special file": _("special file")}


def _kind(text: str) -> str:
    return KIND_WORDS.get(text, inline(text))


# Each template with fields, and the words its fields are said in; a field named `file` or `files`
# is a learner's name, `reason` the system's words, `error` an exception's type: data, in code spans.
SAID: Tuple[Tuple[str, Callable[[Dict[str, str]], _]], ...] = (
    (lf.NO_SOURCE, lambda f: _("{where}: its source is neither text nor a list of lines", where=cell_words(f["where"]))),
    (lf.NOT_UTF8, lambda f: _("{file} is not UTF-8 text", file=inline(f["file"]))),
    (lf.JSON_TOO_DEEP, lambda f: _("{file} is JSON nested too deeply to read", file=inline(f["file"]))),
    (lf.NOT_JSON, lambda f: _("{file} is not valid JSON ({reason})", file=inline(f["file"]), reason=inline(f["reason"]))),
    (lf.NOT_NOTEBOOK, lambda f: _("{file} is not a notebook (no list of cells)", file=inline(f["file"]))),
    (lf.TOO_MANY_CELLS, lambda f: _("{file} has {count} cells (at most {most} are read)", file=inline(f["file"]),
                                    count=f["count"], most=f["most"])),
    (lf.NOT_A_CELL, lambda f: _("{where} is not a cell (a JSON object)", where=cell_words(f["where"]))),
    (lf.NO_CELL_TYPE, lambda f: _("{where} has no cell_type", where=cell_words(f["where"]))),
    (lf.BAD_METADATA, lambda f: _("{where}: its metadata is not a JSON object", where=cell_words(f["where"]))),
    (lf.BAD_TAGS, lambda f: _("{where}: its tags are not a list of strings", where=cell_words(f["where"]))),
    (lf.PYTHON_TOO_DEEP, lambda f: _("{file} is nested too deeply to parse (an expression or block far too long)",
                                     file=inline(f["file"]))),
    (lf.TOO_LARGE, lambda f: _("{file} is larger than {mib} MiB", file=inline(f["file"]), mib=f["mib"])),
    (intake.SYMLINK, lambda f: _("{file} is a symbolic link (submissions must be regular files)",
                                 file=inline(f["file"]))),
    (intake.NOT_REGULAR, lambda f: _("{file} is a {kind}, not a regular file", file=inline(f["file"]),
                                     kind=_kind(f["kind"]))),
    (intake.CANNOT_READ, lambda f: _("cannot read {file}: {reason}", file=inline(f["file"]), reason=inline(f["reason"]))),
    (intake.BOTH_KINDS, lambda f: _("ambiguous: the folder holds both notebooks and {file}; hand in one or the other "
                                    "(nothing was graded)", file=inline(f["file"]))),
    (intake.TOO_MANY_FILES, lambda f: _("the folder holds {count} notebooks and .py files (at most {most})",
                                        count=f["count"], most=f["most"])),
    (intake.MANY_PYS, lambda f: _("ambiguous: the folder holds {count} .py files ({files}); hand in one",
                                  count=f["count"], files=inline(f["files"]))),
    (intake.NO_FILES + intake.HOLDS_FOLDERS, lambda f: _("the folder holds no notebooks and no .py file (it holds "
                                                         "folders: {folders}; is it a class folder?)",
                                                         folders=inline(f["folders"]))),
    (TOO_MANY_NOTEBOOKS, lambda f: _("the folder holds {count} notebooks (at most {most} are read)",
                                     count=f["count"], most=f["most"])),
    (UNREADABLE, lambda f: _("the submission could not be read ({error})", error=inline(f["error"]))),
    (GRADER_FAILURE, lambda f: _("grader failure: {error}", error=inline(f["error"]))),
)
FIXED_ERRORS: Dict[str, str] = {intake.NO_SUCH: _("no such file or folder"),
                                intake.NOT_GRADABLE: _("not a notebook, a .py file or a class folder"),
                                intake.NO_FILES: _("the folder holds no notebooks and no .py file"),
                                NOT_A_SUBMISSION: _("not a notebook, a .py file or a folder of notebooks")}


def submission_error(text: str) -> str:
    """Why a submission could not be graded, in words the feedback's language renders, else as data."""
    return read_back(text, FIXED_ERRORS, SAID)
