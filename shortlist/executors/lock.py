"""One run per output folder: a lock under it, held for the whole run."""
from __future__ import annotations

import fcntl
import os
import socket
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
    in one line that names the first. The kernel drops the lock with its holder, however that ends."""
    out = Path(out)
    try:  # read-only is enough for flock: a lock file another user left is still ours to lock
        fd = os.open(out / LOCK, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as e:
        raise Busy(f"{out / LOCK}: cannot open the run's lock ({e.strerror})") from None
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
    try:
        output.write_json(out / HOLDER, {"pid": os.getpid(), "host": socket.gethostname(),
                                         "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                         "command": " ".join(sys.argv)})
        yield
    finally:
        with suppress(OSError):  # said only while held: an ended run leaves no pid behind
            os.unlink(out / HOLDER)
        os.close(fd)
