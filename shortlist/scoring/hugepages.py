"""Make fork() of a zygote cheap: its heap on 2 MiB pages.

fork() copies one page-table entry per 4 KiB page, and exit tears them down: for a zygote that
imported Reasoning Gym (~90 MB of Python objects) that cost ~3 ms per fork on a 2-core VM, per
answer. MADV_COLLAPSE (Linux >= 6.1) moves the populated heap onto transparent huge pages, one
entry per 2 MiB, synchronously and whatever the system's THP setting (except "never"). Where the
kernel refuses, nothing changes but the cost.
"""
from __future__ import annotations

import ctypes

from shortlist.libc import libc

_MADV_HUGEPAGE, _MADV_COLLAPSE = 14, 25
_HUGE = 2 << 20


def collapse() -> int:
    """Collapse this process's private anonymous memory; returns the MiB now on huge pages."""
    done = 0
    with open("/proc/self/maps") as f:
        regions = [line.split() for line in f]
    for fields in regions:
        low, high = (int(x, 16) for x in fields[0].split("-"))
        anonymous = len(fields) < 6 or fields[5] == "[heap]"
        if fields[1] != "rw-p" or not anonymous:
            continue
        start, end = -(-low // _HUGE) * _HUGE, high // _HUGE * _HUGE  # whole 2 MiB pages inside the region
        if end > start:
            span = (ctypes.c_void_p(start), ctypes.c_size_t(end - start))  # typed: an address is wider than an int
            libc.madvise(*span, _MADV_HUGEPAGE)  # keep khugepaged from splitting them back
            if libc.madvise(*span, _MADV_COLLAPSE) == 0:
                done += end - start
    return done >> 20
