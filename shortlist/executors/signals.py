"""A run's signals and its end: SIGINT and SIGTERM stop it in the main thread, once."""
from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager

from shortlist.executors.kill import resource_tracker, stop_descendants


class Stopped(KeyboardInterrupt):
    """SIGINT or SIGTERM, raised in the main thread (stop_on_signals): every job is stopped on the way out.
    A KeyboardInterrupt, so no `except Exception` on the way records it as a failure."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def code(self) -> int:
        return 128 + self.signum  # 130 for SIGINT, 143 for SIGTERM, as a shell reports them


@contextmanager
def stop_on_signals():
    """While inside: SIGINT and SIGTERM raise Stopped in the main thread, once (the executors then stop
    their jobs on the way out, uninterrupted). Elsewhere than the main thread, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stopped(signum, frame):
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)
        raise Stopped(signum)
    old = {s: signal.signal(s, stopped) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def exit(code: int) -> None:
    """A command's end: sys.exit, but a stopped run (130, 143) leaves at once, its lines flushed:
    Python's teardown of what the batch imported (torch, Reasoning Gym) took 5 s more, measured. Its own
    helpers go first, killed and ended: os._exit skips the exit hooks that close them, and a task builder
    left to notice its closed stdin ran its own teardown after the batch had exited. A second Ctrl-C or
    SIGTERM meanwhile is ignored: it would cut that short. multiprocessing's resource tracker is spared: it
    unlinks the semaphores left behind once this process is gone."""
    if code in (130, 143):
        if threading.current_thread() is threading.main_thread():  # only there can handlers be set
            for s in (signal.SIGINT, signal.SIGTERM):
                signal.signal(s, signal.SIG_IGN)
        sys.stdout.flush()
        sys.stderr.flush()
        stop_descendants(spare=resource_tracker())
        os._exit(code)
    sys.exit(code)
