"""Stopping a job: every process of its tree, kernels in sessions of their own included."""
from __future__ import annotations

import os
import signal
import subprocess


def stop(procs: list[subprocess.Popen]) -> None:
    """Every process of each job's tree, stopped (SIGSTOP: none can start another) until no new one
    appears, then killed (SIGKILL), and the jobs reaped. A kill, not a request: papermill answers SIGTERM
    by shutting its kernel down politely (a SIGINT to the kernel's group: tracebacks from its helpers)
    while training goes on, and a kernel's helpers left to notice their parent's end took seconds.
    Every file a job writes is written whole or not at all."""
    tree, found = set(), {proc.pid for proc in procs}
    while found:
        for pid in found:
            _signal(pid, signal.SIGSTOP)
        tree |= found
        found = {pid for proc in procs for pid in descendants(proc.pid)} - tree
    for pid in tree:
        _signal(pid, signal.SIGKILL)
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything of its group the tree missed
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


def descendants(root: int) -> list[int]:
    """Every process below root, kernels in sessions of their own included, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])  # the name, in parentheses, may hold spaces
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
