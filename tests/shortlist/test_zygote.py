"""Scoring under hostile answers: the adversarial corpus of protocol-notes.md through every creatable
family, and probes of what an answer could reach (another answer's score, the counts, the run, the
machine or the user's files) through the nine families whose scorers run the answer as Python (as root
and as a throwaway non-root user: test_zygote_users.py)."""
import json
import os
import secrets
import time

import pytest

from shortlist import sources
from shortlist.scoring import isolation
from shortlist.scoring import Scorer
from tests.shortlist.probes import probes, shm_keys, shm_remove

DEADLINE_S = 0.25
NINE = ["binary_matrix", "spiral_matrix", "string_insertion", "n_queens", "simple_integration",
        "intermediate_integration", "polynomial_multiplication", "puzzle24", "countdown"]
# families whose scorers hung, raised or returned odd values in the fuzz of protocol-notes.md
ODD = ["coin_flip", "prime_factorization", "boxnet", "game_of_life", "propositional_logic", "codeio",
       "polynomial_equations", "spell_backward"]


def representative(marker: str) -> list[str]:
    """One answer of each kind in corpus(): enough for a scorer that never runs the answer as code."""
    return ["9**9**9", "1e999999999", f"__import__('os').system('touch {marker}/system')", "__import__('os')._exit(3)",
            "(" * 5000 + ")" * 5000, "x" * 1_000_000, "[0] * 10**10", "\x00\x01\x02\x1b[2J\x7f", "\ud800",
            '{"a": NaN}', ""]


def corpus(marker: str) -> list[str]:
    """Answers a model that explores might write, and worse."""
    return [
        "9**9**9", "10**10**10", "9**9**8", "2**2**2**2**2**2", "1e999999999", "-1e999999999", "10**-10**10",
        f"__import__('os').system('touch {marker}/system')",
        f"exec(\"open('{marker}/exec', 'w').write('x')\")",
        f"open('{marker}/open', 'w').write('x')",
        f"__import__('pathlib').Path('{marker}/pathlib').touch()",
        f"__import__('subprocess').run(['touch', '{marker}/subprocess'])",
        f"__import__('shutil').copy('/etc/hostname', '{marker}/copy')",
        "__import__('socket').create_connection(('1.1.1.1', 53), 1)",
        "__import__('os').kill(__import__('os').getppid(), 9)",
        "__import__('os')._exit(3)", "exit()", "raise SystemExit", "[x for x in iter(int, 1)]",
        "(" * 5000 + ")" * 5000, "[" * 100000, "{" * 10000, "-" * 10000 + "1",
        "x" * 1_000_000, "9" * 1_000_000, "[0] * 10**10", "' ' * 10**11", "list(range(10**10))",
        "\x00\x01\x02\x1b[2J\x7f", "\ud800", "\u202e1", "",
        '{"a": NaN}', "1e309", "[1, 2,", '{"__proto__": {"x": 1}}', "-0", "null", "[[[[[[[[]]]]]]]]", "Infinity",
    ]


def processes_under(root: int) -> dict[int, dict]:
    """Every live process descending from pid root, with its /proc status: a Scorer's server and
    what it started, and nothing of another Scorer's (other runs share the machine and the uid)."""
    parents, statuses = {}, {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines())
        except (OSError, ValueError):
            continue
        if status["State"].split()[0] not in "ZX":
            parents[int(pid)], statuses[int(pid)] = int(status["PPid"]), status
    found, frontier = {}, [root]
    while frontier:
        frontier = [p for p, parent in parents.items() if parent in frontier and p not in found]
        found.update({p: statuses[p] for p in frontier})
    return found


def live(pids) -> list[int]:
    alive = []
    for pid in pids:
        try:
            state = next(line for line in open(f"/proc/{pid}/status") if line.startswith("State:")).split()[1]
        except (OSError, StopIteration):
            continue
        if state not in "ZX":
            alive.append(pid)
    return sorted(alive)


def stray_processes(server: int, uid: int) -> list[str]:
    """Processes of the answers' uid under a server that are not an answer process waiting in its own
    PID namespace (the zygotes' pool): anything an answer started, or one that outlived its batch."""
    stray = []
    for pid, status in processes_under(server).items():
        if int(status["Uid"].split()[0]) != uid:
            continue
        if status["NSpid"].split()[-1] != "1" or status["State"].split()[0] == "T":  # T: answered, never killed
            stray.append(f"{pid} {status['Name'].strip()} {status['State'].strip()} nspid {status['NSpid'].strip()}")
    return stray


def settled(check, seconds: float = 3.0):
    """check() once it is empty, or its last value: killed processes take a moment to go."""
    deadline = time.monotonic() + seconds
    while (value := check()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return value


def test_probes_through_the_nine_python_scorers(tmp_path, monkeypatch):
    marker, secret = tmp_path / "pwned", "shortlist-" + secrets.token_hex(8)
    marker.mkdir()
    monkeypatch.setenv("SHORTLIST_PROBE_SECRET", secret)  # in the parent's environment only
    shm_key = secrets.randbelow(1 << 30) + 1
    attacks = probes(str(marker), secret, shm_key)
    home_before = set(os.listdir(os.path.expanduser("~")))
    try:
        with Scorer(workers=2, deadline_s=2.0) as scorer:
            nobody = f"{isolation.UNPRIVILEGED}:{isolation.UNPRIVILEGED}"
            assert scorer.confinement["user"] == nobody or os.geteuid() != 0
            server, uid = scorer._server.process.pid, int(scorer.confinement["user"].split(":")[0])
            for name in NINE:
                family = sources.parse(name)
                # each probe followed by an honest answer to a task of its own (an answer repeated for one task is
                # scored once), every fourth a wrong one, so that each is scored in a process of its own
                honest_seeds = list(range(1, len(attacks) + 1))
                right = [t["answer"] for t in family.tasks(honest_seeds)]
                honest = ["no such answer" if k % 4 == 2 else right[k] for k in range(len(attacks))]
                baseline = scorer.score(family, honest_seeds, honest)
                assert [b == 1.0 for b in baseline] == [k % 4 != 2 for k in range(len(attacks))], name
                answers, seeds = [], []
                for k, attack in enumerate(attacks.values()):
                    answers += [attack, honest[k]]
                    seeds += [1, honest_seeds[k]]
                scores = scorer.score(family, seeds, answers)
                got = dict(zip(attacks, scores[::2]))
                got.pop("forged_reply")  # its own score is whatever it wrote: faking that is all an answer can do
                assert got == dict.fromkeys(got, 0.0), (name, {k: v for k, v in got.items() if v})
                assert scores[1::2] == baseline, name  # no other score moved
                counts = scorer.counts[name]
                assert counts.timeouts == 0 and counts.refused <= counts.answers, (name, vars(counts))
                json.dumps(vars(counts))  # what 01 writes: no answer's number can make it raise
                assert settled(lambda: stray_processes(server, uid)) == [], name  # nothing an answer started lives on
                assert shm_key not in shm_keys(), name  # no segment outlives its answer
            started = {pid for pid, status in processes_under(server).items() if int(status["Uid"].split()[0]) == uid}
            assert started  # the pool of the last family, waiting for answers
        assert settled(lambda: live(started)) == []  # closed: none of them is left
    finally:
        shm_remove(shm_key)
    assert os.listdir(marker) == [] and not os.path.exists(tmp_path / "written")
    assert not os.path.exists("/dev/shm/shortlist-probe")
    assert set(os.listdir(os.path.expanduser("~"))) == home_before


@pytest.mark.slow
def test_adversarial_corpus_through_every_creatable_family(tmp_path):
    """The whole corpus where scorers run answers as code or misbehaved; one answer of each kind
    elsewhere (the rest add nothing to a scorer that only compares text, and each costs a process)."""
    marker = tmp_path / "pwned"
    marker.mkdir()
    home_before = set(os.listdir(os.path.expanduser("~")))
    names = sources.creatable()
    assert len(names) >= 100 and set(NINE + ODD) <= set(names)
    started, slowest = time.monotonic(), 0.0
    with Scorer(workers=2, deadline_s=DEADLINE_S) as scorer:
        for name in names:  # one batch per family: the hangs run two at a time, each cut at its deadline
            answers = corpus(str(marker)) if name in NINE + ODD else representative(str(marker))
            t = time.monotonic()
            scores = scorer.score(name, [0] * len(answers), answers)
            spent = time.monotonic() - t
            slowest = max(slowest, spent - scorer.counts[name].timeouts * DEADLINE_S / 2)
            assert all(type(s) is float and 0.0 <= s <= 1.0 for s in scores), name
        counts = [vars(c) for c in scorer.counts.values()]
    summary = {k: sum(c[k] for c in counts) for k in ("timeouts", "crashes", "exceptions", "refused", "clamped")}
    print(f"\n{len(names)} families, {sum(c['answers'] for c in counts)} answers in {time.monotonic() - started:.1f} s; "
          f"slowest batch beyond its timeouts {slowest:.2f} s; {summary}")
    assert slowest < 10.0  # building the family's task and its answer processes, not a hang
    assert os.listdir(marker) == []  # nothing written outside the scratch directory
    assert set(os.listdir(os.path.expanduser("~"))) == home_before
    assert summary["refused"] > 0 and summary["timeouts"] > 0  # the attacks and the hangs did happen


def test_correct_answers_score_one_at_the_default_deadline():
    """Tasks are built in the zygote, outside the deadline (knight_swap's first build takes 1.3 s),
    and they are the tasks Family.tasks() gives, whatever the hash seed (some families order sets of
    strings)."""
    names = NINE + ["knight_swap", "group_anagrams", "isomorphic_strings", "list_functions", "ransom_note",
                    "word_ladder"]
    with Scorer(workers=2) as scorer:
        for name in names:
            tasks = [t for t in sources.parse(name).tasks(range(5)) if t["answer"] is not None]
            assert scorer.score(name, [t["seed"] for t in tasks], [t["answer"] for t in tasks]) == [1.0] * len(tasks), name
