"""The run's source choice (source.Choice) as the one way a source and its options reach a process, and a
local environment Shortlist serves itself (--env-local, sources/local.py), against the real fixture
server rg_openenv.py started on 127.0.0.1."""
import importlib.util
import os
import re
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
PKG_APP = os.path.join(FIXTURE_SOURCES, "pkg_env", "server", "app.py") + ":app"  # OpenEnv's layout


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


@needs_openenv  # without the extra the server exits on its missing uvicorn, before it reads the broken app
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


def test_serving_without_the_openenv_extra_is_one_line_naming_it_before_any_server_starts(monkeypatch):
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else found(name, *a))
    with pytest.raises(local.LocalError) as e:
        with local.served(APP):
            pass
    assert str(e.value) == (f"--env-local {APP!r}: serving an environment needs the OpenEnv extra (uvicorn): "
                            "pip install -e '.[openenv]' (make openenv)")
    assert servers(os.getpid()) == []


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


@needs_openenv
def test_a_file_inside_a_package_is_imported_as_its_packages_module_so_its_relative_imports_work(scorer):
    assert local.package_module(PKG_APP[:-4]) == (FIXTURE_SOURCES, "pkg_env.server.app")
    try:
        with source.Choice("openenv", {"env_local": PKG_APP}).serving():  # server/app.py: from ..models import
            family = sources.parse("openenv.env")
            assert family.tasks([12, 34]) == [{"seed": 12, "question": "What is 1 + 2?", "answer": "3"},
                                              {"seed": 34, "question": "What is 3 + 4?", "answer": "7"}]
            assert scorer.score(family, [12, 12, 34], ["3", "4", "7"]) == [1.0, 0.0, 1.0]
    finally:
        chosen(None)


@needs_openenv  # the child imports uvicorn (openenv-core's) before the app
def test_a_relative_import_outside_a_package_is_one_line_saying_what_to_change(tmp_path):
    (tmp_path / "app.py").write_text("from .models import Answer\n")  # OpenEnv's layout, without its __init__.py
    with pytest.raises(local.LocalError) as e:
        with local.served(f"{tmp_path / 'app.py'}:app"):
            pass
    assert re.fullmatch(r"--env-local \S+: the server exited \(1\): its relative imports need its package: give "
                        r"FILE.py:APP of a file in folders holding __init__.py, or MODULE:APP from the folder above "
                        r"its package", str(e.value))


FAILING = '''from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.types import Action, Observation
def environment():  # as OpenEnv's finqa_env builds none without its data (download_data.sh)
    raise FileNotFoundError("Benchmark file not found: /app/env/data/benchmark_questions/finqa.csv")
app = create_app(environment, Action, Observation, env_name="failing")
'''


@needs_openenv
def test_an_app_whose_environment_cannot_be_built_is_one_line_saying_to_fix_it(tmp_path, capsys):
    from shortlist.__main__ import main as shortlist_main
    (tmp_path / "failing.py").write_text(FAILING)
    assert shortlist_main(["families", "--source", "openenv", "--env-local", f"{tmp_path / 'failing.py'}:app"]) == 1
    assert re.fullmatch(r"error: the OpenEnv server at http://127\.0\.0\.1:\d+ answered /metadata with HTTP 500: its "
                        r"environment failed there \(openenv-core builds one to answer it\): fix it\n",
                        capsys.readouterr().err)
