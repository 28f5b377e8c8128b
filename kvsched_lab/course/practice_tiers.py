"""Notebook 09's practice TODO ``tier_choice`` (not graded): its cases, its check and its four hint tiers.

The learner writes ``place_evicted(block)``: where a block the GPU evicts goes, ``"host"``,
``"disk"`` or ``"drop"``, from its reuse (``block.hits``) and its measured costs
(``block.recompute_s`` against ``block.load_s[tier]``). The rule the notebook asks for:

1. a block used by at least two requests goes to the host, if loading it back from there beats
   recomputing it;
2. any other block goes to the disk, if there is one and loading it back from there beats
   recomputing it;
3. else it is dropped.

The cases mix the course's figures: a Llama-3-8B block over PCIe (moving wins), and costs where
recomputing is cheaper than any load (the tiny model on a GPU). Messages say what is wrong,
never the expected answer.
"""
from __future__ import annotations

from typing import Callable, List, Tuple

from kvsched_lab.course.practice_base import Wrong, call_on_copies
from kvsched_lab.i18n import N_, _
from kvsched_lab.kv.tiers.placement import BlockInfo

_PCIE = (0.0, 2.1e-3, 11.1e-3)  # seconds to load one Llama-3-8B block from device, host, disk (breakeven.py)
_GPU_TINY = (0.0, 4e-5, 9e-4)  # a tiny block on a GPU: loads cost more than the recompute below

# (block, where it belongs)
_CASES: List[Tuple[BlockInfo, str]] = [
    (BlockInfo("a", 3, 1, 3, 17.8e-3, _PCIE), "host"),  # reused, the host beats recompute
    (BlockInfo("b", 1, 4, 3, 17.8e-3, _PCIE), "disk"),  # used once: not worth host memory, the disk still wins
    (BlockInfo("c", 1, 2, 2, 17.8e-3, _PCIE[:2]), "drop"),  # used once and no disk tier
    (BlockInfo("d", 2, 7, 2, 17.8e-3, _PCIE[:2]), "host"),  # two requests: reused
    (BlockInfo("e", 5, 1, 3, 2e-5, _GPU_TINY), "drop"),  # reused, but recomputing beats every load
    (BlockInfo("f", 1, 3, 3, 5e-3, _PCIE), "drop"),  # used once, the disk loads slower than recompute
    (BlockInfo("g", 4, 2, 3, 5e-3, _PCIE), "host"),  # reused, the host still beats recompute
    (BlockInfo("h", 1, 1, 2, 2e-5, _GPU_TINY[:2]), "drop"),
]
_TIER = {"host": 1, "disk": 2}


def check_tier_choice(fn: Callable[[BlockInfo], str]) -> int:
    """Run `fn` on every case; raise `Wrong` at the first wrong choice; return the number of cases."""
    for block, want in _CASES:
        got = call_on_copies(fn, block)
        if got not in ("host", "disk", "drop"):
            raise Wrong(_("return 'host', 'disk' or 'drop' (a string), not {got!r}", got=got))
        if got == "disk" and block.num_tiers < 3:
            raise Wrong(_("chose the disk for a block of a hierarchy without a disk tier (block.num_tiers is {n})",
                          n=block.num_tiers))
        if got in _TIER and block.load_s[_TIER[got]] >= block.recompute_s:
            raise Wrong(_("kept a block in a tier it loads back from more slowly than it is recomputed"))
        if got == want:
            continue
        if got == "host":
            raise Wrong(_("put a block used by one request on the host: host memory is small, keep it for "
                          "reused blocks"))
        if want == "host":
            raise Wrong(_("a block used by {hits} requests did not go to the host, although loading it from there "
                          "beats recomputing it", hits=block.hits))
        raise Wrong(_("dropped a block used once that the disk gives back faster than it is recomputed"))
    return len(_CASES)


# Tiers: 1 the idea; 2 where to look; 3 the check's own messages (quoted); 4 nearly there.
TIER_CHOICE_HINTS: Tuple[str, str, str, str] = (
    N_("Keeping a block below the GPU pays only if bringing it back is faster than computing it again, and "
       "only if some request will ask for it. Host memory is small and fast, the disk large and slow: "
       "give the host to blocks that were reused."),
    N_("Everything you need is on `block`: `block.hits` (requests that used it), `block.num_tiers` (3 when "
       "there is a disk), `block.recompute_s`, and `block.load_s`, indexed by tier: 1 for the host, 2 for the disk."),
    N_("The check reports: “kept a block in a tier it loads back from more slowly than it is recomputed”; "
       "“put a block used by one request on the host”; “chose the disk for a block of a hierarchy without a "
       "disk tier”; “dropped a block used once that the disk gives back faster than it is recomputed”."),
    N_("Three tests in order, each returning a string: a reused block (two requests or more) whose host "
       "load time is below its recompute time; then, if the hierarchy has a disk, a block whose disk load "
       "time is below its recompute time; otherwise drop it."),
)
