"""Writing files so that a run that dies leaves the old file or the new one, never half of one,
and finding out that a place cannot be written before any work that would be lost."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from pathlib import Path

from shortlist.errors import OneLine


_UMASK = os.umask(0)
os.umask(_UMASK)


class OutputError(OneLine, RuntimeError):
    """An output folder that cannot be written; the message is one line."""


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


def write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp's 0600 would hide results from the rest of a team
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode())


def write_json(path: Path, obj) -> None:
    write_text(path, json.dumps(obj, indent=1, allow_nan=False) + "\n")


def read_json(path: Path):
    return json.loads(Path(path).read_text())


def build_folder(dest, build, done: str = "model.safetensors") -> Path:
    """A folder built once (build(folder) fills it), into a temporary folder renamed into place. One
    process builds while the others wait on a lock beside it: processes starting together on a cold
    cache (test workers, notebook kernels) would otherwise each spend the build's CPU."""
    dest = Path(dest)
    if (dest / done).exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f"{dest.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / done).exists():  # built while this process waited
            return dest
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
