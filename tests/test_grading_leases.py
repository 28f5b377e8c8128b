"""Sandbox uid leases on a shared machine: another local user can neither hold nor forge them.

Issue 28 ("the host"): the leases were lock files in /run/lock that any local user could open and
``flock``; an unprivileged user holding all 64 made ``kvsched grade`` wait 64 s and exit 2 with
advice to install bubblewrap. Now the lock files live in root's own 0700 folder, a planted folder
is refused by name, and a lease that cannot be had says exactly that. The attacker is a real
second local user (useradd), so these tests run as root and skip otherwise.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kvsched_lab.grading import grade_main
from kvsched_lab.grading.box import leases, sandbox
from kvsched_lab.grading.box.leases import BLOCKS, LeaseError, lease_folder, lease_uids

sys.path.insert(0, str(Path(__file__).parent / "grading_cases"))
from second_user import unprivileged_user  # noqa: E402

# Run as the other user: hold every lease lock file it can reach, in the folder this copy uses and
# where earlier copies kept them (/run/lock), print how many it holds and why not the rest, wait.
HOLD_ALL = r"""
import fcntl, os, sys, time
held, refused = [], set()
paths = [f"/run/lock/kvsched-sandbox-uids-{k:02d}.lock" for k in range(64)]
paths += [os.path.join(sys.argv[1], f"block-{k:02d}.lock") for k in range(64)]
for p in paths:
    try:
        try:
            fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError:  # root's 0644 file: read-only is enough for flock
            fd = os.open(p, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append(p)
    except OSError as e:
        refused.add(type(e).__name__)
print(len([p for p in held if p.startswith(sys.argv[1])]), len(held), sorted(refused), flush=True)
time.sleep(60)
"""


# The other user runs the system's Python: this checkout's may live where only root can read it (/root).
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture
def other_user():
    if not os.path.exists(SYSTEM_PYTHON):
        pytest.skip(f"the other user needs a Python of the system's ({SYSTEM_PYTHON})")
    with unprivileged_user("lease") as user:
        yield user


def test_another_local_user_cannot_hold_the_leases(other_user):
    """Before: the other user flocked all 64 /run/lock files and every root batch waited, then failed."""
    folder = lease_folder()
    attacker = subprocess.Popen([SYSTEM_PYTHON, "-I", "-c", HOLD_ALL, str(folder)], stdout=subprocess.PIPE,
                                text=True, **other_user.as_user())
    try:
        in_folder, held, refused = attacker.stdout.readline().split(" ", 2)
        assert in_folder == "0" and "PermissionError" in refused, (in_folder, held, refused)
        with lease_uids(wait_seconds=0.5) as lease:  # at once, whatever the other user holds
            assert 0 <= lease.block < BLOCKS
    finally:
        attacker.kill()
        attacker.wait()
    st = os.lstat(folder)
    assert st.st_uid == 0 and st.st_mode & 0o777 == 0o700


@pytest.fixture
def shared_tmp():
    """A folder like /tmp (sticky, everyone may write), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="kvsched-leases-"))
    os.chmod(folder, 0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_folder_another_user_planted_is_refused_by_name(other_user, shared_tmp):
    """A lease folder made by someone else first (in a /tmp-like folder, mode 0777) is never used."""
    planted = shared_tmp / "kvsched-sandbox-uids"
    subprocess.run([SYSTEM_PYTHON, "-I", "-c", f"import os; os.mkdir({str(planted)!r}); os.chmod({str(planted)!r}, 0o777)"],
                   check=True, timeout=60, **other_user.as_user())
    with pytest.raises(LeaseError, match=rf"is a folder of uid {other_user.uid} with mode 0777, not root's own 0700"):
        lease_uids(wait_seconds=0, folder=planted)
    os.chown(planted, 0, 0)  # root's now, but still open to everyone
    with pytest.raises(LeaseError, match="mode 0777"):
        lease_uids(wait_seconds=0, folder=planted)
    os.chmod(planted, 0o700)
    with lease_uids(wait_seconds=0, folder=planted) as lease:
        assert (planted / f"block-{lease.block:02d}.lock").stat().st_mode & 0o777 == 0o600


def test_an_unprivileged_caller_is_told_it_needs_no_lease(other_user):
    code = ("import sys; sys.path.insert(0, %r)\nfrom kvsched_lab.grading.box.leases import lease_uids\n"
            "try:\n    lease_uids(0)\nexcept OSError as e:\n    print(e)") % str(Path(__file__).resolve().parents[1])
    said = subprocess.run([SYSTEM_PYTHON, "-I", "-c", code], capture_output=True, text=True, timeout=60,
                          **other_user.as_user())
    assert "only root leases sandbox uids" in said.stdout, said.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="uid leases are taken by root batches only")
def test_every_block_held_says_so_and_names_the_holders(tmp_path, monkeypatch, capsys):
    """Before: held leases read as 'bwrap could not start ... install bubblewrap', after 64 s."""
    works, why = sandbox.probe()
    if not works:
        pytest.skip(f"the grading sandbox cannot run here: {why}")
    folder = tmp_path / "leases"
    folder.mkdir(mode=0o700)
    code = ("import sys; sys.path.insert(0, %r)\nfrom pathlib import Path\nfrom kvsched_lab.grading.box.leases import "
            "lease_uids\nheld = [lease_uids(0, Path(%r)) for _ in range(64)]\nprint('held', flush=True)\n"
            "import time; time.sleep(60)") % (str(Path(__file__).resolve().parents[1]), str(folder))
    batch = subprocess.Popen([sys.executable, "-I", "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert batch.stdout.readline().strip() == "held"
        monkeypatch.setattr(leases, "lease_folder", lambda: folder)
        monkeypatch.setattr(leases, "WAIT_SECONDS", 0.5)
        klass = tmp_path / "class"
        klass.mkdir()
        (klass / "a.py").write_text("x = 1\n", encoding="utf-8")
        out = tmp_path / "out"
        assert grade_main([str(klass), "--out", str(out)]) == 2
    finally:
        batch.kill()
        batch.wait()
    err = capsys.readouterr().err
    assert f"cannot lease sandbox uids: all {BLOCKS} blocks" in err and f"processes {batch.pid}" in err, err
    assert "bubblewrap" not in err and not (out / "journal.jsonl").exists()
