"""`make mutation`: mutation testing of the core modules with mutmut, one module at a time.

For each module, mutmut makes many small changes to it (a `<` for a `<=`, a 1 for a 0, a
dropped call), one at a time, and runs that module's fast tests on each; a change that no
test notices is a "surviving mutant", a behaviour the suite does not pin down. The score is
killed / all mutants. docs/testing.md lists the scores and every survivor, with why it is
left (equivalent, or not worth a test).

Each module runs in its own scratch copy of the working tree (mutmut writes a `mutants/`
folder next to its config), so a run never touches the repository and its config lives here,
not in the shared pyproject.toml. Usage:

    python tools/mutation.py                              # every core module
    python tools/mutation.py kvsched_lab/kv/block_pool.py    # one (or several) of them
    python tools/mutation.py --list                       # the modules and their tests
    python tools/mutation.py --survivors-of before.json   # only the survivors of an earlier run, again
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
POLICY_TESTS = ["tests/test_policies.py", "tests/test_policy_snapshots.py", "tests/test_policy_base.py"]
# The grader's comparison and scoring, tested in-process (the batch tests run them too, but
# through sandboxes: far too slow to repeat for every mutant).
GRADER_TESTS = ["tests/test_grading_verdict.py"]
CHECK_TESTS = ["tests/test_course_checks.py", "tests/test_check_guards.py", "tests/test_check_messages.py"]

# Core module -> pytest arguments selecting the fast tests that exercise it (mutmut runs, per
# mutant, those of them that reach the mutated function). Ordered by priority: a partial run
# still scores the first ones.
MODULES: Dict[str, List[str]] = {
    "kvsched_lab/kv/block_pool.py": ["tests/test_block_pool.py", "tests/test_model.py"],
    "kvsched_lab/kv/engine.py": ["tests/test_engine.py"],
    "kvsched_lab/sim/replay.py": ["tests/test_replay.py"],
    "kvsched_lab/sim/traces.py": ["tests/test_traces.py", "tests/test_replay.py"],
    "kvsched_lab/kv/model.py": ["tests/test_model.py"],
    "kvsched_lab/sim/policies/lru.py": POLICY_TESTS,
    "kvsched_lab/sim/policies/fifo.py": POLICY_TESTS,
    "kvsched_lab/sim/policies/seed.py": POLICY_TESTS,
    "kvsched_lab/sim/policies/lfu.py": POLICY_TESTS,
    "kvsched_lab/sim/policies/base.py": POLICY_TESTS,
    "kvsched_lab/sim/policies/buckets.py": POLICY_TESTS,
    "kvsched_lab/sim/policies/seed_compact.py": POLICY_TESTS,
    "kvsched_lab/sim/policies/arc.py": [*POLICY_TESTS, "tests/test_policy_arc.py"],
    "kvsched_lab/sim/policies/s3fifo.py": [*POLICY_TESTS, "tests/test_policy_s3fifo.py"],
    "kvsched_lab/sim/policies/s3fifo_prefix.py": [*POLICY_TESTS, "tests/test_policy_s3fifo_prefix.py"],
    "kvsched_lab/sim/policies/s3fifo_repeat.py": [*POLICY_TESTS, "tests/test_policy_s3fifo_repeat.py"],
    "kvsched_lab/sim/policies/gdsf.py": [*POLICY_TESTS, "tests/test_policy_gdsf.py"],
    "kvsched_lab/sim/policies/belady.py": [*POLICY_TESTS, "tests/test_policy_belady.py"],
    "kvsched_lab/sim/policies/vllm.py": [*POLICY_TESTS, "tests/test_policy_vllm_radix.py"],
    "kvsched_lab/sim/policies/radix.py": [*POLICY_TESTS, "tests/test_policy_vllm_radix.py"],
    "kvsched_lab/course/checks/common.py": CHECK_TESTS,
    "kvsched_lab/course/checks/score.py": CHECK_TESTS,
    "kvsched_lab/course/checks/heap.py": CHECK_TESTS,
    "kvsched_lab/course/checks/stale.py": CHECK_TESTS,
    "kvsched_lab/course/checks/entry.py": CHECK_TESTS,
    "kvsched_lab/course/checks/snapshot.py": CHECK_TESTS,
    "kvsched_lab/course/checks/aging.py": CHECK_TESTS,
    "kvsched_lab/course/checks/__init__.py": CHECK_TESTS,
    "kvsched_lab/grading/judging/compare.py": GRADER_TESTS,
    "kvsched_lab/grading/judging/cases.py": GRADER_TESTS,
    "kvsched_lab/grading/judging/verdict.py": GRADER_TESTS,
    "kvsched_lab/kv/block_manager.py": ["tests/test_concurrent_engine.py"],
    "kvsched_lab/kv/concurrent.py": ["tests/test_concurrent_engine.py"],
}
# Besides the package: what the tests import or read.
ALSO_COPY = ["solutions", "notebooks", "docs", "README.md", "Makefile", "environment.yml", ".ci"]


def scratch_copy(module: str, tests: Sequence[str]) -> Path:
    """A copy of the working tree (tracked and untracked, not ignored) with a mutmut config for `module`."""
    scratch = Path(tempfile.mkdtemp(prefix="kvsched-mutation-"))
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            dst = scratch / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    # Tests find the shared traces two folders above themselves: mutants/tests/ -> scratch/shared.
    shared = ROOT.parent / "shared"
    if shared.is_dir():
        (scratch / "shared").symlink_to(shared)
    also = [p for p in ALSO_COPY if (scratch / p).exists()]
    lines = ["[mutmut]", "source_paths = kvsched_lab", f"only_mutate = {module}",
             "also_copy =", *[f"    {p}" for p in also],
             "pytest_add_cli_args_test_selection =", *[f"    {t}" for t in tests],
             # torch is not fork-safe once pytest has run in the parent: fork each mutant from a clean server.
             "process_isolation = forkserver", ""]
    (scratch / "setup.cfg").write_text("\n".join(lines))
    return scratch


def _not_killed(mutmut: List[str], scratch: Path) -> List[str]:
    """Names of the mutants no test killed (survived, no tests, not checked), from `mutmut results`."""
    results = subprocess.run([*mutmut, "results"], cwd=scratch, capture_output=True, text=True).stdout
    return [line.split(":")[0].strip() for line in results.splitlines()
            if line.strip() and not line.strip().endswith((": killed", ": timeout"))]


def _source_sha256(module: str) -> str:
    return hashlib.sha256((ROOT / module).read_bytes()).hexdigest()


def run_module(module: str, tests: Sequence[str], max_children: int, keep: bool,
               earlier: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Score `module`; with `earlier` (its result from a report), test only that run's survivors again."""
    scratch = scratch_copy(module, tests)
    mutmut = [sys.executable, "-m", "mutmut"]
    started = time.perf_counter()
    only = list(earlier["survivors"]) if earlier else []
    run = subprocess.run([*mutmut, "run", "--max-children", str(max_children), *only], cwd=scratch,
                         capture_output=True, text=True)
    # On a loaded machine a few mutants come out "survived" that a second look kills: test each
    # survivor again, so that only confirmed survivors are reported.
    first = [name for name in _not_killed(mutmut, scratch) if not earlier or name in only]
    if run.returncode == 0 and first:
        subprocess.run([*mutmut, "run", "--max-children", str(max_children), *first], cwd=scratch,
                       capture_output=True, text=True)
    seconds = time.perf_counter() - started
    subprocess.run([*mutmut, "export-cicd-stats"], cwd=scratch, capture_output=True, text=True)
    stats_path = scratch / "mutants" / "mutmut-cicd-stats.json"
    if run.returncode != 0 or not stats_path.exists():
        tail = "\n".join((run.stdout + run.stderr).splitlines()[-25:])
        print(f"{module}: mutmut failed (exit {run.returncode}); scratch copy kept at {scratch}\n{tail}")
        return {"module": module, "error": run.returncode, "seconds": seconds}
    stats = json.loads(stats_path.read_text())
    survivors = [name for name in _not_killed(mutmut, scratch) if not earlier or name in only]
    diffs = {name: subprocess.run([*mutmut, "show", name], cwd=scratch, capture_output=True, text=True).stdout
             for name in survivors}
    if keep:
        print(f"{module}: scratch copy kept at {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    if earlier:  # the other mutants were killed in the earlier run, and neither they nor the tests got weaker
        total = earlier["total"]
        killed = total - len(survivors)
    else:
        killed = stats.get("killed", 0) + stats.get("timeout", 0)
        total = stats.get("total", 0) - stats.get("skipped", 0)
    return {"module": module, "total": total, "killed": killed, "survived": total - killed,
            "score": killed / total if total else 1.0, "seconds": seconds, "stats": stats,
            "survivors": survivors, "diffs": diffs, "source_sha256": _source_sha256(module),
            "survivors_only": bool(earlier)}


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="*", help="modules to mutate (default: every core module)")
    parser.add_argument("--list", action="store_true", help="print the modules and their tests, run nothing")
    parser.add_argument("--max-children", type=int, default=1, help="mutants tested at once (default 1)")
    parser.add_argument("--keep", action="store_true", help="keep each scratch copy (to run `mutmut browse`)")
    parser.add_argument("--report", type=Path, help="write every result, survivors' diffs included, as JSON")
    parser.add_argument("--survivors-of", type=Path, metavar="REPORT",
                        help="test again only the survivors listed in an earlier --report (after writing tests for "
                             "them); refused for a module whose source changed since")
    args = parser.parse_args(list(argv))
    if args.list:
        for module, tests in MODULES.items():
            print(f"{module}: {' '.join(tests)}")
        return 0
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"not a core module: {', '.join(unknown)}; see --list")
    earlier: Dict[str, Dict[str, Any]] = {}
    if args.survivors_of:
        earlier = {r["module"]: r for r in json.loads(args.survivors_of.read_text()) if "error" not in r}
        for module in args.modules or list(earlier):
            if module not in earlier:
                parser.error(f"{module} is not in {args.survivors_of}")
            if earlier[module].get("source_sha256", _source_sha256(module)) != _source_sha256(module):
                parser.error(f"{module} changed since {args.survivors_of}: its mutants are numbered anew; run it whole")
    results = []
    for module in args.modules or list(earlier or MODULES):
        result = run_module(module, MODULES[module], args.max_children, args.keep, earlier.get(module))
        results.append(result)
        if args.report:  # after each module, so a long run's finished modules can be read early
            args.report.write_text(json.dumps(results, indent=1) + "\n")
        if "error" not in result:
            print(f"{module}: {result['killed']}/{result['total']} killed, score {result['score']:.1%}, "
                  f"{result['seconds']:.0f} s; survivors: {', '.join(result['survivors']) or 'none'}", flush=True)
    print("\n| module | mutants | killed | survived | score | seconds |\n|---|---:|---:|---:|---:|---:|")
    for r in results:
        if "error" in r:
            print(f"| {r['module']} | mutmut failed | | | | {r['seconds']:.0f} |")
        else:
            print(f"| {r['module']} | {r['total']} | {r['killed']} | {r['survived']} | {r['score']:.1%} | "
                  f"{r['seconds']:.0f} |")
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
