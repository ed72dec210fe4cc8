"""The executors' registry: an executor owns its flags, its checks and `remote`, so a third one is its
class and one entry in placement.EXECUTORS; both command lines build their Placement once."""
import argparse

import pytest

from shortlist import executors
from shortlist.executors import placement


class Inline(executors.Executor):
    """A made-up third executor, registered by the test alone: nothing else in the package knows it."""
    name, about, remote = "inline", "a test's own", True
    FLAGS = {"lanes": {"type": int, "help": "--executor inline: lanes", "elsewhere": "only inline has lanes"}}

    @classmethod
    def check(cls, where) -> None:
        if where.option("lanes", 1) < 1:
            raise executors.PlacementError(f"--lanes {where.option('lanes')}: give 1 or more")

    @classmethod
    def placed(cls, where, log=print, peaks=tuple):
        return cls()

    def capacity(self) -> int:
        return 1


@pytest.fixture
def inline(monkeypatch):
    monkeypatch.setitem(placement.EXECUTORS, Inline.name, Inline)
    parser = argparse.ArgumentParser(prog="x")
    executors.add_arguments(parser)
    return parser


def test_a_registered_executor_brings_its_flags_checks_remote_and_start(inline):
    where = executors.from_args(inline.parse_args(["--executor", "inline", "--lanes", "3", "--per-gpu", "2"]))
    assert where == executors.Placement("inline", 2, {"lanes": 3}) and where.option("lanes") == 3
    assert where.remote is True and isinstance(where.start(), Inline)
    with pytest.raises(executors.PlacementError, match="--lanes 0: give 1 or more"):
        executors.from_args(inline.parse_args(["--executor", "inline", "--lanes", "0"]))
    with pytest.raises(executors.PlacementError, match="--lanes goes with --executor inline; only inline has lanes"):
        executors.from_args(inline.parse_args(["--lanes", "2"]))  # the local executor takes no --lanes
    with pytest.raises(executors.PlacementError, match=r"--executor slurm: give local \(.*\) or ray \(.*\) or "
                                                       r"inline \(a test's own\)"):
        executors.Placement("slurm")
    with pytest.raises(SystemExit):
        inline.parse_args(["--executor", "slurm"])  # argparse's choices are the registry's names


def test_the_builtin_executors_own_their_flags_and_remote():
    assert {name: (kind.remote, sorted(kind.FLAGS)) for name, kind in executors.EXECUTORS.items()} == {
        "local": (False, ["job_gib", "mps"]), "ray": (True, ["address", "cpus_per_job"])}
    assert executors.Placement().remote is False and executors.Placement(options={"mps": False}) == executors.Placement()
