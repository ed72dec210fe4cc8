"""The run's own MPS daemon (shortlist/mps.py), with a stand-in nvidia-cuda-mps-control on PATH that
does what the real one does to its folders: -d makes the control pipe, 'quit' on stdin removes it."""
import json
import os
import stat

import pytest

from shortlist import executors, mps

FAKE = '''#!/bin/sh
echo "$@ pipes=$CUDA_MPS_PIPE_DIRECTORY" >> "{calls}"
if [ "$1" = "-d" ]; then
  [ -n "{fail}" ] && {{ echo "An instance of this daemon is already running" >&2; exit 1; }}
  : > "$CUDA_MPS_PIPE_DIRECTORY/control"; exit 0
fi
read line; echo "stdin $line" >> "{calls}"
if [ "$line" = "get_server_list" ]; then [ -n "{served}" ] && echo 4242; exit 0; fi
rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"
'''


@pytest.fixture
def fake(tmp_path, monkeypatch):
    def make(fail: bool = False, served: bool = True):
        bin_ = tmp_path / "bin"
        bin_.mkdir(exist_ok=True)
        tool = bin_ / mps.BINARY
        tool.write_text(FAKE.format(calls=tmp_path / "calls", fail="yes" if fail else "", served="yes" if served else ""))
        tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
        return tmp_path / "calls"
    return make


def test_jobs_sharing_a_gpu_are_clients_of_the_runs_own_daemon_which_stops_with_the_run(fake, tmp_path, monkeypatch):
    calls = fake()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "seen.py").write_text(
        "import json, os, sys\nopen(sys.argv[1], 'w').write(json.dumps({k: os.environ.get(k) for k in "
        "('CUDA_MPS_PIPE_DIRECTORY', 'SHORTLIST_PLACEMENT')}))\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "mods"), os.environ.get("PYTHONPATH", "")]))
    executor = executors.Placement(per_gpu=2, options={"mps": True}).start(log=lambda line: None)
    pipes = executor.mps.pipes
    assert (pipes / "control").exists() and oct(pipes.parent.stat().st_mode & 0o777) == "0o700"
    job = executors.Job("a", "seen", (str(tmp_path / "a.json"),), gpu_process=False)
    ran, = executor.run([job], tmp_path / "out", log=lambda line: None)
    seen = json.loads((tmp_path / "a.json").read_text())
    assert ran.rc == 0 and seen["CUDA_MPS_PIPE_DIRECTORY"] == str(pipes) and ran.where["mps"] is True
    executor.close()
    assert calls.read_text().splitlines() == [f"-d pipes={pipes}", f" pipes={pipes}", "stdin quit"]
    assert not pipes.parent.exists()  # nothing of the daemon is left behind
    executor.close()  # a second close does nothing
    assert len(calls.read_text().splitlines()) == 3
    plain = executors.Placement(per_gpu=2).start(log=lambda line: None)  # without --mps: no client
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    ran, = plain.run([job], tmp_path / "out", log=lambda line: None)
    assert plain.mps is None and ran.where["mps"] is False
    assert json.loads((tmp_path / "a.json").read_text())["CUDA_MPS_PIPE_DIRECTORY"] is None


def test_a_missing_daemon_binary_is_one_line_before_any_job(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(mps.MpsError) as e:
        executors.Placement(per_gpu=2, options={"mps": True}).start(log=lambda line: None)
    assert "nvidia-cuda-mps-control is not on PATH" in str(e.value) and "\n" not in str(e.value)


def test_a_daemon_that_does_not_start_is_one_line_and_leaves_nothing(fake, tmp_path, monkeypatch):
    fake(fail=True)
    before = set(os.listdir(os.environ.get("TMPDIR", "/tmp")))
    with pytest.raises(mps.MpsError, match="already running") as e:
        mps.Service().start()
    assert "\n" not in str(e.value)
    left = {n for n in set(os.listdir(os.environ.get("TMPDIR", "/tmp"))) - before if n.startswith("shortlist-mps-")}
    assert left == set()


def test_mps_on_ray_is_refused_in_one_line():
    with pytest.raises(executors.PlacementError, match="--mps goes with --executor local; on a Ray cluster start MPS"):
        executors.Placement(executor="ray", per_gpu=2, options={"mps": True})


def test_mps_without_a_gpu_is_refused_in_one_line(monkeypatch, fake):
    fake()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(executors.PlacementError, match="--mps: no GPU is visible"):
        executors.Placement(per_gpu=2, options={"mps": True}).start(log=lambda line: None)


# --- --per-gpu auto: MPS where it runs, never a failure where it does not ------------------------------------

@pytest.fixture
def auto_two_per_gpu(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.setattr(executors.sizing, "free_gib", lambda gpus: {"2": 10.0, "3": 3.0})
    monkeypatch.setattr(executors.sizing.process, "cpus", lambda: 4)  # the CPUs this process may run on
    seen = tmp_path / "probe.json"  # what the probe's CUDA process saw, as a job would see it
    monkeypatch.setattr(mps, "PROBE_CODE", "import json, os, sys\nopen(%r, 'w').write(json.dumps({k: os.environ.get(k) "
                        "for k in ('CUDA_VISIBLE_DEVICES', 'CUDA_MPS_PIPE_DIRECTORY')}))" % str(seen))
    lines = []
    return lambda job_gib=3.5: (executors.Placement(per_gpu="auto", options={"job_gib": job_gib}).start(
        log=lines.append), lines, seen)


def test_auto_runs_jobs_sharing_a_gpu_under_the_runs_own_daemon_once_it_served_a_client(fake, auto_two_per_gpu):
    calls = fake()
    executor, lines, seen = auto_two_per_gpu()
    assert executor.capacity() == 3 and executor.mps is not None and (executor.mps.pipes / "control").exists()
    assert "side by side through the run's own MPS daemon" in lines[-1]
    # the probe ran as a job runs (its GPU, the daemon's pipes); the daemon serves the machine's own GPU numbers
    assert json.loads(seen.read_text()) == {"CUDA_VISIBLE_DEVICES": "2",
                                            "CUDA_MPS_PIPE_DIRECTORY": str(executor.mps.pipes)}
    assert calls.read_text().splitlines()[:2] == [f"-d pipes={executor.mps.pipes}", f" pipes={executor.mps.pipes}"]
    executor.close()
    assert calls.read_text().splitlines()[-1] == "stdin quit" and not executor.mps.root.exists()


def test_the_daemon_is_started_without_the_runs_gpu_list(fake, monkeypatch, tmp_path):
    """Under CUDA_VISIBLE_DEVICES=2,3 a daemon would renumber the GPUs 0 and 1 for its clients."""
    fake()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    spy = tmp_path / "bin" / mps.BINARY
    spy.write_text(spy.read_text().replace("#!/bin/sh\n", f'#!/bin/sh\necho "cvd=$CUDA_VISIBLE_DEVICES" >> {tmp_path}/env\n'))
    service = mps.Service().start()
    service.stop()
    assert (tmp_path / "env").read_text().splitlines()[0] == "cvd="


@pytest.mark.parametrize("case", ["no CUDA", "no server"])
def test_auto_takes_turns_in_one_line_where_a_client_cannot_use_the_daemon(fake, auto_two_per_gpu, monkeypatch, case):
    if case == "no CUDA":  # the stand-in daemon comes up; this machine's python has no CUDA, as a broken MPS gives
        calls = fake()
        monkeypatch.setattr(mps, "PROBE_CODE", "import torch; torch.ones(1, device='cuda')")
    else:  # the client ran, but on its own: the daemon lists no server (MPS falls back silently)
        calls = fake(served=False)
    before = set(os.listdir(os.environ.get("TMPDIR", "/tmp")))
    executor, lines, _ = auto_two_per_gpu()
    assert executor.capacity() == 3 and executor.mps is None
    assert "take turns on it (no MPS: MPS: a CUDA process could not use the daemon" in lines[-1]
    assert ("without the daemon's server" in lines[-1]) == (case == "no server")
    assert calls.read_text().splitlines()[-1] == "stdin quit"  # the daemon it started is stopped
    left = {n for n in set(os.listdir(os.environ.get("TMPDIR", "/tmp"))) - before if n.startswith("shortlist-mps-")}
    assert not left  # and its folders removed


def test_a_probe_stopped_by_ctrl_c_stops_the_daemon(fake, auto_two_per_gpu, monkeypatch):
    calls = fake()
    real = mps.subprocess.run

    def interrupted(args, **kwargs):
        if args[0] == mps.sys.executable:
            raise KeyboardInterrupt
        return real(args, **kwargs)
    monkeypatch.setattr(mps.subprocess, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        auto_two_per_gpu()
    assert calls.read_text().splitlines()[-1] == "stdin quit"


def test_auto_takes_turns_without_the_mps_binary_and_starts_nothing_for_one_job_a_gpu(auto_two_per_gpu, tmp_path,
                                                                                      monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-cuda-mps-control anywhere
    executor, lines, _ = auto_two_per_gpu()
    assert executor.capacity() == 3 and executor.mps is None
    assert "take turns on it (no MPS: nvidia-cuda-mps-control is not on PATH" in lines[-1]
    assert "--mps" not in lines[-1]  # the user gave no --mps: the line does not tell them to drop it
    executor, lines, _ = auto_two_per_gpu(job_gib=9.0)  # one job a GPU: nothing to share, nothing started
    assert executor.capacity() == 2 and executor.mps is None and "MPS" not in lines[-1]


def test_a_daemon_that_hangs_is_one_line_and_leaves_nothing(fake, monkeypatch):
    fake()
    real = mps.subprocess.run

    def hangs(args, **kwargs):
        if args[-1] == "-d":
            raise mps.subprocess.TimeoutExpired(args, mps.UP_S)
        return real(args, **kwargs)
    monkeypatch.setattr(mps.subprocess, "run", hangs)
    before = set(os.listdir(os.environ.get("TMPDIR", "/tmp")))
    with pytest.raises(mps.MpsError, match="did not start .no answer in 10 s.") as e:
        mps.Service().start()
    assert "\n" not in str(e.value)
    assert not {n for n in set(os.listdir(os.environ.get("TMPDIR", "/tmp"))) - before if n.startswith("shortlist-mps-")}
