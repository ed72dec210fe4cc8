"""How a run asks for its jobs to be placed: the flags, checked when built (one line), and the executor."""
from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from typing import Callable, Iterable

from shortlist import mps as mps_
from shortlist.executors.errors import PlacementError, needs_ray
from shortlist.executors import local, sizing
from shortlist.executors.local import Local
from shortlist.executors.protocol import Executor
from shortlist.executors.ray_cluster import head_silent


@dataclass(frozen=True)
class Placement:
    """--executor, --per-gpu, --job-gib, --address, --cpus-per-job, checked when built (one line)."""
    executor: str = "local"
    per_gpu: int | str = 1  # or "auto" (local)
    job_gib: float | None = None  # auto: a job's peak GPU memory, declared
    address: str = "auto"  # ray: the cluster, auto or HOST:PORT
    cpus_per_job: float | None = None  # ray, a cluster of CPUs: what a job asks for instead of a GPU
    mps: bool = False  # local: jobs sharing a GPU run through a CUDA MPS daemon of the run's own (shortlist/mps.py)

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
        if self.mps and self.executor != "local":
            raise PlacementError("--mps is for the local executor; on a Ray cluster start MPS on each node")
        if self.cpus_per_job is not None and not (math.isfinite(self.cpus_per_job) and self.cpus_per_job > 0):
            raise PlacementError(f"--cpus-per-job {self.cpus_per_job}: give a positive number of CPUs")
        if not self.address.strip():
            raise PlacementError("--address: give auto or HOST:PORT of the Ray cluster's head")
        if self.executor == "ray" and importlib.util.find_spec("ray") is None:
            raise needs_ray()
        if self.executor == "ray" and (silent := head_silent(self.address)):
            # before anything is written: ray.init would retry for many minutes, printing Ray's log all the while
            raise PlacementError(f"cannot join a Ray cluster at --address {self.address}: nothing answers there "
                                 f"({silent}) (start one with `ray start --head`)")

    @property
    def remote(self) -> bool:
        """Whether its jobs will run on other machines (their GPUs, not this one's): known before it starts."""
        return self.executor == "ray"

    def start(self, log=print, peaks: Callable[[], Iterable] = tuple) -> Executor:
        """The executor, ready: Ray connected and checked, auto decided (peaks: those measured so far)."""
        if self.executor == "ray":
            from shortlist.executors.ray_cluster import RayExecutor
            return RayExecutor(self.address, self.per_gpu, self.cpus_per_job, log)
        gpus = local.visible_gpus()
        if self.mps and not gpus:
            raise PlacementError("--mps: no GPU is visible here (CUDA_VISIBLE_DEVICES); run without --mps")
        counts = sizing.auto(gpus, self.job_gib, list(peaks()), log) if self.per_gpu == "auto" else \
            {gpu: self.per_gpu for gpu in gpus}
        return Local(counts, mps_.Service().start() if self.mps else None)


def add_arguments(parser) -> None:
    """The flags of every command that runs jobs (proof run, screen --all/--levels)."""
    g = parser.add_argument_group("where jobs run")
    g.add_argument("--executor", default="local", choices=("local", "ray"),
                   help="local: this machine's GPUs; ray: a Ray cluster (default: %(default)s)")
    g.add_argument("--per-gpu", default="1", metavar="N|auto",
                   help="jobs sharing each GPU, each capped at 1/N of its memory; auto: as many as the free memory "
                        "holds at the per-job peak (--job-gib, or the largest recorded in --out) (default: %(default)s)")
    g.add_argument("--job-gib", type=float, help="--per-gpu auto: a job's peak GPU memory, declared, in GiB")
    g.add_argument("--address", default="auto",
                   help="--executor ray: the cluster's head, auto or HOST:PORT (default: %(default)s)")
    g.add_argument("--mps", action="store_true",
                   help="local, with --per-gpu above 1: jobs sharing a GPU run side by side through a CUDA MPS "
                        "daemon the run starts and stops (needs nvidia-cuda-mps-control); without it they take turns")
    g.add_argument("--cpus-per-job", type=float,
                   help="--executor ray on a cluster without GPUs: each job asks for this many CPUs instead")


def from_args(args) -> Placement:
    text = str(args.per_gpu).strip()
    # ASCII digits only: str.isdigit() holds for '²', which int() refuses, and int() reads '٣' as 3
    per_gpu = text if text == "auto" else int(text) if text.isascii() and text.isdigit() else text
    return Placement(args.executor, per_gpu, args.job_gib, args.address, args.cpus_per_job, args.mps)
