"""`kvsched grade`: the instructor's command line, checked in full before any grading starts.

An instructor's mistake fails at once with a clear message and exit status 2, before any work:
a path that does not exist, a class folder with no submission in it, an ``--out`` that is a file,
an ``--out`` that holds an earlier run (refused unless ``--force``, which removes its grades.csv,
feedback/ and work/ so no stale feedback file is left beside the new ones), ``--jobs`` outside
1..`max_jobs`, a timeout or memory budget that cannot work. Then grade.py grades the batch.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import time
from pathlib import Path
from typing import List, Optional

from kvsched_lab.grading import sandbox
from kvsched_lab.grading.grade import PACKAGE, REPO, grade_submissions
from kvsched_lab.grading.intake import discover
from kvsched_lab.grading.leases import BLOCK
from kvsched_lab.grading.writers import bounded, encoded
from kvsched_lab.i18n.language import LANGUAGES
from kvsched_lab.sim.scheduler import TODO_METHODS

MIN_MEMORY_MB = 512  # below this the grading kernel itself cannot start
OUTPUTS = ("grades.csv", "feedback", "work")  # what a run writes into --out (all that --force removes)


def max_jobs() -> int:
    """Parallel sandboxes one batch may run: twice the CPUs, at most one lease's uids."""
    return max(1, min(BLOCK, 2 * (os.cpu_count() or 1)))


def _fingerprint_grader() -> str:
    """Hash of the reference and the grader's code, to notice a submission that rewrote them."""
    h = hashlib.sha256()
    for path in sorted((REPO / "solutions").glob("*.py")) + sorted((PACKAGE / "grading").glob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()


def _problems(args: argparse.Namespace) -> List[str]:
    """Every instructor mistake in `args`, checked before any grading."""
    problems = []
    for arg in args.submissions:
        path = Path(arg)
        if not os.path.lexists(path):
            problems.append(f"{bounded(arg)}: no such file or folder")
        elif path.is_dir() and not path.is_symlink() and not discover([arg]):
            problems.append(f"{bounded(arg)}: the folder holds no submission (no .ipynb, .py or learner folder)")
    if not 1 <= args.jobs <= max_jobs():
        problems.append(f"--jobs {args.jobs}: must be 1 to {max_jobs()} on this machine")
    if not 0 < args.timeout <= 600:
        problems.append(f"--timeout {args.timeout:g}: must be more than 0 and at most 600 seconds")
    if args.memory_mb < MIN_MEMORY_MB:
        problems.append(f"--memory-mb {args.memory_mb}: must be at least {MIN_MEMORY_MB}")
    out = Path(args.out)
    if os.path.lexists(out) and not out.is_dir():
        problems.append(f"--out {bounded(args.out)} is a file, not a folder")
    elif out.is_dir() and any(out.iterdir()) and not args.force:
        problems.append(f"--out {bounded(args.out)} already holds files (an earlier run?); choose another folder "
                        "or pass --force to replace its grades.csv, feedback/ and work/")
    elif out.is_dir() and args.force:
        foreign = sorted(p.name for p in out.iterdir() if p.name not in OUTPUTS)
        if foreign:
            problems.append(f"--out {bounded(args.out)} holds files kvsched grade did not write "
                            f"({bounded(', '.join(foreign[:3]))}); --force replaces only its own outputs")
    return problems


def _say(line: str) -> None:
    """One line on stdout, whatever characters it holds."""
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None:  # a text-only stdout (a redirect in a test): it gets the text, surrogates replaced
        print(encoded(line).decode("utf-8"))
        return
    sys.stdout.flush()
    stream.write(encoded(line + "\n"))
    stream.flush()


def grade_main(argv: Optional[List[str]] = None) -> int:
    """``kvsched grade SUBMISSION... [--out DIR] [--force] [--timeout S] [--jobs N] [--no-sandbox] [--lang zh]``.

    0 when graded; 2 for an instructor mistake (nothing graded); 3 when the grader changed during grading."""
    p = argparse.ArgumentParser(prog="kvsched grade", description=(
        "Grade learner submissions against the hidden reference (instructors only). A SUBMISSION is a "
        "class folder (each .ipynb/.py in it is one learner, each subfolder one learner), or one .ipynb "
        "or .py file. Learner code runs in a bubblewrap sandbox. See docs/grading.md."))
    p.add_argument("submissions", nargs="+", metavar="SUBMISSION")
    p.add_argument("--out", default="grades", help="where grades.csv and feedback/ go (default: ./grades); "
                                                   "must be new or empty unless --force")
    p.add_argument("--force", action="store_true", help="replace the grades.csv, feedback/ and work/ of an earlier run")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds each TODO may run in all (default 10)")
    p.add_argument("--jobs", type=int, default=1, help=f"submissions graded in parallel (default 1, at most {max_jobs()})")
    p.add_argument("--memory-mb", type=int, default=2048,
                   help="memory of one sandbox, all its processes together (default 2048)")
    p.add_argument("--keep-work", action="store_true", help="keep grading inputs and logs in OUT/work")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run learner code without the sandbox (where bubblewrap cannot run; rows say 'unsandboxed')")
    p.add_argument("--lang", default="en", choices=LANGUAGES,
                   help="language of the feedback files (default en); grades.csv is the same in every language")
    args = p.parse_args(argv)
    problems = _problems(args)
    for problem in problems:
        print(f"kvsched grade: {problem}", file=sys.stderr)
    if problems:
        return 2
    try:
        import solutions  # noqa: F401
    except ImportError:
        print("kvsched grade: the reference (solutions/) is not here; grading needs the instructor's copy",
              file=sys.stderr)
        return 2
    if not args.no_sandbox:
        works, why = sandbox.probe()
        if not works:
            print(f"kvsched grade: cannot sandbox learner code here: {why}.\nTo enable it: {sandbox.HOW_TO_ENABLE}.\n"
                  "To grade without it (only submissions you trust): kvsched grade --no-sandbox ...", file=sys.stderr)
            return 2
    out = Path(args.out)
    if args.force and out.is_dir():
        for name in OUTPUTS:
            target = out / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif os.path.lexists(target):
                target.unlink()
    before = _fingerprint_grader()
    started = time.monotonic()
    grades = grade_submissions(args.submissions, out, args.timeout, args.jobs, args.memory_mb,
                               args.keep_work, sandboxed=not args.no_sandbox, lang=args.lang)
    width = min(40, max([len(bounded(g.submission)) for g in grades] + [10]))
    for g in grades:
        _say(f"{bounded(g.submission):<{width}}  {g.total:>3}  " + " ".join(f"{g.todos[n].points:>2}" for n in TODO_METHODS)
             + f"  {bounded(g.status, 2000)}")
    _say(f"graded {len(grades)} submission(s) in {time.monotonic() - started:.1f} s -> {out / 'grades.csv'}")
    if _fingerprint_grader() != before:
        print("kvsched grade: solutions/ or the grader changed during grading; a submission may have tampered "
              "with them. Restore them and regrade.", file=sys.stderr)
        return 3
    return 0
