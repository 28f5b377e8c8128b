"""What each TODO of one learner's (copied) submission should be graded on; nothing runs here.

A submission (see intake.py for how rows are found and copied) is one of:

* a folder with notebooks: the ``todo:*`` cells of all its notebooks are merged (notebooks in
  name order; for a TODO tagged more than once, the last cell that is not an untouched stub counts,
  and when two such cells differ the row says ``review:`` naming both: the candidate-file rule);
* a folder with one ``.py``, or a single ``.py``, that defines a full ``KVCacheSchedulerSim``
  like the chapter's;
* a single ``.ipynb``.

Learner files are read as untrusted data (learner_files.py): a malformed one becomes this
learner's error, never an exception out of `load`. A TODO whose tag was deleted but whose method
is defined in an untagged cell is ``not attempted (untagged cell)``, which shows in the status.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Set

from kvsched_lab.grading.learner.intake import CANNOT_READ, MAX_FILE_BYTES, NO_FILES, NO_SUCH
from kvsched_lab.grading.learner.learner_files import MAX_NOTEBOOKS, LearnerFileError, notebook_cells, parse_python, read_text
from kvsched_lab.grading.judging.stubs import class_methods, fingerprint, functions_in
from kvsched_lab.grading.learner.writers import display_name
from kvsched_lab.i18n.messages import Deferred as _  # feedback text: its language is chosen when written
from kvsched_lab.i18n.messages import Joined, N_
from kvsched_lab.sim.scheduler import TODO_METHODS

UNTAGGED = N_("not attempted (untagged cell)")  # the method is in a cell that lost its todo: tag
# A review note: a TODO tagged in cells of different code (the last graded). Stored in English, as
# every review note is; judging/review_texts.py reads it back into the feedback's language.
ATTEMPTS = "{todo} has {count} different attempts ({cells}): graded the last, {origin}"
# Why a submission could not be graded, beside intake.py's and learner_files.py's (judging/error_texts.py).
TOO_MANY_NOTEBOOKS = "the folder holds {count} notebooks (at most {most} are read)"
UNREADABLE = "the submission could not be read ({error})"  # an exception no check foresaw: its type
NOT_A_SUBMISSION = "not a notebook, a .py file or a folder of notebooks"


@dataclass
class TodoSource:
    """What one TODO of a submission is graded on."""

    status: str  # "run", "not attempted" or "error" (decided without running anything)
    kind: str = ""  # "cell" (a TODO cell) or "py" (a whole .py file)
    source: str = ""
    origin: str = ""  # where it came from, for the feedback
    detail: str = ""  # why it is not attempted / the error


@dataclass
class Submission:
    name: str
    path: Path
    todos: Dict[str, TodoSource] = field(default_factory=dict)
    error: str = ""  # the whole submission could not be read
    review: List[str] = field(default_factory=list)  # for the instructor: e.g. two different attempts at one TODO


def _syntax_error(e: SyntaxError) -> str:
    return f"SyntaxError: {e.msg} (line {e.lineno})"


def _from_notebooks(sub: Submission, notebooks: List[Path], stubs: Dict[str, Set[str]]) -> None:
    if len(notebooks) > MAX_NOTEBOOKS:
        sub.error = TOO_MANY_NOTEBOOKS.format(count=len(notebooks), most=MAX_NOTEBOOKS)
        return
    candidates: Dict[str, List[tuple]] = {name: [] for name in TODO_METHODS}
    untagged: Dict[str, str] = {}
    for path in notebooks:
        try:
            cells = notebook_cells(path.read_bytes(), display_name(path.name))
        except (OSError, LearnerFileError) as e:
            sub.error = (CANNOT_READ.format(file=display_name(path.name), reason=e.strerror) if isinstance(e, OSError)
                         else str(e))
            return
        for cell in cells:
            names = [t[len("todo:"):] for t in cell.tags if t.startswith("todo:")]
            for name in names:
                if name in candidates:
                    candidates[name].append((_("{file}, cell {number}", file=display_name(path.name), number=cell.index + 1),
                                             cell.source))
            if not names and cell.cell_type == "code":  # for a hint when a tag went missing
                for name, method in TODO_METHODS.items():
                    if f"def {method}(" in cell.source:
                        untagged[name] = _("{file}, cell {number}", file=display_name(path.name), number=cell.index + 1)
    for name, method in TODO_METHODS.items():
        found = candidates[name]
        attempted = [(o, s) for o, s in found if not _is_stub(s, method, stubs[name])]
        if attempted:
            origin, source = attempted[-1]
            others = [o for o, s in attempted[:-1] if s != source]
            if others:
                sub.review.append(ATTEMPTS.format(todo=name, count=len(others) + 1,
                                                  cells="; ".join([*others[-2:], origin]), origin=origin))
            sub.todos[name] = _checked(TodoSource("run", "cell", source, origin))
        elif found:
            sub.todos[name] = TodoSource("not attempted", origin=found[-1][0], detail=_("the stub is unchanged"))
        elif name in untagged:
            sub.todos[name] = TodoSource(UNTAGGED, origin=untagged[name], detail=_(
                "no cell is tagged todo:{name}; {cell} defines {method} but is not tagged todo:{name} "
                "(restore the tag and resubmit)", name=name, cell=untagged[name], method=method))
        else:
            sub.todos[name] = TodoSource("not attempted", detail=_("no cell is tagged todo:{name}", name=name))


def _is_stub(source: str, method: str, stubs: Set[str]) -> bool:
    try:
        fn = functions_in(source, [method]).get(method)
        return fn is not None and fingerprint(fn) in stubs
    except (RecursionError, MemoryError):  # too deep for the parser: no stub; _checked says why
        return False


def _checked(todo: TodoSource) -> TodoSource:
    """A TODO whose source does not even parse is an error without running it."""
    try:
        parse_python(todo.source, todo.origin)
    except SyntaxError as e:
        return TodoSource("error", todo.kind, todo.source, todo.origin, _syntax_error(e))
    except LearnerFileError as e:
        return TodoSource("error", todo.kind, todo.source, todo.origin, str(e))
    except ValueError as e:  # null bytes
        return TodoSource("error", todo.kind, todo.source, todo.origin, f"ValueError: {e}")
    return todo


def _from_py(sub: Submission, path: Path, stubs: Dict[str, Set[str]]) -> None:
    try:
        source = read_text(path, MAX_FILE_BYTES)
    except OSError as e:
        sub.error = CANNOT_READ.format(file=display_name(path.name), reason=e.strerror)
        return
    except LearnerFileError as e:
        sub.error = str(e)
        return
    try:
        tree = parse_python(source, display_name(path.name))
    except LearnerFileError as e:
        sub.error = str(e)
        return
    except (SyntaxError, ValueError) as e:
        detail = _syntax_error(e) if isinstance(e, SyntaxError) else f"ValueError: {e}"
        sub.todos = {name: TodoSource("error", "py", source, display_name(path.name), detail) for name in TODO_METHODS}
        return
    methods = class_methods(source)
    assigned = any(isinstance(n, (ast.Assign, ast.AnnAssign, ast.ImportFrom)) and "KVCacheSchedulerSim" in ast.dump(n)
                   for n in tree.body)
    if methods is None and not assigned:
        classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
        detail = (_("the file defines no class KVCacheSchedulerSim (it defines {classes})", classes=Joined(classes))
                  if classes else _("the file defines no class KVCacheSchedulerSim"))
        sub.todos = {name: TodoSource("error", "py", source, display_name(path.name), detail) for name in TODO_METHODS}
        return
    for name, method in TODO_METHODS.items():
        fn = (methods or {}).get(method)
        if fn is not None and fingerprint(fn) in stubs[name]:
            sub.todos[name] = TodoSource("not attempted", origin=display_name(path.name), detail=_("the stub is unchanged"))
        else:
            sub.todos[name] = TodoSource("run", "py", source, f"{display_name(path.name)}, KVCacheSchedulerSim.{method}")


def load(name: str, path: Path, stubs: Dict[str, Set[str]]) -> Submission:
    """Parse one submission; problems end up in `Submission.error` or per TODO, never raised."""
    try:
        return _load(name, path, stubs)
    except (Exception, RecursionError, MemoryError) as e:  # a file no check above foresaw: this row only
        return Submission(name, path, error=UNREADABLE.format(error=type(e).__name__))


def _load(name: str, path: Path, stubs: Dict[str, Set[str]]) -> Submission:
    sub = Submission(name, path)
    if path.is_dir():
        notebooks = sorted(p for p in path.glob("*.ipynb") if not p.name.startswith("."))
        pys = sorted(path.glob("*.py"))
        if notebooks:
            _from_notebooks(sub, notebooks, stubs)
        elif len(pys) == 1:
            _from_py(sub, pys[0], stubs)
        else:
            sub.error = NO_FILES
    elif path.suffix == ".ipynb" and path.is_file():
        _from_notebooks(sub, [path], stubs)
    elif path.suffix == ".py" and path.is_file():
        _from_py(sub, path, stubs)
    elif not path.exists():
        sub.error = NO_SUCH
    else:
        sub.error = NOT_A_SUBMISSION
    return sub
