"""A process's tie to its parent (prctl PR_SET_PDEATHSIG): jobs and the scorer's servers die with theirs."""
from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)  # the program's own symbols: loaded before any sandbox closes


def die_with_parent(parent: int | None = None) -> bool:
    """SIGKILL when the parent dies; False if `parent` (its pid) is already gone. Process 1 of a
    PID namespace sees no parent (getppid() is 0): its namespace's death is the check there."""
    took = _libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0) == 0
    return took and (parent is None or os.getpid() == 1 or os.getppid() == parent)
