"""Landlock (Linux >= 5.13) through its three system calls: the kernel refuses writes outside one
directory, TCP bind/connect (ABI >= 4), and signals or abstract sockets that leave the domain
(ABI >= 6). Reading and executing stay allowed everywhere: the interpreter must read its modules.

A hack in one place: Python has no Landlock binding in the standard library, so this is ctypes,
and `ruleset()` returns None wherever the kernel (or a container's seccomp profile) refuses it.
"""
from __future__ import annotations

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same numbers on every architecture
_VERSION = 1  # landlock_create_ruleset flag: return the ABI version
_RULE_PATH_BENEATH = 1
_WRITE_FILE, _REFER, _TRUNCATE = 1 << 1, 1 << 13, 1 << 14
_CHANGES_V1 = sum(1 << b for b in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12))  # write, remove, make anything


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is absent or refused."""
    return max(0, _libc.syscall(_CREATE_RULESET, None, 0, _VERSION))


def ruleset(writable: str) -> int | None:
    """A ruleset fd that allows changes only beneath `writable` (and writing /dev/null)."""
    version = abi()
    if version < 1:
        return None
    fs = _CHANGES_V1 | (_REFER if version >= 2 else 0) | (_TRUNCATE if version >= 3 else 0)
    attr = _RulesetAttr(fs, 0b11 if version >= 4 else 0, 0b11 if version >= 6 else 0)
    fd = _libc.syscall(_CREATE_RULESET, ctypes.byref(attr), 8 if version < 4 else 16 if version < 6 else 24, 0)
    if fd < 0:
        return None
    for path, rights in ((writable, fs), ("/dev/null", _WRITE_FILE | (_TRUNCATE if version >= 3 else 0))):
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
        try:
            if _libc.syscall(_ADD_RULE, fd, _RULE_PATH_BENEATH, ctypes.byref(_PathBeneathAttr(rights, target)), 0):
                os.close(fd)
                return None
        finally:
            os.close(target)
    return fd


def restrict(writable: str) -> int | None:
    """Confine this process (and its future children) to `writable`; returns the ABI applied.

    Needs no_new_privs (or CAP_SYS_ADMIN). Domains nest: a process restricted twice is bound by
    both, and scoped signals then cannot reach the outer domain's other processes.
    """
    fd = ruleset(writable)
    if fd is None:
        return None
    try:
        return abi() if _libc.syscall(_RESTRICT_SELF, fd, 0) == 0 else None
    finally:
        os.close(fd)
