"""A real second, unprivileged local user for the host tests (leases, the Slurm cluster, podman).

`unprivileged_user()` makes one with ``useradd`` (a name of this run's own, no home, no login shell,
a group of its own) and removes it with ``userdel`` when the test ends. It skips, saying why,
where it cannot: not root, or no ``useradd``. `as_user` gives `subprocess` keywords that run a
command as that user, with no supplementary group and nothing of root's environment.
"""
from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from typing import Iterator

import pytest


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int

    def as_user(self, **env: str) -> dict:
        """`subprocess.run`/`Popen` keywords: run as this user, a plain environment plus `env`."""
        return {"user": self.uid, "group": self.gid, "extra_groups": [],
                "env": {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/nonexistent",
                        "USER": self.name, "LOGNAME": self.name, **env}}


@contextlib.contextmanager
def unprivileged_user(tag: str) -> Iterator[User]:
    """A fresh local user `kvs-<tag>-<pid>` for the test's life (skips where none can be made)."""
    if os.geteuid() != 0:
        pytest.skip("making a second local user (useradd) needs root; CI runs as root")
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.skip("useradd/userdel (the passwd package) are not installed")
    name = f"kvs-{tag}-{os.getpid()}"[:31]
    made = subprocess.run(["useradd", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
                           "--user-group", name], capture_output=True, text=True, timeout=60)
    if made.returncode != 0:
        pytest.skip(f"useradd could not make a test user: {made.stderr.strip()}")
    try:
        entry = pwd.getpwnam(name)
        yield User(name, entry.pw_uid, entry.pw_gid)
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=60)
