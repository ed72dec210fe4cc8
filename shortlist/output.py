"""Writing files so that a run that dies leaves the old file or the new one, never half of one,
and finding out that a place cannot be written before any work that would be lost.

A full disk is one line (DiskFull, an OutputError) wherever this module writes, and disk_full()
tells one apart from other failures for writers outside it (torch's and safetensors' savers).
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager, suppress
from pathlib import Path

from shortlist.errors import OneLine


def umask() -> int:
    """This process's umask, read without changing it (Linux's /proc), else by setting it back at once."""
    try:
        with open("/proc/self/status") as f:
            return int(next(line.split()[1] for line in f if line.startswith("Umask:")), 8)
    except (OSError, StopIteration, ValueError):
        mask = os.umask(0o022)
        os.umask(mask)
        return mask


class OutputError(OneLine, RuntimeError):
    """An output folder that cannot be written; the message is one line."""


class DiskFull(OutputError):
    """No space (or no quota) left where a run writes; the message is one line."""
    exit_code = 1  # the work failed, the input was sound


FULL = (errno.ENOSPC, errno.EDQUOT)
# how savers that wrap the OSError say it: torch's zip writer, safetensors' Rust io::Error
FULL_WORDS = ("No space left on device", "Disk quota exceeded", "StorageFull", "QuotaExceeded", "file write failed")


def cache_root() -> Path:
    """The machine's own folder for what Shortlist builds once and reuses (SHORTLIST_CACHE, else
    ~/.cache/shortlist): the tiny models, the Ray worker folders. Never under a run's --out."""
    return Path(os.environ.get("SHORTLIST_CACHE") or Path.home() / ".cache" / "shortlist")


def disk_full(e: BaseException) -> bool:
    """Whether an exception, or one it was raised from or during, is a full disk."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, DiskFull) or isinstance(e, OSError) and e.errno in FULL:
            return True
        if any(word in str(e) for word in FULL_WORDS):
            return True
        e = e.__cause__ or e.__context__
    return False


def full(where, what: str = "", resumes: str = "what was written whole") -> DiskFull:
    """The one line a full disk ends in: what could not be written, how much is left, what to do."""
    place = Path(where)
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        free = f"{shutil.disk_usage(place).free:,} bytes free"
    except OSError:
        free = "free space unknown"
    return DiskFull(f"disk full: cannot write {what or where} ({free}); free space and run the same command "
                    f"again: it resumes from {resumes}")


PATH_MAX, NAME_MAX = 4096, 255  # Linux's longest path, and longest name in one folder (bytes)


def path_error(text: str, what: str = "out") -> str | None:
    """Why a folder name cannot hold a run's files (None: it can), said before anything is made: an
    empty name writes into the working directory, a control character (a newline) garbles every log
    line and file list that names it, a name longer than NAME_MAX fails deep inside a run, and / is
    every file on the machine."""
    if not text.strip():
        return f"{what}={text!r}: give a folder (an empty {what} writes into the working directory)"
    if "\0" in text:
        return f"{what}: holds a NUL character, which no path can"
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        return f"{what}={text[:80]!r}: holds a control character (a newline, a tab...); give a plain folder name"
    if len(text) > PATH_MAX:
        return f"{what}: {len(text)} characters, longer than any path ({PATH_MAX})"
    long = next((part for part in text.split("/") if len(os.fsencode(part)) > NAME_MAX), None)
    if long is not None:
        return (f"{what}: a folder name of {len(os.fsencode(long)):,} bytes ({long[:40]!r}...), longer than a "
                f"name can be ({NAME_MAX})")
    if os.path.realpath(text) == "/":
        return f"{what}={text!r}: the root folder; give a folder of the run's own"
    return None


def check_writable(out) -> Path:
    """The output folder, made if need be and shown writable, before any work that would be lost."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutputError(f"output folder {out} is a file; give a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".writable.", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputError(f"cannot write into {out}: {e.strerror or type(e).__name__}") from None
    return out


@contextmanager
def removed_if_refused(out, leftovers: tuple = (), lock: str | None = None):
    """An output folder made inside this block is removed again if the block ends in an exception before
    anything but the leftovers (a run's lock files) was written into it: a refusal leaves no folder behind.
    A folder that was there before, or that holds anything else (another run's files), stays. Where the
    leftovers hold a lock (an flock on out/<lock>, as shortlist.executors.one_run takes it), they go only
    while this process can take it: a run refused because another holds the folder it saw as new never
    removes that run's lock, its record or its folder."""
    out = Path(out)
    made = not out.exists()
    try:
        yield
    except BaseException:
        if made and out.is_dir() and {p.name for p in out.iterdir()} <= set(leftovers):
            _remove_unheld(out, leftovers, lock)
        raise


def _remove_unheld(out: Path, leftovers: tuple, lock: str | None) -> None:
    """The leftovers and the folder removed under the lock, if no other process holds it (else nothing)."""
    fd = None
    if lock is not None:
        with suppress(FileNotFoundError):
            fd = os.open(out / lock, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by another run (or no flock here): its files are not this run's to remove
            os.close(fd)
            return
    try:
        for name in leftovers:
            (out / name).unlink(missing_ok=True)
        with suppress(OSError):  # something arrived meanwhile: it stays
            out.rmdir()
    finally:
        if fd is not None:
            os.close(fd)


def write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as e:  # no room even for an empty file (a full disk, or no inodes left)
        if disk_full(e):
            raise full(path.parent, str(path)) from None
        raise
    try:
        os.fchmod(fd, 0o666 & ~umask())  # mkstemp's 0600 would hide results from the rest of a team
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if disk_full(e):
            raise full(path.parent, str(path)) from None
        raise


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode())


def write_json(path: Path, obj) -> None:
    write_text(path, json.dumps(obj, indent=1, allow_nan=False) + "\n")


def read_json(path: Path):
    return json.loads(Path(path).read_text())


def sync_folder(folder) -> None:
    """Every file of a folder, and the folder itself, on disk: what a rename then publishes is whole."""
    folder = Path(folder)
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    _sync_dir(folder)


def publish_folder(staged, dest) -> Path:
    """A folder written whole under a temporary name, synced and renamed into place (one on the same
    file system): a reader finds the whole folder or none. An existing dest is replaced."""
    staged, dest = Path(staged), Path(dest)
    sync_folder(staged)
    if dest.exists():  # a leftover no reader trusts (an incomplete one): the whole one takes its place
        shutil.rmtree(dest)
    staged.rename(dest)
    _sync_dir(dest.parent)
    return dest


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class WaitStopped(OneLine, KeyboardInterrupt):
    """Ctrl-C while another process builds a folder this one waits for; one line (the build goes on there)."""
    exit_code = 130  # as a shell reports SIGINT


def build_folder(dest, build, done: str = "model.safetensors") -> Path:
    """A folder built once (build(folder) fills it), into a temporary folder renamed into place. One
    process builds while the others wait on a lock beside it: processes starting together on a cold
    cache (test workers, notebook kernels) would otherwise each spend the build's CPU. The builder
    writes its pid into the lock file, so that a waiter says once whom it waits for (a build takes minutes
    on a loaded machine), and a waiter's Ctrl-C is one line (WaitStopped)."""
    dest = Path(dest)
    if (dest / done).exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f"{dest.name}.lock", "a+") as lock:  # "a+": opening it truncates no builder's pid
        _wait_for(lock, dest)
        if (dest / done).exists():  # built while this process waited
            return dest
        lock.truncate(0)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
        try:
            build(tmp)
            try:
                tmp.rename(dest)
            except OSError:  # a process that took no lock (an older version) built it first
                pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _wait_for(lock, dest: Path) -> None:
    """Take the lock; where another process holds it, say so once (with its pid) and wait."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    lock.seek(0)
    holder = lock.read().strip()
    holder = f"process {holder}" if holder.isdigit() else "another process"
    try:  # the line inside: a Ctrl-C that comes as soon as it is read is this one line too
        print(f"waiting for {holder}, which is building {dest.name} in {dest.parent} (once for this machine; "
              "this process goes on when it is done)", file=sys.stderr, flush=True)
        fcntl.flock(lock, fcntl.LOCK_EX)
    except KeyboardInterrupt as e:
        if type(e) is not KeyboardInterrupt:  # a run's own stop (executors.Stopped) is handled where it is raised
            raise
        raise WaitStopped(f"stopped while waiting for {holder} to build {dest}: that build goes on; run the same "
                          "command again to use it") from None
