"""Difficulty levels as family specs the proof takes unchanged.

A source says how many levels a family has and which config overrides each level means
(Reasoning Gym: its own curricula, so chain_sum at level 0 is chain_sum(max_digits=1, max_terms=2)).
Here a level becomes a spec, and the spec is read back and checked to give exactly that level's
config, so it builds the same tasks for every seed wherever it is passed (`proof run --families`).
A family with one level has its default config (level None).

With grid=True (the catalog's --grid) a family's levels are its wider grid's points instead
(sources/grid.py, from a source's optional grid(): Reasoning Gym's curricula with steps below level
0 and between levels), numbered 0.. from the easiest; each Level records its position on the
curriculum (1.5: halfway from level 1 to 2). A source without grid() gives its levels.
"""
from __future__ import annotations

import functools
import re
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
    position: float | None = None  # where it sits on the curriculum, in its levels (None: one level only)

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


def count(name: str, source: str = source_.DEFAULT, grid: bool = False) -> int:
    return len(points(name, source)) if grid else source_.get(source).levels(name)


def points(name: str, source: str = source_.DEFAULT) -> tuple:
    """The family's grid: (position, config overrides), easiest first (its levels where the source has no grid)."""
    src = source_.get(source)
    if hasattr(src, "grid"):
        return _grid(src, name)
    n = src.levels(name)
    return ((0.0, {}),) if n == 1 else tuple((float(at), src.level(name, at)) for at in range(n))


@functools.lru_cache(maxsize=None)
def _grid(src, name: str) -> tuple:  # once per process and family: it reads the curriculum and tries configs
    return tuple(src.grid(name))


def first(name: str, source: str = source_.DEFAULT, grid: bool = False) -> int | None:
    return 0 if count(name, source, grid) > 1 else None


def following(name: str, level: int | None, source: str = source_.DEFAULT, grid: bool = False) -> int | None:
    """The next level up whose config differs from this one's (several curricula repeat a config
    once an attribute tops out; the grid's points all differ); None past the last."""
    if level is None:
        return None
    if grid:
        return level + 1 if level + 1 < count(name, source, grid) else None
    src = source_.get(source)
    here = src.level(name, level)
    for up in range(level + 1, count(name, source)):
        if src.level(name, up) != here:
            return up
    return None


def level_zero(name: str, source: str = source_.DEFAULT, grid: bool = False) -> int | None:
    """The index of the curriculum's level 0 among the family's levels (or grid points); None: it has none."""
    found = [i for i, (position, _) in enumerate(points(name, source) if grid else ()) if position == 0]
    return found[0] if found else first(name, source, grid)


def at(name: str, level: int | None, source: str = source_.DEFAULT, grid: bool = False) -> Level:
    """The family at a level (with grid, at a grid point), as a spec that gives exactly that config."""
    check_name(name, source)
    n = count(name, source, grid)
    label = name if source == source_.DEFAULT else f"{source}.{name}"
    if level is None or n == 1:
        return Level(name, None, 1, label)
    where = f"{name} {'grid point' if grid else 'level'} {level}"
    try:
        position, overrides = points(name, source)[level] if grid else (float(level), source_.get(source).level(name, level))
        text = spec_.render(label, overrides)
        same = spec_.parse_call(text, "family")[1] == overrides
    except Exception as e:  # noqa: BLE001  a value repr() cannot write as a literal, a config that refuses it
        raise LevelError(f"{where}: its config cannot be written as a spec ({one_line(e)})") from None
    if not same:
        raise LevelError(f"{where}: the spec {text} does not give its config")
    return Level(name, level, n, text, position)


@dataclass(frozen=True)
class Listed:
    """A family as `python -m shortlist families` lists it: what it asks, and why it cannot be screened
    where it cannot (its defaults, or every level of its curriculum, refused by its own checks)."""
    family: str
    about: str  # the source's one line on it ("" where the source says nothing)
    fails: str | None  # None: it builds where the catalog starts it (its easiest level that builds)


def listing(source: str = source_.DEFAULT, log=None) -> list[Listed]:
    """Every family of a source, described, with the ones that do not build and why (log: each as it is read)."""
    src, found = source_.get(source), []
    describe = getattr(src, "describe", lambda name: "")  # a source may say nothing of its families
    for name in src.names():
        found.append(Listed(name, describe(name), _fails(name, source)))
        if log:
            log(found[-1])
    return found


def _fails(name: str, source: str) -> str | None:
    """Why a family cannot be screened: its defaults refused (a family without levels), or every level."""
    n, why = count(name, source), []
    for level in (None,) if n == 1 else range(n):
        try:
            family_.parse(at(name, level, source).spec, source)
            return None
        except (family_.FamilyError, LevelError) as e:
            why.append(re.sub(r"^(AssertionError|ValueError): ", "", e.cause if isinstance(e, family_.FamilyError)
                              and e.cause else str(e)))  # the source's own words, without how it raised them
    return (f"does not build with its defaults ({why[0]}); give it a config" if n == 1 else
            f"no level of its {n} builds (level 0: {why[0]}); the catalog lists it as failed")

