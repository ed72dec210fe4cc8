"""Where jobs run: a process per job, on this machine's GPUs (local) or on a Ray cluster (ray).

A job is one command run against an output folder: a family's notebook (the proof), a catalog
worker's share of families. An executor runs a list of jobs as a queue, so that every slot stays
busy, and hands each job's end to the caller as it comes, in the caller's thread:

- **local** (the default): `per_gpu` jobs share each visible GPU, each seeing only that GPU
  (CUDA_VISIBLE_DEVICES) and its allocator capped at 1/per_gpu of the GPU's memory; without a GPU,
  one job at a time. `auto` decides once, at the start: on each GPU, as many jobs as its free
  memory holds at (per-job peak + CONTEXT_GIB), never fewer than 1; the peak is the one declared
  (--job-gib) or else the largest that an earlier job into the same output folder recorded (each job
  records what torch reserved at most: here()); with neither, 1 per GPU.
- **ray**: each job a Ray task on an existing cluster, asking for num_gpus=1/per_gpu and no CPU
  (the GPU is what jobs share, as with local), or, on a cluster of CPUs, num_cpus=C and no GPU
  (--cpus-per-job C). The worker runs the job in a folder of its own: what the job reads is shipped
  with it; what it writes comes back to the driver as it is written (a checkpoint folder whole, once
  its marker file is in it), so a cluster needs no shared filesystem and a lost node loses only what
  it had not sent. Only the driver writes the output folder, atomically (shortlist.output). A
  machine's caches (torch.compile's) stay on it, one per output folder. The job runs with the
  driver's OMP_NUM_THREADS (Ray would force 1), so CPU arithmetic is what it would be locally.

Every job process starts through this module (`python -m shortlist.placement ... -m MODULE`): it
dies with its parent (PR_SET_PDEATHSIG) and runs in a session of its own, so a Ctrl-C reaches only
the batch, which stops every job (every process of its tree, killed: stop()), and a kill -9 of the
batch takes every job with it, down to the notebooks' kernels. One run per output
folder: one_run() holds a lock under it for the whole run.
"""
from __future__ import annotations

import fcntl
import fnmatch
import hashlib
import importlib.util
import json
import math
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from shortlist import leftovers, output
from shortlist.errors import OneLine, one_line

OUT, SCRATCH = "{out}", "{job}"  # in a job's arguments: the output folder it writes, its own scratch folder
WHERE, PER_GPU = "SHORTLIST_PLACEMENT", "SHORTLIST_PER_GPU"  # a job's environment: where it runs; jobs on its GPU
CONTEXT_GIB = 0.5  # what a job's CUDA context takes beside what torch's allocator reserves (auto)
POLL_S = 0.2  # how often the local executor looks at its jobs
SEND_S = 1.0  # how often a Ray worker sends back what its job wrote
STOP_WAIT_S = 10.0  # how long a stopped run waits for Ray to confirm its cancelled tasks
RAY = "ray==2.60.0"  # pyproject's extra `ray`
LOCK, HOLDER = "lock", "lock.json"  # under the output folder: the run's flock, and who holds it
_UMASK = os.umask(0)
os.umask(_UMASK)


class PlacementError(OneLine, ValueError):
    """Jobs that cannot be placed as asked (a flag, a missing Ray, a cluster without GPUs); one line."""


class Busy(OneLine, RuntimeError):
    """Another run holds the output folder; the message names it."""


class Stopped(KeyboardInterrupt):
    """SIGINT or SIGTERM, raised in the main thread (stop_on_signals): every job is stopped on the way out.
    A KeyboardInterrupt, so no `except Exception` on the way records it as a failure."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def code(self) -> int:
        return 128 + self.signum  # 130 for SIGINT, 143 for SIGTERM, as a shell reports them


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES values."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip() and d.strip() != "-1"]
    try:
        import torch
        return [str(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        return []


# --- a job, and where it ran ---------------------------------------------------------------------

@dataclass(frozen=True)
class Job:
    """One command, `python -m module args`, in a process of its own; OUT and SCRATCH in its args stand
    for the output folder and its scratch folder, wherever it runs. Paths in reads/writes/units/caches
    are relative to the output folder; they matter where the job runs elsewhere (ray)."""
    name: str  # what the log and a failure call it
    module: str
    args: tuple = ()
    files: tuple = ()  # (name, bytes): written into its scratch folder before it starts (its parameters)
    reads: tuple = ()  # files or folders it reads: shipped with it
    writes: tuple = ()  # files or folders it writes: sent back as they are written
    units: tuple = ()  # (glob, marker): a folder sent back whole, once the marker file is in it
    caches: tuple = ()  # folders that are a machine's cache: kept on each machine, never sent
    gpu_process: bool = True  # its own process uses the GPU (False: its children do, a notebook's kernel)
    alone: bool = False  # runs by itself with a whole machine's GPUs (local) or a whole GPU (ray), no share

    def __post_init__(self):
        for name in ("args", "files", "reads", "writes", "units", "caches"):
            object.__setattr__(self, name, tuple(tuple(x) if isinstance(x, list) else x for x in getattr(self, name)))


@dataclass(frozen=True)
class Ran:
    """How a job ended: its exit status, or why it has none (a lost worker), and where it ran."""
    job: Job
    rc: int | None  # None: it never exited by itself (its Ray worker or node was lost)
    why: str | None  # one line when it did not end with status 0
    where: dict  # executor, slot, slots, gpu, per_gpu, node: what a record of it keeps (here())
    seconds: float = 0.0


def here() -> dict | None:
    """Where this process's job runs, as its executor placed it (None outside a job), with the most
    GPU memory torch's allocator has reserved in it so far (what `--per-gpu auto` sizes from)."""
    where = json.loads(os.environ.get(WHERE) or "null")
    torch = sys.modules.get("torch")
    if where is not None and torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        where["peak_gib"] = round(max(torch.cuda.max_memory_reserved(i)
                                      for i in range(torch.cuda.device_count())) / 2 ** 30, 3)
    return where


def describe(where: dict) -> str:
    """' on GPU 0 (2 share it)', ' on 10.0.0.5, GPU 1': what the log says where a job started."""
    gpu = f"GPU {where['gpu']}" if where.get("gpu") not in (None, "") else ""
    share = f" ({where['per_gpu']} share it)" if gpu and (where.get("per_gpu") or 1) > 1 else ""
    node = where["node"] if where.get("executor") == "ray" else ""
    return (" on " + ", ".join(filter(None, [node, gpu + share]))) if node or gpu else ""


def command(job: Job, out, scratch, parent: int) -> list[str]:
    """The job's argv: this module's launcher, then the job's module and its arguments."""
    args = [str(a).replace(OUT, str(out)).replace(SCRATCH, str(scratch)) for a in job.args]
    return launcher(job.module, args, parent, job.gpu_process)


def launcher(module: str, args: list[str], parent: int, gpu: bool) -> list[str]:
    """`python -m module args` as a job's process: it dies with `parent`; with gpu, it takes its share."""
    return [sys.executable, "-m", "shortlist.placement", "--parent", str(parent), *(["--gpu"] if gpu else []),
            "-m", module, *args]


def _launch(argv: list[str]) -> None:
    """A job's process (launcher()): die with the parent, take the GPU's share, run the module as __main__.
    The parent is checked after the prctl: one that died before it would never be noticed."""
    import runpy

    from shortlist.scoring import isolation
    parent, gpu = None, False
    while argv and argv[0] != "-m":
        if argv[0] == "--parent":
            parent, argv = int(argv[1]), argv[2:]
        elif argv[0] == "--gpu":
            gpu, argv = True, argv[1:]
        else:
            raise SystemExit(f"shortlist.placement: unknown option {argv[0]}")
    isolation.die_with_parent()
    if parent is not None and os.getppid() != parent:
        os._exit(1)
    if gpu:
        _cap_memory()
    sys.argv = [argv[1], *argv[2:]]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)


def _cap_memory() -> None:
    """Jobs sharing a GPU each keep to their share of its memory: sampling sizes its batches within
    it (sampling.available_memory), and a job that needs more fails alone, not its neighbours."""
    share = int(os.environ.get(PER_GPU) or 1)
    if share <= 1:
        return
    import torch
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            torch.cuda.set_per_process_memory_fraction(1 / share, i)


# --- how a run asks for its jobs to be placed ------------------------------------------------------

@dataclass(frozen=True)
class Placement:
    """--executor, --per-gpu, --job-gib, --address, --cpus-per-job, checked when built (one line)."""
    executor: str = "local"
    per_gpu: int | str = 1  # or "auto" (local)
    job_gib: float | None = None  # auto: a job's peak GPU memory, declared
    address: str = "auto"  # ray: the cluster, auto or HOST:PORT
    cpus_per_job: float | None = None  # ray, a cluster of CPUs: what a job asks for instead of a GPU

    def __post_init__(self):
        if self.executor not in ("local", "ray"):
            raise PlacementError(f"--executor {self.executor}: give local (this machine) or ray (a Ray cluster)")
        if self.per_gpu != "auto" and not (isinstance(self.per_gpu, int) and not isinstance(self.per_gpu, bool)
                                           and 1 <= self.per_gpu <= 64):
            raise PlacementError(f"--per-gpu {self.per_gpu}: give a whole number of jobs per GPU, 1 to 64, or auto")
        if self.per_gpu == "auto" and self.executor == "ray":
            raise PlacementError("--per-gpu auto is for the local executor; on Ray give a number (each job asks "
                                 "for 1/N of a GPU)")
        if self.job_gib is not None and (self.per_gpu != "auto" or not (math.isfinite(self.job_gib)
                                                                        and self.job_gib > 0)):
            raise PlacementError(f"--job-gib {self.job_gib}: a job's peak GPU memory in GiB, a positive number, "
                                 f"for --per-gpu auto")
        if self.executor == "local" and (self.address != "auto" or self.cpus_per_job is not None):
            raise PlacementError("--address and --cpus-per-job go with --executor ray")
        if self.cpus_per_job is not None and not (math.isfinite(self.cpus_per_job) and self.cpus_per_job > 0):
            raise PlacementError(f"--cpus-per-job {self.cpus_per_job}: give a positive number of CPUs")
        if not self.address.strip():
            raise PlacementError("--address: give auto or HOST:PORT of the Ray cluster's head")
        if self.executor == "ray" and importlib.util.find_spec("ray") is None:
            raise PlacementError(f"--executor ray needs Ray, an optional extra: pip install '.[ray]' in this "
                                 f"repository (or pip install '{RAY}')")
        if self.executor == "ray" and (silent := _head_silent(self.address)):
            # before anything is written: ray.init would retry for many minutes, printing Ray's log all the while
            raise PlacementError(f"cannot join a Ray cluster at --address {self.address}: nothing answers there "
                                 f"({silent}) (start one with `ray start --head`)")

    def start(self, log=print, peaks: Callable[[], Iterable] = tuple) -> "Executor":
        """The executor, ready: Ray connected and checked, auto decided (peaks: those measured so far)."""
        if self.executor == "ray":
            return RayExecutor(self.address, self.per_gpu, self.cpus_per_job, log)
        gpus = visible_gpus()
        counts = auto(gpus, self.job_gib, list(peaks()), log) if self.per_gpu == "auto" else \
            {gpu: self.per_gpu for gpu in gpus}
        return Local(counts)


def add_arguments(parser) -> None:
    """The flags of every command that runs jobs (proof run, screen --all/--levels)."""
    g = parser.add_argument_group("where jobs run")
    g.add_argument("--executor", default="local", help="local: this machine's GPUs (default); ray: a Ray cluster")
    g.add_argument("--per-gpu", default="1", metavar="N|auto",
                   help="jobs sharing each GPU, each capped at 1/N of its memory (default 1); auto: as many as the "
                        "free memory holds at the per-job peak (--job-gib, or the largest recorded in --out)")
    g.add_argument("--job-gib", type=float, help="--per-gpu auto: a job's peak GPU memory, declared, in GiB")
    g.add_argument("--address", default="auto", help="--executor ray: the cluster's head, auto or HOST:PORT")
    g.add_argument("--cpus-per-job", type=float,
                   help="--executor ray on a cluster without GPUs: each job asks for this many CPUs instead")


def from_args(args) -> Placement:
    text = str(args.per_gpu).strip()
    # ASCII digits only: str.isdigit() holds for '²', which int() refuses, and int() reads '٣' as 3
    per_gpu = text if text == "auto" else int(text) if text.isascii() and text.isdigit() else text
    return Placement(args.executor, per_gpu, args.job_gib, args.address, args.cpus_per_job)


def auto(gpus: list[str], job_gib: float | None, peaks: list, log=print) -> dict[str, int]:
    """--per-gpu auto: jobs per GPU from its free memory and a per-job peak, declared or measured."""
    measured = [p for p in peaks if isinstance(p, (int, float)) and p > 0]
    peak, source = (job_gib, "declared") if job_gib else (max(measured), "measured") if measured else (None, None)
    if not gpus:
        return {}
    if peak is None:
        log("--per-gpu auto: no per-job peak declared (--job-gib) or recorded in this folder yet: 1 job per GPU; "
            "each job records its own, for the next run")
        return {gpu: 1 for gpu in gpus}
    free = free_gib(gpus)
    counts = {gpu: max(1, int(free[gpu] // (peak + CONTEXT_GIB))) for gpu in gpus}
    log(f"--per-gpu auto: {', '.join(f'GPU {g} {counts[g]} (free {free[g]:.1f} GiB)' for g in gpus)}, at "
        f"{peak:.2f} GiB a job ({source}) + {CONTEXT_GIB} GiB for its CUDA context")
    return counts


def free_gib(gpus: list[str]) -> dict[str, float]:
    """Each GPU's free memory, asked in a process of its own: the batch keeps no CUDA context."""
    code = ("import json, torch; print(json.dumps([torch.cuda.mem_get_info(i)[0] "
            "for i in range(torch.cuda.device_count())]))")
    try:
        done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(gpus)),
                              capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise PlacementError("--per-gpu auto: reading the GPUs' free memory took over 300 s") from None
    try:
        free = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise PlacementError(f"--per-gpu auto: could not read the GPUs' free memory "
                             f"({(done.stderr.strip().splitlines() or ['no output'])[-1]})") from None
    if len(free) != len(gpus):
        raise PlacementError(f"--per-gpu auto: CUDA_VISIBLE_DEVICES names {len(gpus)} GPUs, torch sees {len(free)}")
    return {gpu: f / 2 ** 30 for gpu, f in zip(gpus, free)}


# --- executors -------------------------------------------------------------------------------------

class Executor:
    name = ""
    serial = False  # True: jobs run one at a time, on this machine, without a GPU

    def capacity(self) -> int:
        """How many jobs run at once."""
        raise NotImplementedError

    def cpus_per_job(self) -> float:
        """The CPUs a job can count on: this machine's, shared by its slots; on Ray, what a job asks for
        (a GPU job asks for none: 2, one for itself and one for a helper)."""
        raise NotImplementedError

    def run(self, jobs: list[Job], out, done: Callable[[Ran], None] | None = None, log=print) -> list[Ran]:
        """Every job, in order from a queue into free slots; done(ran) as each ends. A signal or an error
        on the way stops every job still running before it propagates."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class Local(Executor):
    """Jobs as processes of this machine: per_gpu[gpu] at once on each GPU; no GPU: one at a time."""
    name = "local"

    def __init__(self, per_gpu: dict[str, int]):
        # slot k of every GPU before slot k + 1 of any: fewer jobs than slots spread over the GPUs
        self.slots = [(gpu, n) for k in range(max(per_gpu.values(), default=0)) for gpu, n in per_gpu.items()
                      if k < n] or [(None, 1)]
        self.serial = not per_gpu

    def capacity(self) -> int:
        return len(self.slots)

    def cpus_per_job(self) -> float:
        return (os.cpu_count() or 1) / len(self.slots)

    def run(self, jobs, out, done=None, log=print):
        queue, running, ended = deque(jobs), {}, []
        try:
            while queue or running:
                for slot in range(len(self.slots)):
                    if slot not in running and queue:
                        running[slot] = self._start(queue.popleft(), slot, out, log)
                for slot, (job, proc, scratch, where, started) in list(running.items()):
                    if proc.poll() is None:
                        continue
                    del running[slot]
                    shutil.rmtree(scratch, ignore_errors=True)
                    ran = Ran(job, proc.returncode, None if proc.returncode == 0 else f"exited with {proc.returncode}",
                              where, time.time() - started)
                    ended.append(ran)
                    if done:
                        done(ran)
                if running:
                    time.sleep(POLL_S)
        finally:
            stop([proc for _, proc, _, _, _ in running.values()])
            for _, _, scratch, _, _ in running.values():
                shutil.rmtree(scratch, ignore_errors=True)
        return ended

    def _start(self, job: Job, slot: int, out, log):
        gpu, n = (None, 1) if job.alone else self.slots[slot]
        where = {"executor": "local", "node": socket.gethostname(), "slot": None if job.alone else slot + 1,
                 "slots": len(self.slots), "gpu": gpu, "per_gpu": n if gpu is not None else None}
        scratch = Path(leftovers.make("shortlist-job-"))  # a batch killed -9 leaves it: the next run removes it
        for name, data in job.files:
            (scratch / name).write_bytes(data)  # the job's own scratch, not the output folder
        env = dict(os.environ, PYTHONUNBUFFERED="1", **{WHERE: json.dumps(where)})
        if gpu is not None:
            env |= {"CUDA_VISIBLE_DEVICES": gpu, PER_GPU: str(n)}
        log(f"{job.name}: started{describe(where)}")
        proc = subprocess.Popen(command(job, Path(out), scratch, os.getpid()), env=env, stdin=subprocess.DEVNULL,
                                start_new_session=True)  # a terminal's Ctrl-C reaches the batch, which stops it
        return job, proc, scratch, where, time.time()


def stop(procs: list[subprocess.Popen]) -> None:
    """Every process of each job's tree, stopped (SIGSTOP: none can start another) until no new one
    appears, then killed (SIGKILL), and the jobs reaped. A kill, not a request: papermill answers SIGTERM
    by shutting its kernel down politely (a SIGINT to the kernel's group: tracebacks from its helpers)
    while training goes on, and a kernel's helpers left to notice their parent's end took seconds.
    Every file a job writes is written whole or not at all."""
    tree, found = set(), {proc.pid for proc in procs}
    while found:
        for pid in found:
            _signal(pid, signal.SIGSTOP)
        tree |= found
        found = {pid for proc in procs for pid in descendants(proc.pid)} - tree
    for pid in tree:
        _signal(pid, signal.SIGKILL)
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything of its group the tree missed
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


def descendants(root: int) -> list[int]:
    """Every process below root, kernels in sessions of their own included, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])  # the name, in parentheses, may hold spaces
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# --- Ray --------------------------------------------------------------------------------------------

def _ray():
    try:
        import ray
    except ImportError:
        raise PlacementError(f"--executor ray needs Ray, an optional extra: pip install '.[ray]' in this "
                             f"repository (or pip install '{RAY}')") from None
    return ray


RAY_HEAD_S = 10.0  # a TCP connect to the head, bounded, before ray.init: its own retries to nothing last minutes


def _head_silent(address: str) -> str | None:
    """Why nothing answers at a HOST:PORT (or ray://HOST:PORT) address; None where something does, or
    where the address is auto or no HOST:PORT (Ray reads those itself, and fails fast where none runs)."""
    host, sep, port = address.strip().removeprefix("ray://").rpartition(":")
    if not sep or not host or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        return None
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_HEAD_S):
            return None
    except OSError as e:  # refused, unreachable, no such host, or silent for RAY_HEAD_S
        return e.strerror or type(e).__name__


class RayExecutor(Executor):
    """Jobs as Ray tasks on an existing cluster (ray.init(address)), or on the one this process already
    joined (ray.is_initialized(): tests start a local cluster with fake GPUs)."""
    name = "ray"

    def __init__(self, address: str, per_gpu: int, cpus_per_job: float | None, log=print):
        ray = _ray()
        self.joined = not ray.is_initialized()
        if self.joined:
            ours = signal.getsignal(signal.SIGTERM)  # ray.init puts sys.exit in its place: a stop would exit 15
            try:
                ray.init(address=address, log_to_driver=True)
                signal.signal(signal.SIGTERM, ours)
            except Exception as e:  # noqa: BLE001  ConnectionError, or Ray's own: no cluster there, either way
                raise PlacementError(f"cannot join a Ray cluster at --address {address}: {one_line(e)} (start one "
                                     f"with `ray start --head`)") from None
        self.per_gpu, self.cpus = per_gpu, cpus_per_job
        self.ask = {"num_cpus": cpus_per_job, "num_gpus": 0} if cpus_per_job else {"num_gpus": 1 / per_gpu,
                                                                                 "num_cpus": 0}
        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        kind, need = ("CPU", cpus_per_job) if cpus_per_job else ("GPU", 1 / per_gpu)
        self.slots = sum(math.floor(r.get(kind, 0) / need + 1e-9) for r in nodes)
        if not any(r.get(kind, 0) >= need - 1e-9 for r in nodes):
            offered = ", ".join(f"{r.get('CPU', 0):g} CPU {r.get('GPU', 0):g} GPU" for r in nodes) or "no node"
            self.close()
            raise PlacementError(
                f"the Ray cluster at --address {address} has no node with the {need:g} {kind} a job asks for "
                f"(its nodes: {offered}): " + ("give fewer --cpus-per-job" if cpus_per_job else
                                                "start its nodes with GPUs, or give --cpus-per-job N to run each "
                                                "job on N CPUs instead"))
        log(f"ray: {len(nodes)} nodes, {self.slots} jobs at once ({need:g} {kind} each)")
        self.remote = ray.remote(_remote_job)

    def capacity(self) -> int:
        return max(1, self.slots)

    def cpus_per_job(self) -> float:
        return self.cpus or 2

    def run(self, jobs, out, done=None, log=print):
        ray = _ray()
        out = Path(out)
        cache_key = hashlib.sha256(f"{socket.gethostname()}:{out.resolve()}".encode()).hexdigest()[:16]
        # None: unset there too, as here. SHORTLIST_CPU: a CPU cluster (--cpus-per-job) trains what it was told to
        env = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "SHORTLIST_CPU", "HF_HUB_OFFLINE")}
        running, ended = {}, []
        try:
            for job in jobs:
                ask = self.ask if not job.alone else ({"num_cpus": self.cpus, "num_gpus": 0} if self.cpus
                                                      else {"num_gpus": 1, "num_cpus": 0})
                gen = self.remote.options(**ask, max_retries=0, name=job.name).remote(
                    job, pack(out, job.reads), cache_key, None if self.cpus else (1 if job.alone else self.per_gpu),
                    env)
                running[gen] = [job, {"executor": "ray", "slots": self.capacity()}, time.time()]
            while running:
                ready, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
                for gen in ready:
                    job, where, started = running[gen]
                    try:
                        message = ray.get(next(gen))
                    except StopIteration:
                        message = ("lost", "its Ray task ended without an exit status")
                    except ray.exceptions.RayError as e:
                        message = ("lost", f"its Ray worker was lost: {one_line(e)}")
                    kind = message[0]
                    if kind == "started":
                        where.update(message[1])
                        running[gen][2] = time.time()
                        log(f"{job.name}: started{describe(where)}")
                    elif kind == "files":
                        for rel, data in message[1].items():
                            output.write_bytes(out / rel, data)
                    elif kind == "unit":
                        put_folder(out / message[1], message[2])
                    else:
                        del running[gen]
                        if kind == "exit":
                            prune_units(out, job, message[2])
                        rc, why = (message[1], None if message[1] == 0 else f"exited with {message[1]}") \
                            if kind == "exit" else (None, message[1])
                        ran = Ran(job, rc, why, where, time.time() - started)
                        ended.append(ran)
                        if done:
                            done(ran)
        finally:
            for gen in running:
                ray.cancel(gen, force=True)  # the worker dies; its job's process dies with it (PR_SET_PDEATHSIG)
            if running:
                ray.wait(list(running), num_returns=len(running), timeout=STOP_WAIT_S)
        return ended

    def close(self) -> None:
        if self.joined:
            _ray().shutdown()  # leaves the cluster; stops nothing on it
            self.joined = False


def pack(out: Path, paths: Iterable[str]) -> dict[str, bytes]:
    """The files under these paths (files or folders) of the output folder, as relative path -> bytes."""
    found = {}
    for rel in paths:
        for path in _files(out / rel):
            found[str(path.relative_to(out))] = path.read_bytes()
    return found


def _files(path: Path) -> list[Path]:
    """Files at or under path, leaving out names that start with a dot (a write still in progress)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        return []
    return [p for p in sorted(path.rglob("*")) if p.is_file() and not any(part.startswith(".") for part in
                                                                            p.relative_to(path).parts)]


def put_folder(dest: Path, contents: dict[str, bytes]) -> None:
    """A folder written whole or not at all: into a temporary folder beside it, renamed into place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    os.chmod(tmp, 0o777 & ~_UMASK)  # mkdtemp's 0700 would hide the folder from the rest of a team
    try:
        for rel, data in contents.items():
            output.write_bytes(tmp / rel, data)
        if dest.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
            dest.rename(old / dest.name)
            tmp.rename(dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def prune_units(out: Path, job: Job, present: list[str]) -> None:
    """After a job ended: its unit folders here that it no longer has there (a rotated checkpoint) go."""
    for pattern, _ in job.units:
        for folder in out.glob(pattern):
            if folder.is_dir() and str(folder.relative_to(out)) not in present:
                shutil.rmtree(folder, ignore_errors=True)


class _Watch:
    """What a job on a Ray worker wrote under its writes and has not sent back: a file once it has
    not changed between two looks (or once the job has ended), a unit folder once its marker is there."""

    def __init__(self, out: Path, job: Job):
        self.out, self.job, self.sent, self.seen, self.units_sent = out, job, {}, {}, {}
        for _ in self.changes(settled=False, send=False):  # what was shipped here is not sent back
            pass

    def _unit(self, rel: str) -> str | None:
        parts = rel.split("/")
        for pattern, _ in self.job.units:
            depth = len(pattern.split("/"))
            if len(parts) > depth and fnmatch.fnmatchcase("/".join(parts[:depth]), pattern):
                return "/".join(parts[:depth])
        return None

    def units(self) -> list[str]:
        return sorted(str(f.relative_to(self.out)) for pattern, _ in self.job.units for f in self.out.glob(pattern)
                      if f.is_dir())

    def changes(self, settled: bool, send: bool = True):
        batch = {}
        for rel in self.job.writes:
            for path in _files(self.out / rel):
                name = str(path.relative_to(self.out))
                if self._unit(name):
                    continue
                try:
                    stat = path.stat()
                    mark = (stat.st_size, stat.st_mtime_ns)
                    if self.sent.get(name) == mark:
                        continue
                    if settled and self.seen.get(name) != mark:
                        self.seen[name] = mark  # changed since the last look: perhaps still being written
                        continue
                    batch[name] = path.read_bytes() if send else b""
                    self.sent[name] = mark
                except FileNotFoundError:  # renamed or removed between the listing and the read
                    continue
        if batch and send:
            yield ("files", batch)
        for pattern, marker in self.job.units:
            for folder in self.out.glob(pattern):
                mark_file = folder / marker
                if not mark_file.is_file():
                    continue
                rel = str(folder.relative_to(self.out))
                mark = mark_file.stat().st_mtime_ns
                if self.units_sent.get(rel) != mark:
                    if send:
                        yield ("unit", rel, {str(p.relative_to(folder)): p.read_bytes() for p in _files(folder)})
                    self.units_sent[rel] = mark


def _worker_root() -> Path:
    """This node's own folder: a home shared between nodes (NFS) holds other nodes' live jobs, whose pids
    mean nothing here, so stale jobs are looked for among this host's only."""
    root = Path(os.environ.get("SHORTLIST_CACHE", Path.home() / ".cache" / "shortlist")) / "ray" / socket.gethostname()
    (root / "jobs").mkdir(parents=True, exist_ok=True)
    return root


def _remote_job(job: Job, shipped: dict, cache_key: str, per_gpu: int | None, env: dict):
    """A job on a Ray worker, as a generator task: ("started", where), then ("files", {...}) and
    ("unit", folder, {...}) as the job writes, then ("exit", status, unit folders it still has). It
    runs in a folder of its own, removed at the end; the machine's caches are linked into it."""
    import ray
    root = _worker_root()
    for stale in (root / "jobs").glob("job-*-*"):  # a worker killed mid-job (a stopped run) left its folder
        owner = stale.name.split("-")[1]
        if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            shutil.rmtree(stale, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(prefix=f"job-{os.getpid()}-", dir=root / "jobs"))
    out, scratch = folder / "out", folder / "scratch"
    proc = None
    try:
        scratch.mkdir()
        for rel, data in shipped.items():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_bytes(data)
        for name, data in job.files:
            (scratch / name).write_bytes(data)
        for rel in job.caches:
            cache = root / "caches" / cache_key / rel
            cache.mkdir(parents=True, exist_ok=True)
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).symlink_to(cache, target_is_directory=True)
        gpus = [str(g) for g in ray.get_gpu_ids()]
        where = {"executor": "ray", "node": ray.util.get_node_ip_address(), "slot": None, "gpu": ",".join(gpus) or None,
                 "per_gpu": per_gpu if gpus else None}
        yield ("started", where)
        child_env = {k: v for k, v in os.environ.items() if k not in env} | {k: v for k, v in env.items() if v}
        child_env |= {WHERE: json.dumps(where), PER_GPU: str(per_gpu or 1), "PYTHONUNBUFFERED": "1"}
        watch = _Watch(out, job)  # before the job starts: what it writes is new to the watch
        proc = subprocess.Popen(command(job, out, scratch, os.getpid()), env=child_env, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        while proc.poll() is None:
            time.sleep(SEND_S)
            yield from watch.changes(settled=True)
        yield from watch.changes(settled=False)
        end = ("exit", proc.returncode, watch.units())
    finally:
        if proc is not None and proc.poll() is None:  # cancelled: the job goes with this task
            stop([proc])
        shutil.rmtree(folder, ignore_errors=True)
    yield end  # last, once this worker has cleaned up after the job


# --- a run: its signals, its output folder -------------------------------------------------------

@contextmanager
def stop_on_signals():
    """While inside: SIGINT and SIGTERM raise Stopped in the main thread, once (the executors then stop
    their jobs on the way out, uninterrupted). Elsewhere than the main thread, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stopped(signum, frame):
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)
        raise Stopped(signum)
    old = {s: signal.signal(s, stopped) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def exit(code: int) -> None:
    """A command's end: sys.exit, but a stopped run (130, 143) leaves at once, its lines flushed:
    Python's teardown of what the batch imported (torch, Reasoning Gym) took 5 s more, measured."""
    if code in (130, 143):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


@contextmanager
def one_run(out):
    """Hold <out>/lock (flock, exclusive) for the whole run: a second run into the same folder is refused
    in one line that names the first. The kernel drops the lock with its holder, however that ends.
    The lock is opened without blocking and must be a regular file: a FIFO of that name blocked forever."""
    out = Path(out)
    try:  # read-only is enough for flock: a lock file another user left is still ours to lock
        fd = os.open(out / LOCK, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, 0o666)
    except OSError as e:
        raise Busy(f"{out / LOCK}: cannot open the run's lock ({e.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Busy(f"{out / LOCK}: the run's lock is not a regular file (a FIFO, a device...): remove it")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if not isinstance(e, BlockingIOError):
            os.close(fd)
            raise Busy(f"{out}: this filesystem cannot lock the run's folder ({e.strerror}): give an --out on "
                       f"a local disk") from None
        os.close(fd)
        try:
            h = output.read_json(out / HOLDER)
            who = f"pid {h['pid']} on {h['host']}, started {h['started']}"
        except (OSError, ValueError, KeyError, TypeError):
            who = "a run that has not said who it is yet"
        raise Busy(f"{out} is in use by another run ({who}): wait for it to end, or give another --out") from None
    try:
        try:
            output.write_json(out / HOLDER, {"pid": os.getpid(), "host": socket.gethostname(),
                                             "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                             "command": " ".join(sys.argv)})
        except OSError as e:  # a folder named lock.json, a read-only folder
            raise Busy(f"{out / HOLDER}: cannot say who holds the run's folder ({e.strerror or type(e).__name__})"
                       + (": remove that folder" if (out / HOLDER).is_dir() else "")) from None
        yield
    finally:
        os.close(fd)


if __name__ == "__main__":
    _launch(sys.argv[1:])
