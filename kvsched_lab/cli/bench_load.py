"""How loaded the machine was while `kvsched bench` ran: load averages and CPU shares, read at start and end.

The bench's ratios are measured side by side so that load hits both sides alike, but a loaded
machine still skews some of them (a C loop suffers less from cache pressure than Python; a
prefill's GEMMs less than its gathers). So the report says how quiet the run was: the load
averages at start and end (``os.getloadavg``), and from ``/proc/stat`` the share of all CPU time
between the two reads that was busy, taken by this process and its children (``os.times``), taken
by other work, and stolen by the hypervisor. Where ``/proc/stat`` is missing (macOS) only the load
averages are given.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_sample() -> Dict[str, Any]:
    """Load averages, ``/proc/stat``'s all-CPU counters (seconds, or None) and this process's CPU seconds."""
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    counters: Optional[Dict[str, float]] = None
    try:
        with open("/proc/stat", encoding="ascii") as f:
            values = f.readline().split()[1:1 + len(_STAT_FIELDS)]
        tick = os.sysconf("SC_CLK_TCK")
        counters = {k: int(v) / tick for k, v in zip(_STAT_FIELDS, values)}
    except (OSError, ValueError):
        pass
    t = os.times()
    return {"loadavg": load, "cpu": counters, "own_s": t.user + t.system + t.children_user + t.children_system}


def machine_load(start: Dict[str, Any], end: Dict[str, Any]) -> Dict[str, Any]:
    """The two samples' load averages and, between them, the CPU shares (module docstring)."""
    out: Dict[str, Any] = {"cores": os.cpu_count(), "loadavg_start": start["loadavg"], "loadavg_end": end["loadavg"]}
    a, b = start["cpu"], end["cpu"]
    if a and b:
        delta = {k: b[k] - a[k] for k in _STAT_FIELDS if k in a and k in b}
        total = sum(delta.values())
        if total > 0:
            busy = total - delta.get("idle", 0) - delta.get("iowait", 0)
            own = min(end["own_s"] - start["own_s"], busy)
            out.update(busy_share=busy / total, own_share=own / total, others_share=(busy - own) / total,
                       steal_share=delta.get("steal", 0) / total)
    return out


def load_markdown(load: Dict[str, Any]) -> str:
    """One line: the load averages and the CPU shares, for the top of the report."""
    def avg(x):
        return "n/a" if not x else " / ".join(f"{v:.2f}" for v in x)

    line = (f"Machine load: load average (1 / 5 / 15 min) {avg(load['loadavg_start'])} at start, "
            f"{avg(load['loadavg_end'])} at end, on {load['cores']} cores")
    if "busy_share" in load:
        line += (f"; CPU during the run {100 * load['busy_share']:.0f}% busy: this bench "
                 f"{100 * load['own_share']:.0f}%, other work {100 * load['others_share']:.0f}%, "
                 f"steal {100 * load['steal_share']:.1f}%")
    quiet = load.get("others_share")
    if quiet is not None:
        line += " (a quiet run)" if quiet < 0.1 else " (**a loaded run**: ratios may be skewed)"
    return line + "."
