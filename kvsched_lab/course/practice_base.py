"""What every practice check shares: `Wrong` (one broken expectation, phrased for the learner) and `call_on_copies`."""
from __future__ import annotations

import copy
from typing import Any, Callable

from kvsched_lab.i18n import _


class Wrong(Exception):
    """One broken expectation, phrased for the learner; `check_practice` turns it into `CheckFailed`."""


def call_on_copies(fn: Callable, *args: Any) -> Any:
    """Call `fn` on copies of `args`; complain if it changed them."""
    copies = copy.deepcopy(args)
    out = fn(*copies)
    if copies != args:
        raise Wrong(_("the function changed its inputs; build and return a new result instead"))
    return out
