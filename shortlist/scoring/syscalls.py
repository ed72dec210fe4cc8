"""A seccomp filter: the kernel refuses system calls a scorer never needs, whatever Python does.

Built with libseccomp through pyseccomp (a ctypes binding with libseccomp's own Python API), not
hand-written BPF. It is a deny list, so the interpreter and the scorers' libraries keep working
across versions; refused calls fail with EPERM (a scorer sees a PermissionError, scores 0.0).
Calls of another ABI (i386, x32) are killed by libseccomp's architecture check.

Two filters, stacked: the zygote installs KERNEL (it must still fork, kill, unshare and drop
privileges for its children, which mount their scratch); every answer process adds ANSWER on top.
libseccomp compiles a filter in ~2 ms, so the zygote compiles once (libseccomp's own BPF export)
and each child hands the program to the kernel with one prctl().
"""
from __future__ import annotations

import ctypes
import errno
import os

from shortlist.libc import libc

# facilities no scoring process uses: new programs, the network, devices, other processes'
# memory, mounts (bar mount() itself, which an answer process needs for its scratch tmpfs before it
# adds ANSWER), kernel extensions, io_uring (whose operations seccomp cannot see), SysV IPC and
# POSIX message queues (which would outlive an answer where it has no IPC namespace of its own)
KERNEL = ("execve", "execveat", "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
          "mknod", "mknodat", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
          "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsmount", "fspick",
          "fsconfig", "mount_setattr", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
          "io_uring_enter", "io_uring_register", "kexec_load", "kexec_file_load", "init_module",
          "finit_module", "delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl", "syslog",
          "add_key", "request_key", "keyctl", "open_by_handle_at", "name_to_handle_at", "settimeofday",
          "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname", "iopl", "ioperm",
          "vhangup", "shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semtimedop", "semctl", "msgget",
          "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify",
          "mq_getsetattr")
# what an answer must not do to the rest of the run: make processes (threads stay allowed), signal,
# change identity or namespace, mount (over its scratch tmpfs), hold memory no rlimit counts
# (memfd_create: pages written to it count against no address space), or make itself debuggable again
ANSWER = KERNEL + ("mount", "memfd_create", "fork", "vfork", "kill", "tkill", "tgkill", "rt_sigqueueinfo",
                   "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal", "unshare", "setns", "setuid",
                   "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "setfsuid",
                   "setfsgid", "capset", "setsid", "setpgid")
_CLONE_THREAD = 0x10000
_PR_SET_DUMPABLE, _PR_SET_PTRACER, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP = 4, 0x59616D61, 38, 22
_SECCOMP_MODE_FILTER = 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _Fd:
    def __init__(self, fd: int):
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

try:
    import pyseccomp as _seccomp
except (ImportError, OSError, AttributeError):  # the package, or libseccomp.so.2, is missing
    _seccomp = None


def build(names: tuple[str, ...]) -> bytes | None:
    """The BPF program of a filter refusing these calls (and, for ANSWER, process clones and
    prctl's dumpable and ptracer), compiled by libseccomp; None where libseccomp is unavailable."""
    if _seccomp is None:
        return None
    refuse = _seccomp.ERRNO(errno.EPERM)
    f = _seccomp.SyscallFilter(_seccomp.ALLOW)
    for name in names:
        try:
            f.add_rule(refuse, name)
        except (OSError, ValueError, RuntimeError):  # a call this libseccomp does not know yet
            pass
    if "fork" in names:
        f.add_rule(refuse, "clone", _seccomp.Arg(0, _seccomp.MASKED_EQ, _CLONE_THREAD, 0))  # a process, not a thread
        f.add_rule(_seccomp.ERRNO(errno.ENOSYS), "clone3")  # flags sit behind a pointer: glibc falls back to clone
        for option in (_PR_SET_DUMPABLE, _PR_SET_PTRACER):
            f.add_rule(refuse, "prctl", _seccomp.Arg(0, _seccomp.EQ, option))
    r, w = os.pipe()  # a program is a few KiB, well under a pipe's buffer
    try:
        f.export_bpf(_Fd(w))
        os.close(w)
        w = -1
        chunks = []
        while chunk := os.read(r, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def load(program: bytes | None) -> bool:
    """Install a compiled filter in this process, after no_new_privs; False where refused."""
    if not program:
        return False
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))  # 8 bytes per instruction
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0
