"""Sandbox uids that no other running batch holds: one lease of a block of uids per batch.

As root, each parallel job's sandbox runs as a uid of its own, which is what makes the
process-count limit and the reaping of stray processes hold. Two batches on one machine (two
instructors, two CI jobs, several engineers' test runs) must not share those uids, so a batch
leases a block of `BLOCK` uids: an exclusive ``flock`` on the block's lock file, held for the
batch's life and released by the kernel when its process ends, however it ends (no stale lease
to clean up). A batch that finds every block taken waits, then says so.
"""
from __future__ import annotations

import fcntl
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# The first sandbox uid (unused by system accounts). Earlier versions ran job k as 61000 + k
# without a lease; starting after those uids keeps a batch of such a copy on the same machine apart.
UID_BASE = 61064
BLOCK = 64  # uids per lease: one per parallel job (``kvsched grade --jobs`` is at most this)
BLOCKS = 64  # leases that can be held at once on one machine: uids 61064-65159
WAIT_SECONDS = 60.0  # how long a batch waits for a free block before giving up


def _lock_dir() -> Path:
    for d in ("/run/lock", tempfile.gettempdir()):
        if os.path.isdir(d) and os.access(d, os.W_OK):
            return Path(d)
    raise OSError("no writable folder for the sandbox uid leases (/run/lock or the temporary folder)")


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


def _try(block: int, folder: Path) -> Optional[UidLease]:
    path = folder / f"kvsched-sandbox-uids-{block:02d}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return UidLease(block, fd)


def lease_uids(wait_seconds: float = WAIT_SECONDS) -> UidLease:
    """A block of uids no other running batch holds (waits up to `wait_seconds`, then OSError)."""
    folder = _lock_dir()
    deadline = time.monotonic() + wait_seconds
    start = os.getpid() % BLOCKS  # concurrent batches start looking at different blocks
    while True:
        for k in range(BLOCKS):
            lease = _try((start + k) % BLOCKS, folder)
            if lease is not None:
                return lease
        if time.monotonic() >= deadline:
            raise OSError(f"all {BLOCKS} blocks of sandbox uids are held by other running batches")
        time.sleep(0.5)


def in_leased_range(uid: int) -> bool:
    """Whether `uid` is one the leases hand out (for tests that look for stray sandbox processes)."""
    return UID_BASE <= uid < UID_BASE + BLOCK * BLOCKS
