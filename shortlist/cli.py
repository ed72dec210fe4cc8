"""What both command lines (python -m shortlist, python -m proof) open with: the run's sources from
the flags and where its jobs run, each built once (a Ray head is probed once), the sources served
while the command runs and stopped after, whatever ends it."""
from __future__ import annotations

import contextlib

from shortlist import executors
from shortlist.sources import flags


@contextlib.contextmanager
def opened(args):
    """(the run's source.Choice, served and configured here; its executors.Placement, or None for a command
    without the flags of where jobs run). A bad flag is one line (OneLine) before anything is served."""
    chosen = flags.choice(args)
    where = executors.from_args(args) if hasattr(args, "executor") else None
    with chosen.serving(remote=where is not None and where.remote) as chosen:
        yield chosen, where
