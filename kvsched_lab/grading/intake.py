"""From command-line paths to learners, and each learner's files copied into a private folder.

Discovery (nothing is read or run here):

* a file argument (``.ipynb`` or ``.py``) is one learner, named by the file;
* a folder argument is a class folder: every ``.ipynb`` or ``.py`` directly in it is its own
  learner (named by file), and every subfolder is one learner whose notebooks are merged (or
  whose one ``.py`` is graded). A subfolder that mixes a ``.py`` with notebooks, holds several
  ``.py`` files, or holds no notebook and no ``.py`` is reported as an error row: never guessed,
  never merged with another learner.

Copying (`copy_in`), before any learner code runs: only regular files, opened without following
links and checked after opening, each at most `MAX_FILE_BYTES`; a symbolic link, FIFO, device
or socket where a submission's file or folder should be, or an oversized file, makes the row
``error: ...``. The grader parses and grades the copy only, so nothing done to the class folder
during grading changes a grade.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import List

MAX_FILE_BYTES = 4 << 20  # a notebook or .py larger than this is not a plausible submission
SUFFIXES = (".ipynb", ".py")


@dataclass
class Learner:
    """One row of grades.csv: its name, where its files are, or why it cannot be graded."""

    name: str
    path: Path
    error: str = ""


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
    return {stat.S_IFIFO: "FIFO", stat.S_IFCHR: "device", stat.S_IFBLK: "device",
            stat.S_IFSOCK: "socket"}.get(stat.S_IFMT(mode), "special file")


def _refused(path: Path, kind: str) -> str:
    if kind == "link":
        return f"{path.name} is a symbolic link (submissions must be regular files)"
    if kind == "missing":
        return "no such file or folder"
    return f"{path.name} is a {kind}, not a regular file"


def discover(paths: List[str]) -> List[Learner]:
    """One `Learner` per row, in command-line order, class folders expanded (see the docstring)."""
    out: List[Learner] = []
    for arg in paths:
        path = Path(arg)
        kind = _kind(path)
        if kind != "dir":
            error = "" if kind == "file" and path.suffix in SUFFIXES else (
                _refused(path, kind) if kind != "file" else "not a notebook, a .py file or a class folder")
            out.append(Learner(str(path), path, error))
            continue
        for child in sorted(path.iterdir()):
            if child.name.startswith((".", "__")):
                continue
            ckind = _kind(child)
            if ckind == "dir":
                out.append(Learner(str(child), child, _ambiguous(child)))
            elif ckind == "file" and child.suffix not in SUFFIXES:
                continue  # a README or data file beside the submissions
            elif child.suffix in SUFFIXES or ckind != "file":
                out.append(Learner(str(child), child, "" if ckind == "file" else _refused(child, ckind)))
    return out


def one_learner(arg: str) -> Learner:
    """`arg` taken as ONE learner (``kvsched grade --learner``): a file, or a student's folder whose
    notebooks are merged; its subfolders (``kvsched_answers/``) are not part of the submission."""
    path = Path(arg)
    return Learner(str(path), path, _ambiguous(path)) if _kind(path) == "dir" else discover([arg])[0]


def _ambiguous(folder: Path) -> str:
    """Why a learner's folder cannot be graded as one learner ("" when it can)."""
    names = [p.name for p in folder.iterdir() if not p.name.startswith(".")]
    notebooks = [n for n in names if n.endswith(".ipynb")]
    pys = [n for n in names if n.endswith(".py")]
    if pys and notebooks:
        return (f"ambiguous: the folder holds both notebooks and {pys[0]}; hand in one or the other "
                "(nothing was graded)")
    if len(pys) > 1:
        return f"ambiguous: the folder holds {len(pys)} .py files ({', '.join(sorted(pys)[:3])}); hand in one"
    if not notebooks and not pys:
        inner = [n for n in names if (folder / n).is_dir() and not (folder / n).is_symlink()]
        more = f" (it holds folders: {', '.join(sorted(inner)[:3])}; is it a class folder?)" if inner else ""
        return "the folder holds no notebooks and no .py file" + more
    return ""


def _copy_file(src: Path, dest: Path) -> str:
    """Copy one regular file; "" or why it was refused."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        return _refused(src, _kind(src)) if _kind(src) != "file" else f"cannot read {src.name}: {e.strerror}"
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return _refused(src, _kind(src))
        if info.st_size > MAX_FILE_BYTES:
            return f"{src.name} is larger than {MAX_FILE_BYTES >> 20} MiB"
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        return f"{src.name} is larger than {MAX_FILE_BYTES >> 20} MiB"
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
        error = _copy_file(child, target / child.name)
        if error:
            learner.error = error
            break
    return target
