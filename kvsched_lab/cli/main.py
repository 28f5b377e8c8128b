"""The `kvsched` command line: doctor, replay, i18n, bench, grade, release."""
from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional


def _cmd_doctor(args: argparse.Namespace) -> int:
    from kvsched_lab.cli.doctor import diagnose, problems, report

    rows = diagnose(grading=args.grading)
    print(report(rows))
    return 1 if problems(rows) else 0


def _load_requests(args: argparse.Namespace):
    from kvsched_lab.sim.traces import load_named_trace, sort_by_arrival

    spec = args.trace if "/" in args.trace or args.trace.endswith(".jsonl") or args.trace == "synthetic" \
        or args.trace.startswith("mooncake:") else f"mooncake:{args.trace}"
    requests = sort_by_arrival(load_named_trace(spec, seed=args.seed))
    if args.max_requests is not None:
        requests = requests[: args.max_requests]
    return requests


def _cmd_replay(args: argparse.Namespace) -> int:
    requests = _load_requests(args)
    if args.concurrent:
        from kvsched_lab.kv import ConcurrentConfig, run_concurrent
        from kvsched_lab.kv.model import TinyDecoder

        if args.policy != "vllm":
            raise ValueError("--concurrent runs vLLM's block pool (free-block queue, tail first): use --policy vllm")
        config = ConcurrentConfig(num_blocks=args.capacity_blocks, tokens_per_block=args.tokens_per_block,
                                  max_running=args.max_running, max_output_tokens=args.max_output_tokens)
        report = run_concurrent(requests, config, model=TinyDecoder(device=args.device))
        out = {"policy": args.policy, "trace": args.trace, **report.summary()}
    elif args.real_kv:
        from kvsched_lab.kv.real_kv import real_kv_replay

        out = real_kv_replay(requests, args.policy, capacity_blocks=args.capacity_blocks,
                             tokens_per_block=args.tokens_per_block, device=args.device,
                             progress=not args.quiet)
        out = {"policy": args.policy, "trace": args.trace, **out}
    else:
        from kvsched_lab.sim.replay import replay

        result = replay(requests, args.policy, args.capacity_blocks, progress=not args.quiet)
        out = {"trace": args.trace, **result.to_dict()}
    if args.json:
        print(json.dumps(out))
    else:
        width = max(len(k) for k in out)
        for k, v in out.items():
            if v is None:
                continue
            shown = f"{v:.4%}" if k.endswith("_rate") else (f"{v:.3f}" if isinstance(v, float) else v)
            print(f"{k:<{width}}  {shown}")
    return 0


def _cmd_i18n(args: argparse.Namespace) -> int:
    """update: merge the English into the PO files; build: write notebooks/zh; status: list stale."""
    from pathlib import Path

    from kvsched_lab.i18n import notebooks as nbi18n
    from kvsched_lab.i18n.catalogue import update_catalogue

    root = Path(args.root).resolve()
    package = root / "kvsched_lab"
    # The runtime catalogue is managed where root is a source checkout (not for a bare notebooks tree).
    has_catalogue = (package / "i18n").is_dir()
    sources = nbi18n.english_notebooks(root)
    if not sources:
        raise FileNotFoundError(f"no English notebooks under {root / 'notebooks'}")
    if args.action == "update":
        memory = nbi18n.translation_memory([nbi18n.po_path_for(root, nb) for nb in sources])
        for nb in sources:
            counts = nbi18n.update_po(nb, nbi18n.po_path_for(root, nb), memory)
            summary = ", ".join(f"{k} {v}" for k, v in counts.items())
            print(f"{nbi18n.po_path_for(root, nb).relative_to(root)}: {summary}")
        if has_catalogue:
            new, obsolete = update_catalogue(package_dir=package)
            print(f"kvsched_lab/i18n/zh_CN.po: new {new}, obsolete {obsolete}")
        return 0
    stale = []
    for nb in sources:
        if args.action == "build":
            report = nbi18n.build_notebook(nb, nbi18n.po_path_for(root, nb), nbi18n.zh_path_for(root, nb))
        else:
            report = nbi18n.check_notebook(nb, nbi18n.po_path_for(root, nb))
        stale += [f"{nb.name} {s}" for s in report.stale]
    if has_catalogue:
        stale += [f"zh_CN.po: {m}" for m in nbi18n.untranslated_messages(package)]
    if args.action == "build":
        print(f"wrote {len(sources)} notebooks to {root / 'notebooks' / 'zh'}")
    shown = " (built in English)" if args.action == "build" else ""
    for line in stale:
        print(f"stale{shown}: {line}", file=sys.stderr)
    if stale:
        print(f"{len(stale)} translations missing or fuzzy: edit the i18n/zh_CN/*.po entries listed above "
              "(remove the 'fuzzy' flag once retranslated), then run `kvsched i18n build`.", file=sys.stderr)
    return 1 if stale and (args.strict or args.action == "status") else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kvsched", description="KV-cache scheduling lab.")
    sub = parser.add_subparsers(dest="command", required=True)

    doctor = sub.add_parser("doctor", help="check Python, torch, GPU, Jupyter and widgets")
    doctor.add_argument("--grading", action="store_true",
                        help="also check what grading needs here (instructors: the sandbox for learner code)")
    doctor.set_defaults(func=_cmd_doctor)

    rp = sub.add_parser("replay", help="replay a trace through a policy (REFERENCE.md section 3)")
    rp.add_argument("--trace", default="conversation",
                    help="a JSONL path, 'synthetic' (generated offline), or a Mooncake trace name: "
                         "'conversation' or 'mooncake:synthetic' (found on disk or downloaded)")
    rp.add_argument("--policy", default="lru", help="library policy name (see --help of kvsched bench)")
    rp.add_argument("--capacity-blocks", type=int, required=True, help="cache capacity in blocks")
    rp.add_argument("--json", action="store_true", help="print one JSON object")
    rp.add_argument("--quiet", action="store_true", help="no progress bar")
    rp.add_argument("--seed", type=int, default=0, help="seed of the generated 'synthetic' trace")
    rp.add_argument("--max-requests", type=int, default=None, help="replay only the first N requests")
    rp.add_argument("--real-kv", action="store_true",
                    help="run the replay through the engine: real KV blocks and the tiny model")
    rp.add_argument("--concurrent", action="store_true",
                    help="serve the requests concurrently on real KV blocks (prefill, decode, preemption); "
                         "--capacity-blocks is then the whole pool")
    rp.add_argument("--max-running", type=int, default=8, help="with --concurrent: requests decoding at once")
    rp.add_argument("--max-output-tokens", type=int, default=32,
                    help="with --concurrent: cap on each request's output_length from the trace")
    rp.add_argument("--tokens-per-block", type=int, default=16,
                    help="with --real-kv or --concurrent: tokens in one block")
    rp.add_argument("--device", default=None, help="with --real-kv: cpu, cuda, cuda:1 (default: GPU if any)")
    rp.set_defaults(func=_cmd_replay)

    i18n = sub.add_parser("i18n", help="the Chinese edition: update the PO files, build notebooks/zh, list stale")
    i18n.add_argument("action", choices=["update", "build", "status"],
                      help="update: merge the English into i18n/zh_CN/*.po and the runtime catalogue; "
                           "build: write notebooks/zh (stale cells in English); status: list stale entries")
    i18n.add_argument("--root", default=".", help="the repository root (holds notebooks/ and i18n/)")
    i18n.add_argument("--strict", action="store_true", help="build: exit 1 when any translation is stale")
    i18n.set_defaults(func=_cmd_i18n)

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
