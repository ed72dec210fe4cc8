"""Difficulty levels: Reasoning Gym's own curricula, as family specs the proof takes unchanged.

102 families ship a curriculum (reasoning_gym.factory.CURRICULA): attributes with a list of values
each, moved together by a global level. At level L, generate_configuration() (its default context:
ranges span level 0 to L) gives the family's config; the fields that differ from the config's own
defaults become the spec's overrides, so chain_sum at level 0 is chain_sum(max_digits=1, max_terms=2).
Before a spec is used it is read back and checked to give exactly the curriculum's config, so it
builds the same tasks for every seed wherever it is passed (`proof run --families`).
A family without a curriculum has one level, its default config (level None).
"""
from __future__ import annotations

import dataclasses
import difflib
import json
from dataclasses import dataclass

from reasoning_gym.factory import CURRICULA, DATASETS, create_curriculum

from shortlist import spec as spec_
from shortlist.errors import OneLine

NOT_CONFIG = ("seed", "size")  # the screen chooses seeds and builds one task per seed


class LevelError(OneLine, ValueError):
    """A curriculum level that cannot be written as a family spec; the message is one line."""


@dataclass(frozen=True)
class Level:
    family: str  # Reasoning Gym's name
    level: int | None  # the curriculum's global level; None: no curriculum, the default config
    levels: int  # how many levels the curriculum has (1 without one)
    spec: str  # what families.parse() and `proof run --families` take: the config at this level

    def __post_init__(self):
        name, _ = spec_.call(self.spec, "family")
        if name != self.family:
            raise LevelError(f"level of {self.family}: its spec {self.spec!r} names {name}")
        if self.level is None and self.levels != 1 or self.level is not None and not 0 <= self.level < self.levels:
            raise LevelError(f"{self.family}: level {self.level} is not one of its {self.levels}")


def check_name(name: str) -> str:
    """A Reasoning Gym family name, or one line suggesting close ones (nothing is built)."""
    if name not in DATASETS:
        close = difflib.get_close_matches(name, list(DATASETS), n=3, cutoff=0.6)
        raise LevelError(f"unknown family {name!r}" + (f"; did you mean {', '.join(close)}?" if close else
                                                       "; `python -m shortlist families` lists them"))
    return name


def count(name: str) -> int:
    """How many levels a family's curriculum has: its longest attribute's (1 without a curriculum)."""
    if name not in CURRICULA:
        return 1
    return max([len(a.levels) for a in create_curriculum(name).attributes.values()] or [1])


def first(name: str) -> int | None:
    return 0 if name in CURRICULA else None


def following(name: str, level: int | None) -> int | None:
    """The next level up whose config differs from this one's (several curricula repeat a config
    once an attribute tops out); None past the last."""
    if level is None:
        return None
    here = _config(name, level)
    for up in range(level + 1, count(name)):
        if _config(name, up) != here:
            return up
    return None


def at(name: str, level: int | None) -> Level:
    """The family at a curriculum level, as a spec that gives exactly the curriculum's config."""
    check_name(name)
    if level is None:
        return Level(name, None, 1, name)
    config = _config(name, level)
    config_cls = DATASETS[name][1]
    try:
        defaults = _canonical(config_cls())
    except Exception:  # noqa: BLE001  a config without usable defaults: every field is written out
        defaults = {}
    overrides = {k: v for k, v in config.items() if k not in defaults or defaults[k] != v}
    text = spec_.render(name, overrides)
    try:
        _, read = spec_.call(text, "family")
        same = _canonical(config_cls(**read)) == config
    except Exception as e:  # noqa: BLE001  a value repr() cannot write as a literal, a config that refuses it
        raise LevelError(f"{name} level {level}: its config cannot be written as a spec "
                         f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    if not same:
        raise LevelError(f"{name} level {level}: the spec {text} does not give the curriculum's config")
    return Level(name, level, count(name), text)


def _config(name: str, level: int) -> dict:
    curriculum = create_curriculum(name)
    curriculum.set_global_level(level)
    return _canonical(curriculum.generate_configuration())


def _canonical(config) -> dict:
    """A config's fields as JSON would hold them (tuples become lists, as in a spec), seed and size aside."""
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in NOT_CONFIG}
    return json.loads(json.dumps(fields, default=repr))
