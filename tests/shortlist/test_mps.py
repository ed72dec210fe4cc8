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
read line; echo "stdin $line" >> "{calls}"; rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"
'''


@pytest.fixture
def fake(tmp_path, monkeypatch):
    def make(fail: bool = False):
        bin_ = tmp_path / "bin"
        bin_.mkdir(exist_ok=True)
        tool = bin_ / mps.BINARY
        tool.write_text(FAKE.format(calls=tmp_path / "calls", fail="yes" if fail else ""))
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
