"""Scoring under hostile answers: the adversarial corpus of protocol-notes.md through every creatable
family, and probes of what an answer could reach (another answer's score, the counts, the run, the
machine or the user's files) through the nine families whose scorers run the answer as Python, as
root and as a throwaway non-root user."""
import ctypes
import json
import os
import secrets
import subprocess
import sys
import time

import pytest

from shortlist import sources
from shortlist.scoring import isolation
from shortlist.scoring import Scorer
from shortlist.scoring.zygote import Limits

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


# --- probes of an answer's escape: each reports what it achieved through the one channel an answer
# has, its own reply (1.0: the attack worked; 0.0: it was refused) ---------------------------------
PRELUDE = """
import gc, json, os, stat, sys, time
def report(x):
    for fd in range(3, 64):  # every descriptor it holds, in case one reaches the parent: a forged reply
        try:
            os.write(fd, json.dumps({"score": float(x), "refused": False}).encode())
        except OSError:
            pass
    os._exit(0)
def unhook():  # switch the audit hook off from inside: each later layer must hold without it
    m = sys.modules.get("shortlist.scoring.answer")
    if m:
        m._REFUSED_EVENTS.clear(); m._PATH_EVENTS.clear(); m._REFUSED_PREFIXES = ("\\0",); m._inside = lambda *a: True
"""
PROBES = {
    "forged_reply": """
for o in gc.get_objects():
    if type(o).__name__ == "Connection":
        try: o.send_bytes(json.dumps({"score": 1.0, "refused": False}).encode())
        except Exception: pass
report(1.0)""",
    "gadget_chain": """
w = [c for c in ().__class__.__mro__[1].__subclasses__() if c.__name__ == "catch_warnings"][0]
s = w.__init__.__globals__["sys"]
s.modules["shortlist.scoring.answer"]._REFUSED_EVENTS.clear()
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
    # what leaves the sandbox (other processes, SysV memory, the scratch), and the counts
    "other_cmdline": """
unhook()
seen = False
for path in ("/proc/1/cmdline", f"/proc/{PARENT}/cmdline", "/proc"):
    try:
        seen = seen or bool(os.listdir(path) if path == "/proc" else open(path, "rb").read())
    except OSError:
        pass
report(seen)""",
    "sysv_shm": """
unhook()
import ctypes
libc = ctypes.CDLL(None)
shm = libc.shmget(SHM_KEY, 1 << 24, 0o1000 | 0o666)  # IPC_CREAT: it would outlive this process
report(shm >= 0)""",
    "scratch_fill": """
unhook()
written = 0
try:
    for n in range(64):  # many files: a limit per file is no budget
        with open(f"fill{n}", "wb") as f:
            for _ in range(8):
                f.write(b"x" * (1 << 20)); f.flush(); written += 1
except OSError:
    pass
report(written > BUDGET_MB)""",
    "forged_counts": """
for fd in range(3, 64):  # a refused count json.dumps cannot write once two are summed
    try: os.write(fd, json.dumps({"score": 1.0, "refused": 9 * 10 ** 4299}).encode())
    except OSError: pass
os._exit(0)""",
    "deep_reply": """
for fd in range(3, 64):
    try: os.write(fd, b"[" * 60000)
    except OSError: pass
os._exit(0)""",
}
PRIVATE_PROBE = """
unhook()
try:
    report(open(PRIVATE, "rb").read(1)[0] / 255)  # a byte of the user's private file, leaked as a score
except OSError:
    report(0)"""
PID_IS_ONE = """
report(os.getpid() == 1)"""


def probes(marker: str, secret: str, shm_key: int, extra: dict | None = None) -> dict[str, str]:
    """Each probe as one Python expression: eval() and sympy's parse_expr both run it."""
    head = PRELUDE + (f"MARKER = {marker!r}\nSECRET = {secret!r}\nPARENT = {os.getpid()}\nSHM_KEY = {shm_key}\n"
                      f"BUDGET_MB = {Limits.scratch_mb}\n")
    return {name: f"exec({head + body!r}, {{}})" for name, body in {**PROBES, **(extra or {})}.items()}


def shm_keys() -> set[int]:
    """The keys of the SysV shared memory segments of this process's IPC namespace."""
    with open("/proc/sysvipc/shm") as f:
        return {int(line.split()[0]) for line in f.readlines()[1:]}


def shm_remove(key: int) -> None:
    """A segment a failing probe left must not stay behind in the machine's namespace."""
    libc = ctypes.CDLL(None)
    if key in shm_keys():
        libc.shmctl(libc.shmget(key, 0, 0), 0, None)  # IPC_RMID


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


# --- as root and as a throwaway user: the same probes, a private file of the user's, honest answers ------
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
THROWAWAY = 61337  # a uid no account has: the user a non-root run is, with a home of its own under tmp_path
MS_REC, MS_PRIVATE, MS_BIND = 0x4000, 1 << 18, 4096


def expose(paths: list[str]) -> None:
    """In this process's own mount namespace, make paths reachable by any user without opening what
    lies beside them: a folder others cannot enter on the way (/root, pytest's 0700 temporary
    folders) is covered by an empty tmpfs, and each path is bind-mounted back into it."""
    libc = ctypes.CDLL(None, use_errno=True)
    paths = sorted({os.path.realpath(p) for p in paths if os.path.exists(p)})
    paths = [p for p in paths if not any(p.startswith(q + "/") for q in paths)]
    closed: dict[str, list[str]] = {}
    for path in paths:
        parts = path.strip("/").split("/")
        ancestors = ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]
        first = next((a for a in ancestors if not os.stat(a).st_mode & 0o001), None)
        if first:
            closed.setdefault(first, []).append(path)
    for folder, inside in closed.items():
        fds = {p: os.open(p, os.O_PATH) for p in inside}
        assert libc.mount(b"tmpfs", folder.encode(), b"tmpfs", 0, b"mode=0755") == 0, folder
        for path, fd in fds.items():
            os.makedirs(path, exist_ok=True)
            assert libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None, MS_BIND, None) == 0, path


def launch() -> None:
    """argv: a JSON spec. As root: a mount namespace of its own, the spec's paths exposed, then (uid
    given) that uid with no groups, and exec: what a user who installed the project would run."""
    spec = json.loads(sys.argv[1])
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.unshare(0x20000) == 0 and libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) == 0
    expose(spec["paths"])
    if spec["refuse_unshare"]:  # as a Docker container's default seccomp profile does; it holds across exec
        from shortlist.scoring import syscalls
        assert syscalls.load(syscalls.build(("unshare", "setns", "mount", "umount2")))
    if spec["uid"] is not None:
        os.setgroups([])
        os.setresgid(spec["uid"], spec["uid"], spec["uid"])
        os.setresuid(spec["uid"], spec["uid"], spec["uid"])
    os.execve(sys.executable, [sys.executable, "-c", spec["code"], *spec["args"]], spec["env"])


def user_namespaces_allowed(uid: int) -> bool:
    """Whether this machine lets uid make a user namespace (some distributions refuse it)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        os.write(w, b"1" if ctypes.CDLL(None).unshare(0x10000000) == 0 else b"0")  # CLONE_NEWUSER
        os._exit(0)
    os.close(w)
    allowed = os.read(r, 1) == b"1"
    os.close(r)
    os.waitpid(pid, 0)
    return allowed


def run_battery(tmp_path, uid: int | None, refuse_unshare: bool = False) -> dict:
    """battery() in a fresh interpreter, as root (uid None) or as uid, with a home under tmp_path;
    with refuse_unshare, where the kernel refuses every namespace (a Docker container's default)."""
    home, answers_uid = tmp_path / "home", uid if uid is not None else isolation.UNPRIVILEGED
    home.mkdir()
    os.chmod(tmp_path, 0o755)
    (home / "private").write_bytes(b"s3cret")  # the user's own file, closed to everyone else
    (tmp_path / "pwned").mkdir(mode=0o777)
    os.chmod(tmp_path / "pwned", 0o777)  # an answer could write here, but for the sandbox
    for path, mode in ((home / "private", 0o600), (home, 0o700)):
        os.chown(path, answers_uid, answers_uid)
        os.chmod(path, mode)
    code = "import json, sys; from tests.shortlist import test_zygote as t; print(json.dumps(t.battery(*sys.argv[1:])))"
    spec = {"uid": uid, "refuse_unshare": refuse_unshare, "code": code,
            "args": [str(home / "private"), str(tmp_path / "pwned")],
            "env": {"PATH": "/usr/bin:/bin", "PYTHONPATH": REPO, "HOME": str(home)},
            "paths": [*sys.path, sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable)), REPO,
                      str(tmp_path)]}
    done = subprocess.run([sys.executable, "-c", "from tests.shortlist import test_zygote; test_zygote.launch()",
                           json.dumps(spec)], capture_output=True, text=True, timeout=600, cwd=REPO,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": REPO})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def battery(private: str, marker: str) -> dict:
    """One Scorer, run by whoever runs this process: honest batches of more answers than any first
    child's namespace could hold, every probe between honest answers, a private file of this user's,
    and after each probe an answer that says whether it is process 1 of a PID namespace."""
    secret, shm_key = "shortlist-" + secrets.token_hex(8), secrets.randbelow(1 << 30) + 1
    os.environ["SHORTLIST_PROBE_SECRET"] = secret  # in this process's environment only
    attacks = probes(marker, secret, shm_key, {"private_file": PRIVATE_PROBE.replace("PRIVATE", repr(private))})
    checks = probes(marker, secret, shm_key, {"pid_is_one": PID_IS_ONE})["pid_is_one"]
    try:
        with Scorer(workers=2, deadline_s=2.0) as scorer:
            chain = sources.parse("chain_sum")
            tasks = chain.tasks(range(5))
            honest = [scorer.score(chain, [t["seed"] for t in tasks] * 2, [t["answer"] for t in tasks] * 2)
                      for _ in range(3)]
            right = sources.parse("binary_matrix").task(1)["answer"]
            answers = [a for attack in attacks.values() for a in (attack, right, checks)]
            scores = scorer.score("binary_matrix", [1] * len(answers), answers)
            counts = vars(scorer.counts["binary_matrix"])
            json.dumps(counts)  # what 01 writes
            return {"confinement": scorer.confinement, "uid": os.getuid(), "honest": honest,
                    "probes": dict(zip(attacks, scores[::3])), "between": scores[1::3], "pid_is_one": scores[2::3],
                    "counts": counts, "shm_left": shm_key in shm_keys(), "written": os.listdir(marker)}
    finally:
        shm_remove(shm_key)


@pytest.mark.skipif(os.geteuid() != 0, reason="CI runs as root: the non-root path is a throwaway uid it drops to")
@pytest.mark.parametrize("uid, refuse_unshare", [(None, False), (THROWAWAY, False), (None, True)],
                         ids=["root", "throwaway user", "root, unshare refused"])
def test_the_probes_as_root_as_a_throwaway_user_and_without_namespaces(tmp_path, uid, refuse_unshare):
    """What once failed: as a non-root user every honest answer scored 0.0 after the first; an answer could
    read the user's private files, other processes' /proc, leave SysV shared memory behind, fill its
    scratch, and forge the counts. Where unshare is refused, the next layer holds instead, and the
    record says which."""
    got = run_battery(tmp_path, uid, refuse_unshare)
    c = got["confinement"]
    answers = f"{isolation.UNPRIVILEGED}:{isolation.UNPRIVILEGED}" if uid is None else f"{uid}:{uid}"
    assert got["uid"] == (0 if uid is None else uid) and c["user"] == answers
    namespaces = not refuse_unshare and (uid is None or user_namespaces_allowed(uid))  # as the machine allows
    assert c["namespaces_held_by"] == ("none" if not namespaces else "root" if uid is None else "user namespace")
    assert c["network_namespace"] is namespaces and c["ipc_namespace"] is namespaces
    assert c["process_tree"] == ("pid_namespace" if namespaces else "process_group")
    assert c["scratch"] == (f"tmpfs {Limits.scratch_mb} MiB" if namespaces else "none: files cannot grow")
    assert c["capabilities"] == 0 and c["landlock_abi"] >= 1 and c["seccomp"] is True
    assert got["honest"] == [[1.0] * 10] * 3
    assert got["between"] == [1.0] * len(got["probes"])  # no probe moved an honest score
    assert got["pid_is_one"] == [float(namespaces)] * len(got["probes"])  # the recorded tree held for every answer
    probes_ = {k: v for k, v in got["probes"].items() if k != "forged_reply"}
    assert probes_ == dict.fromkeys(probes_, 0.0), {k: v for k, v in probes_.items() if v}
    assert got["counts"]["refused"] <= got["counts"]["answers"] and got["counts"]["timeouts"] == 0
    assert got["shm_left"] is False and got["written"] == []


@pytest.mark.parametrize("where", ["/", "parent"])
def test_an_answer_reads_nothing_beside_the_scorers_code_from_any_working_directory(tmp_path, where):
    """The working directory is a sys.path entry of the scorer ('' made absolute). Run from / or from
    the checkout's parent, the read rule once granted the folder below it: all of /, or the checkout."""
    import shortlist
    package = os.path.dirname(os.path.realpath(shortlist.__file__))
    secret = os.path.join(os.path.dirname(package), ".read-rule-probe-" + secrets.token_hex(4))
    with open(secret, "wb") as f:
        f.write(b"\xff")  # readable by anyone: only the read rule stands between an answer and it
    os.chmod(secret, 0o644)
    answer = probes(str(tmp_path), "x", 1, {"read": PRIVATE_PROBE.replace("PRIVATE", repr(secret))})["read"]
    code = ("import json, sys; from shortlist.scoring import Scorer\n"
            "with Scorer(workers=1, deadline_s=2.0) as s:\n"
            "    print(json.dumps([s.score('binary_matrix', [1], [sys.argv[1]]), s.confinement['user']]))")
    cwd = "/" if where == "/" else os.path.dirname(os.path.dirname(package))
    try:
        done = subprocess.run([sys.executable, "-c", code, answer], capture_output=True, text=True, timeout=300,
                              cwd=cwd, env={"PATH": "/usr/bin:/bin"})
    finally:
        os.unlink(secret)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1])[0] == [0.0]


IMPORT_PROBE = """
import importlib
candidates = [m for m in CANDIDATES if m not in sys.modules]
try:
    importlib.import_module(candidates[0]); report(1)
except (ImportError, OSError, IndexError):
    report(0)"""


@pytest.mark.parametrize("candidates", [("colorsys", "wave", "sndhdr"), ("_lsprof", "mmap", "_bisect")],
                         ids=["python module", "extension module"])
def test_an_answer_imports_a_standard_module_its_scorer_had_not_loaded(candidates):
    """As root the answers run as nobody, who cannot enter a 0700 folder above the interpreter (/root
    under pyenv, a CI's home): an import not made before the fork failed. Where the interpreter lies
    somewhere nobody may go, that is what this exercises; elsewhere it holds either way."""
    body = IMPORT_PROBE.replace("CANDIDATES", repr(candidates))
    answer = probes("/nonexistent", "x", 1, {"import": body})["import"]
    with Scorer(workers=1, deadline_s=5.0) as scorer:
        assert scorer.score("binary_matrix", [1], [answer]) == [1.0]
