"""Sandbox uids that no other running batch holds: one lease of a block of uids per batch (root only).

As root, each parallel job's sandbox runs as a uid of its own, which is what makes the
process-count limit and the reaping of stray processes hold. Two batches on one machine (two
instructors, two CI jobs, several engineers' test runs) must not share those uids, so a batch
leases a block of `BLOCK` uids: an exclusive ``flock`` on the block's lock file, held for the
batch's life and released by the kernel when its process ends, however it ends (no stale lease
to clean up). A batch that finds every block taken waits, then says which processes hold them.

The lock files live in a folder only root can enter (`lease_folder`: ``/run/kvsched-sandbox-uids``,
root's, mode 0700, in ``/run``, where no other user can create it first): on a shared login node
another user can neither open a lock file to hold a block nor plant the folder. A folder found
with another owner, other permissions or as a link is refused, naming what is wrong. An
unprivileged instructor leases nothing: its sandboxes run in user namespaces of their own, as
its own uid (sandbox.py), so no uid needs to be kept from anyone.
"""
from __future__ import annotations

import fcntl
import os
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

# The first sandbox uid (unused by system accounts). Earlier versions ran job k as 61000 + k
# without a lease; starting after those uids keeps a batch of such a copy on the same machine apart.
UID_BASE = 61064
BLOCK = 64  # uids per lease: one per parallel job (``kvsched grade --jobs`` is at most this)
BLOCKS = 64  # leases that can be held at once on one machine: uids 61064-65159
PROBE_UID = UID_BASE + BLOCK * BLOCKS  # sandbox.probe's one short process (root): no batch's uid
WAIT_SECONDS = 60.0  # how long a batch waits for a free block before giving up
FOLDER_NAME = "kvsched-sandbox-uids"


class LeaseError(OSError):
    """No block of sandbox uids can be had; the message says why (never "install bubblewrap")."""


def _checked(folder: Path) -> Path:
    """`folder`, made if missing, once it is root's own 0700 folder (LeaseError otherwise)."""
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise LeaseError(f"cannot make the sandbox uid lease folder {folder}: {e.strerror}") from e
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o077:
        kind = "a link" if stat.S_ISLNK(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode) else "a file"
        raise LeaseError(f"the sandbox uid lease folder {folder} is {kind} of uid {st.st_uid} with mode "
                         f"{stat.S_IMODE(st.st_mode):04o}, not root's own 0700 folder: another user could hold "
                         f"or forge leases there; remove it as root and grade again")
    return folder


def lease_folder() -> Path:
    """Where the lock files are: ``/run/kvsched-sandbox-uids``, or in the temporary folder without /run."""
    run = Path("/run")
    parent = run if run.is_dir() and os.access(run, os.W_OK) else Path(tempfile.gettempdir())
    return _checked(parent / FOLDER_NAME)


@dataclass
class UidLease:
    """A held block of sandbox uids: job k of the batch runs as ``first_uid + k``."""

    block: int
    fd: int

    @property
    def first_uid(self) -> int:
        return UID_BASE + self.block * BLOCK

    def uid(self, job: int) -> int:
        if not 0 <= job < BLOCK:
            raise ValueError(f"job {job} is outside the lease's {BLOCK} uids")
        return self.first_uid + job

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the file drops the flock
            self.fd = -1

    def __enter__(self) -> "UidLease":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _path(folder: Path, block: int) -> Path:
    return folder / f"block-{block:02d}.lock"


def _try(block: int, folder: Path) -> Optional[UidLease]:
    fd = os.open(_path(folder, block), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return UidLease(block, fd)


def holders(folder: Path) -> List[int]:
    """The processes holding a block's lock in `folder` (from ``/proc/locks``), sorted."""
    inodes = set()
    for block in range(BLOCKS):
        try:
            st = os.stat(_path(folder, block))
        except OSError:
            continue
        inodes.add((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
    pids = set()
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[4].isdigit():
            dev = fields[5].split(":")
            if len(dev) == 3 and all(dev):
                try:
                    key = (int(dev[0], 16), int(dev[1], 16), int(dev[2]))
                except ValueError:
                    continue
                if key in inodes:
                    pids.add(int(fields[4]))
    return sorted(pids)


def lease_uids(wait_seconds: Optional[float] = None, folder: Optional[Path] = None) -> UidLease:
    """A block of uids no other running batch holds (waits up to `wait_seconds`, by default
    `WAIT_SECONDS`, then LeaseError), its lock in `folder` (by default `lease_folder()`).

    Root only: an unprivileged instructor's sandboxes need no leased uid (LeaseError says so)."""
    if os.geteuid() != 0:
        raise LeaseError("only root leases sandbox uids (an unprivileged user's sandbox runs as its own uid "
                         "in a user namespace of its own)")
    folder = lease_folder() if folder is None else _checked(folder)
    wait_seconds = WAIT_SECONDS if wait_seconds is None else wait_seconds
    deadline = time.monotonic() + wait_seconds
    start = os.getpid() % BLOCKS  # concurrent batches start looking at different blocks
    while True:
        for k in range(BLOCKS):
            lease = _try((start + k) % BLOCKS, folder)
            if lease is not None:
                return lease
        if time.monotonic() >= deadline:
            pids = holders(folder)
            shown = ", ".join(map(str, pids[:8])) + (" ..." if len(pids) > 8 else "")
            raise LeaseError(f"all {BLOCKS} blocks of sandbox uids ({UID_BASE}-{UID_BASE + BLOCK * BLOCKS - 1}) "
                             f"are held by other running batches (processes {shown or 'unknown'}; lock files in "
                             f"{folder}); waited {wait_seconds:g} s: wait for one to end, or end one")
        time.sleep(0.5)


def in_leased_range(uid: int) -> bool:
    """Whether `uid` is one the leases hand out (for tests that look for stray sandbox processes)."""
    return UID_BASE <= uid < UID_BASE + BLOCK * BLOCKS
