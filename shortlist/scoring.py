"""One scoring function for screening, evaluation and the GRPO reward: Scorer.score().

Scorers run in sandbox.serve() worker processes, reused across calls. A call that passes its
deadline is answered 0.0 and its worker is killed (SIGKILL) and replaced: threads, SIGALRM and
Pool.get(timeout) cannot stop `9**9**9` (protocol-notes), a killed process can. Every result
is normalized (exception or NaN -> 0.0, clamped to [0, 1]) and every oddity is counted per
family, so a report can show when the reward itself misbehaved.
"""
from __future__ import annotations

import atexit
import json
import math
import multiprocessing as mp
import multiprocessing.connection
import multiprocessing.forkserver
import os
import shutil
import sys
import tempfile
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import asdict, dataclass

from shortlist import families as families_
from shortlist.families import Family

DEADLINE_S = 1.0  # a scorer call that takes longer scores 0.0 and costs its worker
WARMUP_DEADLINE_S = 120.0  # a worker's first call in a family imports what the scorer needs
MEMORY_MB = 2048  # address space of a worker; the answer "x"*10**6 cost one scorer ~533 MB
CPU_SECONDS = 3600  # a worker's lifetime CPU, a backstop behind the deadline
WORKERS = min(4, os.cpu_count() or 1)


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


class _Worker:
    def __init__(self, ctx, scratch: str, memory_mb: int):
        from shortlist import sandbox
        parent, child = ctx.Pipe()
        self.process = ctx.Process(target=sandbox.serve, args=(child, scratch, memory_mb, CPU_SECONDS), daemon=True)
        with _main_module_hidden():
            self.process.start()
        child.close()
        self.conn = parent
        self.warm: set[str] = set()  # family keys this worker has imported its scorer for
        if not parent.poll(WARMUP_DEADLINE_S):
            self.kill()
            raise RuntimeError("a scoring worker did not start")
        self.confinement = json.loads(parent.recv_bytes(1 << 16))

    def send(self, request: dict) -> None:
        self.conn.send_bytes(json.dumps(request).encode())

    def receive(self) -> dict:
        reply = json.loads(self.conn.recv_bytes(1 << 16))
        if not isinstance(reply, dict) or not isinstance(reply.get("refused"), int):
            raise ValueError("malformed reply")
        return reply

    def kill(self) -> None:
        """SIGKILL without waiting: a worker that filled its address space takes a while to tear
        down, and the caller need not wait for that. The scorer reaps it later."""
        self.process.kill()
        self.conn.close()


class Scorer:
    """A pool of sandboxed scoring workers. Use as a context manager, or call close()."""

    def __init__(self, workers: int = WORKERS, deadline_s: float = DEADLINE_S, memory_mb: int = MEMORY_MB):
        if workers < 1 or deadline_s <= 0 or memory_mb < 256:
            raise ValueError("scoring needs workers >= 1, deadline_s > 0 and memory_mb >= 256")
        self.deadline_s, self.memory_mb = deadline_s, memory_mb
        self.counts: dict[str, ScoreCounts] = {}
        self._scratch = tempfile.mkdtemp(prefix="shortlist-scratch-")
        self._ctx = _context()
        self._dying: list = []  # killed workers not yet reaped
        self._workers = [_Worker(self._ctx, self._scratch, memory_mb) for _ in range(workers)]
        self.confinement = self._workers[0].confinement
        atexit.register(self.close)

    def settings(self) -> dict:
        return {"workers": len(self._workers), "deadline_s": self.deadline_s, "memory_mb": self.memory_mb,
                "confinement": self.confinement}

    def score(self, family: Family | str, seeds, answers) -> list[float]:
        """Score answers (None: nothing extracted) to the family's tasks at these seeds."""
        family = families_.parse(family)
        counts = ScoreCounts()
        started = time.perf_counter()
        scores = [0.0] * len(answers)
        jobs = deque()
        for i, (seed, answer) in enumerate(zip(seeds, answers, strict=True)):
            if answer is None:
                counts.unextracted += 1
            else:
                jobs.append((i, {"key": family.key, "name": family.name, "config": family.config,
                                 "seed": int(seed), "answer": str(answer)}))
        for i, value in self._run(jobs, counts):
            scores[i] = normalize(value, counts)
        counts.answers = len(answers)
        counts.seconds = time.perf_counter() - started
        self.counts.setdefault(family.key, ScoreCounts()).add(counts)
        return scores

    def _run(self, jobs: deque, counts: ScoreCounts):
        """Yield (index, raw value) for each job, keeping every worker busy, killing the slow."""
        idle, busy = list(self._workers), {}  # busy: conn -> (worker, index, request, deadline)
        while jobs or busy:
            while jobs and idle:
                worker = idle.pop()
                index, request = jobs.popleft()
                if request["key"] not in worker.warm:  # import the scorer's modules outside the deadline
                    worker.send({**request, "warm": True})
                    busy[worker.conn] = (worker, None, (index, request), time.monotonic() + WARMUP_DEADLINE_S)
                else:
                    worker.send(request)
                    busy[worker.conn] = (worker, index, request, time.monotonic() + self.deadline_s)
            wait = max(0.0, min(deadline for *_, deadline in busy.values()) - time.monotonic())
            for conn in mp.connection.wait(list(busy), timeout=wait):
                worker, index, request, _ = busy.pop(conn)
                try:
                    reply = worker.receive()
                except Exception:  # EOF: the worker died; or it sent something that is not a reply
                    counts.crashes += 1  # the answer scores 0.0
                    idle.append(self._replace(worker))
                    continue
                if index is None:  # a warm-up finished: now the real request, under the deadline
                    worker.warm.add(request[1]["key"])
                    jobs.appendleft(request)
                else:
                    counts.refused += reply["refused"]
                    if "score" in reply:
                        yield index, reply["score"]
                    else:
                        counts.exceptions += 1
                idle.append(worker)
            now = time.monotonic()
            for conn, (worker, _, _, deadline) in list(busy.items()):
                if now >= deadline:  # the answer scores 0.0
                    del busy[conn]
                    counts.timeouts += 1
                    idle.append(self._replace(worker))

    def _replace(self, worker: _Worker) -> _Worker:
        worker.kill()
        self._dying = [p for p in self._dying if p.is_alive()] + [worker.process]  # is_alive() reaps the dead
        fresh = _Worker(self._ctx, self._scratch, self.memory_mb)
        self._workers[self._workers.index(worker)] = fresh
        return fresh

    def close(self) -> None:
        for worker in getattr(self, "_workers", []):
            worker.kill()
        for process in [w.process for w in getattr(self, "_workers", [])] + getattr(self, "_dying", []):
            process.join(5)
        self._workers, self._dying = [], []
        shutil.rmtree(getattr(self, "_scratch", ""), ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _context():
    """A forkserver that has imported reasoning_gym, started with an empty environment.

    forkserver, not fork: CUDA does not survive fork, and the server starts before any
    CUDA work. Preloading makes a replacement worker cost milliseconds, not an import.
    """
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["shortlist.sandbox"])
    saved = dict(os.environ)
    try:  # the server's environment is every worker's /proc/self/environ: give it no secrets
        keep = ("PATH", "PYTHONPATH", "HOME", "LANG", "TMPDIR")
        os.environ.clear()
        os.environ.update({k: saved[k] for k in keep if k in saved})
        with _main_module_hidden():
            mp.forkserver.ensure_running()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return ctx


@contextmanager
def _main_module_hidden():
    """Keep multiprocessing from re-running the caller's __main__ in the server and workers.

    They need nothing from it, and a script without an `if __name__ == "__main__"` guard
    would start a Scorer inside its own worker.
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
