"""Probes of an answer's escape, for the scoring tests (test_zygote.py, test_zygote_users.py): each reports
what it achieved through the one channel an answer has, its own reply (1.0: the attack worked; 0.0: it
was refused); and the SysV shared memory a probe may leave behind."""
import ctypes
import os

from shortlist.scoring.zygote import Limits


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
