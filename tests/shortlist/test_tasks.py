"""Tasks built as a process with PYTHONHASHSEED=0 builds them (sources/tasks.py), in every process."""
import pytest

from shortlist import sources



HASH_SEEDED = ["isomorphic_strings", "knight_swap", "list_functions", "polynomial_multiplication", "ransom_note",
               "word_ladder"]  # reasoning-gym builds other tasks for a seed under another hash seed


BUILD = """
import hashlib, json, sys
import reasoning_gym
from shortlist import sources
if sys.argv[1] == "raw":  # reasoning-gym alone, in this interpreter
    out = {}
    for name in json.loads(sys.argv[2]):
        tasks = [reasoning_gym.create_dataset(name, seed=s, size=1)[0] for s in range(3)]
        out[name] = hashlib.sha256(repr([(t["question"], t["answer"]) for t in tasks]).encode()).hexdigest()
else:  # Family.tasks(), for the families named, or every creatable one
    names = json.loads(sys.argv[2]) if len(sys.argv) > 2 else sources.creatable()
    out = {name: sources.fingerprint(sources.parse(name).tasks(range(2))) for name in names}
print(chr(10) + json.dumps(out))  # some families print while they build
"""


def build_in_a_process(hash_seed: str, *args: str):
    """BUILD in a new interpreter with this hash seed; returns a function that waits for its result."""
    import json
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    process = subprocess.Popen([sys.executable, "-c", BUILD, *args], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": root})
    return lambda: json.loads(process.communicate(timeout=600)[0].splitlines()[-1])


def fingerprints_here(names) -> dict:
    return {name: sources.fingerprint(sources.parse(name).tasks(range(2))) for name in names}


def test_the_hash_seeded_families_build_the_same_tasks_in_every_process():
    """reasoning-gym alone builds other tasks for six families under another hash seed; Family.tasks()
    (and so the fingerprint) builds the same tasks in processes whose hash seeds differ (a subprocess
    with 1, and this one, whatever it has)."""
    import json
    names = HASH_SEEDED + ["chain_sum", "leg_counting"]
    raw = [build_in_a_process(seed, "raw", json.dumps(names)) for seed in ("1", "2")]
    other = build_in_a_process("1", "ours", json.dumps(names))
    one, two = (wait() for wait in raw)
    assert sorted(k for k in one if one[k] != two[k]) == HASH_SEEDED  # without the fix
    assert other() == fingerprints_here(names)  # with it


@pytest.mark.slow
def test_every_creatable_family_builds_the_same_tasks_in_every_process():
    """The same for every creatable family: a family reasoning-gym adds later may depend on the
    hash seed too."""
    other = build_in_a_process("1", "ours")
    here = fingerprints_here(sources.creatable())
    assert other() == here and len(here) >= 100


def test_building_400_tasks_stays_cheap():
    import time
    f = sources.parse("chain_sum")
    f.tasks(range(1))  # the helper interpreter, where this one's hash seed is not 0, starts once
    started = time.monotonic()
    assert [t["seed"] for t in f.tasks(range(400))] == list(range(400))
    assert time.monotonic() - started < 2.0


def test_a_task_builder_slow_to_end_is_killed_at_exit_without_a_traceback():
    """Under load the helper can outlast the wait at exit (seen at load 11-17): here it is stopped (SIGSTOP)
    before the process exits; the process ends quietly and takes the helper with it."""
    import os
    import subprocess
    import sys
    probe = ("import os, signal, sys\nfrom shortlist import sources\nfrom shortlist.sources import tasks\n"
             "tasks.STOP_S = 1\nsources.parse('chain_sum').tasks([0])\n"
             "os.kill(tasks._helper.pid, signal.SIGSTOP)\nprint(tasks._helper.pid, flush=True)\n")
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"})
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
    helper = int(ran.stdout.split()[-1])
    assert not os.path.exists(f"/proc/{helper}") or open(f"/proc/{helper}/stat").read().split(")")[1].split()[0] == "Z"
