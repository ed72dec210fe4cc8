"""How an OpenEnv server's tasks are read and answered (a Reading, sources/openenv.py's options after the
URL), and whether a Reading fits the server it names: misfit() reads its /schema (and a tool-calling
environment's tools) and says in one line which option to change, before any task is asked for.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields

from shortlist.errors import OneLine
from shortlist.sources import openenv_wire as wire


class ReadingError(OneLine, ValueError):
    """An option of the reading that cannot be (a field that is no name, a range that is no range); one line."""


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


@dataclass(frozen=True)
class Reading:
    """How a server's task is read and answered (module docstring): the action's field (an answer tool's
    argument), the observation's question fields, the gold answer's field, the declared reward range,
    and a tool-calling environment's question and answer tools."""
    action: str = "answer"
    question: tuple = ("question",)
    gold: str = "correct_answer"
    reward_range: tuple | None = None
    question_tool: str | None = None
    answer_tool: str | None = None

    @classmethod
    def of(cls, env_action_field=None, env_question_field=None, env_gold_field=None, env_reward_range=None,
           env_question_tool=None, env_answer_tool=None) -> "Reading":
        """A Reading from the options as given (strings); one line naming the option otherwise."""
        question = None if env_question_field is None else tuple(
            f.strip() for f in (env_question_field.split(",") if isinstance(env_question_field, str) else env_question_field))
        made = {"action": _field("env_action_field", env_action_field), "gold": _field("env_gold_field", env_gold_field),
                "question": question and tuple(_field("env_question_field", f) for f in question),
                "reward_range": None if env_reward_range is None else reward_range("--env-reward-range", env_reward_range),
                "question_tool": _tool("env_question_tool", env_question_tool),
                "answer_tool": _tool("env_answer_tool", env_answer_tool)}
        if made["question_tool"] and not made["answer_tool"]:
            raise ReadingError("--env-question-tool goes with --env-answer-tool (the tool the answer is sent to)")
        return cls(**{k: v for k, v in made.items() if v is not None})

    def changed(self, declared: tuple | None = None) -> dict:
        """What differs from the default reading, with the range in force (recorded in identity())."""
        found = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}
        in_force = self.reward_range or declared
        found.update({"reward_range": list(in_force)} if in_force else {})
        return {k: list(v) if isinstance(v, tuple) else v for k, v in found.items()}

    def text(self, observation) -> str | None:
        """The question in an observation (the fields joined), or a question tool's text; None if none."""
        if isinstance(observation, str):
            return observation or None
        parts = [observation.get(f) for f in self.question] if isinstance(observation, dict) else [None]
        if not all(isinstance(p, str) for p in parts) or not any(parts):
            return None
        return "\n\n".join(p for p in parts if p)

    def revealed(self, observation: dict) -> str | None:
        gold = observation.get(self.gold)
        return None if gold is None or isinstance(gold, (dict, list)) else str(gold)

    def score(self, reward, declared: tuple | None = None) -> float:
        """A reward scaled from the range in force into [0, 1] (outside it: outside [0, 1], for the scorer to count)."""
        low, high = self.reward_range or declared or (0.0, 1.0)
        return (float(reward) - low) / (high - low)


def _field(option: str, value) -> str | None:
    if value is not None and not (isinstance(value, str) and value.isidentifier()):
        raise ReadingError(f"{_flag(option)} {str(value)[:60]!r}: give a field's name (letters, digits, _)")
    return value


def _tool(option: str, value) -> str | None:
    if value is not None and not (isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9_.\-]{1,128}", value)):
        raise ReadingError(f"{_flag(option)} {str(value)[:60]!r}: give a tool's name (as its server lists it)")
    return value


def reward_range(where: str, value) -> tuple:
    """(low, high) from "MIN,MAX" (or two numbers), finite, low < high; one line otherwise."""
    parts = value.split(",") if isinstance(value, str) else value
    try:
        low, high = (float(p) for p in parts)
    except (TypeError, ValueError):
        low = high = math.nan
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ReadingError(f"{where} {str(value)[:60]}: give MIN,MAX, two numbers with MIN below MAX "
                           "(--env-reward-range=-10,30)")
    return (low, high)


def misfit(reading: Reading, schema: dict | None, tools) -> str | None:
    """Why a reading does not fit a server's /schema, saying which option to change (None: it fits, or the
    server serves no /schema); tools() gives a tool-calling environment's {name: input schema}."""
    if schema is None:
        return None
    if wire.is_tools(schema):
        return _misfit_tools(reading, tools())
    if reading.answer_tool:
        return "calls no tools (its action is no MCP CallToolAction): leave out --env-answer-tool and --env-question-tool"
    taken, required, extra = wire.fields(schema.get("action"))
    why = _misfit_field(reading.action, taken, required, extra, "its action", "--env-action-field")
    if why:
        return why
    seen, _, extra = wire.fields(schema.get("observation"))
    missing = [f for f in reading.question if f not in seen]
    if missing and not extra:
        return (f"has no field {missing[0]!r} in its observation (its fields: {', '.join(seen) or 'none'}): "
                "name the question's field(s) with --env-question-field")
    if reading.gold != Reading.gold and reading.gold not in seen and not extra:
        return (f"has no field {reading.gold!r} in its observation (its fields: {', '.join(seen) or 'none'}): "
                "name the field that reveals the gold answer with --env-gold-field, or leave it out")
    return None


def _misfit_tools(reading: Reading, offered: dict) -> str | None:
    names = ", ".join(sorted(offered)) or "none"
    if not reading.answer_tool:
        return (f"is a tool-calling (MCP) environment (its tools: {names}): name the tool that returns the question "
                "and the one the answer is sent to, --env-question-tool NAME --env-answer-tool NAME")
    for option, tool in (("env_question_tool", reading.question_tool), ("env_answer_tool", reading.answer_tool)):
        if tool and tool not in offered:
            return f"has no tool {tool!r} (its tools: {names}): give {_flag(option)} one of them"
    taken, required, extra = wire.fields(offered[reading.answer_tool])
    return _misfit_field(reading.action, taken, required, extra, f"its tool {reading.answer_tool}", "--env-action-field")


def _misfit_field(field: str, taken: list, required: list, extra: bool, what: str, flag: str) -> str | None:
    """Why the answer cannot go in `field` of an action (or a tool's arguments): another it requires, or none such."""
    others = [f for f in required if f != field]
    if len(others) > 1:
        return (f"requires {', '.join(others)} in {what}: Shortlist sends the answer as one field, so only an "
                f"environment taking one can be screened")
    if others or (field not in taken and not extra):
        return f"takes no {field!r} in {what} (it takes: {', '.join(taken) or 'nothing'}): give {flag} {(others or taken)[0] if others or taken else 'NAME'}"
    return None
