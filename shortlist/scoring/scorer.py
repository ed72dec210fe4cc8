"""One scoring function for screening, evaluation and the GRPO reward: Scorer.score().

Each answer is scored in a fresh process of its own (zygote.py): forked from a zygote that
imported the family's scorer and built its tasks outside every deadline, confined by the kernel,
and killed with everything it started once it replies or passes its deadline. Threads, SIGALRM and
Pool.get(timeout) cannot stop `9**9**9` (protocol-notes); a killed process can. Every result is
normalized (exception or NaN -> 0.0, clamped to [0, 1]) and every oddity is counted per family,
so a report can show when the reward itself misbehaved.
"""
from __future__ import annotations

import atexit
import json
import math
import multiprocessing as mp
import multiprocessing.forkserver
import os
import shutil
import sys
import tempfile
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import asdict, dataclass

from shortlist import defaults, sources
from shortlist.sources import Family
from shortlist.sources import source as source_

DEADLINE_S = defaults.SCORE_DEADLINE_S  # an answer whose scorer takes longer scores 0.0
WARMUP_DEADLINE_S = 120.0  # a zygote silent this long is dead: it imports and builds tasks, untimed
MEMORY_MB = 2048  # address space of an answer process; the answer "x"*10**6 cost one scorer ~533 MB
CPU_SECONDS = 60  # an answer process's CPU, a backstop behind the deadline
WORKERS = min(4, os.cpu_count() or 1)
ZYGOTES = 4  # families whose zygote (and its children forked ahead) stays alive
_COUNTED = {"error": "exceptions", "timeout": "timeouts", "crash": "crashes"}  # what a zygote reports, where it counts


@dataclass
class ScoreCounts:
    answers: int = 0  # answers scored
    unextracted: int = 0  # no answer could be extracted: 0.0 without calling the scorer
    timeouts: int = 0  # the scorer passed its deadline; its worker was killed and replaced
    crashes: int = 0  # the worker died (memory cap, os._exit, a signal) and was replaced
    exceptions: int = 0  # the scorer raised, or returned something float() refuses
    non_finite: int = 0  # NaN or infinite, scored 0.0
    clamped: int = 0  # outside [0, 1], clamped
    refused: int = 0  # operations the sandbox refused while scoring
    seconds: float = 0.0  # wall time inside score()

    def add(self, other: "ScoreCounts") -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)


def normalize(value, counts: ScoreCounts) -> float:
    try:
        value = float(value)
    except Exception:
        counts.exceptions += 1
        return 0.0
    if not math.isfinite(value):
        counts.non_finite += 1
        return 0.0
    if not 0.0 <= value <= 1.0:
        counts.clamped += 1
        return min(1.0, max(0.0, value))
    return value


class _Zygote:
    """The parent's end of one family's zygote (zygote.Zygote)."""

    def __init__(self, ctx, family: Family | None, scratch: str, limits):
        from shortlist.scoring import zygote
        parent, child = ctx.Pipe()
        what = (source_.wire(family.source), family.name, family.config) if family else (None, None, {})
        self.process = ctx.Process(target=zygote.zygote, args=(child, *what, scratch, limits), daemon=True)
        with _main_module_hidden():
            self.process.start()
        child.close()
        self.conn = parent
        hello = self.receive(WARMUP_DEADLINE_S)
        if hello is None:
            self.kill()
            raise RuntimeError(f"the scoring zygote for {family.key if family else 'the probe'} did not start")
        self.confinement = hello["confinement"]
        if self.confinement.get("hash_seed") != 0:  # tasks would differ from Family.tasks() (issue 9)
            self.kill()
            raise RuntimeError("the scoring forkserver runs without PYTHONHASHSEED=0; start the Scorer before "
                               "anything else uses multiprocessing's forkserver")

    def receive(self, timeout: float):
        """The next message, or None if the zygote died or stayed silent that long."""
        try:
            if self.conn.poll(timeout):
                return json.loads(self.conn.recv_bytes())
        except (EOFError, OSError, ValueError):
            pass
        return None

    def kill(self) -> None:
        """SIGKILL without waiting; its answer processes die with it (PR_SET_PDEATHSIG)."""
        self.process.kill()
        self.conn.close()


class Scorer:
    """Scores answers in sandboxed processes. Use as a context manager, or call close()."""

    def __init__(self, workers: int = WORKERS, deadline_s: float = DEADLINE_S, memory_mb: int = MEMORY_MB):
        from shortlist.scoring.zygote import Limits
        if workers < 1 or deadline_s <= 0 or memory_mb < 256:
            raise ValueError("scoring needs workers >= 1, deadline_s > 0 and memory_mb >= 256")
        self.workers, self.deadline_s, self.memory_mb = workers, deadline_s, memory_mb
        self.counts: dict[str, ScoreCounts] = {}
        self._limits = Limits(memory_mb, CPU_SECONDS, workers)
        self._scratch = tempfile.mkdtemp(prefix="shortlist-scratch-")
        os.chmod(self._scratch, 0o711)  # answer processes (uid nobody) reach their own directory, list nothing
        self._ctx = _context()
        self._zygotes: OrderedDict[str, _Zygote] = OrderedDict()
        self._confinement: dict | None = None
        atexit.register(self.close)

    @property
    def confinement(self) -> dict:
        """Which layers hold on this machine: a flat dict, layer -> value (recorded with results)."""
        if self._confinement is None:
            probe = _Zygote(self._ctx, None, self._scratch, self._limits)
            self._confinement = probe.confinement
            probe.kill()
            probe.process.join(5)
        return self._confinement

    def settings(self) -> dict:
        return {"workers": self.workers, "deadline_s": self.deadline_s, "memory_mb": self.memory_mb,
                "confinement": self.confinement}

    def score(self, family: Family | str, seeds, answers) -> list[float]:
        """Score answers (None: nothing extracted) to the family's tasks at these seeds."""
        family = sources.parse(family)
        counts = ScoreCounts()
        started = time.perf_counter()
        scores = [0.0] * len(answers)
        jobs = []
        for i, (seed, answer) in enumerate(zip(seeds, answers, strict=True)):
            if answer is None:
                counts.unextracted += 1
            else:
                jobs.append([i, int(seed), str(answer)])
        if jobs:
            for i, value in self._run(family, jobs, counts):
                scores[i] = normalize(value, counts)
        counts.answers = len(answers)
        counts.seconds = time.perf_counter() - started
        self.counts.setdefault(family.key, ScoreCounts()).add(counts)
        return scores

    def _run(self, family: Family, jobs: list, counts: ScoreCounts):
        """Yield (index, raw value) for each answer that produced one; count the rest."""
        zygote = self._zygote(family)
        zygote.conn.send_bytes(json.dumps({"jobs": jobs, "deadline_s": self.deadline_s}).encode())
        built = zygote.receive(WARMUP_DEADLINE_S)  # building new tasks is not timed
        results = zygote.receive(len(jobs) * (self.deadline_s + 1.0) + 10.0) if built == "built" else None
        if not isinstance(results, list) or len(results) != len(jobs):  # the zygote died: a bug, not an answer
            zygote.kill()
            del self._zygotes[family.key]
            why = (built if isinstance(built, dict) else results if isinstance(results, dict) else {}).get("fatal")
            raise RuntimeError(f"the scoring zygote for {family.key} died" + (f": {why}" if why else ""))
        for index, kind, value, refused in results:
            counts.refused += refused
            if kind == "score":
                yield index, value
            else:
                field = _COUNTED[kind]
                setattr(counts, field, getattr(counts, field) + 1)

    def _zygote(self, family: Family) -> _Zygote:
        if family.key not in self._zygotes:
            self._zygotes[family.key] = _Zygote(self._ctx, family, self._scratch, self._limits)
            self._confinement = self._confinement or self._zygotes[family.key].confinement
            while len(self._zygotes) > ZYGOTES:
                _, oldest = self._zygotes.popitem(last=False)
                oldest.kill()
        self._zygotes.move_to_end(family.key)
        return self._zygotes[family.key]

    def close(self) -> None:
        zygotes = list(getattr(self, "_zygotes", {}).values())
        for zygote in zygotes:
            zygote.kill()
        for zygote in zygotes:
            zygote.process.join(5)
        self._zygotes = OrderedDict()
        shutil.rmtree(getattr(self, "_scratch", ""), ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _context():
    """A forkserver that has imported the zygote and the default source, started with
    PYTHONHASHSEED=0 and an emptied environment.

    forkserver, not fork: CUDA does not survive fork, and the server starts before any CUDA work.
    Preloading makes a zygote cost milliseconds, not an import. The fixed hash seed makes its tasks
    the ones Family.tasks() builds (some families' tasks depend on it).
    """
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["shortlist.scoring.zygote", source_.SOURCES[source_.DEFAULT]])
    saved = dict(os.environ)
    try:  # the server's environment is every worker's /proc/self/environ: give it no secrets
        keep = ("PATH", "PYTHONPATH", "LANG")
        os.environ.clear()
        # single-threaded BLAS in the server and its zygotes: unshare() needs one thread
        os.environ.update({k: saved[k] for k in keep if k in saved}, PYTHONHASHSEED="0", OMP_NUM_THREADS="1",
                          OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        with _main_module_hidden():
            mp.forkserver.ensure_running()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return ctx


@contextmanager
def _main_module_hidden():
    """Keep multiprocessing from re-running the caller's __main__ in the server and zygotes.

    They need nothing from it, and a script without an `if __name__ == "__main__"` guard
    would start a Scorer inside its own zygote.
    """
    main = sys.modules["__main__"]
    saved = {name: main.__dict__[name] for name in ("__file__", "__spec__") if name in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.update(saved)
        if "__spec__" not in saved:
            del main.__spec__
