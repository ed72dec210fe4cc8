"""The run's source choice (source.Choice) as the one way a source and its options reach a process, and a
local environment Shortlist serves itself (--env-local, sources/local.py), against the real fixture
server rg_openenv.py started on 127.0.0.1."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from shortlist import sources
from shortlist.executors import kill
from shortlist.sources import flags, local, openenv, source
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


@needs_openenv
def test_the_server_reaches_a_notebook_kernel_and_a_task_builder_with_the_settings_and_plan_alone(served):
    from proof import runner
    from proof import settings as settings_
    from shortlist.catalog import walk
    settings = settings_.make("smoke", families=f"openenv.{SPEC}", source=source.current())
    parameters = runner.kernel_parameters(settings)
    assert parameters["source"] == {"name": "openenv", "options": {"env_url": served.url}, "modules": {}}
    program = ("import json, sys\nfrom proof import notebook\nfrom shortlist import sources\n"
               "s = notebook.start(json.loads(sys.argv[1]))\n"
               "print(json.dumps(sources.parse(s.families[0]).tasks(range(3))))")
    kernel = subprocess.run([sys.executable, "-c", program, json.dumps(parameters)], capture_output=True, text=True,
                            env={k: v for k, v in os.environ.items() if "OPENENV" not in k})
    assert kernel.returncode == 0, kernel.stderr
    assert json.loads(kernel.stdout) == sources.parse(SPEC).tasks(range(3))
    builders = walk.Builders(1, 0, 3, source.current())  # a process of its own (spawn): it gets the choice alone
    try:
        builders.submit("leg_counting", None)
        built = builders.next(None)
    finally:
        builders.close()
    assert built.error is None and built.tasks == sources.parse("leg_counting").tasks(range(3))


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


OPTIONED = '''"""A source that takes an option of its own."""
OPTIONS = {"level_cap": "the highest level this source serves"}
VERSION = "1"
taken = {}
def configure(level_cap=None): taken.update(level_cap=level_cap)
def names(): return ["count"]
def settings(family): return set()
def validate(family, config): pass
def entry(family, config, seed): return {"question": str(seed), "answer": str(seed)}
def scorer(family, config): return lambda answer, task: float(answer == task["answer"])
def levels(family): return 1
def level(family, at): return {}
def preload(): pass
'''


def test_a_source_modules_options_are_flags_of_both_command_lines(tmp_path, monkeypatch):
    from proof.__main__ import _parser as proof_parser
    from shortlist.__main__ import _parser as shortlist_parser
    (tmp_path / "optioned_source.py").write_text(OPTIONED)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(source, "SOURCES", dict(source.SOURCES))
    source.register("optioned", "optioned_source")
    for parser, argv in ((shortlist_parser(), ["screen"]), (proof_parser(), ["run"])):
        args = parser.parse_args([*argv, "--source", "optioned", "--level-cap", "3"])
        assert flags.choice(args).options == (("level_cap", "3"),)
        with pytest.raises(source.ChoiceError, match="--level-cap goes with --source optioned"):
            flags.choice(parser.parse_args([*argv, "--level-cap", "3"]))
    assert "optioned_source" not in sys.modules  # the flags were read from its text: --help imports no source
    try:
        source.Choice("optioned", {"level_cap": "3"}).configure()
        assert source.get("optioned").taken == {"level_cap": "3"}
        with pytest.raises(source.ChoiceError, match="--env-url is not an option of --source optioned"):
            source.Choice("optioned", {"env_url": "http://x"}).configure()
    finally:
        source.reset()
        source.Choice().configure()
