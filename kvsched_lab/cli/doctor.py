"""`kvsched doctor`: what this machine offers the course, and what to do about what is missing."""
from __future__ import annotations

import argparse
import importlib
import platform
import sys
from typing import List, Tuple

from kvsched_lab.i18n import N_, _

Row = Tuple[str, bool, str]  # (component, ok, detail or advice)


def _version(module: str) -> str | None:
    try:
        mod = importlib.import_module(module)
    except Exception:  # a broken install is as unusable as a missing one
        return None
    return getattr(mod, "__version__", "installed")


def diagnose() -> List[Row]:
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
    for name, module, advice in [
        ("jupyterlab", "jupyterlab", N_("`make lab` installs it; Colab/ModelScope bring their own")),
        ("ipywidgets", "ipywidgets", N_("sliders fall back to plain function calls without it: pip install ipywidgets")),
        ("matplotlib", "matplotlib", N_("plots need it: pip install matplotlib")),
    ]:
        v = _version(module)
        rows.append((name, v is not None, v if v is not None else _("missing: {advice}", advice=_(advice))))
    rows.append(("reference solutions", _version("solutions") is not None,
                 _("present (instructor copy)") if _version("solutions") is not None
                 else _("withheld (student release): lab.reveal() will say so")))
    rows += _grading_sandbox()
    return rows


def _grading_sandbox() -> List[Row]:
    """Whether `kvsched grade` can sandbox learner code here (instructor copy only: students lack the grader)."""
    try:
        from kvsched_lab.grading import sandbox
    except ImportError:
        return []
    works, why = sandbox.probe()
    if works:
        return [("grading sandbox", True, why)]
    return [("grading sandbox", False, f"{why}: `kvsched grade` refuses unless --no-sandbox. To enable it: "
                                       f"{sandbox.HOW_TO_ENABLE}")]


def report(rows: List[Row]) -> str:
    width = max(len(name) for name, _, _ in rows)
    lines = [f"{'ok ' if ok else 'NO '} {name:<{width}}  {detail}" for name, ok, detail in rows]
    # The reference's absence is normal for students; the grading sandbox matters only where the
    # reference is (an instructor copy, which grades), and there a broken one is a problem.
    instructor = any(name == "reference solutions" and ok for name, ok, _ in rows)
    optional = ("reference solutions",) if instructor else ("reference solutions", "grading sandbox")
    problems = [name for name, ok, _ in rows if not ok and name not in optional]
    lines.append(_("all set: run the notebooks in order") if not problems
                 else _("fix first: {problems}", problems=", ".join(problems)))
    return "\n".join(lines)


def add_parser(sub: argparse._SubParsersAction) -> None:
    doctor = sub.add_parser("doctor", help="check Python, torch, GPU, Jupyter and widgets")
    doctor.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rows = diagnose()
    print(report(rows))
    return 0 if all(ok for name, ok, _ in rows if name != "reference solutions") else 1
