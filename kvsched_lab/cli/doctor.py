"""`kvsched doctor`: what this machine offers the course, and what to do about what is missing.

A learner sees only what the notebooks need; `kvsched doctor --grading` adds what an instructor
needs to grade here (the sandbox for learner code), and then counts it as a problem when missing.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import platform
import sys
from typing import List, Tuple

from kvsched_lab.course.table import row
from kvsched_lab.i18n import N_, _, join
from kvsched_lab.i18n.width import display_width

Row = Tuple[str, bool, str]  # (component, ok, detail or advice); the component is shown with _()


def _version(module: str) -> str | None:
    try:
        mod = importlib.import_module(module)
    except Exception:  # a broken install is as unusable as a missing one
        return None
    return getattr(mod, "__version__", "installed")


def _server_version(module: str) -> str | None:
    """The installed version of a package the notebook server runs and no kernel imports.

    Importing jupyterlab costs seconds (its server extensions); the doctor runs in notebook 00's
    kernel, where only whether it is installed matters."""
    if importlib.util.find_spec(module) is None:
        return None
    try:
        return importlib.metadata.version(module)
    except importlib.metadata.PackageNotFoundError:
        return "installed"


# Rows whose "NO" is not a problem: the reference is withheld from students on purpose.
REFERENCE_ROW, SANDBOX_ROW = N_("reference solutions"), N_("grading sandbox")
NOT_PROBLEMS = (REFERENCE_ROW,)


def diagnose(grading: bool = False) -> List[Row]:
    """One row per component; with `grading`, the instructor's rows too (the grading sandbox)."""
    rows: List[Row] = []
    py_ok = sys.version_info >= (3, 10)
    rows.append(("python", py_ok, platform.python_version() if py_ok else
                 _("{version}: the course needs Python 3.10 or newer", version=platform.python_version())))
    torch_version = _version("torch")
    if torch_version is None:
        rows.append(("torch", False, _("not importable: run `make setup`, or `pip install torch` (on "
                                       "Colab/ModelScope it is preinstalled; never reinstall it)")))
    else:
        import torch

        rows.append(("torch", True, torch_version))
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            rows.append(("gpu", True, _("{name}, {gib:.1f} GiB; KV blocks live on the GPU in fp16",
                                        name=props.name, gib=props.total_memory / 2**30)))
        else:
            rows.append(("gpu", True, _("none: KV blocks live on the CPU in fp32 (every lesson runs; timings "
                                        "differ). On Colab: Runtime > Change runtime type > GPU")))
    for name, find, advice in [
        ("jupyterlab", _server_version, N_("`make lab` installs it; Colab/ModelScope bring their own")),
        ("ipywidgets", _version, N_("sliders fall back to plain function calls without it: pip install ipywidgets")),
        ("matplotlib", _version, N_("plots need it: pip install matplotlib")),
    ]:
        v = find(name)
        rows.append((name, v is not None, v if v is not None else _("missing: {advice}", advice=_(advice))))
    rows.append((REFERENCE_ROW, _version("solutions") is not None,
                 _("present (instructor copy)") if _version("solutions") is not None
                 else _("withheld (student release): lab.reveal() will say so")))
    if grading:
        rows += _grading_sandbox()
    return rows


def _grading_sandbox() -> List[Row]:
    """Whether `kvsched grade` can sandbox learner code here (instructor copy only: students lack the grader)."""
    try:
        from kvsched_lab.grading.box import sandbox
    except ImportError:
        return [(SANDBOX_ROW, False, _("the grader is not in this copy (a student release): grade with "
                                             "the instructor's copy of the course"))]
    works, why = sandbox.probe()
    if works:
        return [(SANDBOX_ROW, True, why)]
    return [(SANDBOX_ROW, False, _("{why}: `kvsched grade` refuses unless --no-sandbox. To enable it: {how}",
                                         why=why, how=_(sandbox.HOW_TO_ENABLE)))]


def problems(rows: List[Row]) -> List[str]:
    """The components to fix before the course (or, with --grading, grading) works here."""
    # Where the reference is (an instructor copy, which grades), a broken grading sandbox is a problem.
    instructor = any(name == "reference solutions" and ok for name, ok, _detail in rows)
    optional = tuple(n for n in NOT_PROBLEMS if not (instructor and n == "grading sandbox"))
    return [name for name, ok, _detail in rows if not ok and name not in optional]


def report(rows: List[Row]) -> str:
    names = [_(name) for name, _ok, _detail in rows]
    marks = [_("ok") if ok else _("NO") for _name, ok, _detail in rows]
    mark_width, name_width = (max(display_width(x) for x in col) for col in (marks, names))
    lines = [row([mark, name, detail], [-(mark_width + 1), -(name_width + 2), 0])
             for mark, name, (_name, _ok, detail) in zip(marks, names, rows)]
    missing = [_(name) for name in problems(rows)]
    lines.append(_("all set: run the notebooks in order") if not missing
                 else _("fix first: {problems}", problems=join(missing)))
    return "\n".join(lines)


def add_parser(sub: argparse._SubParsersAction) -> None:
    doctor = sub.add_parser("doctor", help="check Python, torch, GPU, Jupyter and widgets")
    doctor.add_argument("--grading", action="store_true",
                        help="also check what grading needs here (instructors: the sandbox for learner code)")
    doctor.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rows = diagnose(grading=args.grading)
    print(report(rows))
    return 1 if problems(rows) else 0
