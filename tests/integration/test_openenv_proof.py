"""An OpenEnv server's families through the proof: a notebook's kernel and the task builder reach the server
from the settings alone, training refuses tasks another server served, and proof run takes the preset's
families as the server's."""
import json
import os
import re
import subprocess
import sys

import pytest

from shortlist import sources
from shortlist.sources import source
from tests.conftest import chosen, needs_openenv

pytestmark = needs_openenv
SPEC = "chain_sum(max_digits=1, max_terms=2)"  # as tests/shortlist/test_openenv.py serves it


def test_training_refuses_tasks_served_by_another_server_than_the_committed_one(served, monkeypatch):
    from proof import commit
    key = sources.parse(f"openenv.{SPEC}").key
    built = {name: sources.parse(key).tasks(range(start, start + 3)) for name, start in
             (("train", 0), ("predict", 10_000), ("eval", 100_000))}
    body = {"tasks": {key: commit.fingerprints(built, key)}}
    commit.tasks_verified(body, key, built)  # the same server: accepted
    chosen(served.url.replace("127.0.0.1", "localhost"))  # the same tasks, elsewhere
    assert sources.parse(key).tasks(range(3)) == built["train"]
    with pytest.raises(commit.CommitError, match=r"come from .*url http://localhost.* committed from .*url http://127"):
        commit.tasks_verified(body, key, built)


def test_proof_run_takes_the_presets_families_as_the_servers(served, capsys, no_model_loads):
    import argparse

    from proof.__main__ import _sourced
    from proof.__main__ import main as proof_main
    args = argparse.Namespace(source="openenv", env_url=served.url, families=None, preset="smoke")
    assert _sourced(args, source.current()) == {
        "source": source.current(), "families": ["openenv.chain_sum(max_digits=1, max_terms=2)", "openenv.leg_counting"]}
    assert proof_main(["run", "--preset", "smoke", "--env-url", served.url]) == 2
    assert "goes with --source openenv" in capsys.readouterr().err
    assert proof_main(["run", "--preset", "smoke", "--source", "openenv", "--env-url", "http://127.0.0.1:9"]) == 2
    assert re.search(r"^error: .*cannot be reached", capsys.readouterr().err)


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


def test_training_refuses_tasks_whose_answers_the_server_would_score_otherwise_than_committed(served):
    from proof import commit
    key = sources.parse(f"openenv.{SPEC}").key
    built = {name: sources.parse(key).tasks(range(start, start + 3)) for name, start in
             (("train", 0), ("predict", 10_000), ("eval", 100_000))}
    body = {"tasks": {key: commit.fingerprints(built, key)}}
    chosen(served.url, env_reward_range="0,2")  # the same server and tasks, its rewards scaled otherwise
    assert sources.parse(key).tasks(range(3)) == built["train"]
    with pytest.raises(commit.CommitError, match=r"come from .*reading \{'reward_range': \[0\.0, 2\.0\]\}.* "
                                                 r"committed from"):
        commit.tasks_verified(body, key, built)
