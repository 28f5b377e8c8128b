"""``kvsched grade report OUT``: how the class did, as one self-contained HTML page with PNG figures.

From ``grades.csv`` (final points, after overrides) and ``details.json`` (class_files.py), with no
learner code run: the distribution of totals and of each TODO's points, each TODO's status counts,
the hidden-case families that fail most often per TODO (with how many learners fail each), the most
common feedback message per TODO, the seconds each submission took to grade, and the pairs of
submissions similar enough to read side by side (similarity.py). Every name, message and line of
code on the page is escaped text. Figures: matplotlib's Agg backend (no display needed), written as
PNG files beside the page (OUT/report/) and embedded in it, so the page alone can be sent on.
"""
from __future__ import annotations

import argparse
import base64
import csv
import html
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from kvsched_lab.grading.classroom import similarity
from kvsched_lab.grading.classroom.class_files import read_details
from kvsched_lab.grading.learner.writers import atomic_write
from kvsched_lab.grading.judging.verdict import POINTS
from kvsched_lab.sim.scheduler import TODO_METHODS

STATUSES = ("passed", "failed", "not attempted", "error", "timed out")
COLOURS = {"passed": "#1a7f37", "failed": "#d4a72c", "not attempted": "#8c959f", "error": "#cf222e",
           "timed out": "#8250df"}
TOP = 5  # rows per TODO in the failing-family table
STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 70em; margin: 2em auto; padding: 0 1em; color: #1f2328; }
table { border-collapse: collapse; margin: .5em 0 1.5em; } td, th { border: 1px solid #d0d7de; padding: .25em .6em;
vertical-align: top; text-align: left; } th { background: #f6f8fa; } img { max-width: 100%; }
pre { margin: 0; font-size: 12.5px; white-space: pre-wrap; } .hit { background: #fff1b8; }
.note { background: #ddf4ff; border: 1px solid #54aeff; border-radius: 6px; padding: .6em 1em; }
"""


def _figures(rows: Sequence[Dict[str, str]], details: Sequence[dict], folder: Path) -> List[str]:
    """Write the PNG figures into `folder`; return their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    fig, axes = plt.subplots(1, 1 + len(TODO_METHODS), figsize=(16, 3.2), constrained_layout=True)
    totals = [int(r["total"]) for r in rows]
    axes[0].hist(totals, bins=range(0, POINTS * len(TODO_METHODS) + 6, 5), color="#0969da")
    axes[0].set(title="total", xlabel="points", ylabel="learners")
    for ax, todo in zip(axes[1:], TODO_METHODS):
        ax.hist([int(r[todo]) for r in rows], bins=range(0, POINTS + 2), color="#0969da", align="left")
        ax.set(title=todo, xlabel=f"points (of {POINTS})", xlim=(-1, POINTS + 1))
    fig.suptitle(f"Points per TODO ({len(rows)} learners; final points, after overrides)")
    fig.savefig(folder / "points.png", dpi=90)
    names.append("points.png")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 3.4), constrained_layout=True)
    left = [0] * len(TODO_METHODS)
    for status in STATUSES:
        counts = [sum(1 for d in details if d["todos"][t]["status"] == status) for t in TODO_METHODS]
        ax.barh(list(TODO_METHODS), counts, left=left, color=COLOURS[status], label=status)
        left = [a + b for a, b in zip(left, counts)]
    ax.invert_yaxis()
    ax.set(title="Status of each TODO", xlabel="learners")
    ax.legend(ncol=len(STATUSES), loc="upper center", bbox_to_anchor=(0.5, -0.25), frameon=False)
    fig.savefig(folder / "statuses.png", dpi=90)
    names.append("statuses.png")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 3.2), constrained_layout=True)
    seconds = [d["elapsed_s"] for d in details]
    ax.hist(seconds, bins=20, color="#6e7781")
    ax.set(title=f"Grading time per submission (median {sorted(seconds)[len(seconds) // 2]:.1f} s, "
                 f"total {sum(seconds):.0f} s)" if seconds else "Grading time per submission",
           xlabel="seconds (wall clock, with --jobs parallel)", ylabel="submissions")
    fig.savefig(folder / "timing.png", dpi=90)
    names.append("timing.png")
    plt.close(fig)
    return names


def failing_families(details: Sequence[dict]) -> Dict[str, List[tuple]]:
    """TODO -> [(family, learners failing it)], most failed first."""
    return {t: Counter(f for d in details for f in d["todos"][t]["failing"]).most_common(TOP) for t in TODO_METHODS}


def common_messages(details: Sequence[dict]) -> Dict[str, Optional[tuple]]:
    """TODO -> (the most common feedback message among learners who lost points, how many), or None."""
    out = {}
    for t in TODO_METHODS:
        counts = Counter(d["todos"][t]["message"] for d in details
                         if d["todos"][t]["message"] and d["todos"][t]["status"] != "passed")
        out[t] = counts.most_common(1)[0] if counts else None
    return out


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _code(text: str, hits: Sequence[int]) -> str:
    marked = set(hits)
    return "<pre>" + "\n".join(f'<span class="hit">{_e(line)}</span>' if i in marked else _e(line)
                               for i, line in enumerate(text.split("\n"), start=1)) + "</pre>"


def _similarity_section(details: Sequence[dict], notebooks: Optional[Path]) -> List[str]:
    pairs, methods = similarity.review({d["submission"]: d["sources"] for d in details}, notebooks)
    out = ["<h2>Similar submissions to review</h2>",
           '<p class="note">Each pair below has five TODO methods that are near-identical once names, comments and '
           "layout are set aside and the code every learner is given or expected to write (the stubs and the "
           "model answer) is left out. Similar code has innocent causes: allowed collaboration, the same "
           "tutorial, a hint given in class. <b>This list is a reason to read two submissions side by side, "
           "never a finding.</b> "
           f"A pair is listed when each TODO's methods reach a similarity of {similarity.THRESHOLD} (Jaccard index "
           f"of winnowed token fingerprints) or both have nothing of their own, at least {similarity.MIN_TODOS} "
           f"TODOs share code of their own, and {similarity.MIN_SHARED} fingerprints are shared; on the course's "
           "own right-but-different answers that lists no pair (docs/grading.md gives the measurement).</p>"]
    if not pairs:
        return out + [f"<p>No pair of the {len(details)} submissions reaches the threshold.</p>"]
    out.append(f"<p>{len(pairs)} pair(s); matching lines are highlighted.</p>")
    for p in pairs:
        out.append(f"<h3>{_e(p.a)} and {_e(p.b)}: similarity {p.similarity:.2f}, {p.shared} shared fingerprints</h3>"
                   f"<table><tr><th>TODO</th><th>{_e(p.a)}</th><th>{_e(p.b)}</th></tr>")
        for t, (la, lb) in p.lines.items():
            out.append(f"<tr><td>{_e(t)}</td><td>{_code(methods[p.a][t], la)}</td>"
                       f"<td>{_code(methods[p.b][t], lb)}</td></tr>")
        out.append("</table>")
    return out


def write_report(out: Path, notebooks: Optional[Path] = None) -> Path:
    """Write ``out/report/index.html`` and its figures; return the page's path."""
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    details = read_details(out)
    if [d["submission"] for d in details] != [r["submission"] for r in rows]:
        raise ValueError(f"{out}/details.json and grades.csv list different submissions: regrade the class")
    folder = out / "report"
    folder.mkdir(parents=True, exist_ok=True)
    figures = _figures(rows, details, folder)
    corrected = sum(1 for r in rows if r.get("overrides"))
    body = [f"<h1>Class report: {len(rows)} submissions</h1>",
            f"<p>Mean total {sum(int(r['total']) for r in rows) / max(len(rows), 1):.1f} of "
            f"{POINTS * len(TODO_METHODS)}; {sum(1 for r in rows if r['status'] != 'ok')} row(s) with a status "
            f"other than ok; {corrected} row(s) corrected by overrides.</p>",
            *(f'<p><img alt="{name[:-4]}" src="data:image/png;base64,'
              f'{base64.b64encode((folder / name).read_bytes()).decode()}"></p>' for name in figures),
            "<h2>Hidden-case families failed most often</h2><table><tr><th>TODO</th><th>family</th>"
            "<th>learners failing it</th></tr>"]
    for t, fams in failing_families(details).items():
        body += [f"<tr><td>{_e(t)}</td><td>{_e(fam)}</td><td>{n}</td></tr>" for fam, n in fams]
        if not fams:
            body.append(f"<tr><td>{_e(t)}</td><td colspan=2>none failed</td></tr>")
    body.append("</table><h2>Most common feedback message per TODO</h2><table><tr><th>TODO</th><th>message "
                "(among learners who lost points)</th><th>learners</th></tr>")
    for t, common in common_messages(details).items():
        body.append(f"<tr><td>{_e(t)}</td><td><pre>{_e(common[0])}</pre></td><td>{common[1]}</td></tr>" if common
                    else f"<tr><td>{_e(t)}</td><td colspan=2>every learner passed</td></tr>")
    body.append("</table><h2>Slowest to grade</h2><table><tr><th>submission</th><th>seconds</th><th>status</th></tr>")
    body += [f"<tr><td>{_e(d['submission'])}</td><td>{d['elapsed_s']:.1f}</td><td>{_e(d['status'])}</td></tr>"
             for d in sorted(details, key=lambda d: -d["elapsed_s"])[:TOP]]
    body.append("</table>")
    body += _similarity_section(details, notebooks)
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
            "style-src 'unsafe-inline'\"><title>Class report</title>"
            f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
    atomic_write(folder / "index.html", page.encode("utf-8"))
    return folder / "index.html"


def report_main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="kvsched grade report", description=(
        "Write OUT/report/index.html: how a graded class did, with figures and the similar pairs to review."))
    p.add_argument("out", metavar="OUT", help="the folder kvsched grade wrote")
    p.add_argument("--notebooks", default=None,
                   help="the course notebooks whose TODO cells are given code (default: this checkout's)")
    args = p.parse_args(argv)
    from kvsched_lab.grading.judging.verdict import REPO

    try:
        page = write_report(Path(args.out), Path(args.notebooks) if args.notebooks else REPO / "notebooks")
    except (ValueError, OSError) as e:
        print(f"kvsched grade report: {e}", file=sys.stderr)
        return 2
    print(f"wrote {page}")
    return 0
