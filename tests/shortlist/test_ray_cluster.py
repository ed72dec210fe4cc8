"""The Ray executor (shortlist/executors/ray_cluster.py) on a local cluster with fake GPUs: what a job reads is
shipped, what it writes comes back, a lost worker is a failed job, a cluster without GPUs is one line."""
import json
import os
import socket
import signal
import subprocess
import sys
import threading
import time

import pytest

from shortlist import executors
from tests.conftest import needs_ray
from tests.processes import gone


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
    assert gone(pids) == []  # the job died with its worker


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
