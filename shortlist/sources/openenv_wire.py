"""What crosses to an OpenEnv server, through openenv-core's own clients: the one module that calls
openenv-core's API (sources/openenv.py decides what to ask; this asks it). Its assumptions about
openenv-core 0.3.0 are held by tests/shortlist/test_openenv_wire.py:
- EnvClient's payloads are subclassed to plain JSON (the raw observation is what a Reading reads);
- MCPToolClient (tool-calling environments) takes no max_message_size_mb, so its WebSocket bound is
  set as EnvClient's constructor sets it (_max_message_size, in bytes);
- a server's refusal arrives as EnvClient's RuntimeError("Server error: <message> (code: <code>)");
- an environment that does not override get_metadata() reports openenv-core's default: its class name,
  "<name> environment", version "1.0.0", which is no version of the environment's own;
- an MCP environment's action is CallToolAction (a "tool_name" field in its /schema action).
"""
from __future__ import annotations

import asyncio
import re
import threading

from shortlist.errors import OneLine

DEFAULT_VERSION = "1.0.0"  # what openenv-core's Environment.get_metadata() reports for every environment


class Refused(OneLine, RuntimeError):
    """The server refused a request (its own error reply), in its words; one line. stage: what it refused
    (reset, tool: the question tool, step: the answer)."""

    def __init__(self, text: str, stage: str):
        super().__init__(text)
        self.stage = stage


def client(url: str, tools: bool, request_s: float, reply_mb: float):
    """A client of one session: openenv-core's MCPToolClient for a tool-calling environment, else its
    EnvClient with plain JSON payloads. Every result carries .raw, the observation as the server sent it."""
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
    if tools:
        from openenv.core.mcp_client import MCPToolClient

        class Tools(MCPToolClient):
            def _parse_result(self, payload):
                result = super()._parse_result(payload)
                result.raw = payload.get("observation") or {}
                return result
        made = Tools(base_url=url, connect_timeout_s=request_s, message_timeout_s=request_s)
        made._max_message_size = int(reply_mb * 1024 * 1024)  # EnvClient's own bound, which MCPToolClient leaves at 100 MB
        return made

    class Plain(EnvClient):
        def _step_payload(self, action):
            return action  # the action's fields as given ({field: answer})

        def _parse_result(self, payload):
            result = StepResult(observation=payload.get("observation") or {}, reward=payload.get("reward"),
                                done=payload.get("done", False))
            result.raw = result.observation
            return result

        def _parse_state(self, payload):
            return payload
    return Plain(base_url=url, connect_timeout_s=request_s, message_timeout_s=request_s, max_message_size_mb=reply_mb)


def session(made, work, unreachable):
    """Run the coroutine function work(client) in a session of its own, on a thread of its own (a Jupyter
    kernel already runs an event loop); a connection that fails raises unreachable(reason)."""
    result = {}

    async def run():
        try:
            await made.connect()
        except ConnectionError as e:
            raise unreachable(said(e.__cause__ or e)) from None
        try:
            return await work(made)
        finally:
            await made.disconnect()

    def thread():
        try:
            result["value"] = asyncio.run(run())
        except BaseException as e:  # noqa: BLE001  raised again in the caller's thread
            result["error"] = e
    runner = threading.Thread(target=thread, name="shortlist-openenv", daemon=True)
    runner.start()
    runner.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


def said(e: BaseException) -> str:
    """What the server said, without the client's wrapping ("Server error: ... (code: X)")."""
    text = str(e).strip()
    found = re.match(r"Server error: (.*) \(code: ([A-Z_]+)\)$", text, re.S)
    return (f"{found[1]} ({found[2]})" if found else text.splitlines()[0] if text else type(e).__name__)[:300]


def gone(e: BaseException) -> bool:
    """Whether an error is the session's connection lost (the server died, or sent more than it may), not a reply."""
    return isinstance(e, ConnectionError) or "ConnectionClosed" in type(e).__name__


def too_big(e: BaseException) -> bool:
    """Whether the connection was closed for a reply over the client's bound (WebSocket close code 1009)."""
    return "ConnectionClosed" in type(e).__name__ and "1009" in str(e)


async def reset(made, config: dict) -> dict:
    try:
        return (await made.reset(**config)).raw
    except Exception as e:  # noqa: BLE001  the server's own error reply
        if gone(e) or isinstance(e, (asyncio.TimeoutError, TimeoutError)):
            raise
        raise Refused(f"its reset({_spelled(config)}) failed: {said(e)}", "reset") from None


async def question_of(made, tool: str):
    """What a question tool returns (a text, or a dict of fields)."""
    try:
        return await made.call_tool(tool)
    except RuntimeError as e:  # MCPToolClient's wrapping of a tool's error
        if gone(e):
            raise
        raise Refused(f"its tool {tool} failed: {said(e)}", "tool") from None


async def step(made, answer: str, field: str, tool: str | None) -> tuple:
    """(reward, the observation as sent) for one answer: the action {field: answer}, or the tool's call
    with {field: answer} as its arguments (an MCP environment)."""
    if tool is None:
        action = {field: answer}
    else:
        from openenv.core.env_server.mcp_types import CallToolAction
        action = CallToolAction(tool_name=tool, arguments={field: answer})
    try:
        done = await made.step(action)
    except Exception as e:  # noqa: BLE001  the server's own error reply: the answer was refused
        if gone(e) or isinstance(e, (asyncio.TimeoutError, TimeoutError)):
            raise
        raise Refused(f"it refused the answer sent as {_action(field, tool)}: {said(e)}", "step") from None
    if tool is not None and (done.raw.get("error") or {}).get("message"):
        raise Refused(f"it refused the answer sent as {_action(field, tool)}: {done.raw['error']['message']}", "step")
    reward = done.reward if done.reward is not None else done.raw.get("score")
    return reward, done.raw


async def tools(made) -> dict:
    """{name: input schema} of a tool-calling environment's tools (its ListToolsAction)."""
    return {t.name: t.input_schema or {} for t in await made.list_tools(use_cache=False)}


def _action(field: str, tool: str | None) -> str:
    return f"{{{field!r}: ...}}" if tool is None else f"{tool}({field}=...)"


def _spelled(config: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in config.items())[:200]


def is_tools(schema: dict | None) -> bool:
    """Whether a server's /schema is a tool-calling (MCP) environment's: its action calls a tool."""
    return "tool_name" in ((schema or {}).get("action") or {}).get("properties", {})


def fields(schema_part: dict | None) -> tuple[list[str], list[str], bool]:
    """(its fields, those required, whether it takes others) of an action or observation schema; openenv-core's
    own fields (metadata, done, reward) left out."""
    part = schema_part or {}
    own = [f for f in part.get("properties", {}) if f not in ("metadata", "done", "reward")]
    return own, [f for f in part.get("required", []) if f in own], part.get("additionalProperties") is not False


def own_version(meta: dict) -> str | None:
    """The environment's version in its /metadata, None where it is openenv-core's default (no override)."""
    name, version = meta.get("name"), meta.get("version")
    default = version == DEFAULT_VERSION and meta.get("description") == f"{name} environment"
    return None if default or version is None else str(version)
