"""The batch: papermill runs 01 once, 02 once per family, 03 last; nbconvert renders the report.

The notebooks are the tested path: the runner only executes them, in fresh processes, with the
settings as papermill parameters. It resumes: 01 is kept while its predictions verify, and a
family whose result matches the predictions hash and verifies again (proof/verify.py) is not run
again; one that fails is moved aside, said in one line, and runs again. Each family is a job of
shortlist.executors' executor, from a queue: `per_gpu` at once on each visible GPU, each seeing
only its own (local), or Ray tasks on a cluster, whose results come back to this process, the only
one that writes the output folder there; without a GPU they run one after another. A family that
fails (its notebook raised, its process or its node died) is recorded with the reason (its executed
notebook keeps the traceback) and the others go on. A family stopped by Ctrl-C is neither: a rerun
takes it up where its checkpoints left it.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from proof import checkpoint, commit, files, kernel, records, seal, verify
from proof.settings import Settings
from shortlist import executors, output, provenance, sources
from shortlist.executors import sizing

# the repository's notebooks/, through proof/notebooks (a link to it), so that an install, which carries them
# as the package's data, runs the same three
NOTEBOOKS = Path(__file__).resolve().parent / "notebooks"
PREDICT, TRAIN, REPORT = files.PREDICT, files.TRAIN, files.REPORT


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
    html = report.render(dest, files.report(settings.out))
    seal.notebook(settings.out, sha, dest, html)  # again, with the page rendered from it
    return html


def report_again(out) -> Path:
    """report.html rebuilt from an output folder alone, under the settings and trainee it committed (an
    older run's too: what it did not record is measured, without a model; a run of this version's answers
    are drawn again from its model and adapters)."""
    settings, sha = committed_settings(out, commit.READABLE)
    out = settings.out
    output.check_writable(out)  # a read-only folder: one line before anything, the lock included
    with executors.one_run(out):  # not beside a run that is writing the same folder
        return build_report(settings, sha)


def corrupt(out) -> dict:
    """The families the last report found corrupt (family key -> why), as its executed 03 recorded them
    (report.marks, in the metadata of what it shows first); {} where it holds no such record."""
    return dict(_marks(out).get("corrupt", {}))


def edited(out) -> list[str]:
    """What the last report found edited in the run's record (proof/seal.py: notebooks), one line each."""
    return list(_marks(out).get("edited", []))


def _marks(out) -> dict:
    from proof.report.load import MARK
    try:
        nb = nbformat.read(files.notebooks(out) / REPORT, as_version=4)
    except (OSError, ValueError):
        return {}
    for cell in nb.cells:
        for shown in cell.get("outputs", []):
            for meta in shown.get("metadata", {}).values():  # IPython keys a display's metadata by its type
                if isinstance(meta, dict) and isinstance(meta.get(MARK), dict):
                    return meta[MARK]
    return {}


def committed_settings(out, readable: tuple = (commit.SCHEMA,)) -> tuple[Settings, str]:
    """The settings and trainee an output folder committed (an older run's too, where readable says so), with
    out as the folder, and the predictions' digest."""
    from proof import settings as settings_
    if (bad := output.path_error(str(out), "--out")) is not None:
        raise settings_.SettingsError(bad)
    out = str(Path(out).resolve())
    body, sha = commit.committed(out, readable)
    known = set(settings_.names())
    committed_as = {"reserve": False} | {k: v for k, v in body["settings"].items() if k in known}  # before reserve: False
    return settings_.make(**committed_as, families=body["families"], trainee=body["trainee"], out=out,
                          source=body.get("source")), sha  # the run's sources as recorded (None: this process's)


def publish(settings: Settings, enabled: bool = True) -> None:
    """03's last cell: Run All by hand ends in the report.html the batch would have written (its path printed;
    nothing returned, so the cell shows no stray value)."""
    if not enabled:  # the batch's own headless run of 03: build_report renders it afterwards
        return
    _, sha = commit.committed(settings.out)
    print(f"report: {build_report(settings, sha)}")


def kernel_parameters(settings: Settings) -> dict:
    """What a notebook's kernel is handed: the settings, with the trainee as its resolved record (a
    profile registered only in this process arrives whole), checked once on arrival (notebook.start)."""
    return settings.as_dict() | {"trainee": settings.profile.as_dict(), "model": settings.profile.model}


def execute(notebook: Path, dest: Path, parameters: dict) -> str | None:
    """Run one notebook with papermill in a job of its own, here, with every GPU this process sees (as
    Run All would); returns None, or why it failed (one line)."""
    job = notebook_job(notebook.name, notebook, dest, parameters, alone=True)
    return finish(executors.Local({}).run([job], parameters["out"], log=lambda line: None)[0], dest)


def notebook_job(name: str, notebook: Path, dest: Path, parameters: dict, reads=(), writes=(), units=(),
                 alone: bool = False) -> executors.Job:
    """A notebook executed by papermill (`python -m proof.runner`), as a job: the notebook and its
    parameters travel with it, and where it runs `out` is that machine's output folder. The executed
    notebook is written as it goes to a partial name beside dest (finish() renames it into place), so
    dest is always a whole executed notebook, failed or not; one a stopped run left goes now."""
    out, partial = Path(parameters["out"]), _partial(dest)
    partial.unlink(missing_ok=True)
    Path(dest).unlink(missing_ok=True)  # an earlier attempt's notebook is not this attempt's evidence
    inside = partial.resolve().is_relative_to(out.resolve())
    where = f"{executors.OUT}/{partial.resolve().relative_to(out.resolve())}" if inside else str(partial)
    return executors.Job(
        name, "proof.runner", (f"{executors.SCRATCH}/{NOTEBOOK}", where, f"{executors.SCRATCH}/{PARAMETERS}",
                               executors.OUT),
        files=((NOTEBOOK, Path(notebook).read_bytes()), (PARAMETERS, json.dumps(parameters).encode())),
        reads=tuple(reads), writes=(*writes, *([where.removeprefix(executors.OUT + "/")] if inside else [])),
        units=tuple(units), caches=("work/compile",), gpu_process=False, alone=alone)


NOTEBOOK, PARAMETERS = "notebook.ipynb", "parameters.json"  # in a notebook job's scratch folder


def _partial(dest: Path) -> Path:
    return Path(dest).with_name(Path(dest).stem + ".partial.ipynb")


KERNEL_DIED = 3  # papermill's exit status where the kernel ended mid-cell (nbclient's DeadKernelError)
KERNEL_DIED_WHY = "kernel died (its process ended mid-cell: killed, out of memory, or crashed)"


def finish(ran: executors.Ran, dest: Path) -> str | None:
    """The executed notebook renamed into place (its metadata as papermill left it); why it failed, or None.
    A job that never reached papermill, or whose worker was lost with the notebook, leaves no notebook."""
    partial = _partial(dest)
    why = ran.why if ran.rc is None else KERNEL_DIED_WHY if ran.rc == KERNEL_DIED else \
        f"papermill exited with {ran.rc}" if ran.rc else None
    try:
        nb = nbformat.read(partial, as_version=4)
    except OSError:  # absent: the job never reached papermill, or its worker was lost with the notebook
        return why if ran.rc is None else f"papermill could not start {ran.job.name} (exit {ran.rc})"
    except ValueError:  # cut short: a lost worker sent only part of it, or papermill could not write it (a full disk)
        partial.unlink(missing_ok=True)
        return why or f"papermill could not write {partial.name} whole"
    reason = failure(nb) or why
    files.write_text(dest, nbformat.writes(nb))  # on a full disk, one line (shortlist.output.DiskFull)
    partial.unlink()
    return reason


def papermill(notebook: str, dest: str, parameters: str, out: str | None = None) -> None:
    """One notebook through papermill's own API, in a process of its own (`python -m proof.runner`), with
    `out` (where this job runs) as the notebook's output folder, on the project's kernel (proof/kernel.py: IPC,
    the job's launcher, the same engine a person names by hand), run in the repository's notebooks/, as Run
    All by hand does. What the kernel prints (a line per logged training step, a family's evaluations,
    "resumed at step N") is this process's own output too, so the batch's console shows it as it comes, not
    only the executed notebook."""
    import papermill as pm
    values = json.loads(Path(parameters).read_text()) | ({"out": out} if out else {})
    Path(dest).parent.mkdir(parents=True, exist_ok=True)
    pm.execute_notebook(notebook, dest, parameters=values, kernel_name="python3", engine_name=kernel.register(),
                        log_output=False, stdout_file=sys.stdout, stderr_file=sys.stderr, progress_bar=False,
                        cwd=str(NOTEBOOKS if NOTEBOOKS.is_dir() else Path(notebook).parent))


def failure(nb) -> str | None:
    """The first error an executed notebook holds, as one line."""
    for cell in nb.cells:
        for shown in cell.get("outputs", []):
            if shown.get("output_type") == "error":
                return f"{shown['ename']}: {shown['evalue']}".splitlines()[0]
    return None


def failed(key: str, sha: str, reason: str, notebook: str, where: dict | None = None) -> records.NotebookFailure:
    """The result of a family whose notebook failed, with where its job ran."""
    return records.NotebookFailure(family=key, slug=sources.parse(key).slug, reason=reason, notebook=notebook,
                           predictions_sha256=sha, **provenance.stamp(where))


def stamp(dest: Path, sha: str | None, settings: Settings) -> None:
    """Record in the executed notebook's metadata what produced it."""
    nb = nbformat.read(dest, as_version=4)
    nb.metadata["shortlist"] = {"predictions_sha256": sha, "model": settings.profile.model,
                                "trainee": settings.profile.as_dict(), "settings": settings.as_dict(),
                                **provenance.stamp(executors.with_peak(executors.placement_of_this_job()))}
    files.write_text(dest, nbformat.writes(nb))
    if sha is not None:
        seal.notebook(settings.out, sha, dest)


def pending(settings: Settings, sha: str, log=print) -> list[str]:
    """Families without a finished result for these predictions that verifies (proof/verify.py: one that
    fails is moved aside, said in one line, and runs again; failed ones are tried again too)."""
    from proof import regenerate
    body, _ = commit.committed(settings.out)
    with verify.scorer_for(body, alone=True) as scorer, regenerate.Regenerator() as model:
        return [key for key in settings.families
                if verify.done(settings.out, body, sha, key, scorer, log, model) is None]


@dataclass
class Outcome:
    report: Path
    failed: dict  # family key -> why, for every family without a finished result


def run(settings: Settings, notebooks: Notebooks | None = None, log=print,
        where: executors.Placement | None = None) -> Outcome:
    """The whole proof: every family is tried and the report is built even where some fail. Families
    run as jobs of the placement's executor (shortlist.executors: this machine's GPUs, or a Ray
    cluster); one run at a time holds the output folder, taken once the inputs are known good: a
    refusal (a model that cannot be had, no GPU, a cluster that cannot take the jobs) writes nothing."""
    notebooks = notebooks or THE_NOTEBOOKS
    settings = settings.replace(out=str(Path(settings.out).resolve()))  # kernels run elsewhere
    where = where or executors.Placement()
    if _needs_model(settings):
        _check_model(settings, where.remote)  # one line now, read-only, if it cannot be had
    with output.removed_if_refused(settings.out, (executors.LOCK, executors.HOLDER), executors.LOCK):  # a refusal leaves no folder
        files.check_writable(settings.out)
        executor = where.start(log, peaks=lambda: _peaks(settings))
        try:
            with executors.one_run(settings.out):
                return _run(settings, notebooks, log, executor)
        finally:
            executor.close()


def _needs_model(settings: Settings) -> bool:
    """Whether this run would load the model: predictions to commit, or families left to train. A folder
    whose committed predictions differ needs it too (and one whose results fail verification, under the lock), so that a model that cannot be had is named before any
    such difference (the difference itself is refused under the lock, where the folder is read again)."""
    try:
        _, sha = commit.verified(settings)
    except commit.CommitError:
        return True
    results = (records.read(files.result(settings.out, sources.parse(key).slug), sha) for key in settings.families)
    return not all(isinstance(r, records.FamilyResult) for r in results)  # read only: verified under the lock


def _run(settings: Settings, notebooks: Notebooks, log, executor: executors.Executor) -> Outcome:
    parameters = kernel_parameters(settings)
    out_nb = files.notebooks(settings.out)
    try:
        body, sha = commit.verified(settings)
        log(f"01_predict: kept, predictions verify (sha256 {sha[:12]}…)")
    except commit.NotCommitted:  # the model was checked before the lock (run)
        log("01_predict: screening every family and committing the predictions")
        committed = ("predictions.json", "predictions.sha256")  # 01 refuses to overwrite other settings' own
        job = notebook_job("01_predict", notebooks.predict, out_nb / PREDICT, parameters, reads=committed,
                           writes=committed, alone=True)
        ran = executor.run([job], settings.out, log=log)[0]  # alone: all of this machine's GPUs, or a whole one
        reason = finish(ran, out_nb / PREDICT)
        if reason:
            raise RuntimeError(f"01_predict failed: {reason} (see {out_nb / PREDICT})")
        body, sha = commit.verified(settings)
        stamp(out_nb / PREDICT, sha, settings)
        log(f"01_predict: done ({ran.seconds:.0f} s), predictions committed (sha256 {sha[:12]}…)")
    todo = pending(settings, sha, log)
    if todo:
        _check_model(settings, executor.remote, body)  # a result that failed verification: this machine must train it
    log(f"02_train_family: {len(todo)} of {len(settings.families)} families to run"
        + (f" ({len(settings.families) - len(todo)} already done)" if len(todo) < len(settings.families) else ""))
    jobs = {f"02 {key}": key for key in todo}
    executor.run([family_job(settings, key, notebooks.train, parameters, executor.remote) for key in todo],
                 settings.out, done=lambda ran: trained(settings, jobs[ran.job.name], sha, ran, log), log=log)
    log("03_report: building the report")
    html = build_report(settings, sha, notebooks.report)
    log(f"report: {html}")
    failures = {}
    for key in settings.families:
        result = records.read(files.result(settings.out, sources.parse(key).slug), sha)
        if not isinstance(result, records.FamilyResult):
            failures[key] = result.reason if result is not None else "no result"
    return Outcome(html, failures)


def _check_model(settings: Settings, remote: bool, body: dict | None = None) -> None:
    """The model can be had, fits the trainee, and has a GPU to train on (or is the tiny one); on a Ray
    cluster the GPUs are the workers', not this machine's. With the commitment, it is the committed model
    (each 02 checks again; this says it once, before any family starts)."""
    from shortlist.models import config as models
    models.check_fits(models.model_config(settings.profile.model), settings.profile)
    if body is not None:
        commit.same_model(settings, body, models.identity(settings.profile.model))
    if not remote:
        models.check_device(settings.profile.model, settings.cpu)


def family_job(settings: Settings, key: str, notebook: Path, parameters: dict, elsewhere: bool) -> executors.Job:
    """02 on one family, as a job: it reads the predictions and what an earlier run left in work/<slug>/,
    and writes its result, work/<slug>/ and its notebook. Elsewhere (a Ray worker), each checkpoint comes
    back whole once training has written its bookkeeping into it (checkpoint.PROGRESS, the last file a save
    writes), so a rerun resumes from the last one that arrived, whatever happened to the worker."""
    slug = sources.parse(key).slug
    work = f"work/{slug}"
    units = ()
    if elsewhere:
        units = ((f"{work}/checkpoints/checkpoint-*", checkpoint.PROGRESS),)
    return notebook_job(f"02 {key}", notebook, _train_notebook(settings, key), parameters | {"family": key},
                        reads=("predictions.json", "predictions.sha256", work),
                        writes=(f"families/{slug}.json", work), units=units)


def _train_notebook(settings: Settings, key: str) -> Path:
    return files.train_notebook(settings.out, sources.parse(key).slug)


def trained(settings: Settings, key: str, sha: str, ran: executors.Ran, log) -> None:
    """A family's job ended: its notebook renamed into place and stamped; a failure recorded, with where
    it ran. A job that was stopped (Ctrl-C) never gets here: it is not done, and not failed."""
    dest = _train_notebook(settings, key)
    reason = finish(ran, dest)
    if reason:
        records.write(files.result(settings.out, sources.parse(key).slug),
                      failed(key, sha, reason, str(dest.relative_to(settings.out)), ran.where))
    if dest.exists():
        stamp(dest, sha, settings)
    log(f"02 {key}: {'failed: ' + reason if reason else 'done'} ({ran.seconds:.0f} s)")


def _peaks(settings: Settings) -> list:
    return sizing.recorded_peaks((Path(settings.out) / "families").glob("*.json"), "device", "placement")


if __name__ == "__main__":
    from nbclient.exceptions import DeadKernelError
    try:
        papermill(*sys.argv[1:5])
    except OSError as e:  # the executed notebook could not be written (a full disk): the batch says so in one line
        sys.exit(f"papermill: {e.strerror or e}: {e.filename or sys.argv[2]}")
    except DeadKernelError:  # the notebook holds no error of its own: the exit status says what happened
        print("papermill: the kernel died", file=sys.stderr)
        sys.exit(KERNEL_DIED)
