"""What produced a file: package versions, this code's own fingerprint, the machine and its GPU, and when.

The code's fingerprint (code()) is a SHA-256 over the files that make a run (FOLDERS and FILES: the packages, notebooks,
bench scripts and the pins), read from the tree that runs, not from git: a copied tree's .git may name another commit
(the GPU machine's copy said ce781fb for 166d27b's tree). bench/commit_of.py finds the commit whose files give it.
"""
from __future__ import annotations

import datetime
import functools
import hashlib
import importlib.metadata
import os
import platform
from pathlib import Path

PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "reasoning-gym", "numpy", "scipy",
            "papermill", "nbconvert")


ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("shortlist/", "proof/", "notebooks/", "bench/")
FILES = ("pyproject.toml", "requirements.txt")
NOT_CODE = ("bench/results/",)  # what runs write beside the code


def counts(path: str) -> bool:
    """Whether a file (its path from the repository's root, with /) is part of the code's fingerprint."""
    parts = path.split("/")
    return (path in FILES or path.startswith(FOLDERS)) and not path.startswith(NOT_CODE) \
        and "__pycache__" not in parts and not path.endswith(".pyc") \
        and not any(p.startswith(".") or p.endswith(".egg-info") for p in parts)


def fingerprint(files) -> str:
    """SHA-256 over (path, content) pairs, in path order: the same files give the same digest wherever they lie.
    A path is a str as os.walk and git give it (os.fsdecode: a name that is not UTF-8 keeps its bytes)."""
    digest = hashlib.sha256()
    for path, content in sorted(files):
        digest.update(os.fsencode(path) + f"\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()


def code_files(root: Path = ROOT):
    """The (path, content) pairs counts() keeps under root. Raises OSError where a file or folder cannot be read:
    a fingerprint that left it out would name the wrong tree."""
    def refuse(e: OSError):
        raise e
    for top in FILES + FOLDERS:  # not the whole root: a virtual environment lies there too
        here = root / top
        if not here.exists():  # a tree without bench/, say: nothing of it to count (it matches no commit)
            continue
        found = [here] if top in FILES else [Path(d) / n for d, _, names in os.walk(here, onerror=refuse)
                                              for n in names]
        for path in found:  # os.walk follows no link; a link (proof/notebooks) is not a file counted here
            rel = path.relative_to(root).as_posix()
            if not path.is_symlink() and path.is_file() and counts(rel):
                yield rel, path.read_bytes()


@functools.cache
def code(root: Path = ROOT) -> str | None:
    """This code's fingerprint, "sha256:" and its first 16 hex digits (bench/commit_of.py finds its commit). None
    where this is not a repository's checkout (no pyproject.toml beside the packages: an installed package, as
    on a Ray node after pip install .); "unknown (...)" where a file cannot be read: a file's provenance never
    fails over it. A checkout whose files were rewritten (autocrlf, links as files) gives a fingerprint that
    matches no commit, never another commit's."""
    if not (root / "pyproject.toml").is_file():
        return None
    try:
        return f"sha256:{fingerprint(code_files(root))[:16]}"
    except (OSError, ValueError) as e:  # unreadable: say so in the record
        return f"unknown ({type(e).__name__}: {e})"[:200]


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def versions() -> dict:
    out = {"python": platform.python_version(), "shortlist code": code()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def device(placement: dict | None = None) -> dict:
    """The machine, its GPUs and, for a job, where its executor placed it (`placement`, as the caller has it:
    shortlist.executors.with_peak(placement_of_this_job()) in a job's process)."""
    import torch
    info = {"platform": platform.platform(), "cpus": os.cpu_count(), "cuda": torch.cuda.is_available(),
            "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "placement": placement}
    if info["cuda"]:
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        info["cuda_version"] = torch.version.cuda
    return info


def stamp(placement: dict | None = None) -> dict:
    return {"written_at": now(), "versions": versions(), "device": device(placement)}
