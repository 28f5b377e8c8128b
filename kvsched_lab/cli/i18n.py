"""`kvsched i18n`: the Chinese edition (update the PO files, build notebooks/zh, list what is stale)."""
from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    i18n = sub.add_parser("i18n", help="the Chinese edition: update the PO files, build notebooks/zh, list stale")
    i18n.add_argument("action", choices=["update", "build", "status"],
                      help="update: merge the English into i18n/zh_CN/*.po and the runtime catalogue; "
                           "build: write notebooks/zh (stale cells in English); status: list stale entries")
    i18n.add_argument("--root", default=".", help="the repository root (holds notebooks/ and i18n/)")
    i18n.add_argument("--strict", action="store_true", help="build: exit 1 when any translation is stale")
    i18n.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """update: merge the English into the PO files; build: write notebooks/zh; status: list stale."""
    from pathlib import Path

    from kvsched_lab.i18n import notebooks as nbi18n
    from kvsched_lab.i18n.catalogue import untranslated_messages, update_catalogue

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
        stale += [f"zh_CN.po: {m}" for m in untranslated_messages(package)]
    if args.action == "build":
        print(f"wrote {len(sources)} notebooks to {root / 'notebooks' / 'zh'}")
    shown = " (built in English)" if args.action == "build" else ""
    for line in stale:
        print(f"stale{shown}: {line}", file=sys.stderr)
    if stale:
        print(f"{len(stale)} translations missing or fuzzy: edit the i18n/zh_CN/*.po entries listed above "
              "(remove the 'fuzzy' flag once retranslated), then run `kvsched i18n build`.", file=sys.stderr)
    return 1 if stale and (args.strict or args.action == "status") else 0
