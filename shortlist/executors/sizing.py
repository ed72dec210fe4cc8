"""--per-gpu auto: how many jobs each GPU's free memory holds at a per-job peak."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from shortlist import output, process
from shortlist.executors.errors import PlacementError

CONTEXT_GIB = 0.5  # what a job's CUDA context takes beside what torch's allocator reserves (auto)
# The most jobs per GPU auto puts there: the most measured to pay (issue 39, SmolLM2 on an H200: 8 families under
# MPS 48.8 families/hour, ~38 time-sliced, 1 alone far fewer); 12 and 16 are not measured yet
MOST_PER_GPU = 8


def recorded_peaks(paths, *keys: str) -> list:
    """The peak_gib each job recorded (jobs.with_peak()) in these JSON files, found under keys (e.g.
    "device", "placement"); a file that cannot be read gives nothing. What --per-gpu auto sizes from."""
    peaks = []
    for path in paths:
        try:
            record = output.read_json(path)
            for key in keys:
                record = (record or {}).get(key)
            peaks.append((record or {}).get("peak_gib"))
        except (OSError, ValueError, AttributeError):
            continue
    return peaks


def auto(gpus: list[str], job_gib: float | None, peaks: list, log=print, cpus: int | None = None) -> dict[str, int]:
    """--per-gpu auto: jobs per GPU from its free memory and a per-job peak, declared or measured, at most
    MOST_PER_GPU, and no more jobs in all than CPU cores: each job keeps a core busy (measured: 8 SmolLM2 jobs
    on one H200, each at ~100 % of a core), so a ninth job on 8 cores only slows the others."""
    measured = [p for p in peaks if isinstance(p, (int, float)) and p > 0]
    peak, source = (job_gib, "declared") if job_gib else (max(measured), "measured") if measured else (None, None)
    if not gpus:
        return {}
    if peak is None:
        log("--per-gpu auto: no per-job peak declared (--job-gib) or recorded in this folder yet: 1 job per GPU; "
            "each job records its own, for the next run")
        return {gpu: 1 for gpu in gpus}
    free = free_gib(gpus)
    cores = cpus or process.cpus()
    bound = min(MOST_PER_GPU, max(1, cores // len(gpus)))
    fit = {gpu: max(1, int(free[gpu] // (peak + CONTEXT_GIB))) for gpu in gpus}
    counts = {gpu: min(fit[gpu], bound) for gpu in gpus}
    capped = [g for g in gpus if counts[g] < fit[g]]
    why = ("" if not capped else f"; at most {bound} a GPU (" + (
        f"{cores} CPU cores for {len(gpus)} GPU{'s' if len(gpus) > 1 else ''}: a job keeps a core busy"
        if bound < MOST_PER_GPU else f"the most measured to pay, {MOST_PER_GPU}") + ")")
    log(f"--per-gpu auto: {', '.join(f'GPU {g} {counts[g]} (free {free[g]:.1f} GiB)' for g in gpus)}, at "
        f"{peak:.2f} GiB a job ({source}) + {CONTEXT_GIB} GiB for its CUDA context{why}")
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
