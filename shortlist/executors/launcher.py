"""A job's process: `python -m shortlist.executors.launcher [--parent PID] [--gpu] -m MODULE ARGS`.

It dies with the parent (PR_SET_PDEATHSIG), takes its share of the GPU's memory, then runs MODULE
as __main__."""
from __future__ import annotations

import os
import sys

from shortlist.executors.jobs import placement_of_this_job


def main(argv: list[str]) -> None:
    """A job's process (launcher()): die with the parent, take the GPU's share, run the module as __main__.
    The parent is checked after the prctl: one that died before it would never be noticed."""
    import runpy

    from shortlist import process
    parent, gpu = None, False
    while argv and argv[0] != "-m":
        if argv[0] == "--parent":
            parent, argv = int(argv[1]), argv[2:]
        elif argv[0] == "--gpu":
            gpu, argv = True, argv[1:]
        else:
            raise SystemExit(f"shortlist.executors.launcher: unknown option {argv[0]}")
    process.die_with_parent()
    if parent is not None and os.getppid() != parent:
        os._exit(1)
    if gpu:
        cap_memory((placement_of_this_job() or {}).get("per_gpu") or 1)
    sys.argv = [argv[1], *argv[2:]]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)


def cap_memory(share: int) -> None:
    """Jobs sharing a GPU (`share` of them: the placement's per_gpu) each keep to their share of its memory:
    sampling sizes its batches within it (sampling.available_memory), and a job that needs more fails
    alone, not its neighbours."""
    if share <= 1:
        return
    import torch
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            torch.cuda.set_per_process_memory_fraction(1 / share, i)


if __name__ == "__main__":
    main(sys.argv[1:])
