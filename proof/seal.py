"""A family's record sealed: every file its notebook (02) leaves, hashed into a chain that starts at the
commitment's SHA-256.

    work/<slug>/before.json          the evaluation before training
    work/<slug>/adapter/*            the final LoRA adapter (proof/adapter.py)
    families/<slug>.json             the result

Each link is SHA-256(previous link, the file's path, the file's SHA-256); the first one's previous link is the
predictions' digest, the last one is the seal's head. record() writes work/<slug>/seal.json before the result
(from the result's bytes), so a kill between the two leaves a seal without a result, which nothing reads. An edit
of any sealed file made without running the family again is found even where every number still agrees (a
reward curve, a timing, a version, a completion's text outside its answer). What the seal cannot see is an edit
sealed again with this module: the answers regenerated from the adapter (proof/regenerate.py) and a family
retrained from the commitment (`python -m proof verify --reproduce`) are the checks for that.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from proof import files

NAME = "seal.json"  # in work/<slug>/


def path(out, slug: str) -> Path:
    return files.work(out, slug) / NAME


def sealed(out, slug: str) -> list[Path]:
    """The files the seal covers, in the order the run writes them: those there now."""
    adapter = files.work(out, slug) / "adapter"
    found = [files.work(out, slug) / "before.json", *sorted(p for p in adapter.glob("*") if p.is_file()),
             files.result(out, slug)]
    return [p for p in found if p.is_file()]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def chain(sha: str, out, slug: str, written: dict | None = None) -> dict:
    """The seal of the family's files: written maps a path about to be written to its bytes (the result)."""
    out, written = Path(out), {Path(k): v for k, v in (written or {}).items()}
    head, links = sha, []
    for p in sorted(set(sealed(out, slug)) | set(written), key=_order(out, slug)):
        name = str(p.relative_to(out))
        digest = _digest(written[p] if p in written else p.read_bytes())
        head = _digest(f"{head} {name} {digest}".encode())
        links.append({"file": name, "sha256": digest, "chain": head})
    return {"predictions_sha256": sha, "links": links, "head": head}


def _order(out, slug: str):
    result = files.result(out, slug)
    return lambda p: (p == result, p != files.work(out, slug) / "before.json", str(p))


def write(sha: str, out, slug: str, written: dict | None = None) -> dict:
    record = chain(sha, out, slug, written)
    files.write_json(path(out, slug), record)
    return record


def check(sha: str, out, slug: str) -> list[str]:
    """Why the family's files are not what its seal says (one line each), or nothing."""
    where = path(out, slug)
    try:
        stored = files.made_against(where, sha)
    except (OSError, ValueError, AttributeError) as e:
        return [f"{where.relative_to(Path(out))} is unreadable ({type(e).__name__})"]
    if stored is None:
        return [f"no {where.relative_to(Path(out))} made against these predictions: its files are not sealed"]
    now = chain(sha, out, slug)
    listed, there = [x.get("file") for x in stored.get("links", [])], [x["file"] for x in now["links"]]
    if listed != there:
        return [f"its seal covers {', '.join(listed) or 'nothing'}, but the folder holds {', '.join(there)}"]
    changed = [b["file"] for a, b in zip(stored["links"], now["links"]) if a.get("sha256") != b["sha256"]]
    if changed or stored.get("head") != now["head"]:
        return [f"{', '.join(changed) or 'its seal'} changed after the family's run sealed it"]
    return []
