"""What every executor does: a queue of jobs into its slots, each job's end handed back as it comes.

A third executor is one module: a subclass of Executor that owns its name, `remote`, its own flags
(FLAGS), their checks (check()) and how a Placement starts it (placed()), and one line in
placement.EXECUTORS. Placement asks these and names no executor itself."""
from __future__ import annotations

from typing import Callable, Iterable

from shortlist.executors.jobs import Job, Ran


class Executor:
    """The base of every executor: what a runner asks of it, and nothing about how it does it."""
    name = ""  # what --executor and records call it (where["executor"])
    about = ""  # where its jobs run, in a few words (--executor's help, its refusal)
    serial = False  # True: jobs run one at a time, on this machine, without a GPU
    remote = False  # True: jobs run on other machines; their files travel, the GPUs are theirs, not this one's
    # its own flags, beside --executor and --per-gpu: option (the flag's dest) -> argparse's keywords, and
    # optionally "elsewhere": what to do instead, said where the flag is given with another executor
    FLAGS: dict[str, dict] = {}

    @classmethod
    def check(cls, placement) -> None:
        """Refuse, in one line (PlacementError), what this executor cannot do as placed (a placement.Placement:
        its per_gpu, its option()s). Called when the Placement is made, before anything is written."""

    @classmethod
    def placed(cls, placement, log=print, peaks: Callable[[], Iterable] = tuple) -> "Executor":
        """The executor, ready, as placement asks (peaks: the per-job GPU peaks measured so far)."""
        raise NotImplementedError

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
