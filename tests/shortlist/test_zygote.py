"""Scoring under hostile answers: the adversarial corpus of protocol-notes.md through every creatable
family, and the probes of issue 14 (one answer touching another's score, the run or the machine)
through the nine families whose scorers run the answer as Python."""
import json
import os
import secrets
import time

import pytest

from shortlist import sources as families
from shortlist.scoring import isolation
from shortlist.scoring import Scorer

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


# --- issue 14's probes: each reports what it achieved through the one channel an answer has, its
# own reply (1.0: the attack worked; 0.0: it was refused) ------------------------------------------
PRELUDE = """
import gc, json, os, stat, sys, time
def report(x):
    for fd in range(3, 64):  # every descriptor it holds: the forged reply of the issue
        try:
            os.write(fd, json.dumps({"score": float(x), "refused": 0}).encode())
        except OSError:
            pass
    os._exit(0)
def unhook():  # switch the audit hook off from inside, as the issue's probes did
    m = sys.modules.get("shortlist.scoring.zygote")
    if m:
        m._REFUSED_EVENTS.clear(); m._PATH_EVENTS.clear(); m._REFUSED_PREFIXES = ("\\0",); m._inside = lambda *a: True
"""
PROBES = {
    "forged_reply": """
for o in gc.get_objects():
    if type(o).__name__ == "Connection":
        try: o.send_bytes(json.dumps({"score": 1.0, "refused": 0}).encode())
        except Exception: pass
report(1.0)""",
    "gadget_chain": """
w = [c for c in ().__class__.__mro__[1].__subclasses__() if c.__name__ == "catch_warnings"][0]
s = w.__init__.__globals__["sys"]
s.modules["shortlist.scoring.zygote"]._REFUSED_EVENTS.clear()
report(s.modules["os"].system("true") == 0)""",
    "fork_exec": """
unhook()
import subprocess
try:
    subprocess.Popen(["/bin/sleep", "31337"]); report(1)
except OSError:
    report(0)""",
    "child_outlives": """
unhook()
try:
    if os.fork() == 0:
        time.sleep(60); os._exit(0)
    report(1)
except OSError:
    report(0)""",
    "fork_loop": """
unhook()
n = 0
for _ in range(20):
    try:
        if os.fork() == 0: os._exit(0)
        n += 1
    except OSError:
        pass
report(n / 20)""",
    "root_inside": """
unhook()
import ctypes
class Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
data = (ctypes.c_uint32 * 6)()  # capget, not /proc/self/status: Landlock closes /proc to an answer
ctypes.CDLL(None).capget(ctypes.byref(Header(0x20080522, 0)), data)
report(os.getuid() == 0 or os.geteuid() == 0 or data[0] != 0 or data[3] != 0)""",
    "device_node": """
unhook()
try:
    os.mknod("loop", 0o600 | stat.S_IFBLK, os.makedev(7, 0)); report(1)
except OSError:
    report(0)""",
    "write_outside": """
unhook()
done = 0
for path in (MARKER + "/open", "/dev/shm/shortlist-probe", MARKER + "/../written"):
    try:
        with open(path, "w") as f: f.write("x")
        done = 1
    except OSError:
        pass
try:
    os.close(os.open(MARKER + "/os_open", os.O_CREAT | os.O_WRONLY)); done = 1
except OSError:
    pass
report(done)""",
    "parent_environ": """
unhook()
seen = SECRET in str(dict(os.environ))
for path in (f"/proc/{PARENT}/environ", "/proc/self/environ", f"/proc/{PARENT}/task/{PARENT}/environ"):
    try:
        seen = seen or SECRET.encode() in open(path, "rb").read()
    except OSError:
        pass
report(seen)""",
    "signal_parent": """
unhook()
try:
    os.kill(PARENT, 0); report(1)
except OSError:
    report(0)""",
    "ptrace_parent": """
unhook()
import ctypes
report(ctypes.CDLL(None).ptrace(0x4206, PARENT, 0, 0) == 0)""",  # PTRACE_SEIZE: would not stop the parent
    "socket": """
unhook()
import socket
try:
    socket.socket(); report(1)
except OSError:
    report(0)""",
}


def probes(marker: str, secret: str) -> dict[str, str]:
    """Each probe as one Python expression: eval() and sympy's parse_expr both run it."""
    head = PRELUDE + f"MARKER = {marker!r}\nSECRET = {secret!r}\nPARENT = {os.getpid()}\n"
    return {name: f"exec({head + body!r}, {{}})" for name, body in PROBES.items()}


def stray_processes() -> list[str]:
    """Processes of the answers' uid that are not an answer process waiting in its own PID namespace
    (the zygotes' pool): anything an answer started, or an answer process that outlived its batch."""
    stray = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines())
        except (OSError, ValueError):
            continue
        if int(status["Uid"].split()[0]) != isolation.UNPRIVILEGED or status["State"].split()[0] in "ZX":
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
    attacks = probes(str(marker), secret)
    home_before = set(os.listdir(os.path.expanduser("~")))
    others = set(unprivileged())  # other scorers' answer processes, waiting for answers
    with Scorer(workers=2, deadline_s=2.0) as scorer:
        assert scorer.confinement["user"] == f"{isolation.UNPRIVILEGED}:{isolation.UNPRIVILEGED}" or os.geteuid() != 0
        for name in NINE:
            family = families.parse(name)
            right = [t["answer"] for t in family.tasks([1, 2])]
            honest, honest_seeds = [right[0], right[1], "0", right[0]], [1, 2, 1, 1]
            baseline = scorer.score(family, honest_seeds, honest)
            assert baseline[:2] + baseline[3:] == [1.0, 1.0, 1.0] and baseline[2] < 1.0, name
            answers, seeds = [], []
            for k, attack in enumerate(attacks.values()):  # each probe followed by an honest answer, one batch
                answers += [attack, honest[k % 4]]
                seeds += [1, honest_seeds[k % 4]]
            scores = scorer.score(family, seeds, answers)
            got = dict(zip(attacks, scores[::2]))
            got.pop("forged_reply")  # its own score is whatever it wrote: faking that is all an answer can do
            assert got == dict.fromkeys(got, 0.0), (name, {k: v for k, v in got.items() if v})
            assert scores[1::2] == [baseline[i % 4] for i in range(len(attacks))], name  # no other score moved
            assert scorer.counts[name].timeouts == 0, name
            assert settled(stray_processes) == [], name  # nothing an answer started outlives it
    assert settled(lambda: sorted(set(unprivileged()) - others)) == []  # closed: none of its processes is left
    assert os.listdir(marker) == [] and not os.path.exists(tmp_path / "written")
    assert not os.path.exists("/dev/shm/shortlist-probe")
    assert set(os.listdir(os.path.expanduser("~"))) == home_before


def unprivileged() -> list[str]:
    """Live processes of the answers' uid."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status").read().splitlines())
        except (OSError, ValueError):
            continue
        if int(status["Uid"].split()[0]) == isolation.UNPRIVILEGED and status["State"].split()[0] not in "ZX":
            found.append(pid)
    return found


@pytest.mark.slow
def test_adversarial_corpus_through_every_creatable_family(tmp_path):
    """The whole corpus where scorers run answers as code or misbehaved; one answer of each kind
    elsewhere (the rest add nothing to a scorer that only compares text, and each costs a process)."""
    marker = tmp_path / "pwned"
    marker.mkdir()
    home_before = set(os.listdir(os.path.expanduser("~")))
    names = families.creatable()
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
    and they are the tasks Family.tasks() gives, whatever the hash seed (issue 9)."""
    names = NINE + ["knight_swap", "group_anagrams", "isomorphic_strings", "list_functions", "ransom_note",
                    "word_ladder"]
    with Scorer(workers=2) as scorer:
        for name in names:
            tasks = [t for t in families.parse(name).tasks(range(5)) if t["answer"] is not None]
            assert scorer.score(name, [t["seed"] for t in tasks], [t["answer"] for t in tasks]) == [1.0] * len(tasks), name
