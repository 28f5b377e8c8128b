"""``kvsched release``'s checks by name: each says what it checks when it starts and how it went.

Verifying a bundle runs for minutes (the nbval run of both editions most of all); naming each
check as it runs shows where it is and which check is slow.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Optional, TextIO


def step(name: str, check: Callable[..., Any], *args: Any, stream: Optional[TextIO] = None) -> Any:
    """`check(*args)`, announced as ``checking: NAME ...`` and ended with ``checked: NAME: ok (S s)``.

    A check returns its problems (a list), or (problems, warnings)."""
    out = stream or sys.stdout
    print(f"checking: {name} ...", file=out, flush=True)
    started = time.monotonic()
    result = check(*args)
    problems = result[0] if isinstance(result, tuple) else result
    told = f"{len(problems)} problem(s)" if problems else "ok"
    print(f"checked:  {name}: {told} ({time.monotonic() - started:.1f} s)", file=out, flush=True)
    return result
