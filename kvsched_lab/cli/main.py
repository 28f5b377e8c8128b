"""The `kvsched` entry point: one subparser per subcommand, each defined in its own file of this folder.

``doctor``, ``replay`` and ``i18n`` add their own subparser (``add_parser``); ``bench``, ``grade`` and
``release`` parse their own arguments, so `main` hands them the rest of the command line as it is.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from kvsched_lab.cli import doctor, i18n, replay


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kvsched", description="KV-cache scheduling lab.")
    sub = parser.add_subparsers(dest="command", required=True)

    for module in (doctor, replay, i18n):
        module.add_parser(sub)

    # These own their argparse: `main` hands them the rest of the command line untouched.
    for name, help_text in DELEGATED.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


DELEGATED = {
    "bench": "measure policies, heaps and real-KV prefill side by side",
    "grade": "grade learners' notebooks or .py files (instructors)",
    "release": "build and verify the student bundle (instructors)",
}


def _run_delegated(name: str, argv: List[str]) -> int:
    if name == "bench":
        from kvsched_lab.cli.bench import bench_main as entry
    else:
        try:
            from kvsched_lab import grading
        except ImportError:
            print(f"kvsched {name}: this is the student release; grading tools are for instructors.",
                  file=sys.stderr)
            return 2
        entry = grading.grade_main if name == "grade" else grading.release_main
    return entry(argv)


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in DELEGATED:
        return _run_delegated(argv[0], argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, TypeError) as e:
        print(f"kvsched {args.command}: error: {e}", file=sys.stderr)
        return 2
