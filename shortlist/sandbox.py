"""The process that runs Reasoning Gym scorers on a model's answers, and what confines it.

Nine scorers hand the answer to eval() or to sympy's parse_expr (which ends in eval), so an
answer is code. serve() runs in a worker process that scoring.Scorer kills on a deadline;
before it reads the first answer, confine() applies every layer the machine offers and reports
which ones took:
- environment: emptied (no inherited tokens or keys); HOME, TMPDIR and the working directory are
  a scratch directory of its own;
- resource limits: address space, CPU seconds, file size, open files, processes, no core files;
- Landlock (Linux >= 5.13): writes only beneath the scratch directory (and to /dev/null); TCP bind
  and connect refused (ABI >= 4); signals to processes outside the sandbox refused (ABI >= 6);
- a network namespace of its own: no interface but a loopback that is down;
- no_new_privs, and death with the parent;
- a Python audit hook: refuses process creation, sockets, ctypes, signals, and file writes
  outside the scratch directory, in every scorer, whatever the kernel allows.
Replies are JSON, never pickle, so a subverted worker cannot run code in the parent.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys

os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")  # stay single-threaded: unshare() needs it

import reasoning_gym  # noqa: E402  imported here so a forkserver preloads it once for every worker

_libc = ctypes.CDLL(None, use_errno=True)
_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446  # same on every arch
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS = 1, 38
_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000

# Landlock file-system rights that change something (reading and executing stay allowed everywhere)
_LL_WRITE_FILE, _LL_TRUNCATE = 1 << 1, 1 << 14
_LL_CHANGES_V1 = sum(1 << b for b in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12))  # write, remove, make anything
_LL_REFER = 1 << 13


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _landlock(scratch: str) -> int | None:
    """Allow writes only beneath scratch; returns the Landlock ABI applied, or None."""
    abi = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, 0, 1)
    if abi < 1:
        return None
    fs = _LL_CHANGES_V1 | (_LL_REFER if abi >= 2 else 0) | (_LL_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(fs, 0b11 if abi >= 4 else 0, 0b11 if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        return None
    try:
        for path, rights in ((scratch, fs), ("/dev/null", _LL_WRITE_FILE | (_LL_TRUNCATE if abi >= 3 else 0))):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneathAttr(rights, fd)
                if _libc.syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0) != 0:
                    return None
            finally:
                os.close(fd)
        return abi if _libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) == 0 else None
    finally:
        os.close(ruleset)


def _own_network_namespace() -> bool:
    return _libc.unshare(_CLONE_NEWNET) == 0 or _libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0


def _limit(kind: int, value: int) -> bool:
    try:
        resource.setrlimit(kind, (value, value))
        return True
    except (ValueError, OSError):
        return False


# --- the audit hook -------------------------------------------------------------------------------
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
refused = 0  # operations refused since the last reply


def _inside(path, scratch: str) -> bool:
    if isinstance(path, int):
        return False
    real = os.path.realpath(os.fsdecode(path))
    return real == "/dev/null" or real == scratch or real.startswith(scratch + os.sep)


def _audit_hook(scratch: str):
    def hook(event: str, args: tuple) -> None:
        global refused
        if event in _REFUSED_EVENTS or event.startswith(_REFUSED_PREFIXES):
            bad = True
        elif event == "open":
            path, mode, flags = (tuple(args) + (None, None))[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & _WRITE_FLAGS)
            bad = writing and not _inside(path, scratch)
        elif event in _PATH_EVENTS:
            bad = not all(_inside(a, scratch) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike)))
        else:
            return
        if bad:
            refused += 1
            raise PermissionError(f"{event} is refused in the scorer sandbox")
    return hook


def confine(scratch: str, memory_mb: int, cpu_seconds: int) -> dict:
    """Apply every layer this machine offers; returns which ones took."""
    scratch = os.path.realpath(scratch)
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    os.environ.clear()
    os.environ.update(PATH="/usr/bin:/bin", HOME=scratch, TMPDIR=scratch, LANG="C.UTF-8",
                      OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    os.chdir(scratch)
    quiet = os.open(os.devnull, os.O_WRONLY)  # a scorer that prints must not flood the caller's output
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    os.close(quiet)
    status = {"environment": "emptied", "network_namespace": _own_network_namespace()}
    limits = {resource.RLIMIT_AS: memory_mb << 20, resource.RLIMIT_CPU: cpu_seconds,
              resource.RLIMIT_FSIZE: 64 << 20, resource.RLIMIT_NOFILE: 64, resource.RLIMIT_CORE: 0,
              resource.RLIMIT_NPROC: 0}  # NPROC binds everyone but root; the audit hook covers root
    status["rlimits"] = sorted(name for name in ("AS", "CPU", "FSIZE", "NOFILE", "CORE", "NPROC")
                               if _limit(getattr(resource, f"RLIMIT_{name}"), limits[getattr(resource, f"RLIMIT_{name}")]))
    status["no_new_privs"] = _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
    status["landlock_abi"] = _landlock(scratch) if status["no_new_privs"] else None
    sys.addaudithook(_audit_hook(scratch))
    status["audit_hook"] = True
    return status


def _score(cache: dict, request: dict) -> float:
    key = (request["key"], request["seed"])
    if key not in cache:
        if len(cache) > 4096:
            cache.clear()
        dataset = reasoning_gym.create_dataset(request["name"], seed=request["seed"], size=1, **request["config"])
        cache[key] = (dataset, dataset[0])
    dataset, entry = cache[key]
    answer = entry["answer"] if request.get("warm") else request["answer"]
    return float(dataset.score_answer(answer=answer, entry=entry))


def serve(conn, scratch: str, memory_mb: int, cpu_seconds: int) -> None:
    """Worker main loop: a JSON request in, a JSON reply out, until the pipe closes."""
    global refused
    conn.send_bytes(json.dumps(confine(scratch, memory_mb, cpu_seconds)).encode())
    cache: dict = {}
    while True:
        try:
            request = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        refused = 0
        try:
            reply = {"score": _score(cache, request)}
        except BaseException as e:  # noqa: BLE001  SystemExit and KeyboardInterrupt too: the answer raised them
            reply = {"error": type(e).__name__}
        reply["refused"] = refused
        try:
            conn.send_bytes(json.dumps(reply).encode())
        except (EOFError, OSError):
            return
