"""Jobs as Ray tasks on a cluster: what a job reads is shipped with it, what it writes comes back to
the driver as it is written (a checkpoint folder whole, once its marker is in it), so a cluster needs
no shared filesystem and a lost node loses only what it had not sent. Only the driver writes the
output folder."""
from __future__ import annotations

import fnmatch
import hashlib
import importlib.util
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterable

from shortlist import output
from shortlist.errors import one_line
from shortlist.executors.errors import PlacementError, needs_ray
from shortlist.executors.jobs import PLACEMENT, Job, Ran, command, describe
from shortlist.executors.kill import stop
from shortlist.executors.protocol import Executor

SEND_S = 1.0  # how often a Ray worker sends back what its job wrote
STOP_WAIT_S = 10.0  # how long a stopped run waits for Ray to confirm its cancelled tasks


def _ray():
    try:
        import ray
    except ImportError:
        raise needs_ray() from None
    return ray


RAY_HEAD_S = 10.0  # a TCP connect to the head, bounded, before ray.init: its own retries to nothing last minutes


def head_silent(address: str) -> str | None:
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
    about = "a Ray cluster"
    remote = True
    FLAGS = {
        "address": {"help": "--executor ray: the cluster's head, auto or HOST:PORT (default: auto)"},
        "cpus_per_job": {"type": float, "help": "--executor ray on a cluster without GPUs: each job asks for this "
                                                "many CPUs instead"},
    }

    @classmethod
    def check(cls, placement) -> None:
        """Its options, Ray itself, and a head that answers, before anything is written: ray.init would retry
        a silent address for many minutes, printing Ray's log all the while."""
        cpus, address = placement.option("cpus_per_job"), placement.option("address", "auto")
        if placement.per_gpu == "auto":
            raise PlacementError("--per-gpu auto is for the local executor; on Ray give a number (each job asks "
                                 "for 1/N of a GPU)")
        number = isinstance(cpus, (int, float)) and not isinstance(cpus, bool)
        if cpus is not None and not (number and math.isfinite(cpus) and cpus > 0):
            raise PlacementError(f"--cpus-per-job {cpus}: give a positive number of CPUs")
        if not isinstance(address, str) or not address.strip():
            raise PlacementError("--address: give auto or HOST:PORT of the Ray cluster's head")
        if importlib.util.find_spec("ray") is None:
            raise needs_ray()
        if silent := head_silent(address):
            raise PlacementError(f"cannot join a Ray cluster at --address {address}: nothing answers there "
                                 f"({silent}) (start one with `ray start --head`)")

    @classmethod
    def placed(cls, placement, log=print, peaks=tuple) -> "RayExecutor":
        """Ray joined (or the cluster this process already joined), its nodes read for the slots a job takes."""
        return cls(placement.option("address", "auto"), placement.per_gpu, placement.option("cpus_per_job"), log)

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
        self.task = ray.remote(_remote_job)  # its own name: `remote` is the protocol's boolean (jobs run elsewhere)

    def capacity(self) -> int:
        return max(1, self.slots)

    def cpus_per_job(self) -> float:
        return self.cpus or 2

    def run(self, jobs, out, done=None, log=print):
        ray = _ray()
        out = Path(out)
        cache_key = hashlib.sha256(f"{socket.gethostname()}:{out.resolve()}".encode()).hexdigest()[:16]
        env = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "HF_HUB_OFFLINE")}  # None: unset there too
        running, ended = {}, []
        try:
            for job in jobs:
                ask = self.ask if not job.alone else ({"num_cpus": self.cpus, "num_gpus": 0} if self.cpus
                                                      else {"num_gpus": 1, "num_cpus": 0})
                gen = self.task.options(**ask, max_retries=0, name=job.name).remote(
                    job, pack(out, job.reads), cache_key, None if self.cpus else (1 if job.alone else self.per_gpu),
                    env)
                running[gen] = [job, {"executor": self.name, "slots": self.capacity()}, time.time()]
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
                        log(f"{job.name}: started{describe(where, node=self.remote)}")
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
    os.chmod(tmp, 0o777 & ~output.umask())  # mkdtemp's 0700 would hide the folder from the rest of a team
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
    root = output.cache_root() / "ray" / socket.gethostname()
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
        where = {"executor": RayExecutor.name, "node": ray.util.get_node_ip_address(), "slot": None, "gpu": ",".join(gpus) or None,
                 "per_gpu": per_gpu if gpus else None}
        yield ("started", where)
        child_env = {k: v for k, v in os.environ.items() if k not in env} | {k: v for k, v in env.items() if v}
        child_env |= {PLACEMENT: json.dumps(where), "PYTHONUNBUFFERED": "1"}
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
