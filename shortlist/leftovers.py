"""Temporary folders under the system's temp folder that outlive a killed process, and their removal.

A job's scratch (its notebook and parameters.json, with the settings and trainee), a kernel's sockets
and the scorer's scratch are removed by whoever made them when it ends; a kill -9 ends it before it
can. So each is made by make(), which records its maker inside it (pid, the pid's start time, so a
reused pid is not taken for it, and the host, so a temp folder shared between machines or containers
is not judged from here), and every make() first removes those of PREFIXES whose maker is gone. A
folder without that record (another version's, or one being made this instant) is left alone.
"""
from __future__ import annotations

import os
import shutil
import socket
import tempfile

PREFIXES = ("shortlist-job-", "shortlist-kernel-", "shortlist-scratch-")
OWNER = ".shortlist-owner"  # inside each folder: "<pid> <start time> <host>"


def make(prefix: str) -> str:
    """A new private folder (tempfile.mkdtemp) that records its maker; leftovers of dead makers go first."""
    if prefix not in PREFIXES:
        raise ValueError(f"{prefix!r} is not one of {PREFIXES}: sweep() would never remove it")
    sweep()
    path = tempfile.mkdtemp(prefix=prefix)
    with open(os.path.join(path, OWNER), "w") as f:
        f.write(f"{os.getpid()} {_started(os.getpid())} {socket.gethostname()}\n")
    return path


def sweep(root: str | None = None) -> list[str]:
    """Remove this user's folders of PREFIXES under root (the temp folder) whose maker is gone; the removed."""
    root = root or tempfile.gettempdir()
    removed = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        try:
            mine = entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.geteuid()
        except OSError:
            continue
        if mine and entry.name.startswith(PREFIXES) and _gone(entry.path):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed


def _gone(folder: str) -> bool:
    """Whether the folder's recorded maker no longer runs on this host (False where it says nothing)."""
    try:
        with open(os.path.join(folder, OWNER)) as f:
            pid, started, host = f.read().split()
        pid = int(pid)
    except (OSError, ValueError):
        return False
    if host != socket.gethostname():
        return False
    return _started(pid) != started


def _started(pid: int) -> str:
    """A process's start time in clock ticks since boot (/proc/<pid>/stat, field 22); "-" where none runs."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]  # the name, in parentheses, may hold spaces
    except (OSError, IndexError):
        return "-"
