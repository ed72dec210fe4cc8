"""Where jobs run (shortlist/executors/): the local executor's slots, its stops, the lock of an output
folder, the Ray executor on a local cluster with fake GPUs. Jobs here are tiny modules written into tmp_path."""
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from shortlist import executors, output, provenance
from shortlist.__main__ import main as shortlist_main
from tests.processes import alive, gone

@pytest.mark.parametrize("value, expected", [("1,3", ["1", "3"]), ("", []), ("-1", []), ("0", ["0"])])
def test_visible_gpus_follow_cuda_visible_devices(monkeypatch, value, expected):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    assert executors.visible_gpus() == expected


@pytest.mark.parametrize("changes, fragment", [
    ({"executor": "slurm"}, "--executor slurm"),
    ({"per_gpu": 0}, "--per-gpu 0"),
    ({"per_gpu": "two"}, "--per-gpu two"),
    ({"per_gpu": True}, "--per-gpu True"),
    ({"per_gpu": 1, "options": {"job_gib": 4.0}}, "for --per-gpu auto"),
    ({"per_gpu": "auto", "options": {"job_gib": float("nan")}}, "--job-gib nan"),
    ({"options": {"address": "10.0.0.1:6379"}}, "--address goes with --executor ray"),
    ({"options": {"cpus_per_job": 2.0}}, "--cpus-per-job goes with --executor ray"),
    ({"options": {"gpus_per_node": 2}}, "--gpus-per-node: no executor takes it"),
    ({"options": 5}, "give the executor's flags as a dict"),
    ({"per_gpu": "auto", "options": {"job_gib": "4"}}, "--job-gib 4: a job's peak GPU memory"),
    ({"executor": "ray", "options": {"cpus_per_job": True}}, "--cpus-per-job True: give a positive number"),
])
def test_bad_placements_are_refused_in_one_line(changes, fragment):
    with pytest.raises(executors.PlacementError) as e:
        executors.Placement(**changes)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_ray_without_ray_installed_is_refused_in_one_line_that_says_how_to_install_it(monkeypatch, capsys,
                                                                                        no_model_loads, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(executors.PlacementError, match=r"pip install '\.\[ray\]'"):
        executors.Placement(executor="ray")
    out = tmp_path / "cat"
    assert shortlist_main(["screen", "--all", "--model", "tiny", "--out", str(out), "--executor", "ray"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --executor ray needs Ray") and "\n" not in err
    assert not out.exists()  # refused before anything is written


def test_placement_flags_go_with_the_catalog_only(capsys, no_model_loads):
    assert shortlist_main(["screen", "--model", "tiny", "--per-gpu", "2"]) == 2
    assert "go with --all, --levels or --grid" in capsys.readouterr().err


# --- the local executor -----------------------------------------------------------------------------

JOB = '''
import json, os, sys, time
out, name, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
os.makedirs(out, exist_ok=True)
started = time.time()
time.sleep(seconds)
seen = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "SHORTLIST_PER_GPU", "SHORTLIST_PLACEMENT")}
with open(os.path.join(out, name + ".json"), "w") as f:
    json.dump({"seen": seen, "started": started, "ended": time.time(), "pid": os.getpid(), "ppid": os.getppid(),
               "scratch": open(sys.argv[4]).read() if len(sys.argv) > 4 else None}, f)
'''


@pytest.fixture
def jobs(tmp_path, monkeypatch):
    """A module `job` on every job's path: it sleeps, then writes what it saw into <out>/<name>.json."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "job.py").write_text(JOB)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "mods"), os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "out"

    def make(name, seconds=0.0, **kw):  # gpu_process=False: no torch import to cap a GPU these jobs do not use
        return executors.Job(name, "job", (executors.OUT, name, str(seconds)), gpu_process=False, **kw)
    return make, out


def test_jobs_fill_every_slot_of_every_gpu_each_seeing_only_its_own(jobs):
    make, out = jobs
    ex = executors.Local({"0": 2, "1": 1})
    ended = []
    ran = ex.run([make(f"j{i}", 3) for i in range(6)], out, done=ended.append, log=lambda line: None)
    assert [r.job.name for r in ended] == [r.job.name for r in ran] and sorted(r.job.name for r in ran) == \
        [f"j{i}" for i in range(6)]
    seen = {r.job.name: json.loads((out / f"{r.job.name}.json").read_text()) for r in ran}
    for r in ran:
        s = seen[r.job.name]["seen"]
        assert r.rc == 0 and r.why is None and json.loads(s["SHORTLIST_PLACEMENT"]) == r.where
        assert s["CUDA_VISIBLE_DEVICES"] == r.where["gpu"] and s["SHORTLIST_PER_GPU"] is None  # one variable: the placement
        assert r.where["per_gpu"] == {"0": 2, "1": 1}[r.where["gpu"]] and r.where["slots"] == 3
    # a queue, not a split: the first three take the three slots (slot 1 of every GPU first)
    first = sorted(ran, key=lambda r: seen[r.job.name]["started"])[:3]
    assert sorted((r.where["slot"], r.where["gpu"]) for r in first) == [(1, "0"), (2, "1"), (3, "0")]
    starts = sorted(s["started"] for s in seen.values())
    assert starts[2] < min(s["ended"] for s in seen.values())  # three at once...
    assert max(sum(s["started"] <= t < s["ended"] for s in seen.values()) for t in starts) == 3  # ...never four


def test_without_a_gpu_jobs_run_one_at_a_time_and_a_job_gets_its_files(jobs, monkeypatch):
    make, out = jobs
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    job = executors.Job("a", "job", (executors.OUT, "a", "0", f"{executors.SCRATCH}/note.txt"),
                        files=(("note.txt", b"hello"),))
    ran = executors.Local({}).run([job, make("b")], out, log=lambda line: None)
    a, b = (json.loads((out / f"{n}.json").read_text()) for n in "ab")
    assert a["scratch"] == "hello" and a["ended"] <= b["started"]
    assert a["seen"]["CUDA_VISIBLE_DEVICES"] is None and ran[0].where["gpu"] is None


def test_a_job_records_the_executor_that_ran_it_by_its_registered_name(jobs):
    """An executor built on Local (a registry entry of its own) is recorded as itself, not as "local"."""
    make, out = jobs

    class Cpu(executors.Local):
        name = "cpu"
    [ran] = Cpu({}).run([make("a")], out, log=lambda line: None)
    assert ran.where["executor"] == "cpu" == json.loads(json.loads((out / "a.json").read_text())["seen"]
                                                        ["SHORTLIST_PLACEMENT"])["executor"]

def test_a_job_that_dies_ends_with_its_status_and_the_others_go_on(jobs, tmp_path):
    make, out = jobs
    (tmp_path / "mods" / "dies.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    ran = executors.Local({"0": 1}).run([executors.Job("dies", "dies"), make("lives")], out, log=lambda line: None)
    assert [(r.job.name, r.rc, r.why) for r in ran] == [("dies", -9, "exited with -9"), ("lives", 0, None)]


TREE = '''
import os, subprocess, sys, time
from shortlist import executors, output
# a child in a session of its own, started as jupyter_client starts a kernel: through the launcher
kid = subprocess.Popen(executors.launcher("job", [sys.argv[1], "kernel", "600"], os.getpid(), False),
                       start_new_session=True)
open(os.path.join(sys.argv[1], "pids"), "w").write(f"{os.getpid()} {kid.pid}")
time.sleep(600)
'''


def _wait_for(path: Path, within=60.0) -> str:
    deadline = time.monotonic() + within
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return path.read_text()


def test_a_signal_stops_every_job_down_to_a_child_in_its_own_session(jobs, tmp_path):
    make, out = jobs
    out.mkdir()
    (tmp_path / "mods" / "tree.py").write_text(TREE)
    stopped = {}

    def interrupt():
        stopped["pids"] = [int(p) for p in _wait_for(out / "pids").split()]
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(executors.Stopped) as e:
        with executors.stop_on_signals():
            executors.Local({}).run([executors.Job("tree", "tree", (executors.OUT,)), make("never")], out,
                                    log=lambda line: None)
    assert e.value.code == 130 and str(e.value) == "SIGINT"
    assert [pid for pid in stopped["pids"] if alive(pid)] == []  # killed and ended before the stop returns
    assert not (out / "never.json").exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored


DRIVER = '''
import sys
from shortlist import executors, output
executors.Local({}).run([executors.Job("tree", "tree", (sys.argv[1],))], sys.argv[1])
'''


def test_a_kill_9_of_the_batch_takes_its_jobs_with_it(jobs, tmp_path):
    """PR_SET_PDEATHSIG in each job's process (the launcher): the job, and its child in a session of its
    own, die with the batch that nobody could stop."""
    make, out = jobs
    out.mkdir()
    (tmp_path / "mods" / "tree.py").write_text(TREE)
    batch = subprocess.Popen([sys.executable, "-c", DRIVER, str(out)])
    pids = [int(p) for p in _wait_for(out / "pids").split()]
    assert all(map(alive, pids))
    batch.kill()
    batch.wait()
    assert gone(pids) == []


HELPERS = '''
import subprocess, sys
from shortlist import executors
# a helper as the task builder is one: deaf to Ctrl-C, it ends once its stdin closes, after a teardown of its own
helper = subprocess.Popen([sys.executable, "-c", "import signal, subprocess, sys, time\\n"
                           "signal.signal(signal.SIGINT, signal.SIG_IGN)\\n"
                           "kid = subprocess.Popen(['sleep', '60'], stdout=subprocess.DEVNULL, start_new_session=True)\\n"
                           "print(kid.pid, flush=True)\\nsys.stdin.read()\\ntime.sleep(5)"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
print(helper.pid, helper.stdout.readline().strip(), flush=True)
executors.exit(130)
'''


def test_a_stopped_command_leaves_no_helper_of_its_own_behind():
    """exit(130) leaves by os._exit, past the exit hooks that close a process's helpers: they are killed, and
    ended, first (a task builder's own teardown had outlived the batch), down to a child in its own session."""
    ran = subprocess.run([sys.executable, "-c", HELPERS], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 130, ran.stderr
    pids = [int(p) for p in ran.stdout.split()]
    left = [pid for pid in pids if alive(pid)]
    for pid in left:  # not this test's to leave either
        os.kill(pid, signal.SIGKILL)
    assert len(pids) == 2 and left == []


SEMAPHORES = """
import multiprocessing, sys
from shortlist import executors
queue = multiprocessing.get_context("spawn").SimpleQueue()  # named semaphores the resource tracker registers
print(queue._rlock._semlock.name, flush=True)
executors.exit(130)
"""


def test_a_stopped_command_leaves_no_named_semaphore_behind():
    """exit(130) kills the command's helpers but not multiprocessing's resource tracker, which unlinks the
    semaphores a spawn queue left once the command is gone (killed, they stayed in /dev/shm until a reboot)."""
    ran = subprocess.run([sys.executable, "-c", SEMAPHORES], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 130, ran.stderr
    shm = Path("/dev/shm") / f"sem.{ran.stdout.strip().lstrip('/')}"
    deadline = time.monotonic() + 10
    while shm.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not shm.exists()


def test_a_job_whose_parent_died_before_it_could_watch_does_not_run(jobs, tmp_path):
    make, out = jobs
    done = subprocess.run(executors.launcher("job", [str(out), "orphan", "0"], parent=1, gpu=False))
    assert done.returncode == 1 and not (out / "orphan.json").exists()


# --- auto -------------------------------------------------------------------------------------------

def test_auto_fits_jobs_in_each_gpus_free_memory_at_the_per_job_peak(monkeypatch):
    monkeypatch.setattr(executors.sizing, "free_gib", lambda gpus: {"0": 40.0, "1": 10.0})
    lines = []
    big = {"cpus": 64}  # cores enough not to bound it
    assert executors.auto(["0", "1"], None, [3.0, None, 3.5], lines.append, **big) == {"0": 8, "1": 2}  # 40 // 4 = 10
    assert "3.50 GiB a job (measured)" in lines[-1] and "at most 8 a GPU (the most measured to pay, 8)" in lines[-1]
    assert executors.auto(["0", "1"], 19.5, [3.5], lines.append, **big) == {"0": 2, "1": 1}  # declared wins
    assert "at most" not in lines[-1]  # nothing capped: nothing said
    assert executors.auto(["0", "1"], 60.0, [], lines.append, **big) == {"0": 1, "1": 1}  # never fewer than one
    # a job keeps a CPU core busy: no more jobs in all than cores (Kaggle: 4 cores, two T4s -> 2 a GPU)
    assert executors.auto(["0", "1"], 3.5, [], lines.append, cpus=4) == {"0": 2, "1": 2}
    assert "at most 2 a GPU (4 CPU cores for 2 GPUs: a job keeps a core busy)" in lines[-1]
    assert executors.auto(["0", "1"], 3.5, [], lines.append, cpus=1) == {"0": 1, "1": 1}  # never fewer than one
    assert executors.auto(["0", "1"], None, [], lines.append) == {"0": 1, "1": 1}
    assert "no per-job peak" in lines[-1]
    assert executors.auto([], 4.0, [], lines.append) == {}


def test_a_job_records_where_it_ran(monkeypatch):
    monkeypatch.setenv(executors.PLACEMENT, json.dumps({"executor": "local", "slot": 2, "gpu": "0", "per_gpu": 2}))
    where = executors.placement_of_this_job()
    assert where == {"executor": "local", "slot": 2, "gpu": "0", "per_gpu": 2}
    assert executors.with_peak(where) == where  # no CUDA: no peak
    assert provenance.device(where)["placement"] == where and provenance.device()["placement"] is None
    monkeypatch.delenv(executors.PLACEMENT)
    assert executors.placement_of_this_job() is None and executors.with_peak(None) is None


# --- one run per output folder ------------------------------------------------------------------------

def test_a_second_run_on_the_same_folder_is_refused_in_one_line_naming_the_first(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom shortlist import executors\n"
                               "with executors.one_run(sys.argv[1]):\n    print('held', flush=True)\n"
                               "    time.sleep(600)\n", str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    with pytest.raises(executors.Busy) as e:
        with executors.one_run(tmp_path):
            pass
    assert f"pid {holder.pid} on {os.uname().nodename}, started " in str(e.value) and "\n" not in str(e.value)
    holder.kill()  # the lock dies with its holder
    holder.wait()
    with executors.one_run(tmp_path):
        with pytest.raises(executors.Busy, match=f"pid {os.getpid()}"):  # another open of the lock, same process
            with executors.one_run(tmp_path):
                pass


def test_a_run_refused_as_busy_in_a_folder_it_saw_as_new_leaves_the_holders_lock(tmp_path):
    """The race of issue 40: a run sees the folder as new, another makes it and takes its lock, the first is
    refused as busy; the holder's lock, record and folder stay, so a third run is refused too."""
    out = tmp_path / "new"
    with pytest.raises(executors.Busy):
        with output.removed_if_refused(out, (executors.LOCK, executors.HOLDER), executors.LOCK):  # seen as new
            holder = subprocess.Popen([sys.executable, "-c", "import os, sys, time\nfrom shortlist import executors\n"
                                       "os.mkdir(sys.argv[1])\nwith executors.one_run(sys.argv[1]):\n"
                                       "    print('held', flush=True)\n    time.sleep(600)\n", str(out)],
                                      stdout=subprocess.PIPE, text=True)
            assert holder.stdout.readline() == "held\n"
            with executors.one_run(out):
                pass
    try:
        assert files_in(out) == {executors.LOCK, executors.HOLDER}
        with pytest.raises(executors.Busy, match=f"pid {holder.pid} "):
            with executors.one_run(out):
                pass
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(RuntimeError):  # once no run holds it, a refused run's own leftovers go with its folder
        with output.removed_if_refused(tmp_path / "mine", (executors.LOCK, executors.HOLDER), executors.LOCK):
            (tmp_path / "mine").mkdir()
            with executors.one_run(tmp_path / "mine"):
                raise RuntimeError("refused under the lock")
    assert not (tmp_path / "mine").exists()


def test_who_holds_the_folder_is_said_only_while_it_is_held(tmp_path):
    with executors.one_run(tmp_path):
        assert files_in(tmp_path) == {executors.LOCK, executors.HOLDER}
        assert output.read_json(tmp_path / executors.HOLDER)["pid"] == os.getpid()
    assert files_in(tmp_path) == {executors.LOCK}  # no pid of a run that has ended
    with pytest.raises(RuntimeError):
        with executors.one_run(tmp_path):
            raise RuntimeError("the run failed")
    assert files_in(tmp_path) == {executors.LOCK}


def files_in(folder) -> set:
    return {p.name for p in folder.iterdir()}


def test_a_filesystem_without_flock_is_one_line(tmp_path, monkeypatch):
    import errno
    import fcntl

    def no_locks(fd, how):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(executors.Busy) as e:
        with executors.one_run(tmp_path):
            pass
    assert str(e.value) == (f"{tmp_path}: this filesystem cannot lock the run's folder (No locks available): "
                            f"give an --out on a local disk")


# --- Ray, on a local cluster with fake GPUs ---------------------------------------------------------------

