"""The box's cell runner: a notebook's code cells run in order in one isolated IPython process, over a socket.

Grading needs what nbval gave it (each cell run in one long-lived IPython kernel, in order, with a
per-cell time limit, and each cell's outcome), but not nbval's cost: pytest, nbformat, jupyter_client,
ZeroMQ and ipykernel start-up in every sandbox. Here the box (`run_cells`) starts the kernel process
itself, through kernel_launcher.py (the same clean import path and limits; ``--cells FD`` instead of
an ipykernel), and talks to it over one Unix socket pair of its own, a JSON line per message:

* box -> kernel: ``{"cell": k, "source": ...}``, sent only after cell k-1's reply;
* kernel -> box: ``{"ready": true}`` once, then ``{"cell": k, "outcome": "passed"|"failed", "message": ...}``.

`serve` (the kernel's side) runs each cell with IPython's ``InteractiveShell`` (magics and
``display()`` as in Jupyter; no history database); what a cell prints goes to the kernel's log, as
with ipykernel. Children the kernel forks (the harness's, which run learner code) lose the socket
at the fork, and a socket, unlike a pipe, cannot be reopened through ``/proc/<kernel>/fd``. On
Linux the box also reads who sent each chunk (``SO_PASSCRED``): a byte from any process but the
kernel is a forgery. Nothing the kernel writes is trusted either: a reply that is not the one
awaited (another cell's, a line no runner writes, more than `REPLY_CAP` bytes) fails that cell and
ends the kernel; a cell past its limit, like a kernel that dies, ends it too; every later cell then
fails as nbval's do after a dead kernel; after the last cell the kernel is ended. The outcomes only
explain a TODO that wrote no results: verdicts come from the harness's observation files, which
the grader validates.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from typing import Dict, List, Tuple

REPLY_CAP = 64 << 10  # bytes the box reads from the kernel for one cell (an honest reply: under 400)
MESSAGE_CAP = 300  # characters of a reply's message kept
STARTUP_SECONDS = 60.0  # for the kernel's ready line (nbval's kernel start-up limit in the box)
# nbval's messages, so that the grader reads a runner's outcomes as it read nbval's:
FAILED = "Cell execution caused an exception"
DEAD = "Kernel dead on test start"
_CREDENTIALS = getattr(socket, "SO_PASSCRED", None) is not None  # Linux: each chunk says who sent it
_UCRED = struct.Struct("iII")  # struct ucred: pid, uid, gid


# --------------------------------------------------------------------------- the kernel's side

def serve(fd: int) -> None:
    """Run each cell the box sends on the socket `fd` and reply there, until the box closes it."""
    def drop_socket() -> None:  # in a forked child: learner code there never holds the runner's socket
        try:
            os.close(fd)
        except OSError:
            pass

    os.register_at_fork(after_in_child=drop_socket)
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False  # nothing a cell ran is kept where later code could read it back
    config.InteractiveShell.colors = "nocolor"  # tracebacks go to a log, not a terminal
    shell = InteractiveShell.instance(config=config)
    channel = socket.socket(fileno=fd)
    channel.sendall(b'{"ready": true}\n')
    for line in channel.makefile("rb"):
        request = json.loads(line)
        result = shell.run_cell(request["source"], store_history=False)
        sys.stdout.flush()
        sys.stderr.flush()
        reply = {"cell": request["cell"], "outcome": "passed" if result.success else "failed",
                 "message": "" if result.success else FAILED}
        channel.sendall((json.dumps(reply) + "\n").encode())


# --------------------------------------------------------------------------- the box's side

class _Replies:
    """The box's end of the socket, read a line at a time within a deadline and `REPLY_CAP` bytes a cell."""

    def __init__(self, channel: socket.socket, kernel_pid: int) -> None:
        self.channel, self.kernel_pid, self.buf, self.read = channel, kernel_pid, b"", 0

    def line(self, deadline: float) -> Tuple[str, bytes]:
        """("ok", line), or ("timeout" | "eof" | "flood" | "forged", b"")."""
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout", b""
            if not select.select([self.channel], [], [], left)[0]:
                continue
            chunk, ancillary, _, _ = self.channel.recvmsg(1 << 16, socket.CMSG_SPACE(_UCRED.size))
            if not chunk:
                return "eof", b""
            if _CREDENTIALS and self._sender(ancillary) != self.kernel_pid:
                return "forged", b""
            self.read += len(chunk)
            if self.read > REPLY_CAP:
                return "flood", b""
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return "ok", line

    @staticmethod
    def _sender(ancillary: list) -> int:
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= _UCRED.size:
                return _UCRED.unpack(data[:_UCRED.size])[0]
        return -1


def _reply(line: bytes, cell: int) -> Tuple[str, str]:
    """A reply line's (outcome, message) for `cell`; ValueError if it is not one a runner writes."""
    rec = json.loads(line.decode("utf-8"))
    if not isinstance(rec, dict) or set(rec) != {"cell", "outcome", "message"} or type(rec["cell"]) is not int \
            or rec["cell"] != cell or rec["outcome"] not in ("passed", "failed") or not isinstance(rec["message"], str):
        raise ValueError("not this cell's reply")
    return rec["outcome"], rec["message"][:MESSAGE_CAP]


def _end(proc: subprocess.Popen) -> str:
    """Kill the kernel's process group; how it ended."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    status = proc.wait()
    return f"signal {-status}" if status < 0 else f"status {status}"


WHY = {"timeout": "Timeout of {limit:g} seconds exceeded while executing cell",
       "eof": "Kernel dead while executing the cell", "flood": f"more than {REPLY_CAP} bytes of replies",
       "forged": "bytes on the runner's socket from a process other than the kernel",
       "garbled": "a reply the runner did not write"}
NOT_STARTED = f"{DEAD}: it did not start"


def outcome_kind(message: str) -> str:
    """Which of the runner's outcomes a failed cell's `message` reports: "failed" (the cell raised),
    "not started", "dead" (an earlier cell ended the kernel), a `WHY` key, or "" (no message of the runner's).

    The messages stay nbval's English, the form the box reports; the grader explains each kind to a
    learner in their language (judging/unfinished.py)."""
    if message == FAILED:
        return "failed"
    if message.startswith(NOT_STARTED):
        return "not started"
    if message == DEAD:
        return "dead"
    return next((kind for kind, why in WHY.items() if message.startswith(why.split("{")[0])), "")


def run_cells(kernel: List[str], sources: List[str], name: str, cell_timeout: float, cwd: str) -> Dict[str, List[str]]:
    """Run `sources` in order in the kernel started by the command `kernel` (``--cells FD`` is added).

    Returns ``{"NAME::Cell k": [outcome, message]}`` for every cell, as nbval's recorder did."""
    box_end, kernel_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    if _CREDENTIALS:
        box_end.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # before the kernel can send a byte
    proc = subprocess.Popen(kernel + ["--cells", str(kernel_end.fileno())], cwd=cwd, stdin=subprocess.DEVNULL,
                            pass_fds=(kernel_end.fileno(),), start_new_session=True)
    kernel_end.close()
    replies, outcomes, dead = _Replies(box_end, proc.pid), {}, ""
    try:
        how, line = replies.line(time.monotonic() + STARTUP_SECONDS)
        if how != "ok" or line != b'{"ready": true}':
            dead = f"{NOT_STARTED} ({how}; {_end(proc)})"
        for k, source in enumerate(sources):
            node = f"{name}::Cell {k}"
            if dead:
                outcomes[node] = ["failed", dead[:MESSAGE_CAP]]
                continue
            replies.read = 0
            try:  # nothing is in flight (the last reply came): a grader cell's few bytes never block
                box_end.sendall((json.dumps({"cell": k, "source": source}) + "\n").encode())
            except OSError:  # the kernel is gone: the read below says so
                pass
            how, line = replies.line(time.monotonic() + cell_timeout)
            if how == "ok":
                try:
                    outcomes[node] = list(_reply(line, k))
                    continue
                except (ValueError, RecursionError):
                    how = "garbled"
            why = WHY[how].format(limit=cell_timeout)
            outcomes[node] = ["failed", f"{why}; the kernel was ended ({_end(proc)})"[:MESSAGE_CAP]]
            dead = DEAD
    finally:
        # Ended at once: every result was written during its cell, and nothing runs in the kernel after.
        if proc.poll() is None:
            _end(proc)
        box_end.close()
    return outcomes
