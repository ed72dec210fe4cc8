"""Difficulty levels as family specs the proof takes unchanged.

A source says how many levels a family has and which config overrides each level means
(Reasoning Gym: its own curricula, so chain_sum at level 0 is chain_sum(max_digits=1, max_terms=2)).
Here a level becomes a spec, and the spec is read back and checked to give exactly that level's
config, so it builds the same tasks for every seed wherever it is passed (`proof run --families`).
A family with one level has its default config (level None).
"""
from __future__ import annotations

from dataclasses import dataclass

from shortlist import spec as spec_
from shortlist.errors import OneLine, one_line
from shortlist.sources import source as source_
from shortlist.sources import family as family_


class LevelError(OneLine, ValueError):
    """A level that cannot be written as a family spec; the message is one line."""


@dataclass(frozen=True)
class Level:
    family: str  # the source's name for it
    level: int | None  # the global level; None: one level only, the default config
    levels: int  # how many levels the family has (1: its default only)
    spec: str  # what families.parse() and `proof run --families` take: the config at this level

    def __post_init__(self):
        name, _ = spec_.parse_call(self.spec, "family")
        if name.rpartition(".")[2] != self.family:
            raise LevelError(f"level of {self.family}: its spec {self.spec!r} names {name}")
        if self.level is None and self.levels != 1 or self.level is not None and not 0 <= self.level < self.levels:
            raise LevelError(f"{self.family}: level {self.level} is not one of its {self.levels}")


def check_name(name: str, source: str = source_.DEFAULT) -> str:
    """A family name its source offers, or one line suggesting close ones (nothing is built)."""
    try:
        return family_.check_name(name, source)
    except family_.FamilyError as e:
        raise LevelError(str(e)) from None


def count(name: str, source: str = source_.DEFAULT) -> int:
    return source_.get(source).levels(name)


def first(name: str, source: str = source_.DEFAULT) -> int | None:
    return 0 if count(name, source) > 1 else None


def following(name: str, level: int | None, source: str = source_.DEFAULT) -> int | None:
    """The next level up whose config differs from this one's (several curricula repeat a config
    once an attribute tops out); None past the last."""
    if level is None:
        return None
    src = source_.get(source)
    here = src.level(name, level)
    for up in range(level + 1, count(name, source)):
        if src.level(name, up) != here:
            return up
    return None


def at(name: str, level: int | None, source: str = source_.DEFAULT) -> Level:
    """The family at a level, as a spec that gives exactly that level's config."""
    check_name(name, source)
    n = count(name, source)
    if level is None or n == 1:
        return Level(name, None, 1, name if source == source_.DEFAULT else f"{source}.{name}")
    try:
        overrides = source_.get(source).level(name, level)
        text = spec_.render(name if source == source_.DEFAULT else f"{source}.{name}", overrides)
        same = spec_.parse_call(text, "family")[1] == overrides
    except Exception as e:  # noqa: BLE001  a value repr() cannot write as a literal, a config that refuses it
        raise LevelError(f"{name} level {level}: its config cannot be written as a spec ({one_line(e)})") from None
    if not same:
        raise LevelError(f"{name} level {level}: the spec {text} does not give the level's config")
    return Level(name, level, n, text)
