"""Answers carry over between notebooks: each checked TODO is saved as source, with its status.

One JSON file per TODO in the answers folder: ``$KVSCHED_ANSWERS`` if set, else
``kvsched_answers`` next to the notebooks (a notebook runs in its own folder; the Chinese edition,
in ``zh/`` beside the English notebooks, uses the English folder's, so one course has one folder).
`my_scheduler` builds the learner's scheduler class from the five saved answers, re-checking each,
and falls back to the library's ``seed`` policy (the chapter's scheduler), with one line saying
what is missing. The student release withholds ``seed`` (it answers the TODOs), so there the
fallback is ``lru``, labelled as such; `needs_chapter` lets a cell that shows the chapter's
internals (priorities, heap records) skip itself with one line instead of failing.
"""
from __future__ import annotations

import inspect
import json
import os
import textwrap
import time
from pathlib import Path
from typing import Callable, Dict, Optional

from kvsched_lab.course.checks import NOTEBOOK_OF, TODO_NAMES, Result, grade
from kvsched_lab.i18n import N_, _
from kvsched_lab.i18n.language import LANGUAGES
from kvsched_lab.sim.scheduler import ALL_TODO_METHODS, TODO_METHODS, SchedulerSkeleton, build_scheduler
from kvsched_lab.course.todos import cell_namespace

ANSWERS_ENV = "KVSCHED_ANSWERS"
ANSWERS_DIRNAME = "kvsched_answers"


def answers_dir() -> Path:
    """Where answers are saved: ``$KVSCHED_ANSWERS``, else ``kvsched_answers`` in the course's
    notebook folder (`course_folder` of the working directory); read at every call."""
    return Path(os.environ.get(ANSWERS_ENV) or course_folder(Path.cwd()) / ANSWERS_DIRNAME)


def course_folder(here: Path) -> Path:
    """The folder of the course's notebooks: `here`, or its parent when `here` holds a translated
    edition beside the English one (``notebooks/zh/`` next to ``notebooks/``). So both editions
    share one answers folder: a TODO passed in English counts in Chinese, and the other way round."""
    translated = here.name in LANGUAGES and here.name != "en"
    if translated and any((here.parent / nb.name).is_file() for nb in here.glob("*.ipynb")):
        return here.parent
    return here


def _path(name: str) -> Path:
    return answers_dir() / f"{name}.json"


def function_source(fn: Callable) -> str:
    """The source of `fn` (works for functions defined in notebook cells); OSError/TypeError if unknown."""
    return textwrap.dedent(inspect.getsource(fn))


def save_answer(name: str, fn: Callable, result: Optional[Result] = None, source: Optional[str] = None) -> Path:
    """Save `fn`'s source as the answer for TODO `name` (graded now unless `result` is given).

    `source` overrides reading it from `fn` (for functions built with exec, which have none).
    """
    if name not in ALL_TODO_METHODS:
        raise ValueError(_("unknown TODO {name!r}; the five are {todos}", name=name, todos=", ".join(TODO_NAMES)))
    source = function_source(fn) if source is None else source
    if result is None:
        result = grade(name, fn)
    record = {
        "todo": name,
        "method": ALL_TODO_METHODS[name],
        "function": getattr(fn, "__name__", ALL_TODO_METHODS[name]),
        "status": result.status,
        "cases": result.cases,
        "message": result.message,
        "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "source": source,
    }
    return write_record(name, record)


def write_record(name: str, record: dict) -> Path:
    """Write one answer record for TODO `name` into the answers folder, atomically; its path."""
    path = _path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)  # atomic: a crash never leaves half an answer
    return path


def saved_records() -> Dict[str, dict]:
    """``{todo: record}`` for every readable saved answer."""
    out = {}
    for name in TODO_NAMES:
        try:
            out[name] = json.loads(_path(name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
    return out


def record_function(name: str, record: dict) -> Optional[Callable]:
    """The function a saved `record` of TODO `name` defines, or None if its source fails or defines none."""
    try:
        ns = cell_namespace()
        exec(compile(record["source"], f"<answer:{name}>", "exec"), ns)
    except Exception:  # a broken or edited file counts as missing
        return None
    fn = ns.get(record.get("function", "")) or ns.get(TODO_METHODS[name])
    return fn if callable(fn) else None


def load_answers() -> Dict[str, Callable]:
    """``{todo: function}`` for every saved answer whose source still runs and defines its function."""
    fns = {}
    for name, record in saved_records().items():
        fn = record_function(name, record)
        if fn is not None:
            fns[name] = fn
    return fns


def answer_status() -> Dict[str, Result]:
    """Each TODO's status, re-checked now from the saved source ("missing" when nothing is saved)."""
    fns = load_answers()
    return {name: (grade(name, fns[name]) if name in fns else Result(name, "missing"))
            for name in TODO_NAMES}


def status() -> None:
    """Print one line per TODO: passed / failed / not attempted / missing, and where to fix it."""
    print(_("answers folder: {folder}", folder=answers_dir()))
    # The status words are the graders' (not translated); what they mean is shown in the language.
    shown = {"passed": N_("passed"), "failed": N_("failed"), "not attempted": N_("not attempted"),
             "missing": N_("missing")}
    for name, result in answer_status().items():
        mark = {"passed": "✅", "failed": "❌", "not attempted": "⬜", "missing": "⬜"}[result.status]
        where = "" if result.passed else _("  -> notebook {notebook}", notebook=NOTEBOOK_OF[name])
        print(f"{mark} {name:<9} {_(shown[result.status])}{where}")


def fallback_scheduler() -> type:
    """What `my_scheduler` gives until all five TODOs pass: the library's ``seed`` policy (the
    chapter's reference behaviour), or ``lru`` where ``seed`` is withheld (the student release)."""
    from kvsched_lab.sim.policies import POLICIES

    return POLICIES.get("seed") or POLICIES["lru"]


def is_chapter_scheduler(cls: object) -> bool:
    """True for a chapter-style scheduler class: yours (built on `SchedulerSkeleton`) or the library's
    ``seed``/``seed-compact``, whose entries have ``priority``, ``last_used``, ``hits`` and ``bytes``."""
    from kvsched_lab.sim.policies import CHAPTER_POLICIES

    return isinstance(cls, type) and (issubclass(cls, SchedulerSkeleton)
                                      or getattr(cls, "name", None) in CHAPTER_POLICIES)


def needs_chapter(cls: object, what: Optional[str] = None) -> bool:
    """True when `cls` is a chapter-style scheduler; otherwise print one line saying `what` (default:
    this cell) is skipped and why, and return False. For cells that show the chapter's internals::

        if lab.needs_chapter(Sim, "the priority table"):
            ...
    """
    if is_chapter_scheduler(cls):
        return True
    name = getattr(cls, "name", getattr(cls, "__name__", repr(cls)))
    print(_("⏭️ skipped {what}: it needs the chapter's scheduler (priorities, hits, heap records) and {name!r} "
            "(the fallback) has none. It runs once your five TODOs pass (lab.status()).", what=what or _("this cell"),
            name=name))
    return False


def my_scheduler(verbose: bool = True) -> type:
    """The learner's scheduler class from the saved answers, or the labelled `fallback_scheduler`.

    Each saved answer is re-checked (so a stale or edited file cannot sneak in). With all five
    passing: `build_scheduler` of them, named ``MyKVCacheSchedulerSim``. Otherwise one line names
    what is missing and where to fix it, and the result is ``kvsched_lab.sim.policies.POLICIES["seed"]``:
    the chapter's reference behaviour (same API, same log), so later cells still run. Where
    ``seed`` is withheld (the student release) it is ``POLICIES["lru"]``, and the line says so.
    """
    results = answer_status()
    if all(r.passed for r in results.values()):
        fns = load_answers()
        cls = build_scheduler(fns, name="MyKVCacheSchedulerSim")
        if verbose:
            print(_("✅ my_scheduler: YOUR five methods ({todos}), from {folder}", todos=", ".join(TODO_NAMES),
                    folder=answers_dir()))
        return cls
    fallback = fallback_scheduler()
    problems = []
    for name, r in results.items():
        if not r.passed:
            nb = NOTEBOOK_OF[name].split("_")[0]
            problems.append(_("{name} missing (notebook {notebook})", name=name, notebook=nb)
                            if r.status in ("missing", "not attempted")
                            else _("{name} failing (notebook {notebook})", name=name, notebook=nb))
    if verbose:
        if fallback.name == "seed":
            until = _("the library's 'seed' policy (the chapter's reference behaviour, same log).")
        else:
            until = _("FALLBACK: the library's {name!r} policy, NOT the chapter's scheduler ('seed' is withheld "
                      "in the student release); cells that need the chapter's internals skip themselves.",
                      name=fallback.name)
        print(_("⚠️ my_scheduler: not all your TODOs pass yet: {problems}; run those notebooks' TODO and check "
                "cells. Until then: {until}", problems=", ".join(problems), until=until))
    return fallback


# The chapter's class layout: given methods and TODO methods in the order the chapter lists them.
CHAPTER_LAYOUT = ("__init__", "score", "heap", "stale", "entry", "schedule", "snapshot")


def scheduler_source() -> str:
    """Your `KVCacheSchedulerSim` as one class, in the chapter's layout: the given ``__init__`` and
    ``schedule`` (from `SchedulerSkeleton`) around your five saved methods, each marked with its
    check status; a TODO with no saved answer is a comment saying where to write it."""
    records = saved_records()
    fns = load_answers()
    lines = ["class KVCacheSchedulerSim:  " + _("# assembled from {folder}", folder=answers_dir())]
    for part in CHAPTER_LAYOUT:
        lines.append("")
        if part not in TODO_METHODS:  # given code, as every learner has it
            lines.append("    " + _("# given ({part})", part=part))
            body = textwrap.dedent(inspect.getsource(getattr(SchedulerSkeleton, part)))
        elif part in fns:
            status = grade(part, fns[part]).status
            lines.append("    " + _("# yours: TODO {part} ({status})", part=part, status=_(status)))
            body = records[part]["source"]
        else:
            lines.append("    " + _("# TODO {part}: no saved answer yet; write {method} in notebook {notebook} and run "
                                  "its check cell", part=part, method=TODO_METHODS[part],
                                  notebook=NOTEBOOK_OF[part].split("_")[0]))
            continue
        lines += [("    " + line) if line.strip() else "" for line in body.rstrip().splitlines()]
    return "\n".join(lines) + "\n"


def show_scheduler() -> None:
    """Print `scheduler_source()`: the whole class you wrote, in the chapter's layout."""
    print(scheduler_source())
