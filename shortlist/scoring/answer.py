"""An answer's own process, forked from its family's zygote (zygote.py): it confines itself in every
layer the plan names (in the order the kernel needs them), reports which took, then reads one
answer, scores it and replies. A Python audit hook counts what a scorer attempts (a convenience for
the counts, not a boundary)."""
from __future__ import annotations

import json
import os
import pickle
import signal
import sys

from shortlist import process
from shortlist.scoring import isolation, landlock, syscalls


refused = False  # set by the audit hook while an answer is scored: said in its reply


# --- an answer process ------------------------------------------------------------------------------
def answer_process(zygote, job_r: int, reply_w: int, home: str) -> None:
    """The forked child of `zygote` (zygote.Zygote, which this module does not import: it imports this one)."""
    global refused
    layers = _confine(zygote, job_r, reply_w, home)
    os.write(reply_w, json.dumps(layers).encode())
    if zygote.scorer is None:
        return
    try:
        score(zygote.scorer, zygote.warm, zygote.warm["answer"])  # touch what scoring touches, before the clock
    except Exception:  # noqa: BLE001
        pass
    chunks = []
    while chunk := os.read(job_r, 1 << 20):
        chunks.append(chunk)
    job = b"".join(chunks)
    if not job:
        return  # the zygote went away
    size = int.from_bytes(job[:8], "little")
    entry, answer = pickle.loads(job[8:8 + size]), job[8 + size:].decode("utf-8", "surrogatepass")
    refused = False
    try:
        reply = {"score": score(zygote.scorer, entry, answer)}
    except BaseException as e:  # noqa: BLE001  SystemExit and KeyboardInterrupt too: the answer raised them
        reply = {"error": type(e).__name__}
    reply["refused"] = refused
    os.write(reply_w, json.dumps(reply).encode())
    while True:  # the zygote kills it when the batch ends: exiting now would tear down memory mid-batch
        signal.pause()


def _confine(zygote, job_r: int, reply_w: int, home: str) -> dict:
    """Every layer, in the order the kernel needs them; returns which took. Where the zygote holds a
    plan, only the layers it names are tried, and the zygote checks that each of them took."""
    plan = zygote.plan or {}
    os.setsid()  # a process group of its own, for machines without PID namespaces
    process.to_devnull(0, 1, 2)
    low = 3
    for fd in sorted((job_r, reply_w)):  # the zygote's connection and every sibling's pipes: closed
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)
    try:
        with open("/proc/self/oom_score_adj", "w") as f:  # a memory bomb is what the OOM killer takes first
            f.write("1000")
    except OSError:
        pass
    layers = {"answer_process": "one per answer",
              "process_tree": "pid_namespace" if os.getpid() == 1 else "process_group"}
    layers["ipc_namespace"] = plan.get("ipc_namespace", True) and isolation.own_ipc()
    tmpfs = f"tmpfs {zygote.limits.scratch_mb} MiB"
    mounted = plan.get("scratch", tmpfs) == tmpfs and isolation.scratch_tmpfs(
        home, zygote.limits.scratch_mb, isolation.UNPRIVILEGED if zygote.root else None)
    layers["scratch"] = tmpfs if mounted else "none: files cannot grow"  # RLIMIT_FSIZE 0 below, read-only to Landlock
    os.chdir(home)
    os.environ.update(HOME=home, TMPDIR=home)
    rules = landlock.ruleset(zygote.readable, home, writable=mounted)  # while it may still open every path
    if zygote.root:  # nobody may not reach the interpreter's folders: imports go through descriptors opened here
        isolation.reroute()
    layers["user"] = isolation.drop_privileges(zygote.root, zygote.last_cap)
    layers["capabilities"] = isolation.capabilities()
    layers["dumpable"] = not isolation.not_dumpable()
    isolation.die_with_parent()  # after the uid change, which clears it
    layers["no_new_privs"] = isolation.no_new_privs()
    layers["rlimits"] = isolation.limit({"AS": zygote.limits.memory_mb << 20, "CPU": zygote.limits.cpu_seconds,
                                         "FSIZE": zygote.limits.scratch_mb << 20 if mounted else 0,
                                         "NOFILE": zygote.limits.open_files, "CORE": 0, "NPROC": 0})
    layers["landlock_abi"] = landlock.restrict(rules)
    layers["seccomp"] = syscalls.load(zygote.answer_filter)
    sys.dont_write_bytecode = True  # a lazy import writes no .pyc (Python ignores SIGXFSZ: the write fails)
    sys.addaudithook(_audit_hook(home))
    layers["audit_hook"] = True
    return layers


def score(scorer, entry: dict, answer) -> float:
    return float(scorer(answer, entry))


# --- the audit hook: counts what a scorer attempts (a convenience, not a boundary) ----------------
_REFUSED_EVENTS = {"os.system", "os.posix_spawn", "os.fork", "os.forkpty", "os.kill", "os.killpg",
                   "signal.pthread_kill", "subprocess.Popen", "pty.spawn", "socket.__new__",
                   "socket.connect", "socket.bind", "socket.getaddrinfo", "ctypes.dlopen", "ctypes.dlsym",
                   "ctypes.call_function", "ctypes.cdata", "os.setuid", "os.chroot", "webbrowser.open",
                   "sys.remote_exec"}
_REFUSED_PREFIXES = ("os.exec", "os.spawn")
_PATH_EVENTS = {"os.remove", "os.rmdir", "os.mkdir", "os.rename", "os.symlink", "os.link", "os.chmod",
                "os.chown", "os.truncate", "os.utime", "shutil.rmtree", "shutil.copyfile", "shutil.move",
                "shutil.copytree", "os.mkfifo", "os.mknod"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
refused = False  # whether the hook refused an operation while scoring this answer


def _inside(path, home: str) -> bool:
    if isinstance(path, int):
        return False
    real = os.path.realpath(os.fsdecode(path))
    return real == "/dev/null" or real == home or real.startswith(home + os.sep)


def _audit_hook(home: str):
    def hook(event: str, args: tuple) -> None:
        global refused
        if event in _REFUSED_EVENTS or event.startswith(_REFUSED_PREFIXES):
            bad = True
        elif event == "open":
            path, mode, flags = (tuple(args) + (None, None))[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & _WRITE_FLAGS)
            bad = writing and not _inside(path, home)
        elif event in _PATH_EVENTS:
            bad = not all(_inside(a, home) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike)))
        else:
            return
        if bad:
            refused = True
            raise PermissionError(f"{event} is refused in the scorer sandbox")
    return hook
