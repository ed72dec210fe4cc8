"""Which commit a result's code was: the commit whose files give the fingerprint the result recorded.

    python bench/commit_of.py bench/results/throughput.warm.8mps100.h100.json   # the commits that match, or none
    python bench/commit_of.py sha256:7c414f40a28a4c5c --last 50

Every file a run or a bench script writes records its code's fingerprint in its versions ("shortlist code",
shortlist/provenance.py): a SHA-256 over the files the tree that ran had, taken from the files, not from git. A
result's "commit" field is what its maker was told (SHORTLIST_COMMIT on the GPU machine, whose copied .git may
name another commit); this says which commit's tree it was. None among the last N: the tree had changes that were
never committed, or is older than N commits.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from shortlist import provenance  # noqa: E402

KEY = "shortlist code"


def recorded(value) -> set[str]:
    """Every fingerprint a JSON document records (its versions' KEY, at any depth)."""
    found = set()
    if isinstance(value, dict):
        if isinstance(value.get(KEY), str) and value[KEY].startswith("sha256:"):  # not None, not "unknown (...)"
            found.add(value[KEY])
        for v in value.values():
            found |= recorded(v)
    elif isinstance(value, list):
        for v in value:
            found |= recorded(v)
    return found


def _git(repo: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True, check=True).stdout


def of_commit(repo: Path, commit: str, blobs: dict) -> str:
    """The fingerprint of a commit's tree, as provenance.code() reads a checkout of it (links left out)."""
    wanted = []
    for entry in _git(repo, "ls-tree", "-r", "-z", commit).split(b"\0"):
        if not entry:
            continue
        meta, raw = entry.split(b"\t", 1)
        mode, kind, sha = meta.split()
        path = os.fsdecode(raw)  # as os.walk names it on this machine
        if kind == b"blob" and mode != b"120000" and provenance.counts(path):
            wanted.append((path, sha.decode()))
    missing = sorted({sha for _, sha in wanted if sha not in blobs})
    if missing:
        out = _git(repo, "cat-file", "--batch", data="".join(f"{s}\n" for s in missing).encode())
        at = 0
        for sha in missing:
            header_end = out.index(b"\n", at)
            header = out[at:header_end].split()
            if len(header) != 3:  # "<sha> missing": a shallow or damaged clone
                raise SystemExit(f"commit_of: git has no object {sha} of {commit} ({out[at:header_end].decode()!r})")
            size = int(header[2])
            blobs[sha] = out[header_end + 1:header_end + 1 + size]
            at = header_end + 1 + size + 1
    return f"sha256:{provenance.fingerprint((path, blobs[sha]) for path, sha in wanted)[:16]}"


def matches(repo: Path, wanted: set[str], last: int) -> list[tuple[str, str]]:
    """(commit, fingerprint) for each of the last commits whose fingerprint is one wanted, newest first."""
    blobs: dict = {}
    commits = _git(repo, "rev-list", f"--max-count={last}", "HEAD").decode().split()
    return [(c, f) for c in commits if (f := of_commit(repo, c, blobs)) in wanted]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", help="a result's JSON file, or a fingerprint (sha256:...)")
    ap.add_argument("--last", type=int, default=200, help="how many commits back from HEAD to look")
    ap.add_argument("--repo", type=Path, default=provenance.ROOT)
    a = ap.parse_args(argv)
    wanted = {a.what} if a.what.startswith("sha256:") else recorded(json.loads(Path(a.what).read_text()))
    if not wanted:
        print(f"{a.what}: records no {KEY!r} (written before fingerprints were recorded)", file=sys.stderr)
        return 2
    found = matches(a.repo, wanted, a.last)
    for commit, fp in found:
        print(f"{fp} {commit}")
    for fp in sorted(wanted - {f for _, f in found}):
        print(f"{fp} matches none of the last {a.last} commits (changes never committed, or older)")
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
