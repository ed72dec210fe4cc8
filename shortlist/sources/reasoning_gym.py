"""Reasoning Gym as a source of environments: the only module that imports reasoning_gym.

The tasks behind OpenEnv's reasoning_gym_env: ~100 registered families, each a config dataclass
with validate(), a dataset deterministic in (seed, index), its own score_answer (the reward), and
for most a curriculum of difficulty levels. What this module adds to Reasoning Gym is determinism
across processes: an entry is built with the global `random` and numpy seeded from the family and
seed (list_functions draws from the unseeded global `random`), and sources/tasks.py builds it where
PYTHONHASHSEED=0 (some families iterate over sets of strings).
"""
from __future__ import annotations

import collections.abc
import dataclasses
import importlib.metadata
import json
import re
import types
import typing

import reasoning_gym
from reasoning_gym.factory import CURRICULA, DATASETS, create_curriculum
from reasoning_gym.utils import SYSTEM_PROMPTS, extract_answer  # the ecosystem's prompt and answer convention

from shortlist.sources import meaning as meaning_

VERSION = importlib.metadata.version("reasoning-gym")

# How its families are asked and read where the trainee leaves that to the source (source.py): Reasoning
# Gym's own convention, the "direct" system prompt and extract_answer (the answer between the last
# <answer> tags). "direct", not the step-by-step "default", because the default budget is 128 new tokens
# and a step-by-step answer cut off before its tag scores nothing. Whether a model writes the tags is
# measured, not assumed: screening and evaluation report the share extracted.
SYSTEM_PROMPT = SYSTEM_PROMPTS["direct"]
EXTRACTION = "answer_tags"


def _tagged(answer: str) -> str:
    return f"<answer>{answer}</answer>"


EXTRACTORS = {"answer_tags": (extract_answer, _tagged)}  # extraction.py registers it by this name
NOT_CONFIG = ("seed", "size")  # the proof chooses seeds and builds one task per seed


def names() -> list[str]:
    return sorted(DATASETS)


def settings(family: str) -> set[str]:
    return {f.name for f in dataclasses.fields(DATASETS[family][1])} - set(NOT_CONFIG)


def kinds(family: str) -> dict[str, tuple[type, ...]]:
    """The kinds of value (int, float, bool, str, list, None) each config field takes, read from its
    annotation and its default (Reasoning Gym has int-annotated fields with float defaults); a field
    whose annotation is none of these (a date, an enum, a nested config) is left to validate()."""
    config = DATASETS[family][1]
    try:
        hints, defaults = typing.get_type_hints(config), config()
    except Exception:  # noqa: BLE001  a config without usable defaults or hints: validate() alone judges it
        return {}
    found = {}
    for f in dataclasses.fields(config):
        taken = _kinds(hints.get(f.name))
        if f.name not in NOT_CONFIG and taken is not None:
            found[f.name] = tuple(dict.fromkeys(taken + (_kinds(type(getattr(defaults, f.name))) or ())))
    return found


def _kinds(hint) -> tuple[type, ...] | None:
    if hint in (bool, str, int, type(None)):
        return (hint,)
    if hint is float:  # 1 means 1.0
        return (int, float)
    if hint in (list, tuple) or typing.get_origin(hint) in (list, tuple, collections.abc.Sequence):
        return (list,)  # a spec's tuples are lists
    if typing.get_origin(hint) is typing.Literal:
        return tuple(dict.fromkeys(type(v) for v in typing.get_args(hint)))
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        parts = [_kinds(a) for a in typing.get_args(hint)]
        return None if None in parts else tuple(dict.fromkeys(k for part in parts for k in part))
    return None


def describe(family: str) -> str:
    """One line on what a family asks: its package (arithmetic, games...) and the first line of its dataset's
    docstring, its Markdown links as plain text. A docstring copied from another family's ("Generates Count
    Bits exercises" on number_format) or none at all leaves the package alone: no description beats a wrong one."""
    cls = DATASETS[family][0]
    package = cls.__module__.split(".")[1] if cls.__module__.count(".") >= 2 else ""
    line = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", (cls.__doc__ or "").strip().split("\n")[0]).replace('"', "")
    line = re.sub(r"(\s+(by|with|together|either|here|-|and|or))*[:.]?\s*$", "", line)  # a line the docstring goes on from
    named = re.match(r"Generates (?:an? )?([A-Z][A-Za-z ]*?) (?:exercises|tasks|puzzles|games)\b", line)
    if named and (other := named.group(1).lower().replace(" ", "_")) in DATASETS and other != family:
        line = ""
    return " ".join(filter(None, [f"[{package}]" if package else "", line]))


def validate(family: str, config: dict) -> None:
    """The family's own validate(), through building one task: impossible values raise here."""
    reasoning_gym.create_dataset(family, seed=0, size=1, **config)


def entry(family: str, config: dict, seed: int) -> dict:
    """Reasoning Gym's entry (question, answer, metadata) for a seed; call it where the hash seed is 0."""
    import random

    import numpy
    saved = random.getstate(), numpy.random.get_state()
    random.seed(f"{family}/{seed}")  # a str seeds through SHA-512: the same in every process
    numpy.random.seed(seed % 2**32)
    try:
        return reasoning_gym.create_dataset(family, seed=seed, size=1, **config)[0]
    finally:
        random.setstate(saved[0])
        numpy.random.set_state(saved[1])


# Where a family's tasks carry no gold answer (its scorer checks a solution), the metadata key that holds
# one valid answer, as the dataset's own generator wrote it (boxnet and rush_hour hold none)
KNOWN_ANSWER = ("example_answer", "possible_answer", "example_correct_answer")


def known_answer(family: str, config: dict, entry_: dict) -> str | None:
    """An answer the task's own metadata knows to be valid, as text the scorer reads, or None."""
    metadata = entry_.get("metadata") or {}
    for key in KNOWN_ANSWER:
        value = metadata.get(key)
        if value is not None:
            return value if isinstance(value, str) else json.dumps(value)
    return None


def meaning(family: str) -> str:
    """Which key the family's questions are reserved by (sources/meaning.py): its meaning, or the text."""
    return meaning_.name(family)


def meaning_of(family: str, config: dict, entry_: dict) -> str:
    """The key of an entry of a family whose meaning() is not the text."""
    return meaning_.key(family, config, entry_)


def scorer(family: str, config: dict):
    """The family's score_answer. It does not depend on the seed its dataset was built with (tests)."""
    dataset = reasoning_gym.create_dataset(family, seed=0, size=1, **config)

    def score(answer: str, task: dict) -> float:
        return float(dataset.score_answer(answer=answer, entry=task))
    return score


def preload() -> None:
    """Nothing beyond this module's own imports: reasoning_gym registers every family when imported."""


# --- difficulty: the family's curriculum ----------------------------------------------------------
def levels(family: str) -> int:
    """How many levels a family's curriculum has: its longest attribute's (1 without a curriculum)."""
    if family not in CURRICULA:
        return 1
    return max([len(a.levels) for a in create_curriculum(family).attributes.values()] or [1])


def level(family: str, at: int | None) -> dict:
    """The config overrides at a curriculum level: generate_configuration() at global level `at` (its
    default context: ranges span level 0 to `at`), less the fields equal to the config's own defaults.
    Raises ValueError where the overrides, read back, would not give the curriculum's config."""
    if at is None or family not in CURRICULA:
        return {}
    curriculum = create_curriculum(family)
    curriculum.set_global_level(at)
    config = _canonical(curriculum.generate_configuration())
    config_cls = DATASETS[family][1]
    try:
        defaults = _canonical(config_cls())
    except Exception:  # noqa: BLE001  a config without usable defaults: every field is written out
        defaults = {}
    overrides = {k: v for k, v in config.items() if k not in defaults or defaults[k] != v}
    if _canonical(config_cls(**overrides)) != config:
        raise ValueError("its overrides do not give the curriculum's config")
    return overrides


def _canonical(config) -> dict:
    """A config's fields as JSON would hold them (tuples become lists, as in a spec), seed and size aside."""
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in NOT_CONFIG}
    return json.loads(json.dumps(fields, default=repr))


def grid(family: str) -> list[tuple[float, dict]]:
    """The wider grid (sources/grid.py): (position, config overrides) from the easiest config the family's
    own validation accepts up its curriculum, with steps between levels. Each level's point is checked
    to be exactly level(); raises ValueError where it is not (this module's reading of the curriculum
    and Reasoning Gym's own would differ)."""
    from reasoning_gym.coaching.attributes import RangeAttributeDefinition

    from shortlist.sources import grid as grid_
    if family not in CURRICULA:
        return [(0.0, {})]
    attrs = [grid_.Attr(a.name, (a.lower_field_name, a.upper_field_name) if isinstance(a, RangeAttributeDefinition)
                        else (a.field_name,), tuple(a.levels), bool(getattr(a, "ensure_interval", False)))
             for a in create_curriculum(family).attributes.values()]
    config_cls, n = DATASETS[family][1], levels(family)
    try:
        defaults = _canonical(config_cls())
    except Exception:  # noqa: BLE001  a config without usable defaults: every field is written out
        defaults = {}

    def overrides(fields: dict) -> dict:
        config = _canonical(config_cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}))
        return {k: v for k, v in config.items() if k not in defaults or defaults[k] != v}

    def accepts(fields: dict) -> bool:
        try:
            config = config_cls(**fields)
            if hasattr(config, "validate"):
                config.validate()
            return True
        except Exception:  # noqa: BLE001  an assertion, a ValueError: the config refuses it
            return False
    found = [(position, overrides(fields)) for position, fields in grid_.points(attrs, n, accepts)]
    for position, o in found:
        if position == int(position) and position >= 0 and o != level(family, int(position)):
            raise ValueError(f"{family}: the grid's level {int(position)} is not the curriculum's")
    return found
