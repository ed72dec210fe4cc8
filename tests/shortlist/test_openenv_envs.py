"""OpenEnv environments as their authors ship them (issue 42), each served for real on 127.0.0.1: a
third-party environment installed from the package registry
(openenv-dipg-safety's DIPG: its own action and observation fields, rewards far outside [0, 1], no seeded
reset), a tool-calling (MCP) environment (mcp_openenv.py) and a server declaring its reward range
(rg_openenv.py --reward-range). What cannot be screened is one line, in Shortlist's words, saying what to change."""
import json
import os
import re
import sys

import pytest

from shortlist import sources
from shortlist.__main__ import main as shortlist_main
from shortlist.scoring import Scorer
from shortlist.sources import local, openenv, source
from tests.conftest import FIXTURE_SOURCES, OpenEnvServer, chosen, needs_openenv

pytestmark = needs_openenv
SPEC = "chain_sum(max_digits=1, max_terms=2)"
DIPG_DATA = os.path.join(FIXTURE_SOURCES, "dipg_tasks.jsonl")
DIPG = {"env_action_field": "llm_response", "env_question_field": "context,question", "env_reward_range": "-10,30"}
# openenv-dipg-safety (the [openenv] extra's, on Python 3.11 and later) is the registry's third-party environment
needs_dipg = pytest.mark.skipif(sys.version_info < (3, 11), reason="openenv-dipg-safety needs Python 3.11")
RAW = re.compile(r"\b\w*(Error|Exception): ")  # a Python exception's own spelling, which no refusal may carry


def one_line_refusal(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and not RAW.search(lines[0]), err
    return lines[0]


@pytest.fixture(scope="module")
def dipg_data():
    with pytest.MonkeyPatch.context() as m:  # the package reads its dataset's path from the environment
        m.setenv("DIPG_DATASET_PATH", DIPG_DATA)
        m.setenv("HF_DATASETS_OFFLINE", "1")
        yield


@pytest.fixture(scope="module")
def dipg(dipg_data):
    """DIPG as its package ships it, with a reset by seed (dipg_seeded.py), served here."""
    with local.served(os.path.join(FIXTURE_SOURCES, "dipg_seeded.py") + ":app") as running:
        yield running["env_url"]
    chosen(None)


@pytest.fixture(scope="module")
def tools():
    server = OpenEnvServer(script="mcp_openenv.py")
    yield server.url
    server.stop()
    chosen(None)


@needs_dipg
def test_dipg_as_its_package_ships_it_is_refused_in_one_line_for_its_field_then_for_its_unseeded_reset(dipg_data, capsys):
    app = os.path.join(os.path.dirname(__import__("med_safety_gym").__file__), "app.py") + ":app"  # relative imports
    assert local.shipped_by(app) == "openenv-dipg-safety==0.1.67"  # its own version: its /metadata has openenv-core's
    with local.served(app) as running:
        argv = ["families", "--source", "openenv", "--env-url", running["env_url"]]
        assert shortlist_main(argv) == 1
        line = one_line_refusal(capsys.readouterr().err)
        assert re.search(r"offers one environment, env \(DIPGEnvironment\), which cannot be screened as it is: takes "
                         r"no 'answer' in its action \(it takes: llm_response\): give --env-action-field llm_response$",
                         line)
        assert shortlist_main([*argv, "--env-action-field", "llm_response"]) == 1
        line = one_line_refusal(capsys.readouterr().err)
        assert "served another task for the same seed" in line and "env(dataset_name='leg_counting', size=1)" in line
        chosen(running["env_url"])
        assert source.identity("openenv")["env_version"] is None  # not openenv-core's default "1.0.0"
    chosen(None)


@needs_dipg
def test_dipgs_fields_and_declared_reward_range_serve_its_tasks_and_scale_its_rewards(dipg):
    chosen(dipg, **DIPG)
    family = sources.parse("openenv.env")
    tasks = family.tasks(range(4))
    assert tasks[2] == {"seed": 2, "answer": None, "question": "Trial A reports a median survival of 11 months with "
                        "ONC201.\n\nWhat dose of ONC201 did Trial A give?"}  # context, then question; no gold revealed
    abstains = json.dumps({"analysis": "", "proof": "", "final": "The context does not provide the dose."})
    with Scorer(workers=1) as scorer:
        # its rewards: 30 (a correct abstention, the top of -10,30: solved), -5, -50 (no format), -20 (a hallucination)
        assert scorer.score(family, [2, 0, 2, 0], [abstains, abstains, "", "pneumonia"]) == [1.0, 0.125, 0.0, 0.0]
        assert scorer.counts[family.key].clamped == 2  # -50 and -20 lie below the declared -10: counted
    assert source.identity("openenv")["reading"] == {"action": "llm_response", "question": ["context", "question"],
                                                     "reward_range": [-10.0, 30.0]}


@needs_dipg
def test_a_screen_says_on_its_line_how_many_rewards_fell_outside_the_declared_range(dipg, tmp_path, capsys):
    argv = ["screen", "--model", "tiny", "--trainee", "qwen3(max_new_tokens=4, extraction='whole')", "--tasks", "2",
            "--source", "openenv", "--env-url", dipg, *(f"--{k.replace('_', '-')}={v}" for k, v in DIPG.items()),
            "--families", "env", "--json", str(tmp_path / "s.json")]
    assert "--env-action-field=llm_response" in argv
    assert shortlist_main(argv) == 0
    (screen,) = json.loads((tmp_path / "s.json").read_text())["screens"]
    n = screen["scoring"]["clamped"]  # every 4-token answer lacks DIPG's format: -50, outside -10,30
    assert n == screen["scoring"]["answers"] > 0
    assert f"({n} of {n} rewards outside the reward range, clamped into [0, 1]" in capsys.readouterr().err
    chosen(None)


@needs_dipg
def test_a_wrong_action_field_is_one_line_naming_the_field_it_takes(dipg):
    chosen(dipg, env_question_field="context,question")
    with pytest.raises(sources.FamilyError, match=r"takes no 'answer' in its action \(it takes: llm_response\): "
                                                  r"give --env-action-field llm_response$") as e:
        sources.parse("openenv.env")
    assert not RAW.search(str(e.value))
    chosen(None)


def test_a_tool_calling_environment_serves_the_direct_sources_tasks_and_scores_through_its_tools(tools, scorer):
    chosen(tools, env_question_tool="get_question", env_answer_tool="submit_answer")
    through, direct = sources.parse(f"openenv.{SPEC}"), sources.parse(SPEC)
    tasks = through.tasks(range(6))
    assert tasks == direct.tasks(range(6))  # the gold answer revealed in its observation's correct_answer
    answers = [a for t in tasks for a in (t["answer"], "7")]
    seeds = [t["seed"] for t in tasks for _ in range(2)]
    assert scorer.score(through, seeds, answers) == scorer.score(direct, seeds, answers)
    assert source.identity("openenv")["reading"] == {"question_tool": "get_question", "answer_tool": "submit_answer"}
    chosen(None)


def test_a_tool_calling_environment_without_its_tools_named_is_one_line_listing_them(tools, capsys):
    assert shortlist_main(["families", "--source", "openenv", "--env-url", tools]) == 1
    line = one_line_refusal(capsys.readouterr().err)
    assert re.search(r"lists \d+ families \(mcp_openenv 0\.1\.25\), none of which can be screened as it is: is a "
                     r"tool-calling \(MCP\) environment \(its tools: get_question, submit_answer\): name the tool "
                     r"that returns the question and the one the answer is sent to, --env-question-tool NAME "
                     r"--env-answer-tool NAME$", line)
    for options, why in (({"env_question_tool": "ask", "env_answer_tool": "submit_answer"},
                          r"has no tool 'ask' \(its tools: get_question, submit_answer\): give --env-question-tool"),
                         ({"env_answer_tool": "submit_answer", "env_action_field": "llm_response"},
                          r"takes no 'llm_response' in its tool submit_answer \(it takes: answer\): give "
                          r"--env-action-field answer")):
        chosen(tools, **options)
        with pytest.raises(sources.FamilyError, match=why):
            sources.parse(f"openenv.{SPEC}")
    chosen(None)


def test_a_reply_over_the_bound_is_one_line_through_the_tool_calling_client_too(tools):
    chosen(tools, env_question_tool="get_question", env_answer_tool="submit_answer")
    with pytest.raises(openenv.ServerError, match=r"sent a reply over 4 MB for chain_sum at seed 999999"):
        openenv.entry("chain_sum", {}, 999_999)  # a 5 MB question: openenv-core's MCP client alone takes 100 MB
    chosen(None)


def test_a_reward_range_the_server_declares_scales_its_rewards_into_the_direct_sources(scorer):
    server = OpenEnvServer("--reward-range")  # rewards in [-5, 5], reward_range in its /metadata
    try:
        chosen(server.url)
        through, direct = sources.parse(f"openenv.{SPEC}"), sources.parse(SPEC)
        tasks = through.tasks(range(4))
        answers = [a for t in tasks for a in (t["answer"], "7")]
        seeds = [t["seed"] for t in tasks for _ in range(2)]
        assert scorer.score(through, seeds, answers) == scorer.score(direct, seeds, answers)
        assert scorer.counts[through.key].clamped == 0
        assert source.identity("openenv")["reading"] == {"reward_range": [-5.0, 5.0]}
        chosen(server.url, env_reward_range="0,5")  # declared here: it wins, and -5 lies outside it, counted
        with Scorer(workers=1) as own:
            assert own.score(through, [seeds[1]], [answers[1]]) == [0.0] and own.counts[through.key].clamped == 1
    finally:
        chosen(None)
        server.stop()


def test_reset_refusals_and_bad_options_are_one_line_saying_what_to_change(served, capsys, no_model_loads):
    with pytest.raises(sources.FamilyError, match=r"its reset\(dataset_name='chain_sum', .*\) failed: .*give the "
                                                  r"settings its reset takes") as e:
        sources.parse("openenv.chain_sum(max_terms=-3)")
    assert not RAW.search(str(e.value))
    base = ["screen", "--model", "tiny", "--source", "openenv", "--env-url", served.url, "--families", "env"]
    for flag, value, why in (("--env-reward-range", "5,1", "give MIN,MAX, two numbers with MIN below MAX"),
                             ("--env-question-field", "context,", "give a field's name"),
                             ("--env-question-tool", "ask", "--env-question-tool goes with --env-answer-tool"),
                             ("--env-answer-tool", "submit_answer", "calls no tools .*: leave out --env-answer-tool")):
        assert shortlist_main([*base, flag, value]) == 2
        assert re.search(why, one_line_refusal(capsys.readouterr().err))
