"""One scoring function for screening, evaluation and the GRPO reward: Scorer.score().

Each answer is scored in a fresh process of its own (zygote.py; an answer given again to the same task
within one call is scored once, its result given to every copy): forked from a zygote that
imported the family's scorer and built its tasks outside every deadline, confined by the kernel,
and killed with everything it started once it replies or passes its deadline. Threads, SIGALRM and
Pool.get(timeout) cannot stop `9**9**9` (protocol-notes); a killed process can. The zygotes are
forked by a scoring server, a process of its own with an environment of its own (server.py). Every
result is normalized (exception or NaN -> 0.0, clamped to [0, 1]) and every oddity is counted per
family, by this process, from what it observed of each answer, so a report can show when the
reward itself misbehaved.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection

from shortlist import defaults, leftovers, process, sources
from shortlist.sources import Family
from shortlist.sources import source as source_

DEADLINE_S = defaults.SCORE_DEADLINE_S  # an answer whose scorer takes longer scores 0.0
WARMUP_DEADLINE_S = 120.0  # a zygote silent this long is dead: it imports and builds tasks, untimed
MEMORY_MB = 2048  # address space of an answer process; the answer "x"*10**6 cost one scorer ~533 MB
CPU_SECONDS = 60  # an answer process's CPU, a backstop behind the deadline
WORKERS = min(4, process.cpus())  # a job's answers at once: several jobs may train on one machine
RETRIES = 2  # an answer past its deadline, scored again where a number is read back (Scorer.score)
ZYGOTES = 4  # families whose zygote (and its children forked ahead) stays alive
_COUNTED = {"error": "exceptions", "timeout": "timeouts", "crash": "crashes", "refused": "refused"}  # what a zygote reports, where it counts


@dataclass
class ScoreCounts:
    """What happened to a family's answers, each answer counted once in each field that applies.

    Every field is counted here, from what this process saw of each answer (its reply's kind and
    value, its process's death, the clock); no number an answer reports is ever summed, so an
    answer can move these counts by at most one each, as it can fake its own score and no more.
    """
    answers: int = 0  # answers scored
    unextracted: int = 0  # no answer could be extracted: 0.0 without calling the scorer
    timeouts: int = 0  # the scorer passed its deadline; its process was killed
    crashes: int = 0  # its process died (memory cap, os._exit, a signal) or replied garbage
    exceptions: int = 0  # the scorer raised, or returned something float() refuses
    non_finite: int = 0  # NaN or infinite, scored 0.0
    clamped: int = 0  # outside [0, 1], clamped
    refused: int = 0  # answers whose scorer attempted an operation the sandbox refused (their reply's flag), or
    # that a server-scored source refused to send (over its size bound)
    retried: int = 0  # answers scored again after passing their deadline (Scorer.score's retries); their last
    # try is what the other fields count
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


class _Server:
    """The parent's end of the scoring server (server.py): a process of its own, started with
    zygote.ENVIRONMENT and this process's sys.path; this process's environment is never touched."""

    def __init__(self, scratch: str, limits):
        from shortlist.scoring import server, zygote
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        environment = dict(zygote.ENVIRONMENT)
        if "HOME" in os.environ:  # where matplotlib (Reasoning Gym imports it) keeps its cache: a path, no secret
            environment["HOME"] = os.environ["HOME"]
        argv = [sys.executable, "-c", server.BOOT, json.dumps([os.path.abspath(p) for p in sys.path]),
                str(theirs.fileno()), str(os.getpid()), scratch, json.dumps(asdict(limits))]
        self.process = subprocess.Popen(argv, env=environment, pass_fds=[theirs.fileno()], cwd="/",
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        theirs.close()
        self.control = ours
        self.ids = itertools.count()
        self._confinement: dict | None = None

    @property
    def confinement(self) -> dict:
        """The layers it probed: every answer process holds them (the zygotes check)."""
        if self._confinement is None:
            hello = self.receive(WARMUP_DEADLINE_S)
            if not isinstance(hello, dict) or "confinement" not in hello:
                why = hello.get("fatal") if isinstance(hello, dict) else None
                self.close()
                raise RuntimeError("the scoring server did not start" + (f": {why}" if why else ""))
            self._confinement = hello["confinement"]
            # string hashes order sets, so under another seed its tasks would differ from Family.tasks()
            if self._confinement.get("hash_seed") != 0:
                self.close()
                raise RuntimeError("the scoring server runs without PYTHONHASHSEED=0")
        return self._confinement

    def receive(self, timeout: float):
        try:
            self.control.settimeout(timeout)
            data = self.control.recv(1 << 20)
            return json.loads(data) if data else None
        except (OSError, ValueError):
            return None

    def start(self, family: Family, fd: int) -> int:
        """A zygote for family, serving the socket fd; returns its id."""
        self.confinement  # noqa: B018  the server answers requests only once it has probed
        id_ = next(self.ids)
        what = {"id": id_, "source": source_.as_request(family.source), "name": family.name, "config": family.config}
        try:
            socket.send_fds(self.control, [json.dumps({"start": what}).encode()], [fd])
        except OSError as e:
            raise RuntimeError(f"the scoring server died: {e}") from None
        return id_

    def kill(self, id_: int) -> None:
        """SIGKILL a zygote without waiting; its answer processes die with its PID namespace."""
        try:
            self.control.send(json.dumps({"kill": id_}).encode())
        except OSError:
            pass  # the server is gone, and its zygotes with it

    def close(self) -> None:
        """The server exits when its socket closes, and everything it started with it: its process 1
        is reaped only once every process of its PID namespace is. Killed if it has not within 30 s."""
        self.control.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class _Zygote:
    """The parent's end of one family's zygote (zygote.Zygote), over a socket pair of its own."""

    def __init__(self, server: _Server, family: Family):
        ours, theirs = socket.socketpair()
        try:
            self.id = server.start(family, theirs.fileno())
        finally:
            theirs.close()
        self.server, self.conn = server, Connection(ours.detach())
        hello = self.receive(WARMUP_DEADLINE_S)
        if hello != "ready":
            self.kill()
            why = hello.get("fatal") if isinstance(hello, dict) else None
            raise RuntimeError(f"the scoring zygote for {family.key} did not start" + (f": {why}" if why else ""))

    def receive(self, timeout: float):
        """The next message, or None if the zygote died or stayed silent that long."""
        try:
            if self.conn.poll(timeout):
                return json.loads(self.conn.recv_bytes())
        except (EOFError, OSError, ValueError):
            pass
        return None

    def kill(self) -> None:
        self.server.kill(self.id)
        self.conn.close()


class Scorer:
    """Scores answers in sandboxed processes. Use as a context manager, or call close()."""

    def __init__(self, workers: int = WORKERS, deadline_s: float = DEADLINE_S, memory_mb: int = MEMORY_MB):
        from shortlist.scoring.zygote import Limits
        if workers < 1 or deadline_s <= 0 or memory_mb < 256:
            raise ValueError("scoring needs workers >= 1, deadline_s > 0 and memory_mb >= 256")
        self.workers, self.deadline_s, self.memory_mb = workers, deadline_s, memory_mb
        self.counts: dict[str, ScoreCounts] = {}
        self._scratch = leftovers.make("shortlist-scratch-")  # what a killed owner left, the next Scorer removes
        os.chmod(self._scratch, 0o711)  # answer processes (uid nobody) reach their own directory, list nothing
        self._zygotes: OrderedDict[str, _Zygote] = OrderedDict()
        self._server: _Server | None = _Server(self._scratch, Limits(memory_mb, CPU_SECONDS, workers))  # starts now,
        self._confinement: dict | None = None  # while the caller goes on (loads its model)
        self._owner = os.getpid()  # a forked child's exit must not close the parent's server
        process.close_at_exit(self)

    @property
    def confinement(self) -> dict:
        """Which layers every answer process holds on this machine: a flat dict, layer -> value,
        probed once by the server (recorded with results)."""
        if self._confinement is None:
            self._confinement = self._open().confinement
        return self._confinement

    def settings(self) -> dict:
        return {"workers": self.workers, "deadline_s": self.deadline_s, "memory_mb": self.memory_mb,
                "confinement": self.confinement}

    def score(self, family: Family | str, seeds, answers, retries: int = 0) -> list[float]:
        """Score answers (None: nothing extracted) to the family's tasks at these seeds. An answer repeated for
        the same task within the call (a policy battery's shared guesses, a GRPO group's agreeing completions)
        is scored once, in one process, and counted as often as it was given. retries: an answer that passed
        its deadline is scored again, up to this many times (a loaded machine times honest answers out; a
        number that is read or checked again must not depend on the load: evaluations, the policies); its
        last try counts, and `retried` counts it once. GRPO's rewards keep 0: a hang costs one deadline. A source
        scored at its server is not retried: a batch there has one budget in all (sources/openenv.py)."""
        if retries < 0:
            raise ValueError(f"retries must be >= 0, not {retries}")
        family = sources.parse(family)
        retries = 0 if source_.remote(family.source) else retries
        counts = ScoreCounts()
        started = time.perf_counter()
        scores = [0.0] * len(answers)
        jobs, given = [], {}  # given: index of the job that scores it -> every index that gave that answer
        first: dict[tuple[int, str], int] = {}
        for i, (seed, answer) in enumerate(zip(seeds, answers, strict=True)):
            if answer is None:
                counts.unextracted += 1
                continue
            key = (int(seed), str(answer))
            if key not in first:
                first[key] = i
                jobs.append([i, *key])
            given.setdefault(first[key], []).append(i)
        for attempt in range(1 + retries):
            if not jobs:
                break
            results = self._results(family, jobs)
            sent = {job[0] for job in jobs}
            final, again = [], set()
            for result in results:
                if result[0] not in sent:  # the zygote or a source's server answered something it was not asked
                    raise RuntimeError(f"the scorer replied for answer {result[0]!r}, which it was not given")
                if result[1] == "timeout" and attempt < retries:  # its flags go with it: the last try counts
                    again.add(result[0])
                else:
                    final.append(result)
            for index, value in self._tally(final, counts, given):
                for i in given[index]:
                    scores[i] = normalize(value, counts)
            counts.retried += sum(len(given[i]) for i in again if attempt == 0)
            jobs = [job for job in jobs if job[0] in again]
        counts.answers = len(answers)
        counts.seconds = time.perf_counter() - started
        self.counts.setdefault(family.key, ScoreCounts()).add(counts)
        return scores

    def _results(self, family: Family, jobs: list) -> list:
        """[index, kind, value, refused] for each job that got a reply (kind: score, error, timeout, crash,
        refused)."""
        if source_.remote(family.source):  # scored at its server, from here: the sandbox has no network
            return list(source_.get(family.source).scores(family.name, family.config, jobs))
        zygote = self._zygote(family)
        zygote.conn.send_bytes(json.dumps({"jobs": jobs, "deadline_s": self.deadline_s}).encode())
        built = zygote.receive(WARMUP_DEADLINE_S)  # building new tasks is not timed
        results = zygote.receive(len(jobs) * (self.deadline_s + 1.0) + 10.0) if built == "built" else None
        if not isinstance(results, list) or len(results) != len(jobs):  # the zygote died: a bug, not an answer
            zygote.kill()
            del self._zygotes[family.key]
            why = (built if isinstance(built, dict) else results if isinstance(results, dict) else {}).get("fatal")
            raise RuntimeError(f"the scoring zygote for {family.key} died" + (f": {why}" if why else ""))
        return results

    @staticmethod
    def _tally(results: list, counts: ScoreCounts, given: dict):
        """(index, raw value) of each [index, kind, value, refused] that scored; the others counted, once for each
        answer the job stands for (given: job index -> the indices that gave its answer)."""
        for index, kind, value, refused in results:
            if index not in given:  # the zygote or a source's server answered something it was not asked
                raise RuntimeError(f"the scorer replied for answer {index!r}, which it was not given")
            times = len(given[index])
            counts.refused += times * (refused is True)  # a flag per answer: no number of its own is summed
            if kind == "score":
                yield index, value
            else:
                field = _COUNTED[kind]
                setattr(counts, field, getattr(counts, field) + times)

    def _open(self) -> _Server:
        if self._server is None:
            raise RuntimeError("this Scorer is closed")
        return self._server

    def _zygote(self, family: Family) -> _Zygote:
        if family.key not in self._zygotes:
            self._zygotes[family.key] = _Zygote(self._open(), family)
            while len(self._zygotes) > ZYGOTES:
                _, oldest = self._zygotes.popitem(last=False)
                oldest.kill()
        self._zygotes.move_to_end(family.key)
        return self._zygotes[family.key]

    def close(self) -> None:
        if getattr(self, "_owner", os.getpid()) != os.getpid():
            return
        for zygote in getattr(self, "_zygotes", {}).values():
            zygote.kill()
        self._zygotes = OrderedDict()
        if getattr(self, "_server", None) is not None:
            self._server.close()  # returns once the server, and with it every zygote and answer, is gone
            self._server = None
        shutil.rmtree(getattr(self, "_scratch", ""), ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
