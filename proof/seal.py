"""A run's record sealed: every file a family's notebook (02) leaves, and every executed notebook and the
report, hashed into chains that start at the commitment's SHA-256.

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

The executed notebooks the batch keeps in notebooks/ carry their own seal in their metadata
(`metadata.shortlist.seal`, written by notebook() when the runner stamps them): the SHA-256 of the whole
notebook but that seal (every cell's source and output, and the provenance stamped in it), chained from
    01_predict                 the commitment's SHA-256
    02_train_family.<slug>     its family's seal head (above), or the commitment's where it has none (failed)
    03_report                  the 02 notebooks' seal heads, in name order
and 03's also from report.html, rendered from it. So a figure edited in an executed notebook, or in the report,
is found (notebooks()) even where every result file still agrees with it.
"""
from __future__ import annotations

import copy
import hashlib
import json
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


# --- the executed notebooks and the report -----------------------------------------------------------------------
def _family_head(out, sha: str, slug: str) -> str:
    try:
        stored = files.made_against(path(out, slug), sha)
    except (OSError, ValueError, AttributeError):
        stored = None
    return stored.get("head", sha) if isinstance(stored, dict) else sha


def _trained(out) -> list[Path]:
    return sorted(p for p in files.notebooks(out).glob(files.train_notebook(out, "*").name)
                  if not p.name.endswith(".partial.ipynb"))


def _previous(out, sha: str, dest: Path) -> str:
    """Where the notebook's chain starts (module docstring)."""
    slug = files.trained_slug(dest)
    if slug is not None:
        return _family_head(out, sha, slug)
    if dest.name == files.REPORT:
        heads = [f"{p.name} {_stored(p).get('head')}" for p in _trained(out)]
        return _digest(" ".join([sha, *heads]).encode())
    return sha


def _stored(dest: Path) -> dict:
    import nbformat
    try:
        found = nbformat.read(dest, as_version=4).metadata.get("shortlist", {}).get("seal")
    except (OSError, ValueError, AttributeError):
        return {}
    return found if isinstance(found, dict) else {}


def _body(nb) -> str:
    data = copy.deepcopy(dict(nb))
    data.get("metadata", {}).get("shortlist", {}).pop("seal", None)
    return _digest(json.dumps(data, sort_keys=True, ensure_ascii=False, default=str).encode())


def _link(out, sha: str, dest: Path, nb, report: Path | None) -> dict:
    previous, body = _previous(out, sha, dest), _body(nb)
    head = _digest(f"{previous} {dest.name} {body}".encode())
    found = {"predictions_sha256": sha, "previous": previous, "sha256": body, "head": head}
    if report is not None and report.is_file():
        found["report_sha256"] = _digest(report.read_bytes())
        found["head"] = _digest(f"{head} {report.name} {found['report_sha256']}".encode())
    return found


def notebook(out, sha: str, dest: Path, report: Path | None = None) -> dict:
    """Seal an executed notebook in its own metadata (03's with the report rendered from it)."""
    import nbformat
    nb = nbformat.read(dest, as_version=4)
    found = _link(out, sha, Path(dest), nb, report)
    nb.metadata.setdefault("shortlist", {})["seal"] = found
    files.write_text(dest, nbformat.writes(nb))
    return found


def notebooks(out, sha: str, report: bool = True) -> list[str]:
    """Why the executed notebooks in notebooks/ and (report) 03 and report.html are not what their seals say
    (one line each). The report reads it without 03: it is 03, being built again."""
    import nbformat
    out, why = Path(out), []
    here = files.notebooks(out)
    kept = [here / files.PREDICT, *_trained(out), *([here / files.REPORT] if report else [])]
    for dest in (p for p in kept if p.is_file()):
        name = dest.relative_to(out)
        try:
            nb = nbformat.read(dest, as_version=4)
        except (OSError, ValueError) as e:
            why.append(f"{name} is unreadable ({type(e).__name__})")
            continue
        stored = nb.metadata.get("shortlist", {}).get("seal")
        if not isinstance(stored, dict) or stored.get("predictions_sha256") != sha:
            why.append(f"{name} is not sealed against these predictions")
            continue
        report = files.report(out) if dest.name == files.REPORT else None
        now = _link(out, sha, dest, nb, report)
        if stored.get("sha256") != now["sha256"]:
            why.append(f"{name} changed after its run sealed it")
        elif stored.get("previous") != now["previous"]:
            why.append(f"{name} does not follow what is there now ("
                       + ("its family's files were sealed by another run" if report is None else
                          "the family notebooks changed after it was built: build the report again, python -m proof "
                          "report") + ")")
        elif report is not None and stored.get("report_sha256") != now.get("report_sha256"):
            why.append(f"{report.relative_to(out)} is not the page {files.REPORT} rendered")
        elif stored.get("head") != now["head"]:
            why.append(f"{name}'s seal does not add up")
    return why
