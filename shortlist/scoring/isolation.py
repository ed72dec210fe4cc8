"""Kernel boundaries around scoring processes: namespaces, identity, capabilities, limits.

Each function applies one layer and says whether it took, so a machine that refuses a layer
(a Docker container's default seccomp profile refuses unshare; a non-root user has nothing to
drop) still scores, and the record says what held. Python's os module lacks unshare, setns,
mount, capset and most of prctl before 3.12, hence ctypes, all of it here.

Who may make a PID namespace for each answer: a process with CAP_SYS_ADMIN in the user namespace
that owns its own PID namespace, since after unshare(CLONE_NEWPID) and fork() it must setns() back
into that namespace for the next child. Root has it everywhere. A non-root user gets it only in a
PID namespace created inside a user namespace of its own, hence enter_namespaces(): the server
unshares both and forks once, its child being process 1 there, and every zygote and answer
descends from that child.
"""
from __future__ import annotations

import ctypes
import fcntl
import functools
import os
import resource
import signal

from shortlist.libc import libc
from shortlist.process import die_with_parent  # noqa: F401  the scorer's processes die with their parent too

UNPRIVILEGED = 65534  # nobody/nogroup: where the project runs as root, answers run as this uid and gid

_CLONE_NEWNS, _CLONE_NEWIPC = 0x00020000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
_NS_GET_USERNS = 0xB701  # ioctl on a namespace file: the user namespace that owns it
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP = 1, 4, 24
_PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
_PR_SET_CHILD_SUBREAPER = 36
_SYS_CAPSET = 126  # x86-64; elsewhere capset() fails and the capability check below reports it


@functools.cache
def last_cap() -> int:
    """The highest capability number this kernel knows (drop_privileges drops 0 to it). Read from /proc,
    so read it in the parent, before the sandbox closes: the zygote reads it once, before it forks an
    answer process, and hands it to drop_privileges (an answer process may no longer reach /proc's files)."""
    with open("/proc/sys/kernel/cap_last_cap") as f:
        return int(f.read())


@functools.cache
def _page_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE")


def _prctl(option: int, arg: int = 0) -> bool:
    return libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) == 0


def enter_namespaces() -> dict:
    """The scoring server's namespaces, each tried on its own: a network namespace (no interface)
    and a PID namespace whose process 1 the caller becomes by forking once. A non-root user first
    makes a user namespace that maps only its own uid (the kernel's view of every file and process
    is unchanged, and inside it is the same uid, not 0), which gives it the right to the others.
    Must run single-threaded."""
    held = "root"
    if os.geteuid() != 0:
        uid, gid = os.geteuid(), os.getegid()
        if libc.unshare(_CLONE_NEWUSER) != 0:
            return {"namespaces_held_by": "none", "network_namespace": False, "pid_namespace": False}
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
        held = "user namespace"
    net, pid = libc.unshare(_CLONE_NEWNET) == 0, libc.unshare(_CLONE_NEWPID) == 0
    return {"namespaces_held_by": held if net or pid else "none", "network_namespace": net, "pid_namespace": pid}


class PidNamespaces:
    """fork() whose child is process 1 of a new PID namespace: when it dies, the kernel kills every
    process it started, wherever they went. Where that cannot hold, children lead a process group
    instead, under this process as subreaper, so orphans come back here to be killed.

    Probed before it is relied on: unshare(CLONE_NEWPID) is tried only where setns() back into this
    process's own namespace will be allowed (its owner is this process's user namespace), so a
    refusal can never leave every later child in the first one's namespace (as a non-root user it
    did: every answer after the first scored 0.0)."""

    def __init__(self, wanted: bool = True):
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        self._own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        self.available = wanted and _owned_here(self._own) and libc.unshare(_CLONE_NEWPID) == 0
        if self.available:
            self._back()

    def fork(self) -> int:
        if self.available and libc.unshare(_CLONE_NEWPID) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWPID)")
        pid = os.fork()
        if pid and self.available:
            self._back()  # the next child starts from here again
        return pid

    def _back(self) -> None:
        if libc.setns(self._own, _CLONE_NEWPID) != 0:  # the probe above makes this a bug, never a fallback
            raise OSError(ctypes.get_errno(), "setns() back into this process's own PID namespace")


def _owned_here(namespace_fd: int) -> bool:
    """Whether a namespace is owned by this process's own user namespace."""
    try:
        owner = fcntl.ioctl(namespace_fd, _NS_GET_USERNS)
    except OSError:
        return False
    try:
        return os.fstat(owner).st_ino == os.stat("/proc/self/ns/user").st_ino
    finally:
        os.close(owner)


def own_ipc() -> bool:
    """An IPC namespace of its own: SysV shared memory, semaphores, message queues and POSIX
    message queues made in it die with it."""
    return libc.unshare(_CLONE_NEWIPC) == 0


def scratch_tmpfs(home: str, megabytes: int, owner: int | None) -> bool:
    """Mount a tmpfs of this size on home, in a mount namespace of this process's own whose mounts
    propagate nowhere: everything written beneath home counts against it, nobody else sees it, and it
    is gone when the process dies."""
    if libc.unshare(_CLONE_NEWNS) != 0 or libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return False
    options = f"size={megabytes}m,nr_inodes=4096,mode=0700" + (f",uid={owner},gid={owner}" if owner is not None else "")
    return libc.mount(b"tmpfs", home.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options.encode()) == 0


def kill_tree(pid: int) -> None:
    """SIGKILL a child and what it started (its PID namespace dies with it; else its group)."""
    _signal_tree(pid, signal.SIGKILL)


def stop_tree(pid: int) -> None:
    """SIGSTOP a child and its group: it runs nothing more, and costs nothing until killed."""
    _signal_tree(pid, signal.SIGSTOP)


def _signal_tree(pid: int, sig: int) -> None:
    for send in (os.killpg, os.kill):
        try:
            send(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def resident_mb(pid: int) -> float:
    """Resident memory of a process, from the kernel (a process's own claims are not trusted)."""
    try:
        fd = os.open(f"/proc/{pid}/statm", os.O_RDONLY)
        try:
            return int(os.read(fd, 256).split()[1]) * _page_bytes() / 2**20
        finally:
            os.close(fd)
    except (OSError, ValueError, IndexError):
        return float("inf")


REROUTED_MAX = 32  # descriptors reroute() may hold open (an answer's RLIMIT_NOFILE is 64)


def reroute(uid: int = UNPRIVILEGED) -> int:
    """Before becoming uid: each sys.path entry, and each loaded package's folder, that uid cannot
    reach (a 0700 folder above it: the interpreter under /root, as pyenv or a CI's setup puts it)
    reached instead through a descriptor opened now, while root: /proc/self/fd/N. Without it an
    answer imported nothing its scorer had not imported before the fork (`import mmap` failed).
    Landlock still judges each file by where it really lies. Returns the folders rerouted."""
    opened: dict[str, str] = {}  # a folder -> its /proc/self/fd path

    def via(path):
        if not isinstance(path, str) or not os.path.isabs(path):
            return path
        for folder, proc in opened.items():
            if path == folder or path.startswith(folder + "/"):
                return proc + path[len(folder):]
        if _reachable(path, uid) or not os.path.isdir(path) or len(opened) >= REROUTED_MAX:
            return path
        opened[path] = f"/proc/self/fd/{os.open(path, os.O_PATH | os.O_DIRECTORY)}"
        return opened[path]
    import sys
    sys.path[:] = [via(p) for p in sys.path]
    for module in list(sys.modules.values()):
        folders = getattr(module, "__path__", None)
        if isinstance(folders, list):  # a namespace package's _NamespacePath follows sys.path itself
            folders[:] = [via(p) for p in folders]
    return len(opened)


def _reachable(path: str, uid: int) -> bool:
    """Whether uid (with gid UNPRIVILEGED, no groups) may search every folder down to path, by the mode bits."""
    parts = os.path.realpath(path).split("/")[1:]
    for i in range(len(parts) + 1):
        try:
            st = os.stat("/" + "/".join(parts[:i]))
        except OSError:
            return True  # not there: nothing to reroute
        bit = 0o100 if st.st_uid == uid else 0o010 if st.st_gid == UNPRIVILEGED else 0o001
        if not st.st_mode & bit:
            return False
    return True


def drop_privileges(real_root: bool, last_cap: int) -> str:
    """No capabilities in any set (0 to `last_cap`: last_cap(), read by the parent before it forked this
    process), and, where this is the machine's root, uid and gid nobody with no groups. Returns who the
    process now is, e.g. '65534:65534' or '1000:1000'."""
    for cap in range(last_cap + 1):
        _prctl(_PR_CAPBSET_DROP, cap)  # no later exec can bring any back
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if real_root:
        try:
            os.setgroups([])
            os.setresgid(UNPRIVILEGED, UNPRIVILEGED, UNPRIVILEGED)
            os.setresuid(UNPRIVILEGED, UNPRIVILEGED, UNPRIVILEGED)  # the kernel clears every capability
        except OSError:  # a container without CAP_SETUID: the uid stays, and the record says so
            pass
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    libc.syscall(_SYS_CAPSET, header, (ctypes.c_uint32 * 6)())  # inside a user namespace: drop them here
    return f"{_outside('uid_map', os.getuid())}:{_outside('gid_map', os.getgid())}"


def _outside(table: str, inside: int) -> int:
    """The machine's id for an id of this process's user namespace."""
    with open(f"/proc/self/{table}") as f:
        first, outside, _ = map(int, f.readline().split())
    return outside + inside - first


def real_root() -> bool:
    """uid 0 of the machine, not a uid 0 that a user namespace maps to an ordinary user."""
    with open("/proc/self/uid_map") as f:
        return os.geteuid() == 0 and f.read().split()[:2] == ["0", "0"]


def capabilities() -> int:
    """The effective capability mask, as the kernel reports it."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))


def not_dumpable() -> bool:
    """Nobody without CAP_SYS_PTRACE can ptrace this process or open its /proc files."""
    return _prctl(_PR_SET_DUMPABLE, 0)


def no_new_privs() -> bool:
    return _prctl(_PR_SET_NO_NEW_PRIVS, 1)


def limit(limits: dict[str, int]) -> list[str]:
    """Set each RLIMIT_<name> (soft = hard: no raising it back); returns the names that took."""
    took = []
    for name, value in limits.items():
        try:
            resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), (value, value))
            took.append(name)
        except (ValueError, OSError):
            pass
    return sorted(took)
