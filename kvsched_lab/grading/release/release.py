"""`kvsched release OUT_DIR`: build the student bundle (release_build.py), then verify it (release_checks.py).

The bundle holds the course notebooks, both editions (``notebooks/`` and the Chinese
``notebooks/zh/``), with outputs and run metadata cleared, ``kvsched_lab``
without this package (the grader and its hidden cases) and without the `WITHHELD_FILES`, the setup
files (a Makefile whose ``make check`` runs the notebooks, with no ``tests/`` target), and a README
for students; never ``solutions/`` or ``tests/``. It then verifies itself:

* no ``solutions``, ``kvsched_lab/grading``, ``tests`` or withheld file in it, no Makefile line
  naming ``tests``, and every notebook clean;
* the Chinese edition is complete: one ``notebooks/zh/`` notebook per English one, each with the
  English one's cells, ids and tags (building also refuses a ``notebooks/zh`` that is not what
  ``kvsched i18n build`` writes from the translation files now, where those files are present);
* no line of the reference (28+ characters, not a def/class/import/from/comment/decorator/
  docstring/``return [(`` line, nor given code the stubs also show) appears in any bundle file;
* every notebook's setup cell installs from the ``--repo-url`` given (its one ``REPO_URL = "..."``
  line is the single place substituted), never from the full repository;
* ``lab.reveal`` says the reference is withheld, in a Python that sees only the bundle;
* installed the way Colab would (the setup cell's ``pip install --no-deps git+URL``, with URL a
  ``git+file://`` repository of the bundle, into a fresh environment), ``import solutions`` and
  ``import kvsched_lab.grading`` fail and ``lab.reveal`` says the reference is withheld;
* ``pytest --nbval-lax`` on every notebook of both editions, each in a fresh kernel in a copy
  that is exactly the bundle, ``--jobs`` workers taking them longest first (release_nbval.py),
  fails in check cells (``check:*``, and notebook 08's ``practice-check:*``) only.

Each check and each notebook is named as it starts and ends, with its wall time; the last line
gives the release's wall and CPU seconds and the load average, since on a shared machine the
wall time alone says little.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import List, Optional

from kvsched_lab.grading.release.release_build import REPO, build_release, plain_url, refuse_stale_zh
from kvsched_lab.grading.release.release_checks import verify_release
from kvsched_lab.grading.release.release_nbval import default_jobs


def release_main(argv: Optional[List[str]] = None) -> int:
    """``kvsched release OUT_DIR --repo-url URL [--notebooks DIR] [--force] [--timeout S] [--jobs N]
    [--skip-notebook-run]``."""
    p = argparse.ArgumentParser(prog="kvsched release", description=(
        "Build the student bundle (stub notebooks, kvsched_lab without the grader, a student README; no "
        "solutions/ and no tests/) and verify it gives nothing away."))
    p.add_argument("out", metavar="OUT_DIR")
    p.add_argument("--repo-url", required=True, metavar="URL",
                   help="where students install the bundle from (its own repository, never this one): the "
                        "notebooks' setup cells install from it")
    p.add_argument("--notebooks", default=str(REPO / "notebooks"), help="course notebooks (default: notebooks/)")
    p.add_argument("--force", action="store_true", help="replace OUT_DIR if it exists")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per notebook cell in the nbval run")
    p.add_argument("--jobs", type=int, default=default_jobs(), metavar="N",
                   help="nbval workers, each running one notebook at a time (default: the CPUs here, at most 4)")
    p.add_argument("--skip-notebook-run", action="store_true", help="static checks only (no nbval run)")
    args = p.parse_args(argv)
    if args.jobs < 1:
        p.error(f"--jobs must be at least 1, not {args.jobs}")
    began, cpu_began, load_began = time.monotonic(), _cpu_seconds(), _load()
    out = Path(args.out)
    try:
        plain_url(args.repo_url)
        refuse_stale_zh(Path(args.notebooks))  # before --force removes anything
    except ValueError as e:
        print(f"kvsched release: {e}", file=sys.stderr)
        return 2
    if out.exists() and any(out.iterdir()):
        if not args.force:
            print(f"kvsched release: {out} exists and is not empty (use --force to replace it)", file=sys.stderr)
            return 2
        shutil.rmtree(out)
    try:
        build_release(out, Path(args.notebooks), args.repo_url)
    except ValueError as e:
        print(f"kvsched release: {e}", file=sys.stderr)
        return 2
    problems, warnings = verify_release(out, args.repo_url, args.timeout, run_notebooks=not args.skip_notebook_run,
                                        jobs=args.jobs)
    for w in warnings:
        print(f"warning: {w}")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print(f"release {'FAILED' if problems else 'ok'}: {out} ({len(problems)} problem(s), {len(warnings)} warning(s))")
    print(f"took {time.monotonic() - began:.1f} s wall, {_cpu_seconds() - cpu_began:.1f} s CPU (this process and the "
          f"ones it waited for), load average {load_began} at the start, {_load()} at the end")
    return 1 if problems else 0


def _cpu_seconds() -> float:
    """User + system seconds of this process and of its children that have ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _load() -> str:
    """The 1-minute load average ("?" where the system does not say)."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"
