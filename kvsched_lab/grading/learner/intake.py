"""From command-line paths to learners, and each learner's files copied into a private folder.

Discovery (nothing is read or run here):

* a file argument (``.ipynb`` or ``.py``) is one learner, named by the file;
* a folder argument is a class folder: every ``.ipynb`` or ``.py`` directly in it is its own
  learner (named by file), and every subfolder is one learner whose notebooks are merged (or
  whose one ``.py`` is graded). A subfolder that mixes a ``.py`` with notebooks, holds several
  ``.py`` files, or holds no notebook and no ``.py`` is reported as an error row: never guessed,
  never merged with another learner.

A folder argument that holds several of the course's own notebooks (``01_kv_cache_and_real_blocks.ipynb``
...) is most likely ONE learner's folder passed alone (``kvsched grade alice/``): `lone_learner_folders`
names it, and ``kvsched grade`` warns before grading that each notebook will be a learner of its own.

Rows are named relative to the common root of the arguments (identity.py): one class folder's
rows are ``alice``, ``bob.py``, a lone file argument is named by its own name, and two section
folders give ``sec1/alice.py`` and ``sec2/alice.py``; the instructor's absolute paths never reach
grades.csv or a feedback file. A name is shown escaped (``caf\xe9.py``, ``a\tb.py``: writers.py),
and `discover` refuses learners whose names would still show the same (identity.py).

Copying (`copy_in`), before any learner code runs: only regular files, opened without following
links and checked after opening, each at most `MAX_FILE_BYTES`, at most `MAX_FILES` per learner;
a symbolic link, FIFO, device or socket where a submission's file or folder should be, or an
oversized file, makes the row ``error: ...``, except an oversized notebook in a learner's folder
that holds no ``todo:`` cell (notebook 06 with its plots, say): it is skipped and named in the
feedback. The grader parses and grades the copy only, so nothing done to the class folder during
grading changes a grade.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, List, Tuple

from kvsched_lab.grading.learner.identity import common_root, learner_name, refuse_lookalikes
from kvsched_lab.grading.learner.learner_files import TOO_LARGE
from kvsched_lab.grading.learner.writers import display_name

MAX_FILE_BYTES = 4 << 20  # a notebook or .py larger than this is not a plausible submission
MAX_FILES = 40  # notebooks or .py files in one learner's folder (the course has 10)
SUFFIXES = (".ipynb", ".py")
_TODO_TAG = b'"todo:'
# Why a learner's files were not taken, in its words (judging/error_texts.py reads each back into the
# feedback's language). `{kind}` is "folder", one of `KINDS`' values or "special file".
SYMLINK = "{file} is a symbolic link (submissions must be regular files)"
NO_SUCH = "no such file or folder"
NOT_GRADABLE = "not a notebook, a .py file or a class folder"  # a file named on the command line
NOT_REGULAR = "{file} is a {kind}, not a regular file"
KINDS = {stat.S_IFIFO: "FIFO", stat.S_IFCHR: "device", stat.S_IFBLK: "device", stat.S_IFSOCK: "socket"}
CANNOT_READ = "cannot read {file}: {reason}"
BOTH_KINDS = "ambiguous: the folder holds both notebooks and {file}; hand in one or the other (nothing was graded)"
TOO_MANY_FILES = "the folder holds {count} notebooks and .py files (at most {most})"
MANY_PYS = "ambiguous: the folder holds {count} .py files ({files}); hand in one"
NO_FILES = "the folder holds no notebooks and no .py file"
HOLDS_FOLDERS = " (it holds folders: {folders}; is it a class folder?)"  # after NO_FILES


@dataclass
class Learner:
    """One row of grades.csv: its name, where its files are, or why it cannot be graded."""

    name: str  # the row's name: relative to its class folder, as text
    path: Path
    error: str = ""
    skipped: List[str] = field(default_factory=list)  # oversized notebooks without a TODO, not read


def _kind(path: Path) -> str:
    """What `path` is, without following a link: "file", "dir", "link" or another kind."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "missing"
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return KINDS.get(stat.S_IFMT(mode), "special file")


def _refused(path: Path, kind: str) -> str:
    if kind == "link":
        return SYMLINK.format(file=display_name(path.name))
    if kind == "missing":
        return NO_SUCH
    return NOT_REGULAR.format(file=display_name(path.name), kind="folder" if kind == "dir" else kind)


def discover(paths: List[str], check: bool = True) -> List[Learner]:
    """One `Learner` per row, in command-line order, class folders expanded (see the docstring).

    ValueError, before anything is read, when two learners would show the same name or one is
    given twice (`check`: False only to count a folder's submissions)."""
    out: List[Learner] = []
    root = common_root(paths, [_kind(Path(arg)) == "dir" for arg in paths])
    for arg in paths:
        path = Path(arg)
        kind = _kind(path)
        if kind != "dir":
            error = "" if kind == "file" and path.suffix in SUFFIXES else (
                _refused(path, kind) if kind != "file" else NOT_GRADABLE)
            out.append(Learner(learner_name(root, arg), path, error))
            continue
        for child in sorted(path.iterdir()):
            if child.name.startswith((".", "__")):
                continue
            ckind = _kind(child)
            name = learner_name(root, str(child))
            if ckind == "dir":
                out.append(Learner(name, child, _ambiguous(child)))
            elif ckind == "file" and child.suffix not in SUFFIXES:
                continue  # a README or data file beside the submissions
            elif child.suffix in SUFFIXES or ckind != "file":
                out.append(Learner(name, child, "" if ckind == "file" else _refused(child, ckind)))
    if check:
        refuse_lookalikes([x.name for x in out], [str(x.path) for x in out])
    return out


def lone_learner_folders(paths: List[str], course_notebooks: Collection[str]) -> List[Tuple[str, List[str]]]:
    """(folder argument, the course notebooks directly in it) for each folder argument holding at least
    two of `course_notebooks` (file names): one learner's folder, not a class (see the docstring)."""
    out = []
    for arg in paths:
        if _kind(Path(arg)) != "dir":
            continue
        mine = sorted(c.name for c in Path(arg).iterdir() if c.name in course_notebooks and _kind(c) == "file")
        if len(mine) >= 2:
            out.append((arg, mine))
    return out


def one_learner(arg: str) -> Learner:
    """`arg` taken as ONE learner (``kvsched grade --learner``): a file, or a student's folder whose
    notebooks are merged; its subfolders (``kvsched_answers/``) are not part of the submission."""
    path = Path(arg)
    return Learner(str(path), path, _ambiguous(path)) if _kind(path) == "dir" else discover([arg], False)[0]


def _ambiguous(folder: Path) -> str:
    """Why a learner's folder cannot be graded as one learner ("" when it can)."""
    names = [p.name for p in folder.iterdir() if not p.name.startswith(".")]
    notebooks = [n for n in names if n.endswith(".ipynb")]
    pys = [n for n in names if n.endswith(".py")]
    if pys and notebooks:
        return BOTH_KINDS.format(file=display_name(pys[0]))
    if len(notebooks) + len(pys) > MAX_FILES:
        return TOO_MANY_FILES.format(count=len(notebooks) + len(pys), most=MAX_FILES)
    if len(pys) > 1:
        return MANY_PYS.format(count=len(pys), files=", ".join(map(display_name, sorted(pys)[:3])))
    if not notebooks and not pys:
        inner = [n for n in names if (folder / n).is_dir() and not (folder / n).is_symlink()]
        more = HOLDS_FOLDERS.format(folders=", ".join(map(display_name, sorted(inner)[:3]))) if inner else ""
        return NO_FILES + more
    return ""


def _copy_file(src: Path, dest: Path, skippable: bool = False) -> str:
    """Copy one regular file; "" or why it was refused ("skip" for an oversized `skippable` notebook
    holding no TODO).

    The cost is bounded whatever the file holds: its size is decided from ``fstat``, and at most
    `MAX_FILE_BYTES` + 1 bytes are ever read (a 1 GiB sparse notebook costs what a 4 MiB one does)."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        return _refused(src, _kind(src)) if _kind(src) != "file" else CANNOT_READ.format(file=display_name(src.name),
                                                                                           reason=e.strerror)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # before fdopen, which raises on a folder (a folder named x.ipynb)
        os.close(fd)
        return _refused(src, _kind(src))
    with os.fdopen(fd, "rb") as f:
        if info.st_size > MAX_FILE_BYTES and not skippable:
            return TOO_LARGE.format(file=display_name(src.name), mib=MAX_FILE_BYTES >> 20)
        data = f.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            # An oversized notebook is skipped (and named) unless its first bytes show a todo: tag. A tag
            # further in is not searched for: the TODO shows as not attempted beside the file's name.
            if skippable and _TODO_TAG not in data:
                return "skip"
            return TOO_LARGE.format(file=display_name(src.name), mib=MAX_FILE_BYTES >> 20)
    dest.write_bytes(data)
    return ""


def copy_in(learner: Learner, dest: Path) -> Path:
    """Copy `learner`'s files into the new folder `dest`; return the path to grade, or set `learner.error`."""
    dest.mkdir(parents=True)
    if learner.error:
        return dest
    if _kind(learner.path) == "file":
        target = dest / learner.path.name
        learner.error = _copy_file(learner.path, target)
        return target
    if _kind(learner.path) != "dir":
        learner.error = _refused(learner.path, _kind(learner.path))
        return dest
    target = dest / "submission"
    target.mkdir()
    for child in sorted(learner.path.iterdir()):
        if child.name.startswith(".") or child.suffix not in SUFFIXES:
            continue
        error = _copy_file(child, target / child.name, skippable=child.suffix == ".ipynb")
        if error == "skip":
            learner.skipped.append(display_name(child.name))
        elif error:
            learner.error = error
            break
    return target
