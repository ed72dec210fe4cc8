"""The output folder: where each file of a run lives, and how every one of them is written.

    <out>/predictions.json, predictions.sha256     committed before any training
    <out>/families/<slug>.json                     one result per family (or why it failed)
    <out>/work/<slug>/                             what a rerun resumes from: evaluation, checkpoints; the
                                                   final adapter and the seal of the family's files (seal.py)
    <out>/work/compile/                            torch.compile's caches, shared by every family
    <out>/notebooks/*.ipynb                        the executed notebooks
    <out>/report.html                              the rendered report

Every file is written by shortlist.output: to a temporary name beside its place, then renamed over
it, so a run that dies leaves the old file or the new one, never half of one.
"""
from __future__ import annotations

from pathlib import Path

from shortlist.output import OutputError, check_writable, read_json, write_bytes, write_json, write_text  # noqa: F401


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


def adapter(out, slug: str) -> Path:
    """The family's final LoRA adapter (proof/adapter.py)."""
    return work(out, slug) / "adapter"


def compile_cache(out) -> Path:
    return Path(out) / "work" / "compile"


PREDICT, TRAIN, REPORT = "01_predict.ipynb", "02_train_family.ipynb", "03_report.ipynb"


def notebooks(out) -> Path:
    return Path(out) / "notebooks"


def train_notebook(out, slug: str) -> Path:
    """02 as executed for one family."""
    return notebooks(out) / f"{Path(TRAIN).stem}.{slug}.ipynb"


def trained_slug(notebook: Path) -> str | None:
    """The family slug of an executed 02 (train_notebook's name), or None for another notebook."""
    stem, name = Path(TRAIN).stem + ".", Path(notebook).name
    return name[len(stem):-len(".ipynb")] if name.startswith(stem) and name.endswith(".ipynb") else None


def report(out) -> Path:
    return Path(out) / "report.html"
