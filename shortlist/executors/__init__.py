"""Where jobs run: a process per job, on this machine's GPUs (local) or on a Ray cluster (ray).

A job is one command run against an output folder: a family's notebook (the proof), a catalog
worker's share of families. An executor runs a list of jobs as a queue, so that every slot stays
busy, and hands each job's end to the caller as it comes, in the caller's thread:

- **local** (the default): `per_gpu` jobs share each visible GPU, each seeing only that GPU
  (CUDA_VISIBLE_DEVICES) and its allocator capped at 1/per_gpu of the GPU's memory; without a GPU,
  one job at a time. `auto` decides once, at the start: on each GPU, as many jobs as its free
  memory holds at (per-job peak + CONTEXT_GIB), never fewer than 1; the peak is the one declared
  (--job-gib) or else the largest that an earlier job into the same output folder recorded (each job
  records what torch reserved at most: with_peak()); with neither, 1 per GPU.
- **ray**: each job a Ray task on an existing cluster, asking for num_gpus=1/per_gpu and no CPU
  (the GPU is what jobs share, as with local), or, on a cluster of CPUs, num_cpus=C and no GPU
  (--cpus-per-job C). The worker runs the job in a folder of its own: what the job reads is shipped
  with it; what it writes comes back to the driver as it is written (a checkpoint folder whole, once
  its marker file is in it), so a cluster needs no shared filesystem and a lost node loses only what
  it had not sent. Only the driver writes the output folder, atomically (shortlist.output). A
  machine's caches (torch.compile's) stay on it, one per output folder. The job runs with the
  driver's OMP_NUM_THREADS (Ray would force 1), so CPU arithmetic is what it would be locally.

Every job process starts through the launcher (`python -m shortlist.executors.launcher ... -m MODULE`): it
dies with its parent (PR_SET_PDEATHSIG) and runs in a session of its own, so a Ctrl-C reaches only
the batch, which stops every job (every process of its tree, killed and ended: stop()) and its own
helpers before it exits (exit()), and a kill -9 of the batch takes every job with it, down to the
notebooks' kernels. One run per output folder: one_run() holds a lock under it for the whole run.

The room: placement (the flags, and the executor they start), protocol (what every executor does),
local, ray_cluster, sizing (--per-gpu auto), jobs (a job and where it ran), launcher (a job's
process), kill (a job's process tree), signals, lock. A third executor is one module beside local
and ray_cluster: a subclass of Executor with its own flags, checks, `remote` and start (protocol.py),
and one entry in placement.EXECUTORS.
"""
from shortlist.executors.errors import PlacementError
from shortlist.executors.jobs import (OUT, PLACEMENT, SCRATCH, Job, Ran, describe, launcher, placement_of_this_job,
                                      with_peak)
from shortlist.executors.kill import descendants, stop
from shortlist.executors.local import Local, visible_gpus
from shortlist.executors.lock import HOLDER, LOCK, Busy, one_run
from shortlist.executors.placement import EXECUTORS, Placement, add_arguments, from_args
from shortlist.executors.protocol import Executor
from shortlist.executors.signals import Stopped, exit, stop_on_signals
from shortlist.executors.sizing import auto

__all__ = ["EXECUTORS", "HOLDER", "LOCK", "OUT", "PLACEMENT", "SCRATCH", "Busy", "Executor", "Job", "Local", "Placement", "PlacementError",
           "Ran", "Stopped", "add_arguments", "auto", "describe", "descendants", "exit", "from_args",
           "launcher", "one_run", "placement_of_this_job", "stop", "stop_on_signals", "visible_gpus",
           "with_peak"]
