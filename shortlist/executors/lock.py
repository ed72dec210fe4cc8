"""One run per output folder: a lock under it, held for the whole run."""
from __future__ import annotations

import fcntl
import os
import socket
import stat
import sys
import time
from contextlib import contextmanager, suppress
from pathlib import Path

from shortlist import output
from shortlist.errors import OneLine

LOCK, HOLDER = "lock", "lock.json"  # under the output folder: the run's flock, and who holds it


class Busy(OneLine, RuntimeError):
    """Another run holds the output folder; the message names it."""


@contextmanager
def one_run(out):
    """Hold <out>/lock (flock, exclusive) for the whole run: a second run into the same folder is refused
    in one line that names the first. The kernel drops the lock with its holder, however that ends.
    The lock is opened without blocking and must be a regular file: a FIFO of that name blocked forever."""
    out = Path(out)
    try:  # read-only is enough for flock: a lock file another user left is still ours to lock
        fd = os.open(out / LOCK, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, 0o666)
    except OSError as e:
        raise Busy(f"{out / LOCK}: cannot open the run's lock ({e.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Busy(f"{out / LOCK}: the run's lock is not a regular file (a FIFO, a device...): remove it")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if not isinstance(e, BlockingIOError):
            os.close(fd)
            raise Busy(f"{out}: this filesystem cannot lock the run's folder ({e.strerror}): give an --out on "
                       f"a local disk") from None
        os.close(fd)
        try:
            h = output.read_json(out / HOLDER)
            who = f"pid {h['pid']} on {h['host']}, started {h['started']}"
        except (OSError, ValueError, KeyError, TypeError):
            who = "a run that has not said who it is yet"
        raise Busy(f"{out} is in use by another run ({who}): wait for it to end, or give another --out") from None
    if not _same_file(fd, out / LOCK):  # a refused run removed it (output.removed_if_refused) while this one opened it
        os.close(fd)
        raise Busy(f"{out / LOCK}: the run's lock was removed while this run took it: run the same command again")
    try:
        try:
            output.write_json(out / HOLDER, {"pid": os.getpid(), "host": socket.gethostname(),
                                             "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                             "command": " ".join(sys.argv)})
        except OSError as e:  # a folder named lock.json, a read-only folder
            raise Busy(f"{out / HOLDER}: cannot say who holds the run's folder ({e.strerror or type(e).__name__})"
                       + (": remove that folder" if (out / HOLDER).is_dir() else "")) from None
        yield
    finally:
        with suppress(OSError):  # said only while held: an ended run leaves no pid behind
            os.unlink(out / HOLDER)
        os.close(fd)


def _same_file(fd: int, path: Path) -> bool:
    """Whether an open file is still the one at path (a lock on a removed file locks nothing)."""
    try:
        there = os.stat(path)
    except OSError:
        return False
    here = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
