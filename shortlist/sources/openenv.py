"""An OpenEnv environment server as a source: single-step text environments, scored at the server.

OpenEnv (openenv-core, the optional extra `[openenv]`) publishes an environment as a server: a
session over a WebSocket, reset(seed=...) -> an observation with the question, step(action) -> a
reward. This module talks to one through openenv-core's own client (EnvClient), for environments
of one step: the question is the observation's "question", the answer the action {"answer": text},
the reward the step's. The server is named by a URL (`--env-url`), or started here from an app of
one's own (`--env-local FILE.py:APP` or `MODULE:APP`, local.py: on 127.0.0.1, stopped when the run
ends); either is an option of the run's source Choice (source.py), configure()d in each process.

Families:
    env                  the server's environment as it is: reset(seed=seed, **config)
    <name>               where the server lists names at GET /families (a Shortlist convention):
                         reset(dataset_name=name, dataset_config=config, seed=seed, size=1),
                         the reset of OpenEnv's own reasoning_gym_env
A task's gold answer is what the server reveals after a step (the observation's "correct_answer",
as reasoning_gym_env does); None where it reveals none. What the trainee's extraction takes from a
completion is the action sent, so it is what the server scores. It declares no SYSTEM_PROMPT or
EXTRACTION of its own: its families are asked and read as the default source's are (the "direct"
prompt, the text inside the last <answer> tags), the convention reasoning_gym_env's tasks expect;
a trainee that sets its own overrides it.

The server is the boundary the scoring sandbox is for in-process scorers: answers are scored here,
in the caller's process (REMOTE: the sandbox forbids the network), bounded in what is sent
(ANSWER_MAX characters), taken (REPLY_MB per reply), waited for (REQUEST_S per request) and spent in
all (BUDGET_S per batch).
A refused, failed or timed-out request scores 0 and is counted (scores()); a server that cannot be
reached is one line (ServerError), and since nothing scored is kept half-way, a rerun resumes.
Tasks are committed by fingerprint, and GRPO scores several answers against the same question, so a
task must be served again alike: validate() asks the server for the same seed twice and refuses one
that answers differently (an unseeded server). identity() (the URL, or the local app, the
environment's name and its version) is recorded with every fingerprint and checked at training time.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.metadata
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from shortlist.errors import OneLine, one_line

try:
    VERSION = importlib.metadata.version("openenv-core")
except importlib.metadata.PackageNotFoundError:  # the extra is not installed: get() still imports this module
    VERSION = "absent"
REMOTE = True  # tasks and scores come from a server: scored in the caller, never in the sandbox
OPTIONS = {"env_url": "the OpenEnv server's URL, for --source openenv (docs/sources.md)",
           "env_local": "FILE.py:APP or MODULE:APP: an OpenEnv app Shortlist serves itself on 127.0.0.1 for "
                        "the run's length, for --source openenv (docs/sources.md)"}
HERE_ONLY = ("env_local",)  # served on this machine's 127.0.0.1: a Ray job elsewhere cannot reach it
ENV = "env"
ANSWER_MAX = 10_000  # characters sent as one answer; a longer one is refused here, scored 0, counted
REQUEST_S = 60.0  # seconds one request (a connection, a reset, a step) may take: a loaded machine's server is slow
REPLY_MB = 4.0  # the largest reply taken from the server (a question is at most family.QUESTION_MAX characters)
BUDGET_S = 600.0  # seconds one batch of answers may take in all; what is left then scores 0 as timed out


class ServerError(OneLine, RuntimeError):
    """The OpenEnv server cannot be reached, or serves what a task cannot be built from; one line."""


_chosen: dict = {}  # the options configure() took in this process


def configure(env_url: str | None = None, env_local: str | None = None) -> None:
    """The server this process talks to: env_url (http:// or ws://, with a host); env_local, the app
    that serving() started there, which names it in identity() (its port changes from run to run)."""
    global _chosen
    if env_url is not None:
        parts = urllib.parse.urlparse(str(env_url))
        if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
            raise ServerError(f"--env-url {env_url!r}: give the server's URL, e.g. http://127.0.0.1:8000")
    _chosen = {"env_url": None if env_url is None else str(env_url).rstrip("/"), "env_local": env_local}


def serving(options: dict):
    """The options while the run lasts: with env_local, its app served here (local.py), named by its URL."""
    from shortlist.sources import local
    if options.get("env_local") and options.get("env_url"):
        raise ServerError("--env-url and --env-local each name the server: give one")
    if not options.get("env_local"):
        return contextlib.nullcontext(options)
    return local.served(options["env_local"])


def served() -> str:
    return _chosen.get("env_url") or ""


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
        raise ServerError(f"the OpenEnv server at {url()} answered {path} with HTTP {e.code}") from None
    except (OSError, ValueError) as e:
        raise ServerError(f"the OpenEnv server at {url()} cannot be reached ({one_line(e)}); "
                          f"{_way_out()}") from None


@functools.lru_cache(maxsize=8)
def _identity(address: str) -> dict:
    meta = _get("/metadata") or {}
    return {"url": address, "env": meta.get("name"), "env_version": meta.get("version")}


def _way_out() -> str:
    if _chosen.get("env_local"):
        return f"the server Shortlist started for --env-local {_chosen['env_local']} is gone: run the same command again"
    return "start it, or give another --env-url, then run the same command again"


def identity() -> dict:
    """Which server served the tasks: its URL (a local app: the app, as given, for its port is anyone's),
    the environment's name and the version it reports."""
    found = _identity(url())
    if _chosen.get("env_local"):
        return {"local": _chosen["env_local"], **{k: v for k, v in found.items() if k != "url"}}
    return found


@functools.lru_cache(maxsize=8)
def _names(address: str) -> tuple:
    listed = _get("/families")
    return tuple(sorted({ENV, *(str(n) for n in listed)})) if isinstance(listed, list) else (ENV,)


def names() -> list[str]:
    return list(_names(url()))


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


def _client():
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient

    class Client(EnvClient):
        """openenv-core's client, its payloads as plain JSON: the answer as {"answer": text}."""

        def _step_payload(self, action):
            return {"answer": action}

        def _parse_result(self, payload):
            return StepResult(observation=payload.get("observation") or {}, reward=payload.get("reward"),
                              done=payload.get("done", False))

        def _parse_state(self, payload):
            return payload
    return Client(base_url=url(), connect_timeout_s=REQUEST_S, message_timeout_s=REQUEST_S,
                  max_message_size_mb=REPLY_MB)


def _run(work):
    """Run the coroutine function work(client) in a session of its own, on a thread of its own (a
    Jupyter kernel already runs an event loop); a connection that fails is one line."""
    try:
        client = _client()
    except ImportError:
        raise ServerError("the OpenEnv source needs openenv-core: pip install -e '.[openenv]' (make openenv)") from None
    result = {}

    async def session():
        try:
            await client.connect()
        except ConnectionError as e:
            raise ServerError(f"the OpenEnv server at {url()} cannot be reached ({one_line(e.__cause__ or e)}); "
                              f"{_way_out()}") from None
        try:
            return await work(client)
        finally:
            await client.disconnect()

    def thread():
        try:
            result["value"] = asyncio.run(session())
        except BaseException as e:  # noqa: BLE001  raised again in the caller's thread
            result["error"] = e
    runner = threading.Thread(target=thread, name="shortlist-openenv", daemon=True)
    runner.start()
    runner.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


async def _task(client, family: str, config: dict, seed: int) -> dict:
    """One task from the server: reset at the seed for the question, a blank step for the gold answer."""
    try:
        first = await client.reset(**_reset(family, config, seed))
        question = first.observation.get("question")
        if not isinstance(question, str) or not question:
            raise ServerError(f"the OpenEnv server at {url()} served no question for {family} at seed {seed} "
                              "(its observation has no text \"question\"): only single-step text environments serve")
        after = await client.step("")
    except (OneLine, ConnectionError):
        raise
    except Exception as e:  # noqa: BLE001  the server refused the reset (a bad config) or died
        raise ServerError(f"the OpenEnv server at {url()} failed {family} at seed {seed}: {one_line(e)}") from None
    gold = after.observation.get("correct_answer")
    return {"question": question, "answer": None if gold is None else str(gold), "metadata": {"seed": seed}}


def entry(family: str, config: dict, seed: int) -> dict:
    return _run(lambda client: _task(client, family, config, seed))


def entries(family: str, config: dict, seeds: list[int]) -> list[dict]:
    """entry() of each seed, in one session."""
    async def each(client):
        return [await _task(client, family, config, seed) for seed in seeds]
    return _run(each)


def validate(family: str, config: dict) -> None:
    """The server builds the task of seed 0, twice: a task set that is committed must be served alike."""
    async def twice(client):
        return [await _task(client, family, config, 0) for _ in range(2)]
    first, again = _run(twice)
    if first != again:
        raise ValueError(f"the OpenEnv server at {url()} served another task for the same seed (seed 0, asked "
                         "twice): GRPO scores several answers against one question, so a served task must be "
                         "served again alike; make its reset(seed=...) deterministic in the seed, then run again")


def scorer(family: str, config: dict):
    """score(answer, entry): one answer at the server (entry from entry(): its metadata holds the seed)."""
    def score(answer: str, task: dict) -> float:
        (_, kind, value, _), = scores(family, config, [[0, task["metadata"]["seed"], answer]])
        if kind != "score":
            raise RuntimeError(f"the OpenEnv server did not score the answer ({kind})")
        return value
    return score


def scores(family: str, config: dict, jobs: list) -> list[list]:
    """[index, kind, value, refused] for each [index, seed, answer], as a scoring zygote replies: kind
    "score" with the step's reward, "refused" (an answer over ANSWER_MAX, never sent), "error" (the
    server failed it, or gave no number) or "timeout" (past REQUEST_S, or past BUDGET_S in all).
    After a timeout the session is opened anew (a late reply would answer the next request)."""
    deadline, done = time.monotonic() + BUDGET_S, []
    while len(done) < len(jobs):
        done += _run(lambda client: _score_some(client, family, config, jobs[len(done):], deadline))
    return done


async def _score_some(client, family: str, config: dict, jobs: list, deadline: float) -> list[list]:
    """Score jobs in order until one times out (the session is then spent)."""
    out = []
    for index, seed, answer in jobs:
        if time.monotonic() > deadline:
            out.append([index, "timeout", None, False])
            continue
        if len(answer) > ANSWER_MAX:
            out.append([index, "refused", None, False])
            continue
        try:
            await client.reset(**_reset(family, config, seed))
            step = await client.step(answer)
        except (asyncio.TimeoutError, TimeoutError):
            return out + [[index, "timeout", None, False]]
        except ConnectionError as e:
            raise ServerError(f"the OpenEnv server at {url()} went away while scoring {family} "
                              f"({one_line(e)}); nothing of this batch is kept: run the same command again") from None
        except Exception as e:  # noqa: BLE001  the server's own error reply: that answer failed
            if "ConnectionClosed" in type(e).__name__:
                raise ServerError(f"the OpenEnv server at {url()} went away while scoring {family}; nothing of "
                                  "this batch is kept: run the same command again") from None
            out.append([index, "error", None, False])
            continue
        reward = step.reward if step.reward is not None else step.observation.get("score")
        scored = isinstance(reward, (int, float))  # OpenEnv's rewards may be bools too: True scores 1
        out.append([index, "score", reward, False] if scored else [index, "error", None, False])
    return out
