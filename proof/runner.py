"""The batch: papermill runs 01 once, 02 once per family, 03 last; nbconvert renders the report.

The notebooks are the tested path: the runner only executes them, in fresh processes, with the
settings as papermill parameters. It resumes: 01 is kept while its predictions verify, and a
family whose result matches the predictions hash is not run again. Families fan out one process
per visible GPU, each process seeing one GPU; without a GPU they run one after another. A family
that fails is recorded with the reason (its executed notebook keeps the traceback) and the
others go on.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat

from proof import commit, files, records
from proof.settings import Settings
from shortlist import provenance, sources
from shortlist.placement import visible_gpus

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
PREDICT, TRAIN, REPORT = "01_predict.ipynb", "02_train_family.ipynb", "03_report.ipynb"


@dataclass(frozen=True)
class Notebooks:
    """Which notebooks the batch executes: the repository's own (tests put fixture notebooks in their place)."""
    predict: Path = NOTEBOOKS / PREDICT
    train: Path = NOTEBOOKS / TRAIN
    report: Path = NOTEBOOKS / REPORT

    def replace(self, **changes) -> "Notebooks":
        return dataclasses.replace(self, **{k: Path(v) for k, v in changes.items()})


THE_NOTEBOOKS = Notebooks()


def build_report(settings: Settings, sha: str, notebook: Path = Notebooks.report) -> Path:
    """03 executed headless into <out>/notebooks, then rendered by nbconvert as <out>/report.html."""
    from proof import report
    dest = files.notebooks(settings.out) / REPORT
    reason = execute(notebook, dest, kernel_parameters(settings) | {"publish": False})
    stamp(dest, sha, settings)
    if reason:
        raise RuntimeError(f"03_report failed: {reason} (see {dest})")
    return report.render(dest, files.report(settings.out))


def report_again(out) -> Path:
    """report.html rebuilt from an output folder alone, under the settings and trainee it committed (an
    older run's too: what it did not record is measured, without a model)."""
    from proof import settings as settings_
    out = str(Path(out).resolve())
    body, sha = commit.committed(out, commit.READABLE)
    known = set(settings_.names())
    settings = settings_.make(**{k: v for k, v in body["settings"].items() if k in known},
                              families=body["families"], trainee=body["trainee"], out=out)
    return build_report(settings, sha)


def publish(settings: Settings, enabled: bool = True) -> Path | None:
    """03's last cell: Run All by hand ends in the report.html the batch would have written."""
    if not enabled:  # the batch's own headless run of 03: build_report renders it afterwards
        return None
    _, sha = commit.committed(settings.out)
    html = build_report(settings, sha)
    print(f"report: {html}")
    return html


def kernel_parameters(settings: Settings) -> dict:
    """What a notebook's kernel is handed: the settings, with the trainee as its resolved record (a
    profile registered only in this process arrives whole), checked once on arrival (notebook.start)."""
    return settings.as_dict() | {"trainee": settings.profile.as_dict(), "model": settings.profile.model}


def execute(notebook: Path, dest: Path, parameters: dict, gpu: str | None = None) -> str | None:
    """Run one notebook with papermill in its own process; returns None, or why it failed (one line).

    papermill prints each cell as it starts and what the cell prints. It writes the notebook as it
    goes, to a partial name renamed into place at the end, so dest is always a whole executed
    notebook, failed or not."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.stem + ".partial.ipynb")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(parameters, f)
    try:
        done = subprocess.run([sys.executable, "-m", "proof.runner", str(notebook), str(partial), f.name], env=env)
    finally:
        os.unlink(f.name)
    if not partial.exists():
        return f"papermill could not start {notebook.name} (exit {done.returncode})"
    try:
        nb = nbformat.read(partial, as_version=4)
        reason = failure(nb) or (f"papermill exited with {done.returncode}" if done.returncode else None)
    except ValueError:  # cut short where papermill could not write it (a full disk): kept as it was, unrun
        nb, reason = nbformat.read(notebook, as_version=4), f"papermill could not write {partial.name} whole"
    files.write_text(dest, nbformat.writes(nb))  # on a full disk, one line (shortlist.output.DiskFull)
    partial.unlink()
    return reason


def papermill(notebook: str, dest: str, parameters: str) -> None:
    """One notebook through papermill's own API, in a process of its own (`python -m proof.runner`).
    The kernel talks over IPC, not TCP (ipykernel warns that TCP is unencrypted), and runs in the
    notebook's folder, as Run All by hand does. Its sockets live in a private temporary folder: left to
    jupyter_client's default (a relative "kernel-ipc"), they land in the kernel's working folder,
    the repository's notebooks/, where a killed kernel leaves them behind."""
    import shutil
    import tempfile

    import papermill as pm
    from traitlets.config import Config
    sockets = tempfile.mkdtemp(prefix="shortlist-kernel-")  # short: a socket path holds at most 107 bytes
    try:
        pm.execute_notebook(notebook, dest, parameters=json.loads(Path(parameters).read_text()),
                            kernel_name="python3", log_output=True, progress_bar=False,
                            cwd=str(Path(notebook).parent),
                            config=Config({"KernelManager": {"transport": "ipc", "ip": f"{sockets}/kernel"}}))
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


def failure(nb) -> str | None:
    """The first error an executed notebook holds, as one line."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                return f"{output['ename']}: {output['evalue']}".splitlines()[0]
    return None


def failed(key: str, sha: str, reason: str, notebook: str) -> records.Failure:
    """The result of a family whose notebook failed."""
    return records.Failure(family=key, slug=sources.parse(key).slug, reason=reason, notebook=notebook,
                           predictions_sha256=sha, **provenance.stamp())


def stamp(dest: Path, sha: str | None, settings: Settings) -> None:
    """Record in the executed notebook's metadata what produced it."""
    nb = nbformat.read(dest, as_version=4)
    nb.metadata["shortlist"] = {"predictions_sha256": sha, "model": settings.profile.model,
                                "trainee": settings.profile.as_dict(), "settings": settings.as_dict(),
                                **provenance.stamp()}
    files.write_text(dest, nbformat.writes(nb))


def pending(settings: Settings, sha: str) -> list[str]:
    """Families without a finished result for these predictions (failed ones are tried again)."""
    return [key for key in settings.families
            if not isinstance(records.read(files.result(settings.out, sources.parse(key).slug), sha),
                              records.FamilyResult)]


@dataclass
class Outcome:
    report: Path
    failed: dict  # family key -> why, for every family without a finished result


def run(settings: Settings, notebooks: Notebooks | None = None, log=print) -> Outcome:
    """The whole proof: every family is tried and the report is built even where some fail."""
    notebooks = notebooks or THE_NOTEBOOKS
    settings = settings.replace(out=str(Path(settings.out).resolve()))  # kernels run elsewhere
    files.check_writable(settings.out)
    parameters = kernel_parameters(settings)
    out_nb = files.notebooks(settings.out)
    try:
        _, sha = commit.verified(settings)
        log(f"01_predict: kept, predictions verify (sha256 {sha[:12]}…)")
    except commit.NotCommitted:
        from shortlist.models import config as models  # the model is needed: one line now if it cannot be had
        models.check_fits(models.model_config(settings.profile.model), settings.profile)
        log("01_predict: screening every family and committing the predictions")
        reason = execute(notebooks.predict, out_nb / PREDICT, parameters)
        if reason:
            raise RuntimeError(f"01_predict failed: {reason} (see {out_nb / PREDICT})")
        _, sha = commit.verified(settings)
        stamp(out_nb / PREDICT, sha, settings)
    todo = pending(settings, sha)
    log(f"02_train_family: {len(todo)} of {len(settings.families)} families to run"
        + (f" ({len(settings.families) - len(todo)} already done)" if len(todo) < len(settings.families) else ""))
    gpus = visible_gpus()
    slots = gpus or [None]

    def train_one(i_key):
        i, key = i_key
        gpu = slots[i % len(slots)] if gpus else None
        family = sources.parse(key)
        dest = out_nb / f"02_train_family.{family.slug}.ipynb"
        started = time.time()
        log(f"02 {key}: started" + (f" on GPU {gpu}" if gpu is not None else ""))
        reason = execute(notebooks.train, dest, {**parameters, "family": key}, gpu=gpu)
        if reason:
            records.write(files.result(settings.out, family.slug),
                          failed(key, sha, reason, str(dest.relative_to(settings.out))))
        stamp(dest, sha, settings)
        log(f"02 {key}: {'failed: ' + reason if reason else 'done'} ({time.time() - started:.0f} s)")

    # one queue per GPU: family i goes to slot i mod n, and each slot runs its families in turn
    with ThreadPoolExecutor(max_workers=len(slots)) as pool:
        by_slot = [[(i, k) for i, k in enumerate(todo) if i % len(slots) == s] for s in range(len(slots))]
        list(pool.map(lambda queue: [train_one(item) for item in queue], by_slot))
    log("03_report: building the report")
    html = build_report(settings, sha, notebooks.report)
    log(f"report: {html}")
    failures = {}
    for key in settings.families:
        result = records.read(files.result(settings.out, sources.parse(key).slug), sha)
        if not isinstance(result, records.FamilyResult):
            failures[key] = result.reason if result is not None else "no result"
    return Outcome(html, failures)


if __name__ == "__main__":
    try:
        papermill(*sys.argv[1:4])
    except OSError as e:  # the executed notebook could not be written (a full disk): the batch says so in one line
        sys.exit(f"papermill: {e.strerror or e}: {e.filename or sys.argv[2]}")
