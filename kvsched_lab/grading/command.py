"""``kvsched grade``: the command line of a batch (batch.py), of ``kvsched grade merge`` (merge.py), of a
one-learner regrade (``--learner``, regrade.py) and of ``kvsched grade report|export`` (class_commands.py).

An instructor's mistake fails at once with a clear message and exit status 2, before any work
(`instructor_mistakes`): a path that does not exist, a class folder with no submission in it, an
``--out`` that is a file, an ``--out`` that holds an earlier run (refused unless ``--resume``, or
``--force``, which removes that run's outputs so no stale feedback file is left beside the new
ones), ``--jobs`` outside 1..`max_jobs`, a timeout or memory budget that cannot work.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import List, Optional

from kvsched_lab.grading.box import sandbox
from kvsched_lab.grading.batch.batch import grade_submissions
from kvsched_lab.grading.batch.options import BatchOptions
from kvsched_lab.grading.class_commands import COMMANDS, plan
from kvsched_lab.grading.learner.intake import discover, lone_learner_folders
from kvsched_lab.grading.batch.journal import JOURNAL
from kvsched_lab.grading.box.leases import BLOCK, LeaseError
from kvsched_lab.grading.batch.merge import merge_main
from kvsched_lab.grading.batch.regrade import regrade
from kvsched_lab.grading.batch.shards import parse_shard
from kvsched_lab.grading.batch.stamp import grader_fingerprint
from kvsched_lab.grading.judging.verdict import REPO
from kvsched_lab.grading.learner.writers import bounded, encoded
from kvsched_lab.i18n.language import LANGUAGES
from kvsched_lab.sim.scheduler import TODO_METHODS

MIN_MEMORY_MB = 512  # below this the grading kernel itself cannot start
# What a run (and its report, export, overrides) writes into --out: all that --force removes.
OUTPUTS = ("grades.csv", "feedback", "work", "manifest.json", JOURNAL, "details.json", "overrides.csv", "report",
           "export")


def max_jobs() -> int:
    """Parallel sandboxes one batch may run: twice the CPUs, at most one lease's uids."""
    return max(1, min(BLOCK, 2 * (os.cpu_count() or 1)))


def instructor_mistakes(args: argparse.Namespace) -> list:
    """Every instructor mistake in `args`, checked before any grading."""
    problems = []
    for arg in args.submissions:
        path = Path(arg)
        if not os.path.lexists(path):
            problems.append(f"{bounded(arg)}: no such file or folder")
        elif path.is_dir() and not path.is_symlink() and not discover([arg], check=False):
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
    elif out.is_dir() and any(out.iterdir()) and not (args.force or args.resume or args.learner):
        problems.append(f"--out {bounded(args.out)} already holds files (an earlier run?); choose another folder, "
                        "pass --resume to go on with that run, or --force to replace its outputs")
    elif out.is_dir() and args.force:
        foreign = sorted(p.name for p in out.iterdir() if p.name not in OUTPUTS and not p.name.startswith("."))
        if foreign:
            problems.append(f"--out {bounded(args.out)} holds files kvsched grade did not write "
                            f"({bounded(', '.join(foreign[:3]))}); --force replaces only its own outputs")
    if args.force and args.resume:
        problems.append("--force and --resume: choose one (start over, or go on with the earlier run)")
    return problems


def lone_learner_warnings(paths: List[str]) -> List[str]:
    """A warning for each folder argument that looks like one learner's folder (intake.lone_learner_folders)."""
    course = {p.name for p in (REPO / "notebooks").glob("*.ipynb")}
    out = []
    for arg, mine in lone_learner_folders(list(paths), course):
        name = bounded(Path(arg).name or arg)
        out.append(f"kvsched grade: warning: {bounded(arg)} holds {len(mine)} of the course's notebooks "
                   f"({bounded(', '.join(mine[:3]))}{', ...' if len(mine) > 3 else ''}): it looks like ONE learner's "
                   f"folder, but a folder argument is a class, so each notebook in it is graded as a learner of its "
                   f"own. To grade one learner, give the folder that holds it (kvsched grade CLASS, with "
                   f"CLASS/{name}/ inside), or regrade it in its graded class: kvsched grade --learner "
                   f"{bounded(arg)} --out OUT.")
    return out


def _say(line: str) -> None:
    """One line on stdout, whatever characters it holds."""
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None:  # a text-only stdout (a redirect in a test): it gets the text, surrogates replaced
        print(encoded(line).decode("utf-8"))
        return
    sys.stdout.flush()
    stream.write(encoded(line + "\n"))
    stream.flush()


def grade_parser() -> argparse.ArgumentParser:
    """``kvsched grade``'s arguments (the Kubernetes manifest's test parses its command with it)."""
    p = argparse.ArgumentParser(prog="kvsched grade", description=(
        "Grade learner submissions against the hidden reference (instructors only). A SUBMISSION is a "
        "class folder (each .ipynb/.py in it is one learner, each subfolder one learner), or one .ipynb "
        "or .py file. Learner code runs in a bubblewrap sandbox. `kvsched grade merge OUT_0 ... --out OUT` "
        "puts --shard outputs back together; `kvsched grade report OUT` and `kvsched grade export OUT "
        "--roster CSV` show and export a graded class. See docs/grading.md."))
    p.add_argument("submissions", nargs="*", metavar="SUBMISSION")
    p.add_argument("--learner", metavar="PATH",
                   help="regrade one learner of the class in --out (a file, or a student's folder taken as one "
                        "learner) and change only its row")
    p.add_argument("--overrides", metavar="CSV",
                   help="corrections (submission,todo,points,reason) applied to the rows and shown in the feedback")
    p.add_argument("--out", default="grades", help="where grades.csv, feedback/, manifest.json and the journal go "
                                                   "(default: ./grades); new or empty unless --resume or --force")
    p.add_argument("--force", action="store_true",
                   help="replace the outputs of an earlier run in --out (grades.csv, feedback/, the journal...)")
    p.add_argument("--timeout", type=float, default=10.0, help="CPU seconds each TODO may run in all (default 10)")
    p.add_argument("--jobs", type=int, default=1, help=f"submissions graded in parallel (default 1, at most {max_jobs()})")
    p.add_argument("--memory-mb", type=int, default=2048,
                   help="memory of one sandbox, all its processes together (default 2048, at least 512)")
    p.add_argument("--keep-work", action="store_true", help="keep grading inputs and logs in OUT/work")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run learner code without the sandbox (where bubblewrap cannot run; rows say 'unsandboxed')")
    p.add_argument("--lang", default="en", choices=LANGUAGES,
                   help="language of the feedback files (default en); grades.csv is the same in every language")
    p.add_argument("--shard", default=None, metavar="K/N",
                   help="grade only shard K of N (0 <= K < N; e.g. $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)")
    p.add_argument("--reveal-expected", action="store_true",
                   help="feedback shows the reference's value at each TODO's first difference (by default only "
                        "what differs and the learner's own value: resubmissions cannot read the hidden answers)")
    p.add_argument("--resume", action="store_true",
                   help="keep what OUT's journal already holds (an interrupted run) and grade only the rest")
    return p


def grade_main(argv: Optional[List[str]] = None) -> int:
    """``kvsched grade SUBMISSION... [--out DIR] [--shard K/N] [--resume] ...`` or ``kvsched grade merge ...``.

    0 when graded (whatever the grades), 2 for a usage problem or no sandbox, 3 when the grader changed."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["merge"]:  # a class folder named merge (report, export) is given as ./merge
        return merge_main(argv[1:])
    if argv[:1] and argv[0] in COMMANDS:
        return COMMANDS[argv[0]](argv[1:])
    p = grade_parser()
    args = p.parse_args(argv)
    if bool(args.learner) == bool(args.submissions):
        p.error("give SUBMISSION... or --learner PATH (not both)")
    if args.learner and args.reveal_expected:
        p.error("--reveal-expected is an option of the whole class: a --learner regrade keeps the class's")
    if args.overrides and args.shard:
        p.error("--overrides applies to the whole class: give it to kvsched grade merge")
    try:
        shard = parse_shard(args.shard) if args.shard is not None else None
    except ValueError as e:
        p.error(str(e))
    problems = instructor_mistakes(args)
    for problem in problems:
        print(f"kvsched grade: {problem}", file=sys.stderr)
    if problems:
        return 2
    for warning in lone_learner_warnings(args.submissions):
        print(warning, file=sys.stderr)
    try:
        learners, overrides = plan(args.submissions, args.learner, Path(args.out), args.overrides)
    except ValueError as e:  # an instructor's typo (OverridesError too): nothing graded or written
        print(f"kvsched grade: {e}", file=sys.stderr)
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
    before = grader_fingerprint()
    started = time.monotonic()
    try:
        if args.learner:
            digest = regrade(learners[0], Path(args.out), overrides, sandboxed=not args.no_sandbox)
            print(f"regraded {learners[0].name} in {time.monotonic() - started:.1f} s -> "
                  f"{Path(args.out) / 'grades.csv'}\ngrades.csv sha256 {digest}")
            return 3 if grader_fingerprint() != before else 0
        options = BatchOptions(timeout=args.timeout, jobs=args.jobs, memory_mb=args.memory_mb, keep_work=args.keep_work,
                               sandboxed=not args.no_sandbox, lang=args.lang, shard=shard, resume=args.resume,
                               overrides=tuple(overrides), reveal_expected=args.reveal_expected)
        grades = grade_submissions(args.submissions, Path(args.out), options, progress=sys.stderr, learners=learners)
    except ValueError as e:  # a journal that cannot be resumed, a class a regrade cannot join: before any grading
        print(f"kvsched grade: {e}", file=sys.stderr)
        return 2
    except LeaseError as e:  # every block of sandbox uids held, or an unsafe lease folder: before any grading
        print(f"kvsched grade: cannot lease sandbox uids: {e}", file=sys.stderr)
        return 2
    width = min(40, max([len(bounded(g.submission)) for g in grades] + [10]))
    for g in grades:
        _say(f"{bounded(g.submission):<{width}}  {g.total:>3}  " + " ".join(f"{g.todos[n].points:>2}" for n in TODO_METHODS)
             + f"  {bounded(g.status, 2000)}")
    print(f"graded {len(grades)} submission(s) in {time.monotonic() - started:.1f} s -> {Path(args.out) / 'grades.csv'}"
          + (f" ({len(overrides)} override(s) applied there: the points above are as graded)" if overrides else ""))
    if grader_fingerprint() != before:
        print("kvsched grade: solutions/ or the grader changed during grading; a submission may have tampered "
              "with them. Restore them and regrade.", file=sys.stderr)
        return 3
    return 0
