"""The run's source choice (source.Choice) as the one way a source and its options reach a process, and a
local environment Shortlist serves itself (--env-local, sources/local.py), against the real fixture
server rg_openenv.py started on 127.0.0.1."""
import os
import signal
import subprocess
import sys
import time

import pytest

from shortlist import sources
from shortlist.executors import kill
from shortlist.sources import local, openenv, source
from tests.conftest import FIXTURE_SOURCES, chosen, needs_openenv
from tests.processes import alive

SPEC = "chain_sum(max_digits=1, max_terms=2)"
APP = os.path.join(FIXTURE_SOURCES, "rg_openenv.py") + ":app"


def servers(parent: int) -> list[int]:
    """The local servers (python -m shortlist.sources.local) below a process."""
    found = []
    for pid in kill.descendants(parent):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"shortlist.sources.local" in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


@needs_openenv
def test_a_local_server_serves_the_direct_sources_tasks_and_scores_and_is_stopped_at_the_end(scorer):
    environ = dict(os.environ)
    try:
        with source.Choice("openenv", {"env_local": APP}).serving() as running:
            (pid,) = servers(os.getpid())
            assert running.as_dict()["options"] == {"env_url": openenv.url(), "env_local": APP}
            through, direct = sources.parse(f"openenv.{SPEC}"), sources.parse(SPEC)
            tasks = through.tasks(range(5))
            assert tasks == direct.tasks(range(5))
            answers = [a for t in tasks for a in (t["answer"], "7")]
            seeds = [t["seed"] for t in tasks for _ in range(2)]
            assert scorer.score(through, seeds, answers) == scorer.score(direct, seeds, answers)
            identity = source.identity("openenv")  # the app as given: its port is another each run
            assert identity["local"] == APP and "url" not in identity and identity["env"] == "rg_openenv"
        assert not alive(pid) and servers(os.getpid()) == []
    finally:
        chosen(None)
    assert os.environ == environ  # nothing of the choice went into the environment


def test_a_local_server_that_does_not_come_up_is_one_line_with_its_stderr_and_is_stopped(tmp_path, monkeypatch):
    (tmp_path / "broken.py").write_text("raise SystemExit('no such environment here')\n")
    with pytest.raises(local.LocalError, match=r"the server exited .*no such environment here"):
        with local.served(f"{tmp_path / 'broken.py'}:app"):
            pass
    (tmp_path / "slow.py").write_text("import time\ntime.sleep(600)\napp = None\n")
    monkeypatch.setattr(local, "START_S", 0.5)
    with pytest.raises(local.LocalError, match="did not answer within"):
        with local.served(f"{tmp_path / 'slow.py'}:app"):
            pass
    assert servers(os.getpid()) == []  # the one that never answered was stopped too
    for bad in ("app", "nothere.py:app", "module:not an identifier"):
        with pytest.raises(local.LocalError, match="--env-local"):
            local.check(bad)


@needs_openenv
def test_a_run_killed_outright_leaves_no_local_server(tmp_path):
    program = ("import sys, time\nfrom shortlist.sources import source\n"
               f"with source.Choice('openenv', {{'env_local': {APP!r}}}).serving():\n"
               "    print('up', flush=True)\n    time.sleep(600)\n")
    run = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
    try:
        assert run.stdout.readline().strip() == "up"
        (pid,) = servers(run.pid)
        assert alive(pid)
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        for _ in range(600):  # the kernel delivers the parent-death signal; its reaping takes a moment
            if not alive(pid):
                break
            time.sleep(0.1)
        assert not alive(pid)
    finally:
        if run.poll() is None:
            run.kill()
        run.wait()


def test_register_and_naming_a_server_write_nothing_into_the_environment():
    environ = dict(os.environ)
    source.register("toy", "toy_source")
    try:
        source.Choice("openenv", {"env_url": "http://127.0.0.1:9"}).configure()
        assert openenv.url() == "http://127.0.0.1:9" and source.current().modules == (("toy", "toy_source"),)
    finally:
        source.reset()
        chosen(None)
    assert os.environ == environ
    with pytest.raises(openenv.ServerError, match="no OpenEnv server named"):
        openenv.url()
