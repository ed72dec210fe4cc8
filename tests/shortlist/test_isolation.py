"""The contracts of the kernel layers, each in a forked child that reports what the kernel did:
isolation.py (PID, IPC and mount namespaces, privileges), landlock.py, syscalls.py, hugepages.py."""
import ctypes
import json
import os
import secrets
import socket
import threading
import time
from pathlib import Path

import pytest

from shortlist.scoring import hugepages
from shortlist.scoring import isolation
from shortlist.scoring import landlock
from shortlist.scoring import syscalls


def in_child(body, *, pids=None) -> dict:
    """Run body() in a forked child (in its own PID namespace with pids) and return its dict."""
    r, w = os.pipe()
    pid = pids.fork() if pids else os.fork()
    if pid == 0:
        try:
            os.write(w, json.dumps(body()).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = os.read(r, 1 << 16)
    os.waitpid(pid, 0)
    return json.loads(data)


def attempt(action) -> str:
    try:
        action()
        return "done"
    except OSError as e:
        return type(e).__name__


libc = ctypes.CDLL(None, use_errno=True)
IPC_CREAT, IPC_RMID = 0o1000, 0


def shm_keys() -> set[int]:
    """The keys of the SysV shared memory segments of this process's IPC namespace."""
    with open("/proc/sysvipc/shm") as f:
        return {int(line.split()[0]) for line in f.readlines()[1:]}


def shmget(key: int) -> None:
    if libc.shmget(key, 1 << 20, IPC_CREAT | 0o600) < 0:
        raise OSError(ctypes.get_errno(), "shmget")


def shm_remove(key: int) -> None:
    """Where a test fails, the segment it made must not stay behind in the machine's namespace."""
    if key in shm_keys():
        libc.shmctl(libc.shmget(key, 0, 0), IPC_RMID, None)


def test_the_answer_filter_refuses_processes_sockets_and_devices_but_not_threads(tmp_path):
    program = syscalls.build(syscalls.ANSWER)
    if program is None:
        pytest.skip("libseccomp (pyseccomp) is not available")

    def body():
        assert syscalls.load(program)
        thread = threading.Thread(target=time.sleep, args=(0.01,))
        thread.start()
        thread.join()
        return {"fork": attempt(os.fork), "socket": attempt(socket.socket),
                "mknod": attempt(lambda: os.mknod(str(tmp_path / "null"), 0o600 | 0o020000, os.makedev(1, 3))),
                "kill": attempt(lambda: os.kill(os.getppid(), 0)), "shmget": attempt(lambda: shmget(key)),
                "memfd": attempt(lambda: os.memfd_create("x")), "thread": "done"}
    key = secrets.randbelow(1 << 30) + 1
    try:
        assert in_child(body) == {"fork": "PermissionError", "socket": "PermissionError", "mknod": "PermissionError",
                                  "kill": "PermissionError", "shmget": "PermissionError", "memfd": "PermissionError",
                                  "thread": "done"}
    finally:
        shm_remove(key)


def test_the_zygote_filter_still_lets_it_fork():
    program = syscalls.build(syscalls.KERNEL)
    if program is None:
        pytest.skip("libseccomp (pyseccomp) is not available")

    def body():
        assert syscalls.load(program)
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        return {"fork": "done", "socket": attempt(socket.socket)}
    assert in_child(body) == {"fork": "done", "socket": "PermissionError"}


def test_landlock_confines_reads_to_the_interpreter_and_writes_to_its_directory(tmp_path):
    if landlock.abi() < 1:
        pytest.skip("no Landlock here")
    inside, outside, private = tmp_path / "inside", tmp_path / "outside", tmp_path / "private"
    inside.mkdir()
    private.write_text("secret")
    os.chmod(private, 0o600)
    readable = landlock.readable()
    assert not any(str(tmp_path).startswith(p) for p in readable) and "/proc" not in readable

    def body():
        isolation.no_new_privs()  # what Landlock needs of a process without CAP_SYS_ADMIN
        abi = landlock.restrict(landlock.ruleset(readable, str(inside), writable=True))
        return {"abi": abi, "inside": attempt(lambda: open(inside / "x", "w").close()),
                "outside": attempt(lambda: open(outside, "w").close()),
                "private": attempt(lambda: open(private).read()), "list": attempt(lambda: os.listdir(tmp_path)),
                "stdlib": attempt(lambda: open(os.__file__).read()),
                "pytest": attempt(lambda: open(pytest.__file__).read()),
                "other_cmdline": attempt(lambda: open(f"/proc/{os.getppid()}/cmdline").read()),
                "init_cmdline": attempt(lambda: open("/proc/1/cmdline").read()),
                "null": attempt(lambda: open(os.devnull, "w").write("x")),
                "urandom": attempt(lambda: open("/dev/urandom", "rb").read(1))}
    got = in_child(body)
    denied = dict.fromkeys(("outside", "private", "list", "other_cmdline", "init_cmdline"), "PermissionError")
    assert got == {"abi": got["abi"], "inside": "done", "stdlib": "done", "pytest": "done", "null": "done",
                   "urandom": "done", **denied} and got["abi"] >= 1
    assert not outside.exists()


def test_the_read_rule_grants_imported_packages_not_the_path_entry_above_them(tmp_path, monkeypatch):
    """The working directory is a sys.path entry ('' made absolute); a package an editable install's
    finder imported from below it gives its own folder, never the entry's folder around it."""
    import importlib.util
    import sys
    work = tmp_path / "work"
    package, single = work / "checkout" / "probe_pkg", work / "checkout" / "probe_mod.py"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub.py").write_text("")
    single.write_text("")
    (work / "checkout" / "secret").write_text("s3cret")
    monkeypatch.setattr(sys, "path", [str(work), *sys.path])
    for name, path, search in (("probe_pkg", package / "__init__.py", [str(package)]),
                               ("probe_pkg.sub", package / "sub.py", None), ("probe_mod", single, None)):
        spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=search)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        monkeypatch.setitem(sys.modules, name, module)
    readable = landlock.readable()
    assert str(package) in readable and str(single) in readable
    secret = str(work / "checkout" / "secret")
    assert [p for p in readable if secret == p or secret.startswith(p.rstrip("/") + "/")] == []


def test_the_read_rule_from_the_parent_of_a_checkout_named_shortlist_grants_no_file_of_the_checkout(tmp_path):
    """Run from the parent of a checkout named `shortlist` (what git clone names it), the package imports as
    a namespace whose path is the checkout root: an answer confined by the rule still reads the code it
    imported, and neither the checkout's README nor its tests."""
    if landlock.abi() < 1:
        pytest.skip("no Landlock here")
    import subprocess
    import sys
    checkout = Path(landlock.__file__).resolve().parents[2]
    (tmp_path / "shortlist").symlink_to(checkout, target_is_directory=True)
    probe = """if True:
        import json, os
        import shortlist
        from shortlist.scoring import isolation, landlock
        readable = landlock.readable()
        pid = os.fork()
        if pid == 0:
            isolation.no_new_privs()
            landlock.restrict(landlock.ruleset(readable, os.getcwd(), writable=False))
            got = {}
            for name in ("README.md", "tests/conftest.py", "shortlist/scoring/landlock.py"):
                try:
                    open(os.path.join(CHECKOUT, name)).read(1)
                    got[name] = "done"
                except OSError as e:
                    got[name] = type(e).__name__
            print(json.dumps({"namespace": getattr(shortlist, "__file__", None) is None, "read": got,
                              "readable": readable}))
            os._exit(0)
        os.waitpid(pid, 0)
    """.replace("CHECKOUT", repr(str(checkout)))
    ran = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    got = json.loads(ran.stdout)
    assert got["read"] == {"README.md": "PermissionError", "tests/conftest.py": "PermissionError",
                           "shortlist/scoring/landlock.py": "done"}, (got["namespace"], got["readable"])
    assert str(checkout) not in got["readable"]


def test_landlock_without_a_writable_directory_allows_no_change_there(tmp_path):
    if landlock.abi() < 1:
        pytest.skip("no Landlock here")
    home = tmp_path / "home"
    home.mkdir()

    def body():
        isolation.no_new_privs()
        assert landlock.restrict(landlock.ruleset(landlock.readable(), str(home), writable=False))
        return {"create": attempt(lambda: open(home / "x", "w").close()),
                "mkdir": attempt(lambda: os.mkdir(home / "d")), "list": attempt(lambda: os.listdir(home))}
    assert in_child(body) == {"create": "PermissionError", "mkdir": "PermissionError", "list": "done"}


@pytest.mark.skipif(os.geteuid() != 0, reason="an IPC namespace needs root (the server holds one in a user namespace)")
def test_sysv_shared_memory_dies_with_its_ipc_namespace():
    key = secrets.randbelow(1 << 30) + 1

    def body(own: bool):
        return lambda: {"own": own and isolation.own_ipc(), "shmget": attempt(lambda: shmget(key))}
    try:
        assert in_child(body(False)) == {"own": False, "shmget": "done"}
        assert key in shm_keys()  # the control: without a namespace of its own, the segment outlives its process
        shm_remove(key)
        assert in_child(body(True)) == {"own": True, "shmget": "done"}
        assert key not in shm_keys()
    finally:
        shm_remove(key)


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace needs root (the server holds one in a user namespace)")
def test_a_scratch_tmpfs_bounds_what_is_written_beneath_it_and_leaves_nothing(tmp_path):
    home = tmp_path / "home"
    home.mkdir()

    def body():
        took, written = isolation.scratch_tmpfs(str(home), 4, None), 0
        for n in range(16):  # many files: no per-file limit is what bounds them
            try:
                with open(home / f"f{n}", "wb") as f:
                    for _ in range(4):
                        f.write(b"x" * (1 << 20))
                        f.flush()
                        written += 1
            except OSError:
                break
        return {"took": took, "written_mb": written, "mounts": open("/proc/self/mountinfo").read().count(str(home))}
    got = in_child(body)
    assert got["took"] and got["written_mb"] <= 4 and got["mounts"] == 1
    assert os.listdir(home) == []  # on disk: nothing, and the tmpfs went with the process
    assert str(home) not in open("/proc/self/mountinfo").read()  # its mount never reached this namespace


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to nobody needs root")
def test_dropped_privileges_bind_the_process_limit_and_leave_no_capability():
    def body():
        who = isolation.drop_privileges(isolation.real_root(), isolation.last_cap())
        isolation.limit({"NPROC": 0})
        return {"who": who, "caps": isolation.capabilities(), "fork": attempt(os.fork)}
    assert in_child(body) == {"who": "65534:65534", "caps": 0, "fork": "BlockingIOError"}


def test_killing_process_1_of_a_pid_namespace_kills_what_it_started():
    def body():  # in a child: PidNamespaces makes its process a subreaper, which pytest should not become
        pids = isolation.PidNamespaces()
        if not pids.available:
            return {"skip": True}
        r, w = os.pipe()
        child = pids.fork()
        if child == 0:
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            os.write(w, str(os.getpid()).encode())
            time.sleep(60)
            os._exit(0)
        inner = int(os.read(r, 100))
        grandchildren = [p for p in os.listdir("/proc") if p.isdigit() and _parent(p) == child]
        isolation.kill_tree(child)
        os.waitpid(child, 0)
        deadline = time.monotonic() + 3
        while any(_state(p) not in ("Z", "gone") for p in grandchildren) and time.monotonic() < deadline:
            time.sleep(0.02)
        return {"inner": inner, "grandchildren": len(grandchildren), "left": [_state(p) for p in grandchildren]}
    got = in_child(body)
    if got.get("skip"):
        pytest.skip("PID namespaces are refused here")
    assert got["inner"] == 1 and got["grandchildren"] == 1 and got["left"] in (["gone"], ["Z"])


THROWAWAY = 61337  # a uid no account has: the user a non-root scorer runs as, in a forked child


def as_throwaway_user() -> None:
    os.setgroups([])
    os.setresgid(THROWAWAY, THROWAWAY, THROWAWAY)
    os.setresuid(THROWAWAY, THROWAWAY, THROWAWAY)
    libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE, which the uid change cleared (an exec would have set it)


def forks_in_turn(pids) -> list:
    """Fork three children one after another, each reporting whether it is process 1, and waited for
    before the next: a non-root zygote that entered a PID namespace it could not leave failed the
    second fork here with ENOMEM."""
    seen = []
    for _ in range(3):
        try:
            seen.append(in_child(lambda: {"one": os.getpid() == 1}, pids=pids)["one"])
        except OSError as e:
            seen.append(type(e).__name__)
    return seen


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become a throwaway user")
def test_a_pid_namespace_per_child_is_not_tried_where_setns_back_would_be_refused():
    """A non-root user in a user namespace of its own, but still in the machine's PID namespace (as a
    zygote that drops to a throwaway user is): unshare(CLONE_NEWPID) would succeed and setns() back
    fail, leaving every later child in the first one's namespace. It is not tried; children lead
    process groups."""
    def body():
        as_throwaway_user()
        assert libc.unshare(0x10000000) == 0  # CLONE_NEWUSER
        pids = isolation.PidNamespaces()
        return {"available": pids.available, "children": forks_in_turn(pids)}
    assert in_child(body) == {"available": False, "children": [False, False, False]}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become a throwaway user")
def test_as_a_non_root_user_the_server_gives_every_child_a_pid_namespace_of_its_own():
    """The server's way (isolation.enter_namespaces, then fork once): its child is process 1 of a PID
    namespace its user namespace owns, so every child it forks is process 1 of a new one."""
    if not in_child(lambda: as_throwaway_user() or {"allowed": libc.unshare(0x10000000) == 0})["allowed"]:
        pytest.skip("this machine refuses user namespaces to non-root users")

    def body():
        as_throwaway_user()
        layers = isolation.enter_namespaces()

        def server():
            pids = isolation.PidNamespaces()
            return {"one": os.getpid() == 1, "available": pids.available, "children": forks_in_turn(pids)}
        return {"layers": layers, "server": in_child(server)}
    got = in_child(body)
    assert got["layers"] == {"namespaces_held_by": "user namespace", "network_namespace": True, "pid_namespace": True}
    assert got["server"] == {"one": True, "available": True, "children": [True, True, True]}


def _parent(pid: str) -> int:
    try:
        return int(next(line for line in open(f"/proc/{pid}/status") if line.startswith("PPid:")).split()[1])
    except (OSError, StopIteration):
        return -1


def _state(pid: str) -> str:
    try:
        return next(line for line in open(f"/proc/{pid}/status") if line.startswith("State:")).split()[1]
    except (OSError, StopIteration):
        return "gone"


def test_collapse_puts_a_heap_on_huge_pages_where_the_kernel_can():
    block = bytearray(16 << 20)  # a populated heap region of its own, several 2 MiB pages wide
    for i in range(0, len(block), 4096):
        block[i] = 1

    def body():
        return {"mb": hugepages.collapse(), "huge_kb": int(next(
            line for line in open("/proc/self/smaps_rollup") if line.startswith("AnonHugePages:")).split()[1])}
    got = in_child(body)
    if got["mb"] == 0:
        pytest.skip("this kernel collapses nothing (THP off, or Linux < 6.1)")
    assert got["huge_kb"] >= 8 << 10
