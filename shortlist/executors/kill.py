"""Stopping a job: every process of its tree, kernels in sessions of their own included, killed and seen to
end; and a stopped command's own helpers, on its way out (signals.exit)."""
from __future__ import annotations

import os
import signal
import subprocess
import time

GONE_S = 10.0  # how long a stop waits for what it killed to end: a process stuck in the kernel is left after it


def stop(procs: list[subprocess.Popen]) -> None:
    """Every process of each job's tree, stopped (SIGSTOP: none can start another) until no new one
    appears, then killed (SIGKILL), the jobs reaped, and the rest seen to end. A kill, not a request:
    papermill answers SIGTERM by shutting its kernel down politely (a SIGINT to the kernel's group:
    tracebacks from its helpers) while training goes on, and a kernel's helpers left to notice their
    parent's end took seconds. Every file a job writes is written whole or not at all."""
    tree = _killed({proc.pid for proc in procs}, lambda: {pid for proc in procs for pid in descendants(proc.pid)})
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything of its group the tree missed
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    _ended(tree)


def stop_descendants(spare: set[int] = frozenset()) -> None:
    """Every process below this one but spare killed, and seen to end: a stopped batch's own helpers (a task
    builder, a scorer), which a batch leaving by os._exit would not close (signals.exit)."""
    me = os.getpid()
    _ended(_killed(set(descendants(me)) - spare, lambda: set(descendants(me)) - spare))


def resource_tracker() -> set[int]:
    """multiprocessing's resource tracker, if this process started one: to be spared, since it unlinks the named
    semaphores a spawn queue or pool left once this process is gone (killed, they stay in /dev/shm until a
    reboot). Its pid is a private attribute of the stdlib's tracker; tests/shortlist/test_placement.py holds
    the contract (a stopped command leaves no semaphore)."""
    from multiprocessing import resource_tracker as tracker
    pid = getattr(getattr(tracker, "_resource_tracker", None), "_pid", None)
    return {pid} if isinstance(pid, int) else set()


def _killed(found: set[int], below) -> set[int]:
    """found and every process below() them, stopped until no new one appears, then killed; all of them."""
    tree: set[int] = set()
    while found:
        for pid in found:
            _signal(pid, signal.SIGSTOP)
        tree |= found
        found = below() - tree
    for pid in tree:
        _signal(pid, signal.SIGKILL)
    return tree


def _ended(pids: set[int]) -> None:
    """Until none of pids runs. A SIGKILL is sent at once, but a process ends (its memory unmapped, its GPU
    context torn down) when the kernel gets to it, later on a loaded machine, and only the jobs are ours to
    reap: a kernel, an orphan by then, could still be ending once the batch had exited."""
    deadline = time.monotonic() + GONE_S
    while any(map(_running, pids)) and time.monotonic() < deadline:
        time.sleep(0.01)


def _running(pid: int) -> bool:
    """Whether a process exists and is not a zombie (one that ended, its parent yet to reap it: it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # the name, in parentheses, may hold spaces
    except (OSError, IndexError):
        return False


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
