"""The C library, for every module that calls it through ctypes (prctl, unshare, setns, mount, syscall,
madvise): loaded once, at import, so before any sandbox closes, and shared, never re-dlopen()ed."""
import ctypes

libc = ctypes.CDLL(None, use_errno=True)  # the program's own symbols: glibc's, which CPython links
