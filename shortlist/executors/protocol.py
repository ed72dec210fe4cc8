"""What every executor does: a queue of jobs into its slots, each job's end handed back as it comes.

A third executor is one module: a subclass of Executor, built by Placement.start()."""
from __future__ import annotations

from typing import Callable

from shortlist.executors.jobs import Job, Ran


class Executor:
    """The base of every executor: what a runner asks of it, and nothing about how it does it."""
    name = ""  # what records call it (where["executor"])
    serial = False  # True: jobs run one at a time, on this machine, without a GPU
    remote = False  # True: jobs run on other machines; their files travel, the GPUs are theirs, not this one's

    def capacity(self) -> int:
        """How many jobs run at once."""
        raise NotImplementedError

    def cpus_per_job(self) -> float:
        """The CPUs a job can count on: this machine's, shared by its slots; on Ray, what a job asks for
        (a GPU job asks for none: 2, one for itself and one for a helper)."""
        raise NotImplementedError

    def run(self, jobs: list[Job], out, done: Callable[[Ran], None] | None = None, log=print) -> list[Ran]:
        """Every job, in order from a queue into free slots; done(ran) as each ends. A signal or an error
        on the way stops every job still running before it propagates."""
        raise NotImplementedError

    def close(self) -> None:
        pass
