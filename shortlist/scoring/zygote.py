"""The processes that run Reasoning Gym scorers on a model's answers: one zygote per family, one
fresh process per answer (per distinct answer to a task: Scorer.score sends each once).

Nine scorers hand the answer to eval() or to sympy's parse_expr (which ends in eval), so an
answer is code, and whatever it does must end with it. The scoring server (server.py) forks a
zygote per family, each process 1 of a PID namespace of its own where namespaces hold. The zygote
imports what the family's scorer needs and builds its tasks, outside every deadline; each answer is
then scored in a child forked from it, which confines itself before it reads the answer and is
killed (with all it started) as soon as it replies or passes its deadline. Children are forked
ahead of need (a pool), so a batch's answers do not wait for fork().

What an answer process is (isolation, landlock and syscalls apply the layers; each reports
whether it took):
- process 1 of a PID namespace of its own: when it dies, everything it started dies;
- an IPC namespace of its own, and its scratch a tmpfs of Limits.scratch_mb in a mount namespace
  of its own: SysV shared memory and files it wrote are gone with it, and its disk use is bounded;
- uid/gid nobody where the project runs as root, no capabilities, not dumpable, no_new_privs;
- a seccomp filter: no processes, exec, sockets, device nodes, signals, ptrace, mounts, SysV IPC ...;
- Landlock: reads only the interpreter, its libraries and the imported code, writes only beneath
  its scratch; the server's network namespace;
- rlimits: address space, CPU, file size, open files, processes (0), no core files;
- its own reply pipe: the worst it can do is fake its own score. Replies are JSON, never pickle,
  checked field by field; nothing in them is summed.
The server probes the layers once, in a zygote that forks one answer process and reports what took
(the plan, the recorded confinement); every later answer process reports the same layers before
it may read an answer, or it is killed unused. A Python audit hook refuses (and flags) the
operations a scorer attempts; it is a convenience for the counts, not a boundary: code that
reaches C unaudited passes it, the layers above do not.
"""
from __future__ import annotations

import gc
import json
import os
import pickle
import select
import shutil
import sys
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass
from multiprocessing.connection import Connection

from shortlist import process
from shortlist.scoring import answer, hugepages, isolation, landlock, syscalls
from shortlist.sources import source as source_

REPLY_LIMIT = 1 << 16
ENTRIES = 4096  # tasks a zygote keeps built
POOL_MAX = 32  # children forked ahead: a GRPO step's 32 answers find theirs waiting
FROZEN_MB = 64  # an answered process larger than this is killed at once, not at the end of its batch
FAILURES = 3  # answer processes that may die, or come up with other layers than the plan, before the zygote gives up
# the server's environment (scorer.py starts it with this one), every zygote's and every answer's:
# it is what /proc/self/environ shows them, so it holds no secret; one thread for BLAS (unshare needs one)
ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


@dataclass(frozen=True)
class Limits:
    memory_mb: int  # address space of an answer process
    cpu_seconds: int  # its CPU time, a backstop behind the deadline
    workers: int  # answers scored at once
    scratch_mb: int = 16  # the answer's scratch tmpfs, and its largest file (RLIMIT_FSIZE)
    open_files: int = 64


@dataclass
class _Child:
    pid: int
    jobs: int  # the zygote's end of the child's job pipe
    replies: int  # the zygote's end of the child's reply pipe: this child's answer, nobody else's
    home: str
    index: int = -1
    deadline: float = 0.0


def run(fd: int, source, name: str | None, config: dict, scratch: str, limits: Limits, plan: dict | None) -> None:
    """Serve one family of a source (source_.as_request()) on connection fd until it closes; name None:
    probe the confinement (plan None), report it, return. Runs in a child of the server."""
    conn = Connection(fd)
    try:
        Zygote(conn, source, name, config, scratch, limits, plan).serve()
    except Exception as e:  # noqa: BLE001  a bug here, not an answer's doing: the Scorer raises it
        try:
            conn.send_bytes(json.dumps({"fatal": f"{type(e).__name__}: {e}"}).encode())
        except OSError:
            pass


class Zygote:
    def __init__(self, conn, source, name, config, scratch, limits, plan):
        gc.freeze()  # what the server imported: never traversed again, here or in any child
        self.conn, self.name, self.config, self.limits = conn, name, config, limits
        self.plan = plan  # the layers every answer process must hold (None: this zygote probes them)
        self.probing = plan is None
        self.source = source_.from_request(source) if source else None
        process.to_devnull(0, 1, 2)  # a scorer that prints must not flood the caller's output
        self.scratch = tempfile.mkdtemp(prefix="zygote-", dir=scratch)  # its pid is 1 like every other zygote's
        os.chmod(self.scratch, 0o711)  # answer processes (uid nobody) reach their own directory, list nothing
        os.chdir(self.scratch)
        sys.path[:] = [p for p in sys.path if p not in ("", ".")]  # nothing importable from a scratch directory
        os.environ.clear()  # the server's was already this; os.environ is every child's
        os.environ.update(ENVIRONMENT)
        self.pids = isolation.PidNamespaces(wanted=plan is None or plan["process_tree"] == "pid_namespace")
        self.root = isolation.real_root()
        self.last_cap = isolation.last_cap()  # read here, from /proc: its answer processes drop 0 to it
        isolation.not_dumpable()
        isolation.no_new_privs()
        self.layers = {"seccomp_zygote": syscalls.load(syscalls.build(syscalls.KERNEL))}
        if plan is not None and (self.layers["seccomp_zygote"] != plan["seccomp_zygote"]
                                 or self.pids.available != (plan["process_tree"] == "pid_namespace")):
            raise RuntimeError(f"the zygote cannot apply the probed layers: {self.layers}, "
                               f"PID namespaces {self.pids.available}")
        self.answer_filter = syscalls.build(syscalls.ANSWER)
        self.entries: OrderedDict[int, bytes] = OrderedDict()
        self.scorer = self.warm = None
        if name is not None:
            self.scorer = self.source.scorer(name, config)
            self.warm = self.source.entry(name, config, 0)
            answer.score(self.scorer, self.warm, self.warm["answer"])  # imports what the scorer needs, here, once
        self.readable = landlock.readable()  # after the warm-up: the code it imported
        gc.collect()
        gc.freeze()  # children then leave the zygote's objects alone: fewer copied pages per fork
        self.ready: list[_Child] = []
        self.starting: dict[int, _Child] = {}
        self.results: list = []  # the batch's [index, kind, value, refused?]
        self.frozen: list[_Child] = []  # answered and stopped; killed when the batch ends
        self.dying: list[_Child] = []  # killed, not yet reaped
        self.target = limits.workers  # children kept forked ahead
        self.batches = 0
        self.count = 0
        self.failures = 0  # children that died confining themselves, or came up with other layers

    def serve(self) -> None:
        self.spawn()
        while not self.ready:  # probing: its layers are the plan; else the first one that holds the plan
            if not self.starting:
                self.spawn()
            readable, _, _ = select.select(list(self.starting), [], [], 120)
            if not readable:
                raise RuntimeError("an answer process did not start")
            self.started(readable[0])
        self.conn.send_bytes(json.dumps({"confinement": self.layers} if self.probing else "ready").encode())
        if self.name is None:
            return
        while True:
            if not self.conn.poll(0 if len(self.ready) + len(self.starting) < self.target else None):
                self.spawn()
                continue
            try:
                request = json.loads(self.conn.recv_bytes())
            except (EOFError, OSError):
                return
            if self.batches == 1:  # a family scored again and again (GRPO): make forks cheap, fork ahead
                hugepages.collapse()
            if self.batches:
                self.target = max(self.target, min(POOL_MAX, len(request["jobs"])))
            self.batches += 1
            self.batch(request["jobs"], request["deadline_s"])

    # --- one batch: build its tasks, then each answer in a child of its own -----------------------
    def batch(self, jobs: list, deadline_s: float) -> None:
        """Score a batch; sends "built" once its tasks are built, then every result in one message."""
        for seed in dict.fromkeys(seed for _, seed, _ in jobs):
            self.entry(seed)  # outside every deadline
        self.conn.send_bytes(b'"built"')
        self.results = []
        pending, running = list(reversed(jobs)), {}
        workers = self.limits.workers
        while pending or running:
            while len(self.ready) + len(self.starting) < min(len(pending), workers):
                self.spawn()  # the next answers' processes start while these ones score
            while pending and self.ready and len(running) < workers:
                index, seed, answer = pending.pop()
                child = self.ready.pop()
                if self.dispatch(child, self.entry(seed), answer):
                    child.index, child.deadline = index, time.monotonic() + deadline_s
                    running[child.replies] = child
                else:
                    self.report(index, "crash", None, False)  # it died before its answer: nothing of it ran
            deadline = min((c.deadline for c in running.values()), default=time.monotonic() + 120)
            readable, _, _ = select.select([*running, *self.starting], [], [], max(0.0, deadline - time.monotonic()))
            if not readable and not running:
                raise RuntimeError("answer processes do not start")
            for fd in readable:
                if fd in running:
                    self.finish(running.pop(fd), *_reply(os.read(fd, REPLY_LIMIT)))
                else:
                    self.started(fd)
            now = time.monotonic()
            for fd, child in list(running.items()):
                if now >= child.deadline:
                    del running[fd]
                    self.finish(child, "timeout", None, False)
        while self.frozen:  # before the batch returns, every one of its answer processes is killed
            self.kill(self.frozen.pop())
        self.conn.send_bytes(json.dumps(self.results).encode())
        self.reap()

    def entry(self, seed: int) -> bytes:
        if seed not in self.entries:
            if len(self.entries) >= ENTRIES:
                self.entries.popitem(last=False)
            self.entries[seed] = pickle.dumps(self.source.entry(self.name, self.config, seed))  # Family.tasks()'s task
        self.entries.move_to_end(seed)
        return self.entries[seed]

    def dispatch(self, child: _Child, entry: bytes, answer: str) -> bool:
        job = len(entry).to_bytes(8, "little") + entry + answer.encode("utf-8", "surrogatepass")
        try:
            view = memoryview(job)
            while view:
                view = view[os.write(child.jobs, view):]
            return True
        except OSError:
            self.finish(child, None, None, False)
            return False
        finally:
            os.close(child.jobs)  # EOF ends the job

    def finish(self, child: _Child, kind: str | None, value, refused: bool) -> None:
        """An answer is done: its process stops at once and is killed at the end of the batch.

        Stopped, not killed: tearing down a process's memory costs a millisecond or more of CPU
        that the batch's other answers would wait for. A process that timed out, or grew large,
        is killed now.
        """
        os.close(child.replies)
        if kind is not None:
            self.report(child.index, kind, value, refused)
        if kind == "score" or kind == "error":
            isolation.stop_tree(child.pid)
            if isolation.resident_mb(child.pid) <= FROZEN_MB and len(self.frozen) < POOL_MAX:
                self.frozen.append(child)
                return
        self.kill(child)

    def kill(self, child: _Child) -> None:
        isolation.kill_tree(child.pid)
        self.dying.append(child)

    def report(self, index: int, kind: str, value, refused: bool) -> None:
        self.results.append([index, kind, value, refused])

    def reap(self) -> None:
        """Collect dead children (and any orphan handed to this subreaper) and their directories."""
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            for child in [c for c in self.dying if c.pid == pid]:
                self.dying.remove(child)
                try:
                    os.rmdir(child.home)  # most answers write nothing
                except OSError:
                    shutil.rmtree(child.home, ignore_errors=True)

    # --- the pool of children forked ahead --------------------------------------------------------
    def started(self, fd: int) -> None:
        """A starting child said hello (confined, warmed, waiting), or died trying."""
        child = self.starting.pop(fd)
        layers = _layers(os.read(fd, REPLY_LIMIT))  # written before it read any answer: its word is good here
        if layers is not None and self.probing and not self.plan:
            self.layers.update(layers)
            self.plan = dict(self.layers)
        if layers is not None and layers == {k: self.plan.get(k) for k in layers}:
            self.ready.append(child)
            return
        self.failures += 1
        if self.failures > FAILURES:
            raise RuntimeError(f"answer processes die while confining themselves, or hold other layers "
                               f"than probed: {layers}")
        os.close(child.jobs)
        self.finish(child, None, None, False)

    def spawn(self) -> None:
        self.count += 1
        home = os.path.join(self.scratch, str(self.count))
        os.mkdir(home, 0o700)
        if self.root:
            os.chown(home, isolation.UNPRIVILEGED, isolation.UNPRIVILEGED)
        job_r, job_w = os.pipe()
        reply_r, reply_w = os.pipe()
        pid = self.pids.fork()
        if pid == 0:
            try:
                answer.answer_process(self, job_r, reply_w, home)
            finally:
                os._exit(70)
        os.close(job_r)
        os.close(reply_w)
        self.starting[reply_r] = _Child(pid, job_w, reply_r, home)
        self.reap()


def _layers(hello: bytes) -> dict | None:
    try:
        layers = json.loads(hello)
        return layers if isinstance(layers, dict) else None
    except ValueError:
        return None


def _reply(data: bytes) -> tuple[str, object, bool]:
    """A child's reply, checked: (kind, value, refused?). Anything else is a crash.

    The reply is the answer's own word, so nothing in it may break the parent: exactly the keys an
    answer process writes, a float score (a huge int, which float() refuses, is a crash), an error
    name cut to 100 characters, and `refused` a bool, counted once per answer and never summed.
    JSON that nests too deep raises RecursionError here, and is a crash too.
    """
    try:
        reply = json.loads(data)
        if type(reply) is not dict or type(reply.get("refused")) is not bool or len(reply) != 2:
            raise ValueError
        if "score" in reply:
            if type(reply["score"]) not in (int, float):
                raise ValueError
            return "score", float(reply["score"]), reply["refused"]
        if type(reply.get("error")) is not str:
            raise ValueError
        return "error", reply["error"][:100], reply["refused"]
    except Exception:  # noqa: BLE001  nothing, garbage, half a reply, an int float() cannot hold
        return "crash", None, False
