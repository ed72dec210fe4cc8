"""The batch's jobs: where families run (slots, Ray), how a stopped or killed batch resumes, one run per
folder, and the notebooks' kernels on their way out."""
import shutil
from pathlib import Path

import nbformat
import pytest

from proof import checkpoint, files, kernel, runner
from proof.__main__ import main
from shortlist import sources
from tests.processes import alive, gone


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "notebooks"  # papermill's style: notebooks as files


# --- where families run: slots, Ray, signals, one run per folder ---------------------------------------

def _without(s, keys, out):
    """A copy of a finished run with these families' results, work and notebooks gone: a rerun does them."""
    copy = s.replace(out=str(out))
    shutil.copytree(s.out, copy.out)
    for key in keys:
        slug = sources.parse(key).slug
        files.result(copy.out, slug).unlink()
        shutil.rmtree(files.work(copy.out, slug))
        (files.notebooks(copy.out) / f"02_train_family.{slug}.ipynb").unlink()
    return copy


def _metrics(out, key):
    """A family's numbers, without the clock: what must not depend on where or how it ran."""
    from proof import records
    r = records.read(files.result(out, sources.parse(key).slug))
    return (r.before, r.after, r.gain, [{k: v for k, v in row.items() if k != "step_time"} for row in r.reward_curve],
            {k: v for k, v in r.scoring.items() if k != "seconds"})


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read().replace("\0", " ")
    except FileNotFoundError:
        return ""


def _mtimes(out) -> dict:
    return {str(p): p.stat().st_mtime_ns for p in Path(out).rglob("*") if p.is_file()}


def _wait_for(path, seconds=900, proc=None):
    import time
    deadline = time.monotonic() + seconds
    while not Path(path).exists() and time.monotonic() < deadline and (proc is None or proc.poll() is None):
        time.sleep(0.2)
    assert Path(path).exists(), f"{path} never appeared"


def test_a_second_run_on_the_same_out_is_refused_in_one_line_naming_the_first(no_model_loads, capsys, tmp_path):
    import os
    import socket

    from shortlist import executors
    out = tmp_path / "run"
    out.mkdir()
    with executors.one_run(out):
        assert main(["run", "--preset", "smoke", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {out} is in use by another run (pid {os.getpid()} on {socket.gethostname()}, "
                          f"started ") and err.endswith("give another --out") and "\n" not in err
    assert not files.predictions(out).exists()


def test_ray_without_ray_installed_is_refused_in_one_line_before_anything_is_written(no_model_loads, capsys,
                                                                                     tmp_path, monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    assert main(["run", "--preset", "smoke", "--out", str(tmp_path / "run"), "--executor", "ray"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: --executor ray needs Ray, an optional extra: pip install '.[ray]' in this repository "
                   "(or pip install 'ray==2.60.0')")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["local, 2 per GPU", "ray"])
def test_the_smoke_metrics_do_not_depend_on_where_the_families_ran(smoke_run, tmp_path, monkeypatch, executor):
    """Both families at once, sharing one (fake) GPU, or as Ray tasks on a local cluster with fake GPUs:
    each family's metrics are the smoke run's (one after another), and its result says where it ran."""
    import os

    from shortlist import executors
    s, _, _ = smoke_run
    copy = _without(s, s.families, tmp_path / "run")
    if executor == "ray":
        ray = __import__("ray") if os.environ.get("CI") else pytest.importorskip("ray")  # CI installs the extra
        monkeypatch.setenv("RAY_worker_niceness", "0")  # Ray's 15 starves its workers on a shared machine
        ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
        where = executors.Placement(executor="ray")
    else:
        monkeypatch.setattr(executors.local, "visible_gpus", lambda: ["0"])
        where = executors.Placement(per_gpu=2)
    log: list[str] = []
    try:
        assert runner.run(copy, log=log.append, where=where).failed == {}
    finally:
        if executor == "ray":
            ray.shutdown()
    placed = {}
    for key in s.families:
        assert _metrics(copy.out, key) == _metrics(s.out, key), key
        placed[key] = files.read_json(files.result(copy.out, sources.parse(key).slug))["device"]["placement"]
    if executor == "ray":
        assert sorted(p["gpu"] for p in placed.values()) == ["0", "1"] and all(
            p["executor"] == "ray" and p["per_gpu"] == 1 for p in placed.values())
        for key in s.families:  # what a rerun resumes from came back to this folder; each machine keeps its compile cache
            work = files.work(copy.out, sources.parse(key).slug)
            assert (work / "before.json").exists() and (work / "checkpoints" / f"checkpoint-{s.steps}" / checkpoint.PROGRESS).exists()
    else:
        assert sorted((p["slot"], p["gpu"], p["per_gpu"]) for p in placed.values()) == [(1, "0", 2), (2, "0", 2)]
        started = [i for i, line in enumerate(log) if line.startswith("02 ") and ": started on GPU 0 (2 share it)" in line]
        assert len(started) == 2 and started[1] < min(i for i, line in enumerate(log) if line.startswith("02 ") and
                                                      ": done" in line)  # both at once


PAUSING = str(FIXTURES / "02_pauses_mid_training.ipynb")


@pytest.mark.slow
def test_a_ray_worker_killed_mid_family_is_a_failed_family_and_a_rerun_resumes_it(smoke_run, tmp_path, monkeypatch):
    """SIGKILL to the Ray worker training a family (paused after checkpoint 2): the family is failed, in the
    result and the outcome, the checkpoint it had sent is in the driver's folder, its kernel died with it,
    and a rerun on this machine resumes at step 2 to the uninterrupted metrics."""
    import os
    import signal
    import threading

    from proof import records
    from shortlist import executors
    ray = __import__("ray") if os.environ.get("CI") else pytest.importorskip("ray")
    s, _, _ = smoke_run
    key = s.families[0]
    slug = sources.parse(key).slug
    copy = _without(s, [key], tmp_path / "run")
    pid_file = tmp_path / "kernel.pid"
    monkeypatch.setenv("SHORTLIST_TEST_PAUSE_AT", "2")  # the cluster's workers take this environment at its start
    monkeypatch.setenv("SHORTLIST_TEST_PID_FILE", str(pid_file))
    monkeypatch.setenv("SHORTLIST_CACHE", str(tmp_path / "machine"))  # the worker machine's own folders
    monkeypatch.setenv("RAY_worker_niceness", "0")  # Ray's 15 starves its workers on a shared machine
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    arrived = files.work(copy.out, slug) / "checkpoints" / "checkpoint-2" / checkpoint.PROGRESS
    killed = {}

    def kill_the_worker():
        _wait_for(pid_file)
        _wait_for(arrived, 60)  # the checkpoint came back to the driver: now the node is "lost"
        kernel = int(pid_file.read_text())
        killed["kernel"], killed["job"] = kernel, _ppid(kernel)  # the job's process runs papermill itself
        killed["worker"] = _ppid(killed["job"])
        os.kill(killed["worker"], signal.SIGKILL)
    threading.Thread(target=kill_the_worker, daemon=True).start()
    try:
        outcome = runner.run(copy, notebooks=runner.Notebooks(train=PAUSING), log=lambda line: None,
                             where=executors.Placement(executor="ray"))
    finally:
        ray.shutdown()
    assert list(outcome.failed) == [key] and outcome.failed[key].startswith("its Ray worker was lost: ")
    failure = records.read(files.result(copy.out, slug))
    assert isinstance(failure, records.NotebookFailure) and failure.device["placement"]["executor"] == "ray"
    assert not alive(killed["kernel"]) and not alive(killed["job"])
    assert arrived.exists() and files.read_json(arrived)["train_s"] > 0
    again = runner.run(copy, log=lambda line: None)
    assert again.failed == {}
    assert records.read(files.result(copy.out, slug)).timings["resumed_at_step"] == 2
    assert _metrics(copy.out, key) == _metrics(s.out, key)


BATCH = ("import sys\nfrom proof import runner\nfrom proof.__main__ import main\nfrom shortlist import executors\n"
         "runner.THE_NOTEBOOKS = runner.Notebooks(train=sys.argv[1])\n"
         "executors.exit(main(['run', '--preset', 'smoke', '--out', sys.argv[2]]))\n")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_a_stopped_batch_leaves_no_process_and_a_folder_the_same_command_resumes(smoke_run, tmp_path, how):
    """`python -m proof run` with a family paused mid-training (after checkpoint 2). SIGINT, as a terminal's
    Ctrl-C sends it to the batch's group: exit 130 within 10 s, one line, no traceback, every process of the
    batch gone, kernels included, and the family neither done nor failed. SIGKILL to the batch alone: its
    jobs die with it (no process left writing). Either way, a rerun finishes with the uninterrupted metrics."""
    import os
    import signal
    import subprocess
    import sys

    from proof import records
    from shortlist import executors
    s, _, _ = smoke_run
    key = s.families[0]
    slug = sources.parse(key).slug
    copy = _without(s, [key], tmp_path / "run")
    pid_file = tmp_path / "kernel.pid"
    env = dict(os.environ, SHORTLIST_TEST_PAUSE_AT="2", SHORTLIST_TEST_PID_FILE=str(pid_file))
    batch = subprocess.Popen([sys.executable, "-c", BATCH, PAUSING, copy.out], env=env, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(pid_file, proc=batch)
    tree = executors.descendants(batch.pid)
    kernel = int(pid_file.read_text())
    assert kernel in tree
    if how == "SIGINT":
        os.killpg(batch.pid, signal.SIGINT)
        assert batch.wait(timeout=10) == 130
        err = batch.stderr.read()
        assert err.strip().splitlines()[-1] == (f"stopped by SIGINT: nothing finished is lost; the same command "
                                                f"resumes the run in {copy.out}")
        assert "Traceback" not in err and "KeyboardInterrupt" not in err
        assert [pid for pid in tree if alive(pid)] == []  # killed before the batch exits
    else:
        writers = [pid for pid in tree if "shortlist.executors.launcher" in _cmdline(pid)]  # the family's job and its kernel
        assert kernel in writers and len(writers) == 2
        batch.kill()
        batch.wait()
        assert gone(writers, 2) == []  # PR_SET_PDEATHSIG: at once, not when a poller notices
        written = _mtimes(copy.out)
        assert gone(tree, 30) == []  # the kernel's helpers (task builder, forkserver) notice its end themselves
        assert _mtimes(copy.out) == written  # nothing of the batch wrote after its kill
    assert records.read(files.result(copy.out, slug)) is None  # not done, and not failed either
    # the same command again, as a user types it: it finishes, and a successful run prints no traceback
    rerun = subprocess.run([sys.executable, "-m", "proof", "run", "--preset", "smoke", "--out", copy.out],
                           capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "Traceback" not in rerun.stderr + rerun.stdout and "KeyboardInterrupt" not in rerun.stderr
    assert records.read(files.result(copy.out, slug)).timings["resumed_at_step"] == 2
    assert _metrics(copy.out, key) == _metrics(s.out, key)


def test_the_kernel_is_not_interrupted_on_its_way_out():
    """jupyter_client interrupts a kernel before every shutdown; ours is asked to stop without it (an idle
    kernel logs the interrupt as an ERROR line in a run that went well). A real interrupt still goes through:
    here there is no kernel, so jupyter_client's own refusal shows the call reached it."""
    import asyncio
    manager = kernel.manager()()
    manager.shutting_down = True
    asyncio.run(manager._async_interrupt_kernel())  # a no-op on the way out
    manager.shutting_down = False
    with pytest.raises(RuntimeError, match="No kernel is running"):
        asyncio.run(manager._async_interrupt_kernel())


def test_a_kernel_that_dies_mid_cell_is_recorded_as_a_dead_kernel(tmp_path):
    """The notebook holds no error of its own then: papermill's exit status was all the record said."""
    cells = [nbformat.v4.new_code_cell("out = ''", metadata={"tags": ["parameters"]}),
             nbformat.v4.new_code_cell("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")]
    notebook = tmp_path / "dies.ipynb"
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.write_text(nbformat.writes(nb))
    out = tmp_path / "run"
    assert runner.execute(notebook, out / "dies.ipynb", {"out": str(out)}) == runner.KERNEL_DIED_WHY
    assert runner.KERNEL_DIED_WHY.startswith("kernel died")


def test_a_killed_notebook_leaves_its_kernels_connection_file_only_in_what_the_next_run_sweeps(tmp_path):
    """kill -9 of papermill mid-cell: jupyter_client's default connection file (tempfile.mkstemp: /tmp/tmp*.json)
    stayed behind every time; it is made in the kernel's own sockets folder, which the next run removes."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from shortlist import leftovers
    import tempfile
    temp, ready = Path(tempfile.mkdtemp(prefix="k", dir="/tmp")), tmp_path / "ready"  # a kernel's ipc socket path
    # must fit AF_UNIX's 108 bytes: pytest's tmp_path is too deep for it
    cells = [nbformat.v4.new_code_cell("out = ''", metadata={"tags": ["parameters"]}),
             nbformat.v4.new_code_cell(f"import time\nopen({str(ready)!r}, 'w').close()\ntime.sleep(300)")]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (tmp_path / "sleeps.ipynb").write_text(nbformat.writes(nb))
    (tmp_path / "parameters.json").write_text("{}")
    papermill = subprocess.Popen([sys.executable, "-m", "proof.runner", str(tmp_path / "sleeps.ipynb"),
                                  str(tmp_path / "executed.ipynb"), str(tmp_path / "parameters.json"),
                                  str(tmp_path / "run")], env=dict(os.environ, TMPDIR=str(temp)))
    try:
        for _ in range(1200):
            if ready.exists() or papermill.poll() is not None:
                break
            time.sleep(0.1)
        assert ready.exists(), "the kernel never ran its cell"
    finally:
        papermill.send_signal(signal.SIGKILL)
        papermill.wait()
    left = sorted(p.name for p in temp.iterdir())
    assert [name for name in left if name.endswith(".json")] == []
    assert all(name.startswith(leftovers.PREFIXES) for name in left), left
    kernel = [temp / name for name in left if name.startswith("shortlist-kernel-")]
    assert len(kernel) == 1 and list(kernel[0].glob("*.json"))  # the connection file, where the sweep finds it
    time.sleep(1)  # the kernel dies with papermill (PR_SET_PDEATHSIG); its folder goes with the next make()
    assert str(kernel[0]) in leftovers.sweep(str(temp))
