"""The catalog: every Reasoning Gym family, at the curriculum levels where GRPO can learn.

    python -m shortlist screen --all --out results/catalog                 # every family, easiest level
    python -m shortlist screen --all --levels --budget-min 60 --out ...    # walk each curriculum upwards

Each family is screened at its curriculum's easiest level that builds (curricula.py); with
--levels the walk goes up level by level and stops at the first "too hard", since every level
above it is harder still. The result is a shortlist: the families with a level where the verdict
is "improves", ranked by mean p(1-p), written under one output folder:

    <out>/shortlist.json, .csv, .html   every family x level screened, what failed and why, what the
                                        budget did not reach, and what made it (model, trainee, settings)
    <out>/families/<name>.json          one family's walk: what a rerun keeps
    <out>/workers/<label>.json          each worker's device, decode engine and scorer
    <out>/compile/                      torch.compile's caches, shared by the workers and a rerun

A row is kept by a rerun when the model (name and revision), the whole trainee record, the number
of tasks, their first seed, the sampling seed and the Reasoning Gym version are the same and its
level still gives the same spec: the same tasks (each row records their SHA-256), sampled the
same way. Families fan out one worker process per visible GPU (walk.py), as the proof's do.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import importlib.metadata
import io
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

from shortlist import curricula, defaults, output, page, spec, tiny
from shortlist.errors import OneLine
from shortlist.trainee import VERDICTS, Trainee

OUT = "results/catalog"
clock = time.time  # the budget's clock: wall time, shared by worker processes (tests replace it)


class CatalogError(OneLine, ValueError):
    """A catalog run or record that cannot be; the message is one line."""


# --- records --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    """One family x level screened: a line of shortlist.csv, and what `proof run --families` takes (spec)."""
    family: str
    level: int | None  # the curriculum's global level; None: the family has no curriculum
    levels: int
    spec: str
    verdict: str
    pass1: float
    passk: float
    mean: float
    signal_raw: float
    signal_correct: float
    learnability: float  # mean p(1-p): what the shortlist is ranked by
    extracted: float
    clipped: float
    repetitive: float
    tasks: int
    k: int
    tasks_sha256: str  # families.fingerprint() of the tasks screened: parse(spec).tasks(seeds) gives them
    seconds: float  # sampling and scoring
    scoring: dict = field(default_factory=dict)

    def __post_init__(self):
        curricula.Level(self.family, self.level, self.levels, self.spec)
        if self.verdict not in VERDICTS:
            raise CatalogError(f"row {self.spec}: verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}")
        for name in ("pass1", "passk", "mean", "signal_raw", "signal_correct", "extracted", "clipped", "repetitive"):
            if not 0 <= getattr(self, name) <= 1:
                raise CatalogError(f"row {self.spec}: {name}={getattr(self, name)} is not a share in [0, 1]")
        if not 0 <= self.learnability <= 0.25 or self.tasks < 1 or self.k < 2 or self.seconds < 0:
            raise CatalogError(f"row {self.spec}: learnability, tasks, k or seconds out of range")
        if not re.fullmatch(r"[0-9a-f]{64}", self.tasks_sha256):
            raise CatalogError(f"row {self.spec}: tasks_sha256 is not a SHA-256")

    @classmethod
    def from_screen(cls, level: curricula.Level, screen, tasks_sha256: str, seconds: float) -> "Row":
        known = {f.name for f in fields(cls)} - {"family"}  # the screen's family is the spec
        return cls(**{k: v for k, v in screen.as_dict().items() if k in known}, family=level.family,
                   level=level.level, levels=level.levels, spec=level.spec, tasks_sha256=tasks_sha256,
                   seconds=seconds)


@dataclass(frozen=True)
class Failure:
    """A family x level that could not be built or screened, and why, in one line."""
    family: str
    level: int | None
    spec: str | None  # None where the level could not even be written as a spec
    stage: str  # "build" (config, tasks) or "screen" (sampling, scoring)
    reason: str

    def __post_init__(self):
        if self.stage not in ("build", "screen") or not self.reason or "\n" in self.reason:
            raise CatalogError(f"failure of {self.family}: stage {self.stage!r} and a one-line reason are needed")


@dataclass(frozen=True)
class Unreached:
    """A family whose walk the run did not finish: the budget ran out, or its worker died."""
    family: str
    level: int | None  # where the walk would have gone on
    why: str


@dataclass(frozen=True)
class Walk:
    """One family's walk so far, as <out>/families/<name>.json holds it."""
    family: str
    identity: dict
    rows: tuple = ()
    failures: tuple = ()
    next: int | None = None  # the level the walk goes on from
    done: bool = False

    def as_dict(self) -> dict:
        return {"family": self.family, "identity": self.identity, "rows": [dataclasses.asdict(r) for r in self.rows],
                "failures": [dataclasses.asdict(f) for f in self.failures], "next": self.next, "done": self.done}

    @classmethod
    def from_dict(cls, d: dict) -> "Walk":
        return cls(d["family"], d["identity"], tuple(Row(**r) for r in d["rows"]),
                   tuple(Failure(**f) for f in d["failures"]), d["next"], d["done"])


@dataclass(frozen=True)
class Plan:
    """One catalog run, checked before any model loads; a worker gets it (its share of families) as JSON."""
    trainee: dict  # Trainee.as_dict(), the model in it
    families: tuple  # Reasoning Gym names
    walk: bool = False  # --levels: up the curriculum until "too hard"
    tasks: int = defaults.SCREEN_TASKS
    first_seed: int = defaults.PREDICT_SEED
    seed: int = 0  # torch's, before each family's samples
    batch: int = defaults.SAMPLE_BATCH
    budget_min: float | None = None
    out: str = OUT
    score_deadline_s: float = defaults.SCORE_DEADLINE_S
    builders: int | None = None  # task-building processes per worker; 0: in the worker itself; None: from the CPUs
    model_identity: dict = field(default_factory=dict)  # filled in by run(), before any worker starts
    deadline: float | None = None  # clock() after which no screen starts; filled in by run()
    run: str = ""  # which run: the workers' records name it; filled in by run()
    label: str = "cpu"  # which worker: "gpu <n>", or "cpu"

    def __post_init__(self):
        object.__setattr__(self, "families", tuple(self.families))
        Trainee.from_dict(self.trainee)
        if not self.families:
            raise CatalogError("no families to screen")
        for name in self.families:
            curricula.check_name(name)
        if len(set(self.families)) < len(self.families):
            raise CatalogError("a family is listed twice")
        if self.tasks < 1 or self.first_seed < 0 or self.seed < 0 or self.batch < 0:
            raise CatalogError("--tasks must be at least 1, --first-seed, --batch and the seed at least 0")
        if self.budget_min is not None and not self.budget_min > 0:
            raise CatalogError(f"--budget-min {self.budget_min}: give a positive number of minutes")
        if not 0 < self.score_deadline_s <= 600:
            raise CatalogError(f"score_deadline_s={self.score_deadline_s}: give seconds in (0, 600]")
        if self.builders is not None and self.builders < 0:
            raise CatalogError(f"builders={self.builders}: give 0 (build in the worker) or more processes")

    def identity(self) -> dict:
        """What a kept row must have been screened under: the same model, trainee, tasks and seeds."""
        return {"model": self.model_identity, "trainee": self.trainee, "tasks": self.tasks,
                "first_seed": self.first_seed, "seed": self.seed, "reasoning_gym": _version("reasoning-gym")}

    def as_dict(self) -> dict:
        return dataclasses.asdict(self) | {"families": list(self.families)}

    def replace(self, **changes) -> "Plan":
        return dataclasses.replace(self, **changes)


def every_family() -> list[str]:
    """Every registered family: one that cannot be built is listed with its reason, not left out."""
    from reasoning_gym.factory import DATASETS
    return sorted(DATASETS)


def plan(trainee: Trainee, names=None, **settings) -> Plan:
    """A Plan for these family names (every_family() when None); bad input is one line."""
    if names is None:
        names = every_family()
    elif isinstance(names, str):
        names = spec.split(names)
    checked = []
    for text in names:
        name, config = spec.call(text, "family")
        if config:
            raise CatalogError(f"{text.strip()}: the catalog takes the config from {name}'s curriculum; give the name alone")
        checked.append(curricula.check_name(name))
    return Plan(trainee=trainee.as_dict(), families=tuple(checked), **settings)


# --- files ----------------------------------------------------------------------------------------
def walk_path(out, name: str) -> Path:
    return Path(out) / "families" / f"{name}.json"


def read_walk(out, name: str) -> Walk | None:
    try:
        return Walk.from_dict(output.read_json(walk_path(out, name)))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError, OneLine):  # a file from an older layout, or damaged: screened again
        return None


def write_walk(out, walk: Walk) -> None:
    output.write_json(walk_path(out, walk.family), walk.as_dict())


# --- the run --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Catalog:
    """What a run found: shortlist.json holds it, shortlist.csv and .html show it."""
    rows: tuple
    failures: tuple
    unreached: tuple
    about: dict  # model, trainee, settings, versions, workers' devices, wall time

    def shortlist(self) -> list[dict]:
        """Families with a level where GRPO can learn, best mean p(1-p) first, and those levels."""
        best: dict[str, list[Row]] = {}
        for row in self.rows:
            if row.verdict == "improves":
                best.setdefault(row.family, []).append(row)
        ranked = sorted(best.items(), key=lambda kv: (-max(r.learnability for r in kv[1]), kv[0]))
        return [{"rank": i + 1, "family": name, "levels": [r.level for r in rows], "specs": [r.spec for r in rows],
                 "best": max(rows, key=lambda r: r.learnability).spec,
                 "learnability": max(r.learnability for r in rows)} for i, (name, rows) in enumerate(ranked)]

    def ordered(self) -> list[tuple[int | None, Row]]:
        """Every row with its family's rank: shortlisted families first, in rank order, then the rest."""
        rank = {s["family"]: s["rank"] for s in self.shortlist()}
        rows = sorted(self.rows, key=lambda r: (rank.get(r.family, len(rank) + 1), r.family, r.level or 0))
        return [(rank[r.family] if r.verdict == "improves" else None, r) for r in rows]

    def as_dict(self) -> dict:
        return {**self.about, "shortlist": self.shortlist(), "rows": [dataclasses.asdict(r) for _, r in self.ordered()],
                "failures": [dataclasses.asdict(f) for f in self.failures],
                "unreached": [dataclasses.asdict(u) for u in self.unreached]}


def run(p: Plan, log=print) -> Catalog:
    """Screen the plan's families, resuming what is kept, within its budget; write the shortlist."""
    from shortlist import gpus as gpus_
    started = clock()
    out = output.check_writable(p.out)
    p = p.replace(out=str(out.resolve()), model_identity=model_identity(p.trainee["model"]),
                  deadline=started + p.budget_min * 60 if p.budget_min else None,
                  run=f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    gpus = gpus_.visible_gpus()
    if p.builders is None:  # half the CPUs build tasks; the rest score answers and drive the GPUs
        p = p.replace(builders=max(1, (os.cpu_count() or 1) // max(1, len(gpus)) // 2))
    exits = _fan_out(p, gpus, log) if gpus else _in_process(p, log)
    catalog = assemble(p, exits, clock() - started)
    page_error = write(out, catalog)
    if page_error:
        log(f"error: shortlist.html not written ({page_error}); shortlist.json and .csv are")
    return catalog


def _in_process(p: Plan, log) -> dict:
    from shortlist import walk
    walk.work(p, log)
    return {}


def _fan_out(p: Plan, gpus: list[str], log) -> dict:
    """One worker process per GPU, each seeing only its own; family i goes to GPU i mod n."""
    procs = {}
    for slot, gpu in enumerate(gpus):
        share = p.families[slot::len(gpus)]
        if not share:
            continue
        job = p.replace(families=share, label=f"gpu {gpu}")
        path = Path(p.out) / "jobs" / f"gpu{gpu}.json"
        output.write_json(path, job.as_dict())
        log(f"{job.label}: {len(share)} families")
        procs[gpu] = (share, subprocess.Popen([sys.executable, "-m", "shortlist.walk", str(path)],
                                              env={**os.environ, "CUDA_VISIBLE_DEVICES": gpu}))
    return {gpu: (share, proc.wait()) for gpu, (share, proc) in procs.items()}


def assemble(p: Plan, exits: dict, wall_s: float) -> Catalog:
    """The catalog from the walks on disk: rows and failures of every family, what was not reached."""
    died = {name: f"its worker (GPU {gpu}) exited with {rc}" for gpu, (share, rc) in exits.items() if rc
            for name in share}
    rows, failures, unreached = [], [], []
    for name in p.families:
        walk = read_walk(p.out, name)
        if walk is None or walk.identity != p.identity():
            unreached.append(Unreached(name, curricula.first(name), died.get(name, "the budget ran out")))
            continue
        rows += walk.rows
        failures += walk.failures
        if not walk.done:
            unreached.append(Unreached(name, walk.next, died.get(name, "the budget ran out")))
    workers = []
    for path in sorted((Path(p.out) / "workers").glob("*.json")):
        record = output.read_json(path)
        if record.get("run") == p.run:  # not a worker of an earlier run into the same folder
            workers.append(record)
    about = {"written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "wall_s": round(wall_s, 1),
             "model": p.model_identity, "trainee": p.trainee, "rule": Trainee.from_dict(p.trainee).rule_text(),
             "settings": {k: v for k, v in p.as_dict().items() if k not in ("trainee", "model_identity", "families",
                                                                          "deadline", "label")}
             | {"families": len(p.families)},
             "versions": versions(), "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
             "workers": workers}
    return Catalog(tuple(rows), tuple(failures), tuple(unreached), about)


def summary(found: Catalog, p: Plan) -> str:
    """What the command line prints at the end: the shortlist, what failed, what was not reached."""
    short = found.shortlist()
    lines = [f"{p.trainee['model']} as {p.trainee['profile']}: {len(short)} of {len(p.families)} families have a "
             f"level where GRPO can learn (ranked by mean p(1-p)):"]
    lines += [f"{s['rank']:4d}  {s['learnability']:.3f}  {s['best']}" + (
        f"  (improves at levels {', '.join(map(str, s['levels']))})" if len(s["levels"]) > 1 else "") for s in short]
    lines.append(f"{len(found.rows)} family x level screens, {len(found.failures)} could not be built or screened, "
                 f"{len(found.unreached)} families not reached")
    why: dict[str, list[str]] = {}  # the same command again goes on from where each one stopped
    for u in found.unreached:
        why.setdefault(u.why, []).append(u.family + (f" (from level {u.level})" if u.level not in (None, 0) else ""))
    lines += [f"  not reached, {reason}: {', '.join(names)}" for reason, names in why.items()]
    return "\n".join(lines + [f"written: {Path(p.out) / 'shortlist.json'}, .csv, .html"])


# --- identity and provenance ----------------------------------------------------------------------
def model_identity(name: str) -> dict:
    """The model's name and revision, without loading it: tiny's fingerprint, a local folder's files
    hashed (a folder has no commit), a hub model's commit as its config names it."""
    if name == tiny.NAME:
        return {"name": name, "revision": tiny.fingerprint(tiny.ensure())}
    folder = Path(name).expanduser()
    if folder.is_dir():
        digest = hashlib.sha256()
        for path in sorted(p for p in folder.iterdir() if p.is_file()):
            digest.update(path.name.encode() + b"\0")
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 24), b""):
                    digest.update(block)
        return {"name": name, "revision": "files:" + digest.hexdigest()[:16]}
    from shortlist import models
    return {"name": name, "revision": getattr(models.model_config(name), "_commit_hash", None)}


def versions() -> dict:
    out = {"python": platform.python_version()}
    for package in ("torch", "transformers", "reasoning-gym"):
        out[package] = _version(package)
    return out


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


# --- the shortlist's files ------------------------------------------------------------------------
CSV_COLUMNS = ("rank", "family", "level", "levels", "spec", "status", "verdict", "pass1", "passk", "mean",
               "signal_raw", "signal_correct", "learnability", "extracted", "clipped", "repetitive", "tasks", "k",
               "tasks_sha256", "seconds", "reason")


def write(out, catalog: Catalog) -> str | None:
    """shortlist.json and .csv first (the numbers), then the page; each written whole or not at all.
    Returns why the page could not be rendered (nbconvert missing, say), or None: the numbers stand."""
    out = Path(out)
    output.write_json(out / "shortlist.json", catalog.as_dict())
    output.write_text(out / "shortlist.csv", to_csv(catalog))
    try:
        output.write_text(out / "shortlist.html", to_html(catalog))
    except Exception as e:  # noqa: BLE001  a GPU machine's one run must not end in a traceback over a page
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None


def to_csv(catalog: Catalog) -> str:
    lines = [{"rank": rank, "status": "screened", **dataclasses.asdict(row)} for rank, row in catalog.ordered()]
    lines += [{"family": f.family, "level": f.level, "spec": f.spec, "status": f"failed to {f.stage}",
               "reason": f.reason} for f in catalog.failures]
    lines += [{"family": u.family, "level": u.level, "status": "not reached", "reason": u.why} for u in catalog.unreached]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(lines)
    return buffer.getvalue()


def to_html(catalog: Catalog) -> str:
    """One page, the report's look: what was found, then what failed and what was not reached."""
    import html
    a, t = catalog.about, Trainee.from_dict(catalog.about["trainee"])
    s = a["settings"]
    short = catalog.shortlist()
    parts = []
    if t.model == tiny.NAME:
        parts.append('<div style="background:#fff3cd;border-left:6px solid #e0a800;padding:0.6rem 1rem;margin:0.6rem 0">'
                     '<b>This is a smoke run, not a finding.</b> It was made with the offline <b>tiny</b> test model '
                     '(0.2 M parameters), so its numbers exercise the pipeline and say nothing about any real model.</div>')
    if catalog.unreached:
        parts.append('<div style="background:#f8d7da;border-left:6px solid #b02a37;padding:0.6rem 1rem;margin:0.6rem 0">'
                     f'⚠ {len(catalog.unreached)} families were not screened to the end: see the last table.</div>')
    levels = "up its curriculum until too hard" if s["walk"] else "at its easiest level that builds"
    parts.append(f"<p>{html.escape(a['model']['name'])} as <b>{html.escape(t.profile)}</b>: {s['tasks']} tasks × "
                 f"{t.group} samples (seeds {s['first_seed']}..{s['first_seed'] + s['tasks'] - 1}) per family × level, "
                 f"each family {levels}. <b>{len(short)} of {s['families']} families</b> have a level where GRPO can "
                 f"learn (verdict <i>improves</i>), ranked by mean p(1−p). {len(catalog.rows)} family × level screens, "
                 f"{a['wall_s']:.0f} s of wall time.</p><p>{html.escape(a['rule'])}.</p>")
    rows = [{"rank": rank, "family": r.family, "level": r.level, "spec (proof run --families)": r.spec,
             "verdict": r.verdict, "pass@1": r.pass1, f"pass@{r.k}": r.passk, "mean score": r.mean,
             "signal (correct)": r.signal_correct, "mean p(1−p)": r.learnability, "extracted": r.extracted,
             "clipped": r.clipped} for rank, r in catalog.ordered()]
    shares = "{:.2f}"
    parts.append("<h2>Every family × level screened</h2>" + page.table(rows, {
        "pass@1": shares, f"pass@{t.group}": shares, "mean score": "{:.3f}", "signal (correct)": shares,
        "mean p(1−p)": "{:.3f}", "extracted": shares, "clipped": shares}))
    parts.append("<h2>Could not be built or screened</h2>" + page.table(
        [{"family": f.family, "level": f.level, "spec": f.spec, "failed to": f.stage, "why": f.reason}
         for f in catalog.failures]))
    parts.append("<h2>Not reached</h2>" + page.table(
        [{"family": u.family, "from level": u.level, "why": u.why} for u in catalog.unreached]))
    about = [("model", f"{a['model']['name']} (revision {a['model']['revision']})"),
             ("trainee", ", ".join(f"{k} = {v!r}" for k, v in a["trainee"].items())),
             ("settings", ", ".join(f"{k} = {v}" for k, v in s.items())),
             ("versions", ", ".join(f"{k} {v}" for k, v in a["versions"].items() if v)),
             ("workers", "; ".join(f"{w['label']}: {w['device']}, engine {w['engine'].get('engine', '–')}, "
                                   f"{w['screened']} screened, {w['kept']} kept" for w in a["workers"]) or "–"),
             ("written", a["written_at"])]
    parts.append("<h2>What made it</h2>" + page.table([{"": k, "value": v} for k, v in about]))
    return page.page("Shortlist: the catalog", "".join(parts))


if __name__ == "__main__":
    sys.exit("use python -m shortlist screen --all")
