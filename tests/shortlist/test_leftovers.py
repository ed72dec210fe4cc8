"""shortlist/leftovers.py: what a killed process leaves in the temp folder goes with the next make()."""
import os
import signal
import socket
import subprocess
import sys
import tempfile

import pytest

from shortlist import leftovers


@pytest.fixture
def temp(tmp_path, monkeypatch):
    """The temp folder, here and in the processes a test starts: the machine's /tmp is not touched."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    return tmp_path


def killed(code: str, temp) -> list[str]:
    """The folders of PREFIXES a process left after it printed 'ready' and was killed (SIGKILL)."""
    proc = subprocess.Popen([sys.executable, "-c", code + "\nprint('ready', flush=True)\nimport time; time.sleep(300)"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return sorted(p.name for p in temp.iterdir() if p.name.startswith(leftovers.PREFIXES))


def test_the_next_make_removes_what_a_killed_maker_left_and_nothing_else(temp):
    left = killed("from shortlist import leftovers; leftovers.make('shortlist-kernel-')", temp)
    assert len(left) == 1 and left[0].startswith("shortlist-kernel-")
    alive = leftovers.make("shortlist-job-")  # this process: alive
    elsewhere = temp / "shortlist-job-elsewhere"  # a maker on another host sharing the folder
    elsewhere.mkdir()
    (elsewhere / leftovers.OWNER).write_text(f"1 {leftovers._started(1)} not-{socket.gethostname()}\n")
    unsigned = temp / "shortlist-scratch-unsigned"  # another version's, or one being made right now
    unsigned.mkdir()
    reused = temp / "shortlist-scratch-reused"  # this pid, but another process's start time: a reused pid
    reused.mkdir()
    (reused / leftovers.OWNER).write_text(f"{os.getpid()} 1 {socket.gethostname()}\n")
    unrelated = temp / "other-job-x"
    unrelated.mkdir()
    newer = leftovers.make("shortlist-job-")
    remaining = {p.name for p in temp.iterdir()}
    assert left[0] not in remaining and "shortlist-scratch-reused" not in remaining
    assert {os.path.basename(alive), os.path.basename(newer), "shortlist-job-elsewhere", "shortlist-scratch-unsigned",
            "other-job-x"} <= remaining


def test_a_killed_batch_leaves_its_job_scratch_and_a_killed_scorer_owner_its_scratch_for_the_next_run(temp):
    batch = ("from shortlist import executors\nimport tempfile, threading\n"
             "job = executors.Job('sleeper', 'timeit', ('-n', '1', '-r', '1', 'import time; time.sleep(300)'), "
             "files=(('parameters.json', b'{}'),))\n"
             "threading.Thread(target=executors.Local({}).run, args=([job], '.'), kwargs={'log': lambda line: None}, "
             "daemon=True).start()\n"
             "import glob, time\nwhile not glob.glob(tempfile.gettempdir() + '/shortlist-job-*/parameters.json'): "
             "time.sleep(0.05)")
    left = killed(batch, temp)
    assert len(left) == 1 and left[0].startswith("shortlist-job-")
    assert (temp / left[0] / "parameters.json").exists()  # a killed batch leaves its settings and trainee
    left = killed("from shortlist.scoring import Scorer; s = Scorer(workers=1)", temp)
    assert any(name.startswith("shortlist-scratch-") for name in left)
    assert sorted(leftovers.sweep()) == sorted(str(temp / name) for name in left)
    assert [p.name for p in temp.iterdir() if p.name.startswith(leftovers.PREFIXES)] == []


def test_a_prefix_the_sweep_does_not_know_is_refused():
    with pytest.raises(ValueError, match="is not one of"):
        leftovers.make("shortlist-other-")
