"""The key that signs each journal entry, kept outside any output folder.

``OUT/journal.jsonl`` lies in a folder others may write (a shared file system, a TA's account,
a learner who can reach it). Each entry carries an HMAC-SHA256 of the journal's header and the
entry, keyed with a secret of the grader's own user: ``$KVSCHED_STATE_DIR/journal.key``
(default ``$XDG_STATE_HOME/kvsched`` or ``~/.local/state/kvsched``), 32 random bytes made on
first use, the folder 0700 and the file 0600, owned by the user. An entry whose HMAC does not
check (edited, copied from another learner, written under another key) is graded again by
``--resume`` and refused by ``kvsched grade merge``; it is never trusted. What it cannot stop:
someone who can read the key (this user, root) can sign entries; a Slurm array whose nodes do
not share the home folder needs ``KVSCHED_STATE_DIR`` on a shared, private folder.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

KEY_FILE = "journal.key"
KEY_BYTES = 32


def state_dir() -> Path:
    """Where the grader keeps its own state (never inside an output folder)."""
    if os.environ.get("KVSCHED_STATE_DIR"):
        return Path(os.environ["KVSCHED_STATE_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "kvsched"


def _checked(fd: int, path: Path) -> bytes:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise ValueError(f"{path} must be a regular file of this user that only it can read (chmod 600 {path}); "
                         "it signs the grading journals")
    data = os.read(fd, 4 * KEY_BYTES + 1).strip()
    if len(data) != 2 * KEY_BYTES:
        raise ValueError(f"{path} is not a journal key ({2 * KEY_BYTES} hex digits); remove it to make a new one "
                         "(journals signed with it are then graded again)")
    return bytes.fromhex(data.decode("ascii", "replace"))


def journal_key() -> bytes:
    """This user's journal key, made (atomically, 0600) on first use; ValueError saying why it cannot be had."""
    folder = state_dir()
    path = folder / KEY_FILE
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            tmp = folder / f".{KEY_FILE}.{secrets.token_hex(6)}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, secrets.token_hex(KEY_BYTES).encode("ascii") + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)  # two graders starting at once: the first link wins, both use it
            except FileExistsError:
                pass
            finally:
                os.unlink(tmp)
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            return _checked(fd, path)
        finally:
            os.close(fd)
    except OSError as e:
        raise ValueError(f"cannot keep the journal key in {folder} ({e.strerror}); set KVSCHED_STATE_DIR to a "
                         "private folder of this user") from None


def sign(key: bytes, data: bytes) -> str:
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def verify(key: bytes, data: bytes, mac: object) -> bool:
    return isinstance(mac, str) and hmac.compare_digest(sign(key, data), mac)
