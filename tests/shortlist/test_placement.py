"""Where jobs run (shortlist/executors/): the local executor's slots, its stops, the lock of an output
folder, the Ray executor on a local cluster with fake GPUs. Jobs here are tiny modules written into tmp_path."""
import importlib.util
import json
import os
import socket
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from shortlist import executors, output, provenance
from shortlist.__main__ import main as shortlist_main
from tests.processes import alive

RAY = importlib.util.find_spec("ray") is not None
# a local Ray cluster takes ~10 s to start here: its tests are marked slow (make test-slow; CI installs the extra)
needs_ray = pytest.mark.skipif(not RAY and not os.environ.get("CI"),
                               reason="Ray, an optional extra, is not installed here (CI installs it)")


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


@pytest.mark.parametrize("value", ["²", "٣", "１"])
def test_a_per_gpu_of_non_ascii_digits_is_one_line_in_both_commands(value, capsys, no_model_loads, tmp_path):
    """str.isdigit() holds for '²' (which int() then refused with a traceback) and int() reads '٣' as 3."""
    from proof.__main__ import main as proof_main
    for main, argv in ((shortlist_main, ["screen", "--all", "--model", "tiny", "--out", str(tmp_path / "c")]),
                       (proof_main, ["run", "--preset", "smoke", "--out", str(tmp_path / "p")])):
        assert main([*argv, "--per-gpu", value]) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"error: --per-gpu {value}: give a whole number of jobs per GPU, 1 to 64, or auto"
    assert list(tmp_path.iterdir()) == []


@needs_ray
@pytest.mark.parametrize("command", [["shortlist", "screen", "--all", "--model", "tiny"],
                                     ["proof", "run", "--preset", "smoke"]], ids=["catalog", "proof"])
def test_a_ray_address_where_nothing_answers_is_one_quiet_line_and_writes_nothing(command, tmp_path):
    """ray.init retries such an address for minutes, printing its log; the command had not returned after 120 s."""
    out = tmp_path / "out"
    with socket.socket() as s:  # a port of this machine that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = subprocess.run([sys.executable, "-m", *command, "--out", str(out), "--executor", "ray", "--address",
                           f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"error: cannot join a Ray cluster at --address 127.0.0.1:{port}: nothing answers there "
                           f"(Connection refused) (start one with `ray start --head`)\n")
    assert not out.exists()


def test_placement_flags_go_with_the_catalog_only(capsys, no_model_loads):
    assert shortlist_main(["screen", "--model", "tiny", "--per-gpu", "2"]) == 2
    assert "go with --all or --levels" in capsys.readouterr().err


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


def _gone(pids, within=30.0) -> list[int]:
    """The pids still alive after waiting for them up to `within` seconds."""
    deadline = time.monotonic() + within
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


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
    assert _gone(stopped["pids"], within=0.5) == []  # killed, not asked: nothing is left to wind down
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
    assert _gone(pids) == []


def test_a_job_whose_parent_died_before_it_could_watch_does_not_run(jobs, tmp_path):
    make, out = jobs
    done = subprocess.run(executors.launcher("job", [str(out), "orphan", "0"], parent=1, gpu=False))
    assert done.returncode == 1 and not (out / "orphan.json").exists()


# --- auto -------------------------------------------------------------------------------------------

def test_auto_fits_jobs_in_each_gpus_free_memory_at_the_per_job_peak(monkeypatch):
    monkeypatch.setattr(executors.sizing, "free_gib", lambda gpus: {"0": 40.0, "1": 10.0})
    lines = []
    assert executors.auto(["0", "1"], None, [3.0, None, 3.5], lines.append) == {"0": 10, "1": 2}  # 40 // 4, 10 // 4
    assert "3.50 GiB a job (measured)" in lines[-1]
    assert executors.auto(["0", "1"], 19.5, [3.5], lines.append) == {"0": 2, "1": 1}  # declared wins
    assert executors.auto(["0", "1"], 60.0, [], lines.append) == {"0": 1, "1": 1}  # never fewer than one
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

@pytest.fixture
def ray_cluster(tmp_path, monkeypatch):
    """A local Ray cluster of 2 CPUs and 2 fake GPUs (ray.init(num_gpus=2)), for one test. Its workers take
    the environment at its start: the test's modules on their path, their machine's cache in tmp_path."""
    import ray
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "mods"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("SHORTLIST_CACHE", str(tmp_path / "machine"))
    monkeypatch.setenv("RAY_worker_niceness", "0")  # Ray's 15 starves its workers on a shared machine
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


WRITER = '''
import json, os, sys, time
out = sys.argv[1]
shipped = open(os.path.join(out, "in", "a.txt")).read()
os.makedirs(os.path.join(out, "res", "ckpt-1"), exist_ok=True)
open(os.path.join(out, "res", "ckpt-1", "weights"), "w").write("w1")
open(os.path.join(out, "res", "ckpt-1", "DONE"), "w").write("")
os.makedirs(os.path.join(out, "res", "ckpt-2"), exist_ok=True)
open(os.path.join(out, "res", "ckpt-2", "weights"), "w").write("half")  # no DONE: never sent
open(os.path.join(out, "cache", "compiled"), "w").write("x")
open(os.path.join(out, "pid"), "w").write(f"{os.getpid()} {os.getppid()}")
time.sleep(float(sys.argv[2]))
with open(os.path.join(out, "res", "result.json"), "w") as f:
    json.dump({"shipped": shipped, "where": json.loads(os.environ["SHORTLIST_PLACEMENT"]),
               "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "omp": os.environ.get("OMP_NUM_THREADS")}, f)
'''


def _writer_job(tmp_path, seconds):
    (tmp_path / "mods").mkdir(exist_ok=True)
    (tmp_path / "mods" / "writer.py").write_text(WRITER)
    return executors.Job("writer", "writer", (executors.OUT, str(seconds)), reads=("in",), writes=("res",),
                         units=(("res/ckpt-*", "DONE"),), caches=("cache",), gpu_process=False)


@pytest.mark.slow
@needs_ray
def test_a_ray_job_gets_what_it_reads_and_its_writes_come_back_to_the_driver(tmp_path, monkeypatch, ray_cluster):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    job = _writer_job(tmp_path, 0)
    out = tmp_path / "out"
    (out / "in").mkdir(parents=True)
    (out / "in" / "a.txt").write_text("shipped")
    (out / "res" / "ckpt-0").mkdir(parents=True)  # an old unit the job no longer has: pruned at its end
    lines = []
    ex = executors.Placement(executor="ray", per_gpu=2).start(lines.append)
    assert ex.remote is True  # the protocol's boolean, which the runner reads (its Ray task is another attribute)
    assert ex.capacity() == 4 and "4 jobs at once (0.5 GPU each)" in lines[0]
    [ran] = ex.run([job], out, log=lines.append)
    assert ran.rc == 0 and ran.why is None and ran.where["executor"] == "ray" and ran.where["per_gpu"] == 2
    result = json.loads((out / "res" / "result.json").read_text())
    assert result["shipped"] == "shipped" and result["where"] == {k: v for k, v in ran.where.items() if k != "slots"}
    assert result["cuda"] == ran.where["gpu"] and result["omp"] is None  # Ray's forced OMP_NUM_THREADS=1 undone
    assert (out / "res" / "ckpt-1" / "weights").read_text() == "w1" and not (out / "res" / "ckpt-2").exists()
    assert not (out / "res" / "ckpt-0").exists() and not (out / "cache").exists()  # caches stay on the machine
    assert [p.read_text() for p in (tmp_path / "machine" / "ray" / socket.gethostname() / "caches").glob("*/cache/compiled")] == ["x"]
    assert list((tmp_path / "machine" / "ray" / socket.gethostname() / "jobs").iterdir()) == []  # the worker's folder is gone
    assert any(line.startswith("writer: started on ") and ", GPU " in line for line in lines)


@pytest.mark.slow
@needs_ray
def test_a_lost_ray_worker_is_a_failed_job_and_what_it_sent_stays(tmp_path, ray_cluster):
    out = tmp_path / "out"
    (out / "in").mkdir(parents=True)
    (out / "in" / "a.txt").write_text("shipped")
    ex = executors.Placement(executor="ray").start(lambda line: None)
    pids = []

    def kill_the_worker():
        deadline = time.monotonic() + 120
        while not (out / "res" / "ckpt-1" / "DONE").exists() and time.monotonic() < deadline:
            time.sleep(0.2)  # the unit came back: now the worker dies
        job_pid = int(next((tmp_path / "machine" / "ray" / socket.gethostname() / "jobs").glob("*/out/pid")).read_text().split()[0])
        worker = int(open(f"/proc/{job_pid}/stat").read().rsplit(")", 1)[1].split()[1])
        pids.extend([job_pid, worker])
        os.kill(worker, signal.SIGKILL)
    threading.Thread(target=kill_the_worker, daemon=True).start()
    [ran] = ex.run([_writer_job(tmp_path, 600)], out, log=lambda line: None)
    assert ran.rc is None and ran.why.startswith("its Ray worker was lost: ") and "\n" not in ran.why
    assert (out / "res" / "ckpt-1" / "weights").read_text() == "w1"  # sent before the loss: a rerun has it
    assert not (out / "res" / "result.json").exists()
    assert _gone(pids) == []  # the job died with its worker


@pytest.mark.slow
@needs_ray
def test_a_ray_cluster_without_gpus_is_refused_in_one_line():
    code = ("import ray\nfrom shortlist import executors\n"
            "ray.init(num_cpus=1, num_gpus=0, include_dashboard=False)\n"
            "try:\n    executors.Placement(executor='ray').start()\n"
            "except executors.PlacementError as e:\n    print('refused:', e)\n"
            "print(executors.Placement(executor='ray', options={'cpus_per_job': 1}).start().capacity())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("refused:")]
    assert len(lines) == 1, done.stdout + done.stderr
    assert "has no node with the 1 GPU a job asks for (its nodes: 1 CPU 0 GPU)" in lines[0]
    assert "--cpus-per-job N" in lines[0]
    assert done.stdout.splitlines()[-1] == "1"  # a CPU job: num_cpus=1 on the cluster's one CPU
