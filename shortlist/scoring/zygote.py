"""The processes that run Reasoning Gym scorers on a model's answers: one zygote per family, one
fresh process per answer.

Nine scorers hand the answer to eval() or to sympy's parse_expr (which ends in eval), so an
answer is code, and whatever it does must end with it. scorer.Scorer starts a zygote per family
from a forkserver that preloaded this module and the default source (PYTHONHASHSEED=0, an emptied
environment, single-threaded BLAS). The zygote
imports what the family's scorer needs and builds its tasks, outside every deadline; each answer is
then scored in a child forked from it, which confines itself before it reads the answer and is
killed (with all it started) as soon as it replies or passes its deadline. Children are forked
ahead of need (a pool), so a batch's answers do not wait for fork().

What an answer process is (isolation, landlock and syscalls apply the layers; each reports
whether it took, and the zygote reports them as the confinement):
- process 1 of a PID namespace of its own: when it dies, everything it started dies;
- uid/gid nobody where the project runs as root, no capabilities, not dumpable, no_new_privs;
- a seccomp filter: no processes, exec, sockets, device nodes, signals, ptrace, mounts ...;
- Landlock: writes only beneath its own scratch directory; its zygote's network namespace;
- rlimits: address space, CPU, file size, open files, processes (0), no core files;
- its own reply pipe: the worst it can do is fake its own score. Replies are JSON, never pickle.
A Python audit hook counts (and refuses) the operations a scorer attempts; it is a convenience
for the counts, not a boundary: code that reaches C unaudited passes it, the layers above do not.
"""
from __future__ import annotations

import gc
import json
import os
import pickle
import select
import shutil
import signal
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass

from shortlist.scoring import hugepages, isolation, landlock, syscalls
from shortlist.sources import source as source_

REPLY_LIMIT = 1 << 16
ENTRIES = 4096  # tasks a zygote keeps built
POOL_MAX = 32  # children forked ahead: a GRPO step's 32 answers find theirs waiting
FROZEN_MB = 64  # an answered process larger than this is killed at once, not at the end of its batch
ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


@dataclass(frozen=True)
class Limits:
    memory_mb: int  # address space of an answer process
    cpu_seconds: int  # its CPU time, a backstop behind the deadline
    workers: int  # answers scored at once
    file_mb: int = 64
    open_files: int = 64


@dataclass
class _Child:
    pid: int
    jobs: int  # the zygote's end of the child's job pipe
    replies: int  # the zygote's end of the child's reply pipe: this child's answer, nobody else's
    home: str
    index: int = -1
    deadline: float = 0.0


def zygote(conn, source, name: str | None, config: dict, scratch: str, limits: Limits) -> None:
    """Serve one family of a source (source_.wire()) until the connection closes. name None: report
    the confinement, exit."""
    try:
        Zygote(conn, source, name, config, scratch, limits).serve()
    except Exception as e:  # noqa: BLE001  a bug here, not an answer's doing: the Scorer raises it
        conn.send_bytes(json.dumps({"fatal": f"{type(e).__name__}: {e}"}).encode())


class Zygote:
    def __init__(self, conn, source, name, config, scratch, limits):
        gc.freeze()  # what the forkserver imported: never traversed again, here or in any child
        isolation.die_with_parent()
        self.conn, self.name, self.config, self.scratch, self.limits = conn, name, config, scratch, limits
        self.source = source_.arrive(source) if source else None
        _quiet()
        os.chdir(scratch)
        sys.path[:] = [p for p in sys.path if p not in ("", ".")]  # nothing importable from a scratch directory
        os.environ.clear()  # the forkserver's was already emptied; this one is every child's
        os.environ.update(ENVIRONMENT)
        self.layers = {"environment": "emptied", "hash_seed": 0 if sys.flags.hash_randomization == 0 else "random"}
        self.layers["network_namespace"], self.layers["namespaces_held_by"] = isolation.own_namespaces()
        self.pids = isolation.PidNamespaces()
        self.root = isolation.real_root()
        isolation.not_dumpable()
        isolation.no_new_privs()
        landlock.restrict(scratch)
        self.layers["seccomp_zygote"] = syscalls.load(syscalls.build(syscalls.KERNEL))
        self.answer_filter = syscalls.build(syscalls.ANSWER)
        self.entries: OrderedDict[int, bytes] = OrderedDict()
        self.scorer = self.warm = None
        if name is not None:
            self.scorer = self.source.scorer(name, config)
            self.warm = self.source.entry(name, config, 0)
            _score(self.scorer, self.warm, self.warm["answer"])  # imports what the scorer needs, here, once
        gc.collect()
        gc.freeze()  # children then leave the zygote's objects alone: fewer copied pages per fork
        self.ready: list[_Child] = []
        self.starting: dict[int, _Child] = {}
        self.results: list = []  # the batch's [index, kind, value, refused]
        self.frozen: list[_Child] = []  # answered and stopped; killed when the batch ends
        self.dying: list[_Child] = []  # killed, not yet reaped
        self.target = limits.workers  # children kept forked ahead
        self.batches = 0
        self.count = 0
        self.failures = 0  # children that died confining themselves

    def serve(self) -> None:
        self.spawn()
        while not self.ready:  # the first child's layers are every child's
            readable, _, _ = select.select(list(self.starting), [], [], 120)
            if not readable:
                raise RuntimeError("an answer process did not start")
            self.started(readable[0])
        self.conn.send_bytes(json.dumps({"confinement": self.layers}).encode())
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
                    self.report(index, "crash", None, 0)  # it died before its answer: nothing of it ran
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
                    self.finish(child, "timeout", None, 0)
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
            self.finish(child, None, None, 0)
            return False
        finally:
            os.close(child.jobs)  # EOF ends the job

    def finish(self, child: _Child, kind: str | None, value, refused: int) -> None:
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

    def report(self, index: int, kind: str, value, refused: int) -> None:
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
        hello = os.read(fd, REPLY_LIMIT)
        if hello:
            if "answer_process" not in self.layers:
                self.layers.update(json.loads(hello))
            self.ready.append(child)
            return
        self.failures += 1
        if self.failures > 3:
            raise RuntimeError("answer processes die while confining themselves")
        os.close(child.jobs)
        self.finish(child, None, None, 0)

    def spawn(self) -> None:
        self.count += 1
        home = os.path.join(self.scratch, f"{os.getpid()}.{self.count}")
        os.mkdir(home, 0o700)
        if self.root:
            os.chown(home, isolation.UNPRIVILEGED, isolation.UNPRIVILEGED)
        job_r, job_w = os.pipe()
        reply_r, reply_w = os.pipe()
        pid = self.pids.fork()
        if pid == 0:
            try:
                _answer_process(self, job_r, reply_w, home)
            finally:
                os._exit(70)
        os.close(job_r)
        os.close(reply_w)
        self.starting[reply_r] = _Child(pid, job_w, reply_r, home)
        self.reap()


def _reply(data: bytes) -> tuple[str, object, int]:
    """A child's reply, checked: (kind, value, refused). Anything else is a crash."""
    try:
        reply = json.loads(data)
        refused = reply["refused"]
        if not isinstance(refused, int) or isinstance(refused, bool) or refused < 0:
            raise ValueError
        if "score" in reply:
            if not isinstance(reply["score"], (int, float)) or isinstance(reply["score"], bool):
                raise ValueError
            return "score", reply["score"], refused
        return "error", str(reply["error"])[:100], refused
    except Exception:  # noqa: BLE001  nothing, garbage, or half a reply
        return "crash", None, 0


# --- an answer process ------------------------------------------------------------------------------
def _answer_process(zygote: Zygote, job_r: int, reply_w: int, home: str) -> None:
    global refused
    layers = _confine(zygote, job_r, reply_w, home)
    os.write(reply_w, json.dumps(layers).encode())
    if zygote.scorer is None:
        return
    try:
        _score(zygote.scorer, zygote.warm, zygote.warm["answer"])  # touch what scoring touches, before the clock
    except Exception:  # noqa: BLE001
        pass
    chunks = []
    while chunk := os.read(job_r, 1 << 20):
        chunks.append(chunk)
    job = b"".join(chunks)
    if not job:
        return  # the zygote went away
    size = int.from_bytes(job[:8], "little")
    entry, answer = pickle.loads(job[8:8 + size]), job[8 + size:].decode("utf-8", "surrogatepass")
    refused = 0
    try:
        reply = {"score": _score(zygote.scorer, entry, answer)}
    except BaseException as e:  # noqa: BLE001  SystemExit and KeyboardInterrupt too: the answer raised them
        reply = {"error": type(e).__name__}
    reply["refused"] = refused
    os.write(reply_w, json.dumps(reply).encode())
    while True:  # the zygote kills it when the batch ends: exiting now would tear down memory mid-batch
        signal.pause()


def _confine(zygote: Zygote, job_r: int, reply_w: int, home: str) -> dict:
    """Every layer, in the order the kernel needs them; returns which took."""
    os.setsid()  # a process group of its own, for machines without PID namespaces
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    low = 3
    for fd in sorted((job_r, reply_w)):  # the zygote's connection and every sibling's pipes: closed
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)
    try:
        with open("/proc/self/oom_score_adj", "w") as f:  # a memory bomb is what the OOM killer takes first
            f.write("1000")
    except OSError:
        pass
    os.chdir(home)
    os.environ.update(HOME=home, TMPDIR=home)
    layers = {"answer_process": "one per answer", "process_tree": "pid_namespace" if os.getpid() == 1 else "process_group"}
    layers["user"] = isolation.drop_privileges(zygote.root)
    layers["capabilities"] = isolation.capabilities()
    layers["dumpable"] = not isolation.not_dumpable()
    isolation.die_with_parent()  # after the uid change, which clears it
    layers["no_new_privs"] = isolation.no_new_privs()
    layers["rlimits"] = isolation.limit({"AS": zygote.limits.memory_mb << 20, "CPU": zygote.limits.cpu_seconds,
                                         "FSIZE": zygote.limits.file_mb << 20, "NOFILE": zygote.limits.open_files,
                                         "CORE": 0, "NPROC": 0})
    layers["landlock_abi"] = landlock.restrict(home)
    layers["seccomp"] = syscalls.load(zygote.answer_filter)
    sys.addaudithook(_audit_hook(home))
    layers["audit_hook"] = True
    return layers


def _score(scorer, entry: dict, answer) -> float:
    return float(scorer(answer, entry))


def _quiet() -> None:
    """A scorer that prints must not flood the caller's output."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


# --- the audit hook: counts what a scorer attempts (a convenience, not a boundary) ----------------
_REFUSED_EVENTS = {"os.system", "os.posix_spawn", "os.fork", "os.forkpty", "os.kill", "os.killpg",
                   "signal.pthread_kill", "subprocess.Popen", "pty.spawn", "socket.__new__",
                   "socket.connect", "socket.bind", "socket.getaddrinfo", "ctypes.dlopen", "ctypes.dlsym",
                   "ctypes.call_function", "ctypes.cdata", "os.setuid", "os.chroot", "webbrowser.open",
                   "sys.remote_exec"}
_REFUSED_PREFIXES = ("os.exec", "os.spawn")
_PATH_EVENTS = {"os.remove", "os.rmdir", "os.mkdir", "os.rename", "os.symlink", "os.link", "os.chmod",
                "os.chown", "os.truncate", "os.utime", "shutil.rmtree", "shutil.copyfile", "shutil.move",
                "shutil.copytree", "os.mkfifo", "os.mknod"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
refused = 0  # operations refused while scoring this answer


def _inside(path, home: str) -> bool:
    if isinstance(path, int):
        return False
    real = os.path.realpath(os.fsdecode(path))
    return real == "/dev/null" or real == home or real.startswith(home + os.sep)


def _audit_hook(home: str):
    def hook(event: str, args: tuple) -> None:
        global refused
        if event in _REFUSED_EVENTS or event.startswith(_REFUSED_PREFIXES):
            bad = True
        elif event == "open":
            path, mode, flags = (tuple(args) + (None, None))[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & _WRITE_FLAGS)
            bad = writing and not _inside(path, home)
        elif event in _PATH_EVENTS:
            bad = not all(_inside(a, home) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike)))
        else:
            return
        if bad:
            refused += 1
            raise PermissionError(f"{event} is refused in the scorer sandbox")
    return hook
