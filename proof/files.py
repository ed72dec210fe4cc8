"""The output folder: where each file of a run lives, and how every one of them is written.

    <out>/predictions.json, predictions.sha256     committed before any training
    <out>/families/<slug>.json                     one result per family (or why it failed)
    <out>/work/<slug>/                             what a rerun resumes from: evaluation, checkpoints
    <out>/work/compile/                            torch.compile's caches, shared by every family
    <out>/notebooks/*.ipynb                        the executed notebooks
    <out>/report.html                              the rendered report

Every file is written to a temporary name beside its place and renamed over it, so a run that
dies leaves the old file or the new one, never half of one.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


_UMASK = os.umask(0)
os.umask(_UMASK)


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


def made_against(path: Path, sha: str) -> dict | None:
    """A file the run wrote, if it is there and was made against these predictions."""
    path = Path(path)
    if not path.exists():
        return None
    record = read_json(path)
    return record if record.get("predictions_sha256") == sha else None


def predictions(out) -> Path:
    return Path(out) / "predictions.json"


def predictions_hash(out) -> Path:
    return Path(out) / "predictions.sha256"


def result(out, slug: str) -> Path:
    return Path(out) / "families" / f"{slug}.json"


def work(out, slug: str) -> Path:
    return Path(out) / "work" / slug


def compile_cache(out) -> Path:
    return Path(out) / "work" / "compile"


def notebooks(out) -> Path:
    return Path(out) / "notebooks"


def report(out) -> Path:
    return Path(out) / "report.html"
