"""The wider grid: a family's configs from the easiest its settings allow up its curriculum, with steps
between the curriculum's levels, so that a weak model has configs inside the band (the catalog's --grid).

A curriculum's levels are far apart for a small model: SmolLM2 solves products at level 0 (pass@1 0.30)
and barely at level 1 (0.08), count_bits jumps from max_n 1000 to 1000000. The grid keeps every
curriculum level as it is and adds, in order from easiest to hardest:
  - below level 0: each numeric attribute one step easier than its level-0 value (the step its own
    levels take, geometric where they grow by 3x or more, else linear), or half that step, or one unit,
    the first that the family's config accepts; then each attribute stepped back up to level 0, one
    at a time;
  - between levels L and L+1: the attributes that change stepped one at a time, in the curriculum's
    order, a numeric one through up to STEPS intermediate values on the way (geometric for a wide range:
    count_bits' 1000 -> 1000000 passes 10000 and 100000; linear integers otherwise).
So consecutive points differ in one attribute, each a step harder. A point's position is where it sits
on the curriculum, in its levels: L at level L, L + j/m for the j-th of m steps from L to L+1, from -1
below level 0. This module knows attributes, not Reasoning Gym: sources/reasoning_gym.py describes its
curricula as Attr records and checks that the grid's level points are exactly the curriculum's configs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

STEPS = 2  # intermediate values, at most, in one attribute's step between two levels
WIDE = 3.0  # a step that multiplies a value by this or more is divided geometrically


@dataclass(frozen=True)
class Attr:
    """One attribute of a curriculum: a scalar field, or a range's (lower, upper) fields, and its levels."""
    name: str
    fields: tuple  # (field,) or (lower field, upper field)
    values: tuple  # the value at each of its levels
    interval: bool = False  # a range that spans two levels (Reasoning Gym's ensure_interval)

    def index(self, level: int) -> int:
        """Which of its values the top of a range (or the scalar) takes at a global level."""
        return min(level + (1 if self.interval and len(self.fields) == 2 else 0), len(self.values) - 1)

    def state(self, level: int) -> tuple:
        """(base, top): a range spans min..max of its first value and its level's; a scalar is its top."""
        return self.values[0], self.values[self.index(level)]

    def fields_of(self, state: tuple) -> dict:
        base, top = state
        if len(self.fields) == 1:
            return {self.fields[0]: top}
        return {self.fields[0]: min(base, top), self.fields[1]: max(base, top)}


def numeric(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _round(v: float, like) -> int | float:
    """v to two significant digits (an int where the levels are ints): 316.2 -> 320, 31622 -> 32000."""
    if v == 0:
        return 0 if isinstance(like, int) else 0.0
    digits = 2 - 1 - math.floor(math.log10(abs(v)))
    r = round(v, digits)
    return int(round(r)) if isinstance(like, int) else float(r)


def between(a, b) -> list:
    """Up to STEPS values strictly between a and b, in order from a: geometric for a wide step, else linear."""
    if not (numeric(a) and numeric(b)) or a == b:
        return []
    ints = isinstance(a, int) and isinstance(b, int)
    if a * b > 0 and max(a / b, b / a) >= WIDE:
        ratio = b / a
        k = 1 if abs(math.log10(abs(ratio))) < 2.5 else STEPS  # 1000 -> 1000000 in three decades: two between
        raw = [a * ratio ** (j / (k + 1)) for j in range(1, k + 1)]
    else:
        k = min(STEPS, abs(b - a) - 1) if ints else STEPS
        raw = [a + (b - a) * j / (k + 1) for j in range(1, k + 1)] if k > 0 else []
    out = []
    for v in raw:
        v = _round(v, a if ints else 0.0)
        if min(a, b) < v < max(a, b) and v not in out:
            out.append(v)
    return out


def easier(values: tuple) -> list:
    """Candidates for one value below a numeric attribute's first, most extreme first: a whole step of its
    own levels, half of one, one unit (ints); never across zero (a count of terms of 2 goes to 1, not -1:
    several configs accept what their generators cannot build)."""
    if len(values) < 2 or not (numeric(values[0]) and numeric(values[1])) or values[0] == values[1]:
        return []
    a, b = values[0], values[1]
    ints = isinstance(a, int) and isinstance(b, int)
    if a * b > 0 and max(a / b, b / a) >= WIDE:
        found = [a * a / b, a / math.sqrt(b / a)]
    else:
        found = [a - (b - a), a - (b - a) / 2]
    if ints:
        found = [round(v) for v in found] + [a - (1 if b > a else -1)]
    return list(dict.fromkeys(v for v in found if (v < a if b > a else v > a) and v * a > 0))


def _chain(attrs: list, start: list, end: list, base: list, merged) -> list[dict]:
    """The configs from `start` to `end` (per attribute a state), one attribute at a time, through
    intermediate tops; the last is end's. `base` holds each attribute's base while it moves."""
    points, now = [], list(start)
    for i, a in enumerate(attrs):
        if now[i] == end[i]:
            continue
        for top in between(now[i][1], end[i][1]):
            now[i] = (base[i], top)
            points.append(merged(now))
        now[i] = end[i]
        points.append(merged(now))
    return points


def points(attrs: list, levels: int, accepts) -> list[tuple[float, dict]]:
    """(position, the attributes' fields) for every grid point, easiest first, consecutive ones different.
    `accepts(fields)` says whether the family's config takes these fields: below level 0 it picks how low each
    attribute goes; between two levels a point the config refuses is left out (moving one attribute at a time
    makes pairs the curriculum never gives: caesar_cipher's max_rotation past 25 before its level 2, which its
    own config refuses too). The curriculum's own levels are kept whatever their config says: a level that
    does not build is the family's fact, and the catalog lists it as failed."""
    def merged(states) -> dict:
        out = {}
        for a, s in zip(attrs, states):
            out |= a.fields_of(s)
        return out
    at = [[a.state(level) for a in attrs] for level in range(levels)]
    found: list[tuple[float, dict]] = []
    below = _below(attrs, at[0], merged, accepts)
    if below is not None:
        found.append((-1.0, merged(below)))
        steps = _chain(attrs, below, at[0], [s[0] for s in below], merged)
        found += [(-1 + (j + 1) / len(steps), p) for j, p in enumerate(steps)]
    else:
        found.append((0.0, merged(at[0])))
    for level in range(levels - 1):
        steps = _chain(attrs, at[level], at[level + 1], [s[0] for s in at[level]], merged)
        found += [(level + (j + 1) / len(steps), p) for j, p in enumerate(steps)]
    found = [(position, p) for position, p in found if position == int(position) and position >= 0 or accepts(p)]
    out = []
    for position, p in found:  # a level that repeats the one before (an attribute topped out) is no new point
        if not out or out[-1][1] != p:
            out.append((round(position, 4), p))
    return out


def _below(attrs: list, level0: list, merged, accepts) -> list | None:
    """Every attribute's state one step below level 0 where its config accepts it (each tried alone, then
    all together); None where no attribute can go lower."""
    states, moved = list(level0), False
    for i, a in enumerate(attrs):
        for v in easier(a.values):
            trial = list(level0)
            if len(a.fields) == 2:  # the range starts lower; an interval's top is level 0's first value
                trial[i] = (v, a.values[0] if a.interval else v)
            else:
                trial[i] = (v, v)
            if accepts(merged(trial)):
                states[i], moved = trial[i], True
                break
    if not moved:
        return None
    return states if accepts(merged(states)) else None
