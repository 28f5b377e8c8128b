"""Notebook 10's practice TODO ``admission`` (not graded): its cases, its check and its four hint tiers.

The learner writes ``admit(info)``: whether an arriving request is admitted (True) or refused at
once (False), from an `AdmissionInfo` (``kvsched_lab.sim.serving.server``). The rule asked for:

1. refuse a request whose blocks do not fit in the free blocks (``info.blocks > info.free_blocks``):
   the chapter's rule for an entry larger than the room there is;
2. refuse a request predicted to miss its deadline: the wait in the queue plus its prefill
   (``info.wait_s + info.prefill_s``) later than ``info.deadline_s``: the TTFT test of Mooncake's
   Conductor (FAST 2025, section 4.1, Algorithm 1), which refuses such a request before any prefill
   (Mooncake's early rejection proper decides on the decoding load: notebook 10, section 5);
3. admit the rest. Exactly fitting, and a first token exactly at the deadline, are admitted.

Messages say what is wrong, never the expected answer.
"""
from __future__ import annotations

from typing import Callable, List, Tuple

from kvsched_lab.course.practice_base import Wrong, call_on_copies
from kvsched_lab.i18n import N_, _
from kvsched_lab.sim.serving.server import AdmissionInfo

# (what arrives, admit?); floats chosen so that every sum below is exact in binary
_CASES: List[Tuple[AdmissionInfo, bool]] = [
    (AdmissionInfo(10, 100, 0.5, 0.25, 2.0), True),  # fits, well in time
    (AdmissionInfo(120, 100, 0.0, 0.125, 30.0), False),  # does not fit, although it would be in time
    (AdmissionInfo(10, 100, 1.75, 0.5, 2.0), False),  # its prefill alone is in time, but not after the wait
    (AdmissionInfo(10, 100, 0.0, 2.5, 2.0), False),  # even an idle server misses
    (AdmissionInfo(100, 100, 0.25, 0.25, 2.0), True),  # fits exactly
    (AdmissionInfo(10, 100, 1.5, 0.5, 2.0), True),  # first token exactly at the deadline
    (AdmissionInfo(30, 20, 0.0, 0.125, 30.0), False),
    (AdmissionInfo(5, 0, 0.0, 0.0625, 2.0), False),  # no free block at all
    (AdmissionInfo(24, 4000, 12.0, 0.75, 30.0), True),  # a batch request with a long but acceptable wait
]


def check_admission(fn: Callable[[AdmissionInfo], bool]) -> int:
    """Run `fn` on every case; raise `Wrong` at the first wrong decision; return the number of cases."""
    for info, want in _CASES:
        got = call_on_copies(fn, info)
        if not isinstance(got, bool):
            raise Wrong(_("return True (admit) or False (refuse), not {got!r}", got=got))
        if got == want:
            continue
        fits = info.blocks <= info.free_blocks
        if got and not fits:
            raise Wrong(_("admitted a request whose blocks do not fit in the free blocks"))
        if got and info.prefill_s <= info.deadline_s:
            raise Wrong(_("admitted a request that is predicted to miss its deadline once it has waited "
                          "in the queue: the wait counts too"))
        if got:
            raise Wrong(_("admitted a request that is predicted to miss its deadline"))
        if info.blocks == info.free_blocks:
            raise Wrong(_("refused a request whose blocks fit exactly: fitting includes using the last free block"))
        if info.wait_s + info.prefill_s == info.deadline_s:
            raise Wrong(_("refused a request whose first token comes exactly at its deadline: that meets it"))
        raise Wrong(_("refused a request that fits and is predicted to meet its deadline"))
    return len(_CASES)


# Tiers: 1 the idea; 2 where to look; 3 the check's own messages (quoted); 4 nearly there.
ADMISSION_HINTS: Tuple[str, str, str, str] = (
    N_("Refusing a request at once costs it nothing it would have had: a request that cannot fit, or that "
       "will miss its deadline anyway, only takes prefill time from the requests behind it."),
    N_("Everything you need is on `info`: `info.blocks` and `info.free_blocks` for the room, and "
       "`info.wait_s`, `info.prefill_s` and `info.deadline_s` (seconds from now) for the time."),
    N_("The check reports: “admitted a request whose blocks do not fit in the free blocks”; “admitted a request "
       "that is predicted to miss its deadline once it has waited in the queue: the wait counts too”; “refused a "
       "request whose blocks fit exactly”; “refused a request whose first token comes exactly at its deadline”."),
    N_("Two tests, each returning False: more blocks than free blocks; then the wait plus the prefill later "
       "than the deadline (strictly greater). Otherwise return True."),
)
