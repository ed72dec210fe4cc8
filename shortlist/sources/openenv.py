"""An OpenEnv environment server as a source: single-step text environments, scored at the server.

OpenEnv (openenv-core, the optional extra `[openenv]`) publishes an environment as a server: a
session over a WebSocket, reset(seed=...) -> an observation with the question, step(action) -> a
reward. This module decides what to ask one; openenv_wire.py asks it through openenv-core's own
clients. The server is named by a URL (`--env-url`), or started here from an app of one's own
(`--env-local FILE.py:APP` or `MODULE:APP`, local.py: on 127.0.0.1, stopped when the run ends);
either is an option of the run's source Choice (source.py), configure()d in each process.

How a task is read (a Reading, from the options after the URL; each default is OpenEnv's
reasoning_gym_env's): the question is the observation's field `question` (--env-question-field:
fields joined by a blank line, as envs/dipg_safety_env's context,question); the answer goes as the
action {"answer": text} (--env-action-field: dipg's llm_response); the gold answer is the field the
server reveals after a step, `correct_answer` (--env-gold-field; None where it reveals none). A
tool-calling (MCP) environment is asked through openenv-core's MCPToolClient: after the reset, the
question tool's result is the question (--env-question-tool; without one, the reset's observation),
and the answer is the answer tool's argument (--env-answer-tool NAME, --env-action-field its argument).
Rewards are read in [0, 1] unless a range is declared (--env-reward-range MIN,MAX, or `reward_range`
in the server's /metadata): each is scaled from it into [0, 1]; one outside is clamped by the scorer,
counted (scoring.clamped) and said on the screen's line. The top of the range is what counts as solved.

Families:
    env                  the server's environment as it is: reset(seed=seed, **config)
    <name>               where the server lists names at GET /families (a Shortlist convention):
                         reset(dataset_name=name, dataset_config=config, seed=seed, size=1),
                         the reset of OpenEnv's own reasoning_gym_env
It declares no SYSTEM_PROMPT or EXTRACTION of its own: its families are asked and read as the default
source's are (the "direct" prompt, the text inside the last <answer> tags); what the trainee's
extraction takes from a completion is the action sent, so it is what the server scores.

The server is the boundary the scoring sandbox is for in-process scorers: answers are scored here,
in the caller's process (REMOTE: the sandbox forbids the network), bounded in what is sent
(ANSWER_MAX characters), taken (REPLY_MB per reply), waited for (REQUEST_S per request) and spent in
all (BUDGET_S per batch). A refused, failed or timed-out request scores 0 and is counted (scores());
a server that cannot be reached is one line (ServerError), and since nothing scored is kept half-way,
a rerun resumes. validate() checks the options against the server's /schema (one line saying what to
change) and asks for the same seed twice, refusing a server that answers differently (unseeded):
GRPO scores several answers against one question. identity() (the URL, or the local app, the
environment's name and own version, the Reading where it is not the default) is recorded with every
fingerprint and checked at training time.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.metadata
import json
import time
import urllib.error
import urllib.parse
import urllib.request

from shortlist.errors import OneLine
from shortlist.sources import openenv_wire as wire
from shortlist.sources.openenv_reading import Reading, ReadingError, misfit, reward_range

try:
    VERSION = importlib.metadata.version("openenv-core")
except importlib.metadata.PackageNotFoundError:  # the extra is not installed: get() still imports this module
    VERSION = "absent"
REMOTE = True  # tasks and scores come from a server: scored in the caller, never in the sandbox
OPTIONS = {"env_url": "the OpenEnv server's URL, for --source openenv (docs/sources.md)",
           "env_local": "FILE.py:APP or MODULE:APP: an OpenEnv app Shortlist serves itself on 127.0.0.1 for "
                        "the run's length (a file inside a package is imported as its package's module; docs/sources.md)",
           "env_action_field": "the action's field the answer is sent in (default: answer; OpenEnv's "
                               "dipg_safety_env: llm_response); with --env-answer-tool, that tool's argument",
           "env_question_field": "the observation's field holding the question (default: question); several, "
                                 "comma-separated, are joined by a blank line (dipg_safety_env: context,question)",
           "env_gold_field": "the observation's field that reveals the gold answer after a step "
                             "(default: correct_answer; none there: no gold answer)",
           "env_reward_range": "MIN,MAX (--env-reward-range=-10,30): the rewards the server gives, scaled from it into "
                               "[0, 1], MAX counting as solved (default: its /metadata's reward_range, else rewards "
                               "are read in [0, 1])",
           "env_question_tool": "a tool-calling (MCP) environment's tool that returns the question after "
                                "the reset (without one: the reset's observation)",
           "env_answer_tool": "a tool-calling (MCP) environment's tool the answer is sent to: its step's "
                              "reward is the score"}
HERE_ONLY = ("env_local",)  # served on this machine's 127.0.0.1: a Ray job elsewhere cannot reach it
ENV = "env"
ANSWER_MAX = 10_000  # characters sent as one answer; a longer one is refused here, scored 0, counted
REQUEST_S = 60.0  # seconds one request (a connection, a reset, a step) may take: a loaded machine's server is slow
REPLY_MB = 4.0  # the largest reply taken from the server (a question is at most budget.QUESTION_MAX characters)
BUDGET_S = 600.0  # seconds one batch of answers may take in all; what is left then scores 0 as timed out
UNSEEDED = ("served another task for the same seed (seed 0, asked twice): GRPO scores several answers against one "
            "question, so make its reset(seed=...) deterministic in the seed, or give the settings that make it so "
            "(OpenEnv's reasoning_gym_env: env(dataset_name='leg_counting', size=1))")


class ServerError(OneLine, RuntimeError):
    """The OpenEnv server cannot be reached, or serves what a task cannot be built from; one line.
    why: the line without the server's name."""
    why = ""


def _at(why: str) -> ServerError:
    error = ServerError(f"the OpenEnv server at {url()} {why}")
    error.why = why
    return error


_chosen: dict = {"reading": Reading()}  # the options configure() took in this process


def configure(env_url: str | None = None, env_local: str | None = None, **reading) -> None:
    """The server this process talks to (env_url: http:// or ws://, with a host; env_local, the app that
    serving() started there, which names it in identity()) and how its tasks are read (Reading.of())."""
    global _chosen
    if env_url is not None:
        parts = urllib.parse.urlparse(str(env_url))
        if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
            raise ServerError(f"--env-url {env_url!r}: give the server's URL, e.g. http://127.0.0.1:8000")
    _chosen = {"env_url": None if env_url is None else str(env_url).rstrip("/"), "env_local": env_local,
               "reading": Reading.of(**reading)}


@contextlib.contextmanager
def serving(options: dict):
    """The options while the run lasts: with env_local, its app served here (local.py), named by its URL."""
    from shortlist.sources import local
    if options.get("env_local") and options.get("env_url"):
        raise ServerError("--env-url and --env-local each name the server: give one")
    if not options.get("env_local"):
        yield options
        return
    with local.served(options["env_local"]) as running:
        yield {**options, **running}


def served() -> str:
    """The server read now, and how (parsed families are kept per server and reading: another field is another task)."""
    return f"{_chosen.get('env_url') or ''} {_chosen['reading']}"


def url() -> str:
    if not _chosen.get("env_url"):
        raise ServerError("no OpenEnv server named: give --env-url URL (the server's address) or --env-local FILE.py:APP")
    return _chosen["env_url"]


def _get(path: str):
    """A GET of the server's HTTP side as JSON (None where it answers 404: a route it lacks)."""
    address = url().replace("ws://", "http://", 1).replace("wss://", "https://", 1) + path
    try:
        with urllib.request.urlopen(address, timeout=REQUEST_S) as reply:  # noqa: S310  the user's own server
            return json.loads(reply.read(1 << 20))
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        failed = ": its environment failed there (openenv-core builds one to answer it): fix it" if e.code >= 500 else ""
        raise _at(f"answered {path} with HTTP {e.code}{failed}") from None
    except (OSError, ValueError) as e:
        raise _at(f"cannot be reached ({wire.said(e)}); {_way_out()}") from None


@functools.lru_cache(maxsize=8)
def _metadata(address: str) -> dict:
    meta = _get("/metadata")
    return meta if isinstance(meta, dict) else {}


@functools.lru_cache(maxsize=8)
def _identity(address: str) -> dict:
    meta = _metadata(address)
    return {"url": address, "env": meta.get("name"), "env_version": wire.own_version(meta)}


def _declared() -> tuple | None:
    """The reward range the server's /metadata declares (`reward_range`: [MIN, MAX]), where no option declares one."""
    declared = None if _chosen["reading"].reward_range else _metadata(url()).get("reward_range")
    try:
        return None if declared is None else reward_range("reward_range", declared)
    except ReadingError:
        raise _at(f"declares reward_range {str(declared)[:60]} in its /metadata, which is no range (two numbers, "
                  "MIN below MAX): give the range it gives, --env-reward-range=MIN,MAX") from None


def _way_out() -> str:
    if _chosen.get("env_local"):
        return f"the server Shortlist started for --env-local {_chosen['env_local']} is gone: run the same command again"
    return "start it, or give another --env-url, then run the same command again"


def identity() -> dict:
    """Which server served the tasks: its URL (a local app: the app, as given, for its port is anyone's),
    the environment's name and own version (a local app's: else its package's, as installed), and how its
    tasks were read where that is not the default."""
    from shortlist.sources import local
    found = dict(_identity(url()))
    reading = _chosen["reading"].changed(_declared())
    if _chosen.get("env_local"):
        found = {"local": _chosen["env_local"], **{k: v for k, v in found.items() if k != "url"}}
        found["env_version"] = found["env_version"] or local.shipped_by(_chosen["env_local"])
    return {**found, **({"reading": reading} if reading else {})}


@functools.lru_cache(maxsize=8)
def _names(address: str) -> tuple:
    listed = _get("/families")
    return tuple(sorted({ENV, *(str(n) for n in listed)})) if isinstance(listed, list) else (ENV,)


def names() -> list[str]:
    return list(_names(url()))


def offers() -> str:
    """What `python -m shortlist families` prints: the server's families that build, one a line, where it
    lists them; else one line saying it offers one environment; either, where none builds, one line of why."""
    found = identity()
    what = " ".join(str(found[k]) for k in ("env", "env_version") if found.get(k)) or "no name given"
    if names() != [ENV]:
        from shortlist.sources import family
        built = family.creatable("openenv")
        if built:
            return "\n".join(built)
        why = _unfit(names()[-1])
        raise _at(f"lists {len(names()) - 1} families ({what}), none of which can be screened as it is: {why}")
    why = _unfit(ENV)
    if why:
        raise _at(f"offers one environment, env ({what}), which cannot be screened as it is: {why}")
    return f"env: the one environment the OpenEnv server at {url()} offers ({what}); screen it with --families env"


def _unfit(family: str) -> str | None:
    """Why a family cannot be screened with its defaults (validate()'s line without the server's name), or None."""
    try:
        validate(family, {})
    except ServerError as e:
        return e.why or str(e)
    return None


def settings(family: str) -> None:
    """None: any setting, passed to the server's reset, which judges it (validate())."""
    return None


def levels(family: str) -> int:
    return 1  # a server has no curriculum to walk: its families are screened at the configs given


def level(family: str, at: int | None) -> dict:
    return {}


def preload() -> None:
    """Nothing: no scoring process imports this source (REMOTE)."""


def _reset(family: str, config: dict, seed: int) -> dict:
    if family == ENV:
        return {**config, "seed": seed}
    return {"dataset_name": family, "dataset_config": config, "seed": seed, "size": 1}


def _run(work):
    """work(client) in a session of its own (openenv_wire.session); a connection that fails is one line."""
    try:
        made = wire.client(url(), _chosen["reading"].answer_tool is not None, REQUEST_S, REPLY_MB)
    except ImportError:
        raise ServerError("the OpenEnv source needs openenv-core: pip install -e '.[openenv]' (make openenv)") from None
    return wire.session(made, work, lambda why: _at(f"cannot be reached ({why}); {_way_out()}"))


HINTS = {"reset": "give the settings its reset takes", "tool": "check --env-question-tool",
         "step": "its step failed on a blank answer: the environment must score any text",
         "VALIDATION_ERROR": "give the field its action takes (--env-action-field)"}


async def _task(made, family: str, config: dict, seed: int) -> dict:
    """One task from the server: reset at the seed for the question, a blank answer for the gold one."""
    reading = _chosen["reading"]
    try:
        observation = await wire.reset(made, _reset(family, config, seed))
        if reading.question_tool:
            observation = await wire.question_of(made, reading.question_tool)
        question = reading.text(observation)
        if question is None:
            raise _at(f"served no question for {family} at seed {seed}: {_no_question(reading, observation)}")
        _, after = await wire.step(made, "", reading.action, reading.answer_tool)
    except wire.Refused as e:
        hint = HINTS["VALIDATION_ERROR" if e.stage == "step" and "VALIDATION_ERROR" in str(e) else e.stage]
        raise _at(f"failed {family} at seed {seed}: {e}; {hint}") from None
    except (asyncio.TimeoutError, TimeoutError):
        raise _at(f"did not answer {family} at seed {seed} within {REQUEST_S:.0f} s; {_way_out()}") from None
    except Exception as e:  # noqa: BLE001  the session lost (the server died) is one line; a bug of ours is not
        if wire.too_big(e):
            raise _at(f"sent a reply over {REPLY_MB:g} MB for {family} at seed {seed}, more than Shortlist takes "
                      "(a question is at most 1,000,000 characters)") from None
        if wire.gone(e):
            raise _at(f"went away while serving {family} ({wire.said(e)}); {_way_out()}") from None
        raise
    return {"question": question, "answer": reading.revealed(after), "metadata": {"seed": seed}}


def _no_question(reading: Reading, observation) -> str:
    where = f"its tool {reading.question_tool} returned" if reading.question_tool else "its observation has"
    texts = sorted(k for k, v in observation.items() if isinstance(v, str) and v) if isinstance(observation, dict) else []
    has = f" (its texts: {', '.join(texts)})" if texts else ""
    return (f"{where} no text {', '.join(reading.question)}{has}: name the question's field(s) with --env-question-field"
            + ("" if reading.answer_tool else "; a tool-calling (MCP) environment's with --env-question-tool"))


def entry(family: str, config: dict, seed: int) -> dict:
    return _run(lambda made: _task(made, family, config, seed))


def entries(family: str, config: dict, seeds: list[int]) -> list[dict]:
    """entry() of each seed, in one session."""
    async def each(made):
        return [await _task(made, family, config, seed) for seed in seeds]
    return _run(each)


def validate(family: str, config: dict) -> None:
    """The options fit the server's /schema (openenv_reading.misfit(): one line saying what to change), and the server
    builds the task of seed 0 alike twice: a task set that is committed must be served alike."""
    why = misfit(_chosen["reading"], _schema(url()), lambda: _tools(url()))
    if why:
        raise _at(why)

    async def twice(made):
        return [await _task(made, family, config, 0) for _ in range(2)]
    first, again = _run(twice)
    if first != again:
        raise _at(UNSEEDED)


@functools.lru_cache(maxsize=8)
def _schema(address: str) -> dict | None:
    return _get("/schema")


@functools.lru_cache(maxsize=8)
def _tools(address: str) -> dict:
    """{name: input schema} of a tool-calling environment's tools, asked through openenv-core's MCP client."""
    made = wire.client(url(), True, REQUEST_S, REPLY_MB)
    return wire.session(made, wire.tools, lambda why: _at(f"cannot be reached ({why}); {_way_out()}"))


def scorer(family: str, config: dict):
    """score(answer, entry): one answer at the server (entry from entry(): its metadata holds the seed)."""
    def score(answer: str, task: dict) -> float:
        (_, kind, value, _), = scores(family, config, [[0, task["metadata"]["seed"], answer]])
        if kind != "score":
            raise ServerError(f"the OpenEnv server did not score the answer ({kind})")
        return value
    return score


def scores(family: str, config: dict, jobs: list) -> list[list]:
    """[index, kind, value, refused] for each [index, seed, answer], as a scoring zygote replies: kind
    "score" with the step's reward scaled into [0, 1] (Reading.score()), "refused" (an answer over
    ANSWER_MAX, never sent), "error" (the server failed it, or gave no number) or "timeout" (past
    REQUEST_S, or past BUDGET_S in all). After a timeout the session is opened anew (a late reply
    would answer the next request)."""
    deadline, done, declared = time.monotonic() + BUDGET_S, [], _declared()
    while len(done) < len(jobs):
        done += _run(lambda made: _score_some(made, family, config, jobs[len(done):], deadline, declared))
    return done


async def _score_some(made, family: str, config: dict, jobs: list, deadline: float, declared) -> list[list]:
    """Score jobs in order until one times out (the session is then spent)."""
    out, reading = [], _chosen["reading"]
    for index, seed, answer in jobs:
        if time.monotonic() > deadline:
            out.append([index, "timeout", None, False])
            continue
        if len(answer) > ANSWER_MAX:
            out.append([index, "refused", None, False])
            continue
        try:
            await wire.reset(made, _reset(family, config, seed))
            if reading.question_tool:  # the episode as the task was built: reset, the question asked, the answer
                await wire.question_of(made, reading.question_tool)
            reward, _ = await wire.step(made, answer, reading.action, reading.answer_tool)
        except (asyncio.TimeoutError, TimeoutError):
            return out + [[index, "timeout", None, False]]
        except wire.Refused:  # the server's own error reply: that answer failed
            out.append([index, "error", None, False])
            continue
        except Exception as e:  # noqa: BLE001  the session lost: nothing of the batch is kept
            if wire.gone(e):
                raise _at(f"went away while scoring {family} ({wire.said(e)}); nothing of this batch is kept: "
                          "run the same command again") from None
            raise
        scored = isinstance(reward, (int, float))  # OpenEnv's rewards may be bools too: True is 1
        out.append([index, "score", reading.score(reward, declared), False] if scored else [index, "error", None, False])
    return out
