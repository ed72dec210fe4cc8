"""Scoring under hostile answers as root and as a throwaway user: the same probes, a private file of the
user's, honest answers; what an answer reads from any working directory, and the standard modules it
may import that its scorer had not loaded."""
import ctypes
import json
import os
import secrets
import subprocess
import sys

import pytest

from shortlist import sources
from shortlist.scoring import isolation
from shortlist.scoring import Scorer
from shortlist.scoring.zygote import Limits
from tests.shortlist.probes import PRIVATE_PROBE, PID_IS_ONE, probes, shm_keys, shm_remove


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
    code = "import json, sys; from tests.shortlist import test_zygote_users as t; print(json.dumps(t.battery(*sys.argv[1:])))"
    spec = {"uid": uid, "refuse_unshare": refuse_unshare, "code": code,
            "args": [str(home / "private"), str(tmp_path / "pwned")],
            "env": {"PATH": "/usr/bin:/bin", "PYTHONPATH": REPO, "HOME": str(home)},
            "paths": [*sys.path, sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable)), REPO,
                      str(tmp_path)]}
    done = subprocess.run([sys.executable, "-c", "from tests.shortlist import test_zygote_users; test_zygote_users.launch()",
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
            tasks = chain.tasks(range(10))  # 10 tasks: an answer repeated for one task is scored once
            honest = [scorer.score(chain, [t["seed"] for t in tasks], [t["answer"] for t in tasks]) for _ in range(3)]
            # each probe's honest answer and check on a task of their own: each is scored in a process of its own
            right = [t["answer"] for t in sources.parse("binary_matrix").tasks(range(1, len(attacks) + 1))]
            answers = [a for k, attack in enumerate(attacks.values()) for a in (attack, right[k], checks)]
            seeds = [s for k in range(len(attacks)) for s in (1, k + 1, k + 1)]
            scores = scorer.score("binary_matrix", seeds, answers)
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
