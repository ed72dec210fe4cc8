"""Jobs as processes of this machine: per_gpu[gpu] at once on each GPU, each seeing only its own."""
from __future__ import annotations

import json
import math
import os
import shutil
import socket
import subprocess
import time
from collections import deque
from pathlib import Path

from shortlist import leftovers, process
from shortlist import mps as mps_
from shortlist.executors import sizing
from shortlist.executors.errors import PlacementError
from shortlist.executors.jobs import PLACEMENT, Job, Ran, command, describe
from shortlist.executors.kill import stop
from shortlist.executors.protocol import Executor

POLL_S = 0.2  # how often the local executor looks at its jobs


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


class Local(Executor):
    """Jobs as processes of this machine: per_gpu[gpu] at once on each GPU; no GPU: one at a time."""
    name = "local"
    about = "this machine's GPUs"
    FLAGS = {
        "job_gib": {"type": float, "help": "--per-gpu auto: a job's peak GPU memory, declared, in GiB"},
        "mps": {"action": "store_true", "elsewhere": "on a Ray cluster start MPS on each node",
                "help": "local, with --per-gpu above 1: jobs sharing a GPU run side by side through a CUDA MPS "
                        "daemon the run starts and stops (needs nvidia-cuda-mps-control); without it they take turns "
                        "(--per-gpu auto: under MPS where it works)"},
    }

    @classmethod
    def check(cls, placement) -> None:
        job_gib = placement.option("job_gib")
        number = isinstance(job_gib, (int, float)) and not isinstance(job_gib, bool) and math.isfinite(job_gib)
        if job_gib is not None and (placement.per_gpu != "auto" or not (number and job_gib > 0)):
            raise PlacementError(f"--job-gib {job_gib}: a job's peak GPU memory in GiB, a positive number, "
                                 f"for --per-gpu auto")

    @classmethod
    def placed(cls, placement, log=print, peaks=tuple) -> "Local":
        """auto decided once, at the start, from each GPU's free memory (sizing.auto); --mps: the daemon started."""
        gpus = visible_gpus()
        mps = placement.option("mps", False)
        if mps and not gpus:
            raise PlacementError("--mps: no GPU is visible here (CUDA_VISIBLE_DEVICES); run without --mps")
        auto = placement.per_gpu == "auto"
        counts = sizing.auto(gpus, placement.option("job_gib"), list(peaks()), log) if auto \
            else {gpu: placement.per_gpu for gpu in gpus}
        if mps:
            return cls(counts, mps_.Service().start())
        return cls(counts, cls.mps_where_it_helps(counts, log) if auto else None)

    @staticmethod
    def mps_where_it_helps(counts: dict[str, int], log=print) -> "mps_.Service | None":
        """--per-gpu auto with jobs sharing a GPU: the run's MPS daemon where one starts and a CUDA process can be
        its client (measured: 8 jobs 1.3x faster under MPS than taking turns, shortlist/mps.py); where not, one
        line, and the jobs take turns, as without it. Auto never fails a run that would run without MPS."""
        if max(counts.values(), default=0) < 2:
            return None
        try:
            service = mps_.Service().start().probe(next(gpu for gpu, n in counts.items() if n > 1))
        except mps_.MpsError as e:
            reason = str(e).removeprefix("--mps: ").split("; run without --mps")[0]
            log(f"--per-gpu auto: jobs sharing a GPU take turns on it (no MPS: {reason})")
            return None
        log("--per-gpu auto: jobs sharing a GPU run side by side through the run's own MPS daemon")
        return service

    def __init__(self, per_gpu: dict[str, int], mps: "mps_.Service | None" = None):
        self.mps = mps  # the run's MPS daemon, stopped by close(); its clients are the GPU jobs
        # slot k of every GPU before slot k + 1 of any: fewer jobs than slots spread over the GPUs
        self.slots = [(gpu, n) for k in range(max(per_gpu.values(), default=0)) for gpu, n in per_gpu.items()
                      if k < n] or [(None, 1)]
        self.serial = not per_gpu

    def capacity(self) -> int:
        return len(self.slots)

    def cpus_per_job(self) -> float:
        return process.cpus() / len(self.slots)

    def close(self) -> None:
        if self.mps is not None:
            self.mps.stop()

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
        where = {"executor": self.name, "node": socket.gethostname(), "slot": None if job.alone else slot + 1,
                 "slots": len(self.slots), "gpu": gpu, "per_gpu": n if gpu is not None else None,
                 "mps": gpu is not None and self.mps is not None}
        scratch = Path(leftovers.make("shortlist-job-"))  # a batch killed -9 leaves it: the next run removes it
        for name, data in job.files:
            (scratch / name).write_bytes(data)  # the job's own scratch, not the output folder
        env = dict(os.environ, PYTHONUNBUFFERED="1", **{PLACEMENT: json.dumps(where)})
        if gpu is not None:
            env |= {"CUDA_VISIBLE_DEVICES": gpu, **(self.mps.env() if self.mps else {})}
        log(f"{job.name}: started{describe(where)}")
        proc = subprocess.Popen(command(job, Path(out), scratch, os.getpid()), env=env, stdin=subprocess.DEVNULL,
                                start_new_session=True)  # a terminal's Ctrl-C reaches the batch, which stops it
        return job, proc, scratch, where, time.time()
