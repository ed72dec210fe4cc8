"""A job (one command against an output folder), how it ended, and where it ran.

Every job process starts through the launcher (`python -m shortlist.executors.launcher ... -m
MODULE`): it dies with its parent and runs in a session of its own."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

OUT, SCRATCH = "{out}", "{job}"  # in a job's arguments: the output folder it writes, its own scratch folder
# a job's environment, set by its executor for the job's whole process tree: where it runs, as JSON (the
# Ran.where dict, per_gpu included); read only by placement_of_this_job()
PLACEMENT = "SHORTLIST_PLACEMENT"


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
    where: dict  # executor, slot, slots, gpu, per_gpu, node: what a record of it keeps (with_peak())
    seconds: float = 0.0


def placement_of_this_job() -> dict | None:
    """Where the executor placed this process's job (executor, node, slot, slots, gpu, per_gpu), None
    outside a job: read from the environment its executor set for the job's process tree. A process reads
    it once and passes it on as an argument."""
    return json.loads(os.environ.get(PLACEMENT) or "null")


def with_peak(where: dict | None) -> dict | None:
    """`where` as a record of the job keeps it: with the most GPU memory torch's allocator has reserved in
    this process so far (peak_gib, what `--per-gpu auto` sizes from; none without CUDA in use)."""
    torch = sys.modules.get("torch")
    if where is not None and torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        where = where | {"peak_gib": round(max(torch.cuda.max_memory_reserved(i)
                                               for i in range(torch.cuda.device_count())) / 2 ** 30, 3)}
    return where


def describe(where: dict, node: bool = False) -> str:
    """' on GPU 0 (2 share it)', ' on 10.0.0.5, GPU 1' (node: the executor's jobs run on other machines):
    what the log says where a job started."""
    gpu = f"GPU {where['gpu']}" if where.get("gpu") not in (None, "") else ""
    share = f" ({where['per_gpu']} share it)" if gpu and (where.get("per_gpu") or 1) > 1 else ""
    node = where["node"] if node else ""
    return (" on " + ", ".join(filter(None, [node, gpu + share]))) if node or gpu else ""


def command(job: Job, out, scratch, parent: int) -> list[str]:
    """The job's argv: this module's launcher, then the job's module and its arguments."""
    args = [str(a).replace(OUT, str(out)).replace(SCRATCH, str(scratch)) for a in job.args]
    return launcher(job.module, args, parent, job.gpu_process)


def launcher(module: str, args: list[str], parent: int, gpu: bool) -> list[str]:
    """`python -m module args` as a job's process: it dies with `parent`; with gpu, it takes its share."""
    return [sys.executable, "-m", "shortlist.executors.launcher", "--parent", str(parent), *(["--gpu"] if gpu else []),
            "-m", module, *args]
