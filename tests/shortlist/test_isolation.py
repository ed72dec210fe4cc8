"""The contracts of the kernel layers, each in a forked child that reports what the kernel did:
isolation.py (PID namespaces, privileges), landlock.py, syscalls.py, hugepages.py."""
import json
import os
import socket
import threading
import time

import pytest

from shortlist.scoring import hugepages
from shortlist.scoring import isolation
from shortlist.scoring import landlock
from shortlist.scoring import syscalls


def in_child(body, *, pids=None) -> dict:
    """Run body() in a forked child (in its own PID namespace with pids) and return its dict."""
    r, w = os.pipe()
    pid = pids.fork() if pids else os.fork()
    if pid == 0:
        try:
            os.write(w, json.dumps(body()).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = os.read(r, 1 << 16)
    os.waitpid(pid, 0)
    return json.loads(data)


def attempt(action) -> str:
    try:
        action()
        return "done"
    except OSError as e:
        return type(e).__name__


def test_the_answer_filter_refuses_processes_sockets_and_devices_but_not_threads(tmp_path):
    program = syscalls.build(syscalls.ANSWER)
    if program is None:
        pytest.skip("libseccomp (pyseccomp) is not available")

    def body():
        assert syscalls.load(program)
        thread = threading.Thread(target=time.sleep, args=(0.01,))
        thread.start()
        thread.join()
        return {"fork": attempt(os.fork), "socket": attempt(socket.socket),
                "mknod": attempt(lambda: os.mknod(str(tmp_path / "null"), 0o600 | 0o020000, os.makedev(1, 3))),
                "kill": attempt(lambda: os.kill(os.getppid(), 0)), "thread": "done"}
    assert in_child(body) == {"fork": "PermissionError", "socket": "PermissionError", "mknod": "PermissionError",
                              "kill": "PermissionError", "thread": "done"}


def test_the_zygote_filter_still_lets_it_fork():
    program = syscalls.build(syscalls.KERNEL)
    if program is None:
        pytest.skip("libseccomp (pyseccomp) is not available")

    def body():
        assert syscalls.load(program)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        return {"fork": "done", "socket": attempt(socket.socket)}
    assert in_child(body) == {"fork": "done", "socket": "PermissionError"}


def test_landlock_allows_writes_only_beneath_its_directory(tmp_path):
    if landlock.abi() < 1:
        pytest.skip("no Landlock here")
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()

    def body():
        abi = landlock.restrict(str(inside))
        return {"abi": abi, "inside": attempt(lambda: open(inside / "x", "w").close()),
                "outside": attempt(lambda: open(outside, "w").close())}
    got = in_child(body)
    assert got["abi"] >= 1 and got["inside"] == "done" and got["outside"] == "PermissionError"
    assert not outside.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to nobody needs root")
def test_dropped_privileges_bind_the_process_limit_and_leave_no_capability():
    def body():
        who = isolation.drop_privileges(isolation.real_root())
        isolation.limit({"NPROC": 0})
        return {"who": who, "caps": isolation.capabilities(), "fork": attempt(os.fork)}
    assert in_child(body) == {"who": "65534:65534", "caps": 0, "fork": "BlockingIOError"}


def test_killing_process_1_of_a_pid_namespace_kills_what_it_started():
    def body():  # in a child: PidNamespaces makes its process a subreaper, which pytest should not become
        pids = isolation.PidNamespaces()
        if not pids.available:
            return {"skip": True}
        r, w = os.pipe()
        child = pids.fork()
        if child == 0:
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            os.write(w, str(os.getpid()).encode())
            time.sleep(60)
            os._exit(0)
        inner = int(os.read(r, 100))
        grandchildren = [p for p in os.listdir("/proc") if p.isdigit() and _parent(p) == child]
        isolation.kill_tree(child)
        os.waitpid(child, 0)
        deadline = time.monotonic() + 3
        while any(_state(p) not in ("Z", "gone") for p in grandchildren) and time.monotonic() < deadline:
            time.sleep(0.02)
        return {"inner": inner, "grandchildren": len(grandchildren), "left": [_state(p) for p in grandchildren]}
    got = in_child(body)
    if got.get("skip"):
        pytest.skip("PID namespaces are refused here")
    assert got["inner"] == 1 and got["grandchildren"] == 1 and got["left"] in (["gone"], ["Z"])


def _parent(pid: str) -> int:
    try:
        return int(next(line for line in open(f"/proc/{pid}/status") if line.startswith("PPid:")).split()[1])
    except (OSError, StopIteration):
        return -1


def _state(pid: str) -> str:
    try:
        return next(line for line in open(f"/proc/{pid}/status") if line.startswith("State:")).split()[1]
    except (OSError, StopIteration):
        return "gone"


def test_collapse_puts_a_heap_on_huge_pages_where_the_kernel_can():
    block = bytearray(16 << 20)  # a populated heap region of its own, several 2 MiB pages wide
    for i in range(0, len(block), 4096):
        block[i] = 1

    def body():
        return {"mb": hugepages.collapse(), "huge_kb": int(next(
            line for line in open("/proc/self/smaps_rollup") if line.startswith("AnonHugePages:")).split()[1])}
    got = in_child(body)
    if got["mb"] == 0:
        pytest.skip("this kernel collapses nothing (THP off, or Linux < 6.1)")
    assert got["huge_kb"] >= 8 << 10
