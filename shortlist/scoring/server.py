"""The scoring server: a process of its own that forks a zygote per family (zygote.py).

scorer.Scorer starts it with subprocess (`python -c BOOT`), not through multiprocessing: its
environment is zygote.ENVIRONMENT from the start (PYTHONHASHSEED=0, single-threaded BLAS, no
secret: it is every answer's /proc/self/environ), nothing of the caller's __main__ is re-run, and
the caller's own os.environ is never touched. The caller's sys.path comes as an argument, so the
server imports what the caller would.

    S0  the process the Scorer starts: enters a network and a PID namespace (as a non-root user
        inside a user namespace of its own, isolation.enter_namespaces), forks once, waits.
    S1  process 1 of that PID namespace: imports the zygote and the default source, probes the
        layers in a zygote that forks one answer process (the plan, sent to the Scorer as the confinement), then serves
        the Scorer's control socket: {"start": ...} with the zygote's end of a socket pair, and
        {"kill": id}.
    Z   a zygote, forked by S1 as process 1 of a PID namespace of its own; the Scorer talks to it
        directly over that socket pair.

Everything dies with S1: the kernel kills every process of a PID namespace when its process 1 dies,
nested ones included. S1 dies when the control socket closes (the Scorer closed, or died) or when S0
is killed (PR_SET_PDEATHSIG). Where unshare is refused (a Docker container's default seccomp
profile), S0 serves itself, zygotes and answers are process groups under a subreaper, and each dies
with its parent (PR_SET_PDEATHSIG).
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys

from shortlist.scoring import isolation

# what the Scorer runs: the caller's sys.path, then this module
BOOT = "import sys, json; sys.path[:] = json.loads(sys.argv[1]); from shortlist.scoring import server; server.main()"
MESSAGE_LIMIT = 1 << 20


def main() -> None:
    """argv: the caller's sys.path (JSON), the control socket's fd, the caller's pid, the scratch
    directory, the limits (JSON)."""
    control = socket.socket(fileno=int(sys.argv[2]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle: it closes the Scorer
    if not isolation.die_with_parent(int(sys.argv[3])):
        return
    layers = isolation.enter_namespaces()  # first: it needs one thread, and imports may start some
    if layers.pop("pid_namespace") and os.fork():
        control.close()
        os.wait()  # S0: until S1 exits, or this process is killed (and S1 with it)
        return
    isolation.die_with_parent()  # S1 (or S0 itself where no PID namespace was allowed)
    from shortlist.scoring import zygote  # noqa: PLC0415  after the namespaces: imports may start threads
    from shortlist.sources import source as source_  # noqa: PLC0415
    source_.get().preload()
    server = Server(control, sys.argv[4], zygote.Limits(**json.loads(sys.argv[5])), layers)
    try:
        server.plan = server.probe()
    except Exception as e:  # noqa: BLE001  the Scorer raises it, in one line
        control.send(json.dumps({"fatal": f"{type(e).__name__}: {e}"}).encode())
        return
    control.send(json.dumps({"confinement": server.plan}).encode())
    server.serve()
    os._exit(0)  # no teardown of the interpreter: the kernel ends the namespace and everything in it


class Server:
    def __init__(self, control: socket.socket, scratch: str, limits, layers: dict):
        from shortlist.scoring import zygote  # noqa: PLC0415
        self.zygote, self.control, self.scratch, self.limits = zygote, control, scratch, limits
        self.pids = isolation.PidNamespaces()  # each zygote process 1 of a PID namespace of its own
        self.children: dict[int, int] = {}  # zygote id -> pid
        self.layers = {"environment": "emptied", "hash_seed": 0 if sys.flags.hash_randomization == 0 else "random",
                       **layers}
        self.plan: dict | None = None

    def probe(self) -> dict:
        """The layers that hold here, from a zygote that applies every one it can to one answer
        process: the plan every later answer process must hold, and the recorded confinement."""
        ours, theirs = socket.socketpair()
        pid = self.fork(theirs.detach(), None, None, {})
        conn = self.zygote.Connection(ours.detach())
        try:
            message = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            message = {"fatal": "the probing zygote died"}
        finally:
            conn.close()
        os.waitpid(pid, 0)
        if "confinement" not in message:
            raise RuntimeError(f"probing the scoring sandbox failed: {message.get('fatal')}")
        return {**self.layers, **message["confinement"]}

    def serve(self) -> None:
        while True:
            readable, _, _ = select.select([self.control], [], [], 1.0)
            self.reap()
            if not readable:
                continue
            try:
                data, fds, _, _ = socket.recv_fds(self.control, MESSAGE_LIMIT, 1)
            except OSError:
                return
            if not data:
                return  # the Scorer closed its end, or died: the namespace and all in it go with this process
            message = json.loads(data)
            if "start" in message and fds:
                start = message["start"]
                self.children[start["id"]] = self.fork(fds.pop(), start["source"], start["name"], start["config"])
            elif message.get("kill") in self.children:
                try:
                    os.kill(self.children.pop(message["kill"]), signal.SIGKILL)  # its answers die with its namespace
                except ProcessLookupError:
                    pass
            for fd in fds:
                os.close(fd)

    def fork(self, fd: int, source, name, config: dict) -> int:
        """A zygote serving connection fd (closed here once it has its own copy)."""
        parent = os.getpid()
        pid = self.pids.fork()
        if pid == 0:
            try:
                self.control.close()  # the Scorer's socket is this process's alone
                if isolation.die_with_parent(parent):
                    self.zygote.run(fd, source, name, config, self.scratch, self.limits, self.plan)
            finally:
                os._exit(0)  # never back into the server's loop
        os.close(fd)
        return pid

    def reap(self) -> None:
        """Collect zygotes that died (this process is process 1 of their namespace, or their subreaper)."""
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.children = {k: v for k, v in self.children.items() if v != pid}
