"""The catalog: every Reasoning Gym family, at the curriculum levels where GRPO can learn.

    python -m shortlist screen --all --out results/catalog                 # every family, easiest level
    python -m shortlist screen --all --levels --budget-min 60 --out ...    # walk each curriculum upwards
    python -m shortlist screen --all --grid --budget-min 14 --out ...      # walk each family's wider grid

Each family is screened at its curriculum's easiest level that builds (sources/levels.py); with
--levels the walk goes up level by level and stops at the second level in a row below the band
(pass@1 < pass_min: "too hard", or an audit verdict there), since every level above is harder still. With
--grid the walk's levels are the wider grid's points (sources/grid.py: from below level 0, with
steps between levels), and a point below level 0 that is below the band goes on at level 0. The
result is a shortlist: the families with a level where the verdict is "improves", ranked by mean
p(1-p), written under one output folder:

    <out>/shortlist.json, .csv, .html   every family x level screened, what failed and why, what the
                                        budget did not reach, and what made it (model, trainee, settings)
    <out>/families/<name>.json          one family's walk: what a rerun keeps
    <out>/workers/<label>.json          each worker's device, decode engine and scorer
    <out>/compile/                      torch.compile's caches, shared by the workers and a rerun

A row is kept by a rerun when the model (name and revision), the whole trainee record, the number
of tasks, their first seed, the sampling seed and the Reasoning Gym version are the same and its
level still gives the same spec: the same tasks (each row records their SHA-256), sampled the
same way. Families fan out to worker jobs (walk.py), one per slot of shortlist.executors' executor
(--per-gpu N on each visible GPU, or a Ray cluster), as the proof's do; without a GPU this process
walks them in turn. This module is the run; records.py holds what it finds, store.py writes it.
"""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

from shortlist import executors, output, page, provenance, rule, spec
from shortlist.executors import sizing
from shortlist.catalog import store, walk
from shortlist.catalog.records import OUT, Catalog, CatalogError, Plan, Unreached  # noqa: F401
from shortlist.models import config as model_config
from shortlist.sources import levels as levels_
from shortlist.sources import source as source_
from shortlist.trainee import Trainee


def every_family(source: str = source_.DEFAULT) -> list[str]:
    """Every family a source offers: one that cannot be built is listed with its reason."""
    return source_.get(source).names()


def plan(trainee: Trainee, names=None, source=None, **settings) -> Plan:
    """A Plan for these family names of a source (a source.Choice, its name, or None: this process's
    choice) (every_family() when None); bad input is one line."""
    chosen = source_.Choice.of(source).configure()
    source = chosen.name
    if names is None:
        names = every_family(source)
    elif isinstance(names, str):
        names = spec.split(names)
    checked = []
    for text in names:
        name, config = spec.parse_call(text, "family")
        if config:
            raise CatalogError(f"{text.strip()}: the catalog takes the config from {name}'s levels; give the name alone")
        checked.append(levels_.check_name(name, source))
    return Plan(trainee=trainee, families=tuple(checked), source=chosen, **settings)


def run(p: Plan, log=print, where: executors.Placement | None = None) -> Catalog:
    """Screen the plan's families, resuming what is kept, within its budget; write the shortlist. One run
    at a time holds the output folder; workers are jobs of the placement's executor."""
    started = walk.clock()
    with output.removed_if_refused(p.out, (executors.LOCK, executors.HOLDER), executors.LOCK):  # a refusal leaves no folder
        return _run(p, log, where, started)


def _run(p: Plan, log, where: executors.Placement | None, started: float) -> Catalog:
    out = output.check_writable(p.out)
    p = p.replace(out=str(out.resolve()), model_identity=model_config.identity(p.trainee.model),
                  deadline=started + p.budget_min * 60 if p.budget_min else None,
                  run=f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    executor = (where or executors.Placement()).start(log, peaks=lambda: _peaks(p))
    try:
        with executors.one_run(out):
            in_process = executor.serial  # no GPU here: this process walks the families in turn
            if p.builders is None:  # half a job's CPUs build tasks; the rest score answers and drive the GPU
                p = p.replace(builders=max(1, int(executor.cpus_per_job()) // 2))
            exits = _in_process(p, log) if in_process else _fan_out(p, executor, log)
            catalog = assemble(p, exits, walk.clock() - started)
            page_error = store.write(out, catalog)
    finally:
        executor.close()
    if page_error:
        log(f"error: shortlist.html not written ({page_error}); shortlist.json and .csv are")
    return catalog


def _in_process(p: Plan, log) -> dict:
    walk.work(p, log)
    return {}


def _fan_out(p: Plan, executor: executors.Executor, log) -> dict:
    """One worker job per slot of the executor (every slot of every GPU), family i to worker i mod n:
    a worker pays for its model, its Scorer and its compilation once, for all of its share. Where it
    runs elsewhere (Ray), the walks it reads go with it and the walks it writes come back as written."""
    n = min(executor.capacity(), len(p.families))
    jobs, shares = [], {}
    for i in range(n):
        share = p.families[i::n]
        job = p.replace(families=share, label=f"worker {i + 1}")
        walks = tuple(f"families/{name}.json" for name in share)
        jobs.append(executors.Job(
            job.label, "shortlist.catalog.walk", (f"{executors.SCRATCH}/plan.json", executors.OUT),
            files=(("plan.json", json.dumps(job.as_dict()).encode()),), reads=walks,
            writes=(*walks, f"workers/{job.label.replace(' ', '')}.json"), caches=("compile",)))
        shares[job.label] = share
        log(f"{job.label}: {page.count(len(share), 'family', 'families')}")
    exits = {}

    def ended(ran: executors.Ran) -> None:
        if ran.rc != 0:
            gpu = f", GPU {ran.where['gpu']}" if ran.where.get("gpu") else ""
            exits[ran.job.name] = (shares[ran.job.name], f"its worker ({ran.job.name}{gpu}) exited with {ran.rc}"
                                   if ran.rc is not None else  # lost: "its Ray worker was lost: ..."
                                   (ran.why or "its worker was lost").replace(" worker", f" worker ({ran.job.name}{gpu})", 1))
    executor.run(jobs, p.out, done=ended, log=log)
    return exits


def _peaks(p: Plan) -> list:
    return sizing.recorded_peaks((Path(p.out) / "workers").glob("*.json"), "placement")


def assemble(p: Plan, exits: dict, wall_s: float) -> Catalog:
    """The catalog from the walks on disk: rows and failures of every family, what was not reached
    (exits: worker -> (its share, why it died) for each worker that did not end well)."""
    died = {name: why for share, why in exits.values() for name in share}
    rows, failures, unreached = [], [], []
    for name in p.families:
        found = store.read_walk(p.out, name)
        if found is None or found.identity != p.identity():
            unreached.append(Unreached(name, levels_.first(name, p.source.name, p.grid), died.get(name, "the budget ran out")))
            continue
        rows += found.rows
        failures += found.failures
        if not found.done:
            unreached.append(Unreached(name, found.next, died.get(name, "the budget ran out")))
    workers = []
    for path in sorted((Path(p.out) / "workers").glob("*.json")):
        record = output.read_json(path)
        if record.get("run") == p.run:  # not a worker of an earlier run into the same folder
            workers.append(record)
    about = {"written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "wall_s": round(wall_s, 1),
             "model": p.model_identity, "trainee": p.trainee.as_dict(), "rule": rule.text(p.trainee),
             "settings": {k: v for k, v in p.as_dict().items() if k not in ("trainee", "model_identity", "families",
                                                                          "deadline", "label")}
             | {"families": len(p.families)},
             "versions": provenance.versions(), "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
             "workers": workers}
    return Catalog(tuple(rows), tuple(failures), tuple(unreached), about)


def summary(found: Catalog, p: Plan) -> str:
    """What the command line prints at the end: the shortlist, what failed, what was not reached."""
    short = found.shortlist()
    lines = [f"{p.trainee.model} as {p.trainee.profile}: {len(short)} of {len(p.families)} families have a "
             f"level where GRPO can learn (ranked by mean p(1-p)):"]
    lines += [f"{s['rank']:4d}  {s['learnability']:.3f}  {s['best']}" + (
        f"  (improves at levels {', '.join(map(str, s['levels']))})" if len(s["levels"]) > 1 else "") for s in short]
    lines.append(f"{len(found.rows)} family x level screens, {len(found.failures)} could not be built or screened, "
                 f"{page.count(len(found.unreached), 'family', 'families')} not reached")
    why: dict[str, list[str]] = {}  # the same command again goes on from where each one stopped
    for u in found.unreached:
        why.setdefault(u.why, []).append(u.family + (f" (from level {u.level})" if u.level not in (None, 0) else ""))
    lines += [f"  not reached, {reason}: {', '.join(names)}" for reason, names in why.items()]
    return "\n".join(lines + [f"written: {Path(p.out) / 'shortlist.json'}, .csv, .html"])
