"""What produced a file: package versions, the machine and its GPU, and when."""
from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform

PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "reasoning-gym", "numpy", "scipy",
            "papermill", "nbconvert")


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def device(placement: dict | None = None) -> dict:
    """The machine, its GPUs and, for a job, where its executor placed it (`placement`, as the caller has it:
    shortlist.executors.with_peak(placement_of_this_job()) in a job's process)."""
    import torch
    info = {"platform": platform.platform(), "cpus": os.cpu_count(), "cuda": torch.cuda.is_available(),
            "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "placement": placement}
    if info["cuda"]:
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        info["cuda_version"] = torch.version.cuda
    return info


def stamp(placement: dict | None = None) -> dict:
    return {"written_at": now(), "versions": versions(), "device": device(placement)}
