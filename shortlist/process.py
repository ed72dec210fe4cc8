"""A process's ties: to its parent (prctl PR_SET_PDEATHSIG: jobs and the scorer's servers die with
theirs), to what it must close when it exits (close_at_exit: Scorers, the task builder), and to the
output it must not write into (to_devnull); and the CPUs it may run on (cpus)."""
from __future__ import annotations

import atexit
import ctypes
import functools
import itertools
import os
import signal
import traceback
import weakref

from shortlist.libc import libc

_PR_SET_PDEATHSIG = 1


def cpus(quota_file: str = "/sys/fs/cgroup/cpu.max") -> int:
    """The CPUs this process may run on (>= 1): its affinity, which taskset and a container's cpuset narrow, and
    no more than its cgroup's CPU quota (cgroup v2's cpu.max, "<quota> <period>": `docker --cpus`, a Kubernetes
    limit), rounded up; not the machine's count."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    try:
        with open(quota_file) as f:
            quota, period = f.read().split()[:2]
        if quota != "max" and int(period) > 0:
            n = min(n, -(-int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return max(1, n)


def die_with_parent(parent: int | None = None) -> bool:
    """SIGKILL when the parent dies; False if `parent` (its pid) is already gone. Process 1 of a
    PID namespace sees no parent (getppid() is 0): its namespace's death is the check there."""
    took = libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0) == 0
    return took and (parent is None or os.getpid() == 1 or os.getppid() == parent)



def to_devnull(*fds: int) -> None:
    """Point these descriptors (0, 1, 2: stdin, stdout, stderr) at /dev/null: what a builder, a scorer or an
    answer prints is not its parent's output, and nothing reads from a terminal."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in fds:
        os.dup2(null, fd)
    if null not in fds:
        os.close(null)


_live: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # a resource still open -> (order, its closer)
_order = itertools.count()


def close_at_exit(resource, close=None) -> None:
    """Close `resource` when this process exits (close(resource), or resource.close()), unless it was
    collected before: resources are held weakly, by one atexit hook registered once for them all."""
    _hook()
    _live[resource] = (next(_order), close)


@functools.cache
def _hook() -> None:
    atexit.register(_close_live)


def _close_live() -> None:
    """Every resource still alive, the latest first (as one atexit hook each would have run); one that
    fails to close is reported and the others still close."""
    for resource, (_, close) in sorted(_live.items(), key=lambda item: item[1][0], reverse=True):
        try:
            close(resource) if close is not None else resource.close()
        except Exception:  # noqa: BLE001  what atexit does with a failing hook: report it, run the rest
            traceback.print_exc()
