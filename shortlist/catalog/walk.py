"""One catalog worker: its families walked level by level, on one model and one Scorer.

What does not scale with ~100 families is paid once per worker process: the model loads once, one
Scorer serves every family, the fast engine checks itself once. Every family samples the same
number of rows (tasks x group: one batch shape), and its static cache length is rounded up to a
power of two (tier()), so the whole catalog compiles a handful of shapes, not one per prompt length.
Tasks are built ahead in processes of their own (Builders): generating them is CPU work that
varies wildly (sokoban's easiest level takes ~30 s a task on one core, most families milliseconds),
so it runs beside the GPU. Of the families ready, one with shorter prompts goes first, and one
whose tasks were slow to build goes last (its scorer builds them again before scoring).

    python -m shortlist.catalog.walk <job.json>     # what catalog.run starts once per GPU
"""
from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import signal
import sys
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from shortlist import executors, output, process, sources
from shortlist.catalog import store
from shortlist.catalog.records import LevelFailure, Plan, Row, Walk
from shortlist.errors import one_line
from shortlist.sources import levels as levels_

BELOW = 2  # consecutive levels below the band a walk screens before it stops
SLOW_TASK_S = 0.25  # a family whose tasks take longer each to build is screened after the others
clock = time.time  # the budget's clock: wall time, shared by worker processes (tests replace it)


@dataclass(frozen=True)
class Built:
    """A family x level's tasks, built (or why they could not be)."""
    family: str
    level: int | None
    where: levels_.Level | None  # None where the level could not be written as a spec
    built: sources.Family | None
    tasks: list | None
    sha: str | None
    error: str | None
    seconds: float = 0.0  # to build the tasks


def build(name: str, level: int | None, first_seed: int, n: int, chosen=None, grid: bool = False) -> Built:
    """The tasks of a family at a level: what a builder process runs, under the run's source Choice
    (configured here: a builder is a process of its own). Never raises: a failure is data."""
    where, started = None, time.perf_counter()
    try:
        source = sources.source.Choice.of(chosen).configure().name
        where = levels_.at(name, level, source, grid)
        family = sources.parse(where.spec, source)  # the family's own validate(): impossible configs fail here
        tasks = family.tasks(range(first_seed, first_seed + n))
        return Built(name, level, where, family, tasks, sources.fingerprint(tasks), None,
                     time.perf_counter() - started)
    except Exception as e:  # noqa: BLE001  a family that cannot be built is listed with its reason
        # the source's own words (a curriculum's level is not the user's to change); the failure records the
        # spec beside the reason: said once is enough
        why = e.cause if isinstance(e, sources.FamilyError) and e.cause else one_line(e)
        return Built(name, level, where, None, None, None, why.removeprefix(f"{where.spec}: ") if where else why)


class Builders:
    """Tasks built in `processes` processes of their own (0: in this one, when asked for)."""

    def __init__(self, processes: int, first_seed: int, n: int, chosen=None, grid: bool = False):
        self.args, self.queued, self.running, self.ready = (first_seed, n, chosen, grid), deque(), {}, []
        # spawn: a builder needs Reasoning Gym, not this process's CUDA context or threads
        context = mp.get_context("spawn")
        self._started = context.SimpleQueue()  # each builder's pid, put as it starts: close() kills them
        self.pool = ProcessPoolExecutor(processes, mp_context=context, initializer=_builder_start,
                                        initargs=(os.getpid(), self._started)) if processes else None
        self._pids: set[int] = set()

    @property
    def pending(self) -> int:
        return len(self.queued) + len(self.running) + len(self.ready)

    def submit(self, name: str, level: int | None) -> None:
        if self.pool is None:
            self.queued.append((name, level))
            return
        try:
            self.running[self.pool.submit(build, name, level, *self.args)] = (name, level)
        except Exception as e:  # noqa: BLE001  a broken pool (a builder was killed): this level fails, not the run
            self.ready.append(Built(name, level, None, None, None, None, f"the task builder died: {one_line(e)}"))

    def next(self, timeout: float | None) -> Built | None:
        """A built level (the one with the shortest prompts among those ready), or None after timeout."""
        if self.pool is None:
            return build(*self.queued.popleft(), *self.args) if self.queued else None
        if not self.ready and self.running:
            wait(self.running, timeout=timeout, return_when=FIRST_COMPLETED)
        for future in [f for f in self.running if f.done()]:
            name, level = self.running.pop(future)
            try:
                self.ready.append(future.result())
            except Exception as e:  # noqa: BLE001  the builder process died (killed, out of memory)
                self.ready.append(Built(name, level, None, None, None, None, f"the task builder died: {one_line(e)}"))
        if not self.ready:
            return None
        best = first(self.ready)
        self.ready.remove(best)
        return best

    def pids(self) -> set[int]:
        """The builder processes started so far (each says its pid as it starts)."""
        while not self._started.empty():
            self._pids.add(self._started.get())
        return set(self._pids)

    def close(self) -> None:
        """Stop at once: a build still running (the budget ran out) is killed, not waited for."""
        if self.pool is None:
            return
        self.pool.shutdown(wait=False, cancel_futures=True)
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def first(ready: list[Built]) -> Built:
    """Which ready level to screen first. Shorter prompts first: the static cache only grows, so
    long prompts are best left to the end. Slow builds last: the scorer builds the same tasks again,
    on the way to the next family."""
    return min(ready, key=lambda b: (b.seconds / max(1, len(b.tasks or [])) > SLOW_TASK_S,
                                     max((len(t["question"]) for t in b.tasks or []), default=0)))


def _builder_start(parent: int, started) -> None:
    """A builder prints nothing (some generators write to stdout, from C too: the shortlist goes
    there), and ends when its worker does, however the worker ended (a kill leaves no time to stop it)."""
    import threading
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the run's to handle: it stops builders
    started.put(os.getpid())
    process.to_devnull(1)

    def watch():
        while os.getppid() == parent:
            time.sleep(1)
        os._exit(1)
    threading.Thread(target=watch, daemon=True).start()


def tier(need: int, limit: int | None) -> int:
    """The static cache length for prompts of up to `need` tokens with their completions: the next
    power of two, so that ~100 families share a handful of compiled shapes (never past the model's)."""
    from shortlist.generation import sampling
    length = max(sampling.CACHE_QUANTUM, 1 << max(0, need - 1).bit_length())
    return min(length, limit) if limit and limit >= need else length


class Screener:
    """The model and the Scorer, loaded at the first screen (a run whose rows are all kept loads neither)."""

    def __init__(self, p: Plan):
        self.p, self.loaded, self.sampler, self.scorer = p, None, None, None

    def screen(self, b: Built) -> Row | LevelFailure:
        from shortlist import screening, scoring
        from shortlist.generation import compile_cache, sampling
        from shortlist.models import config as models
        if self.loaded is None:
            trainee = self.p.trainee
            compile_cache.use(Path(self.p.out) / "compile")  # every worker, and a rerun, reuse what one compiled
            self.loaded = sampling.load(trainee.model)
            self.sampler = sampling.Sampler(self.loaded, trainee, batch_size=self.p.batch)
            self.scorer = scoring.Scorer(deadline_s=self.p.score_deadline_s)
        trainee, started = self.sampler.trainee.for_source(b.built.source), time.perf_counter()
        try:
            prompts = sampling.prompt_ids(self.loaded.tokenizer, trainee, [t["question"] for t in b.tasks])
            self.sampler.min_cache_len = tier(max(map(len, prompts)) + trainee.max_new_tokens,
                                              models.positions(self.loaded.model.config))
            s = screening.screen_tasks(self.sampler, self.scorer, b.built, b.tasks, self.p.seed)
        except Exception as e:  # noqa: BLE001  a prompt longer than the model holds, a scorer gone wrong...
            return LevelFailure(b.family, b.level, b.where.spec, "screen", one_line(e))
        return Row(b.family, b.level, b.where.levels, b.where.spec, s, b.sha, time.perf_counter() - started,
                   b.where.position)

    def record(self) -> dict:
        if self.loaded is None:
            return {"device": "none (nothing screened)", "engine": {}, "scoring": {}, "model": None}
        import torch
        from shortlist.generation import engine
        device = torch.cuda.get_device_name(0) if self.loaded.model.device.type == "cuda" else "cpu"
        return {"device": device, "engine": engine.status(), "scoring": self.scorer.settings(),
                "model": self.loaded.source}

    def close(self) -> None:
        if self.scorer is not None:
            self.scorer.close()


class _WalkInProgress:
    """One family's walk as this worker goes (its Walk record, its notes, its time): rows kept from an
    earlier run are its cache, by spec (the same config screened under the same identity is the same
    screen, whether it was a curriculum level or a grid point: --levels' rows are kept by --grid)."""

    def __init__(self, p: Plan, name: str):
        old = store.read_walk(p.out, name)
        self.cache = {r.spec: r for r in old.rows} if old and old.identity == p.identity() else {}
        self.walk = Walk(name, p.identity(), next=levels_.first(name, p.source.name, p.grid))
        self.notes: list[list] = []  # [first level, last level, what happened], as labels (label())
        self.seconds = 0.0
        self.label = lambda level: _level(level, name, p.source.name, p.grid)  # noqa: E731

    def note(self, level: int | None, what: str) -> None:
        what = what if len(what) <= 90 else what[:89] + "…"
        if self.notes and self.notes[-1][2] == what:  # a curriculum whose every level fails says so once
            self.notes[-1][1] = self.label(level)
        else:
            self.notes.append([self.label(level), self.label(level), what])

    def progress(self) -> str:
        return "; ".join(f"{a}{'' if a == b else '-' + b.removeprefix('L')} {what}" for a, b, what in self.notes)


def work(p: Plan, log=print, placement: dict | None = None) -> None:
    """Walk every family of the plan, writing each walk as it goes, until done or out of budget; a worker's
    record says where it ran (`placement`: its job's, None in the batch's own process)."""
    _Walker(p, log, placement).run()


class _Walker:
    """One worker's walk over its families: builders build levels ahead, the screener screens them as
    they come, and every step is written at once (a rerun resumes from the walk files)."""

    def __init__(self, p: Plan, log, placement: dict | None = None):
        self.p, self.log, self.started, self.placement = p, log, time.perf_counter(), placement
        self.walks = {name: _WalkInProgress(p, name) for name in p.families}
        self.builders = Builders(p.builders or 0, p.first_seed, p.tasks, p.source, p.grid)
        self.screener, self.counts = Screener(p), {"screened": 0, "kept": 0, "finished": 0}

    def run(self) -> None:
        try:
            for f in self.walks.values():
                self.advance(f, f.walk.next)
            while self.builders.pending and not self.out_of_budget():
                deadline = self.p.deadline
                b = self.builders.next(None if deadline is None else max(0.0, deadline - clock()))
                if b is None or self.out_of_budget():
                    break  # the walk's file keeps where it was: "not reached" from that level
                self.take(self.walks[b.family], b)
        finally:
            self.builders.close()
            record = {"run": self.p.run, "label": self.p.label,
                      "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "placement": executors.with_peak(self.placement), "families": len(self.walks), "builders": self.p.builders or 0,
                      **self.counts, **self.screener.record(), "seconds": round(time.perf_counter() - self.started, 1)}
            self.screener.close()
            output.write_json(Path(self.p.out) / "workers" / f"{self.p.label.replace(' ', '')}.json", record)

    def take(self, f: _WalkInProgress, b: Built) -> None:
        """A built level: screened, its row written, and the walk goes on from it (or a failure is written)."""
        if b.error:
            f.note(b.level, f"failed to build: {b.error}")
            failed = LevelFailure(b.family, b.level, b.where and b.where.spec, "build", b.error)
            self.save(f, failures=f.walk.failures + (failed,))
            return self.go_on(f, levels_.following(b.family, b.level, self.p.source.name, self.p.grid))
        result = self.screener.screen(b)
        self.counts["screened"] += 1
        if isinstance(result, LevelFailure):  # the levels above would fail the same way (longer prompts)
            f.note(b.level, f"failed to screen: {result.reason}")
            self.save(f, failures=f.walk.failures + (result,))
            return self.finish(f)
        f.seconds += result.seconds
        f.note(b.level, f"{result.screen.verdict} (p(1-p) {result.screen.learnability:.3f})")
        self.save(f, rows=f.walk.rows + (result,))
        self.go_on(f, self.after(f, result))

    def save(self, f: _WalkInProgress, **changes) -> None:
        f.walk = dataclasses.replace(f.walk, **changes)
        store.write_walk(self.p.out, f.walk)

    def finish(self, f: _WalkInProgress) -> None:
        self.save(f, next=None, done=True)
        self.counts["finished"] += 1
        good = [f.label(r.level) for r in f.walk.rows if r.screen.verdict == "improves"]
        self.log(f"{self.p.label} [{self.counts['finished']}/{len(self.walks)}] {f.walk.family}: {f.progress()} -> "
                 + (f"improves at {', '.join(good)}" if good else "no level improves") + f" ({f.seconds:.0f} s)")

    def after(self, f: _WalkInProgress, row: Row) -> int | None:
        """Where the walk goes from a screened level (the last of f's rows): nowhere without --levels or
        --grid, nor past "unscorable" (the extraction that cannot read this level's answers cannot read the
        next one's), nor past BELOW consecutive levels below the band (pass@1 < pass_min: "too hard", or an
        audit verdict there): every level above is harder still, and the one past the first gives the
        proof a second spec the rule says will not improve. A grid point below the curriculum's level 0
        that is below the band goes on at level 0: a config easier than the curriculum's own can be a
        degenerate one (products of one term), and it does not count towards BELOW."""
        name, source, floor = row.family, self.p.source.name, self.p.trainee.pass_min
        if not self.p.walk or row.screen.verdict == "unscorable":
            return None
        if row.screen.pass1 < floor and row.position is not None and row.position < 0:
            return levels_.level_zero(name, source, self.p.grid)
        run = 0
        for r in reversed(f.walk.rows):
            if r.screen.pass1 >= floor or r.position is not None and r.position < 0:
                break
            run += 1
        return levels_.following(name, row.level, source, self.p.grid) if run < BELOW else None

    def advance(self, f: _WalkInProgress, level: int | None) -> None:
        """From this level (None: a family's only one, without a curriculum), take kept rows as they
        come; submit the first level that needs screening, or finish."""
        name, source = f.walk.family, self.p.source.name
        while True:
            try:
                here = levels_.at(name, level, source, self.p.grid)
            except levels_.LevelError as e:
                f.note(level, f"failed to build: {e}")
                self.save(f, failures=f.walk.failures + (LevelFailure(name, level, None, "build", str(e)),))
                level = levels_.following(name, level, source)
            else:
                kept = f.cache.get(here.spec)
                if kept is None:
                    self.save(f, next=level)
                    self.builders.submit(name, level)
                    return
                self.counts["kept"] += 1  # numbered as this walk numbers it (a --levels row in a --grid walk)
                kept = dataclasses.replace(kept, level=here.level, levels=here.levels, position=here.position)
                f.note(level, f"{kept.screen.verdict} (kept)")
                self.save(f, rows=f.walk.rows + (kept,))
                level = self.after(f, kept)
            if level is None:
                return self.finish(f)

    def go_on(self, f: _WalkInProgress, level: int | None) -> None:
        return self.finish(f) if level is None else self.advance(f, level)

    def out_of_budget(self) -> bool:
        return self.p.deadline is not None and clock() >= self.p.deadline


def _level(level: int | None, name: str, source: str, grid: bool) -> str:
    """How a progress line names a level: L3; on the grid, its position on the curriculum (L-1, L0.5)."""
    if level is None:
        return "default"
    return f"L{levels_.points(name, source)[level][0]:g}" if grid else f"L{level}"


def main(job: str, out: str | None = None) -> int:
    """A worker process: its share of the plan, on the one GPU it sees, into `out` (where this worker
    runs: the run's output folder, or a Ray worker's own, which the driver copies back)."""
    p = Plan(**output.read_json(Path(job)))
    p = p.replace(out=out) if out else p
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: builders killed, the walks as written
    work(p, log=lambda line: print(line, file=sys.stderr, flush=True), placement=executors.placement_of_this_job())
    return 0


if __name__ == "__main__":
    from shortlist.catalog import walk  # the module proper, not __main__: what the builders' pickles name
    sys.exit(walk.main(*sys.argv[1:3]))
