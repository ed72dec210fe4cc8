"""Environments: a Reasoning Gym family, optionally with config overrides, and its tasks.

A family is written as one string, on a command line or as a papermill parameter:
    chain_sum
    chain_sum(max_terms=2, max_digits=1)
    basic_arithmetic(operators=("+", "-"), allow_parentheses=False)
Values are Python literals. Several families are separated by commas outside parentheses.
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import re
from dataclasses import dataclass, field

import reasoning_gym
from reasoning_gym.factory import DATASETS

from shortlist import builder, spec
from shortlist.errors import OneLine


# The seed's six families, at Reasoning Gym's default difficulty
DEFAULT = ("basic_arithmetic", "propositional_logic", "word_sorting", "leg_counting", "letter_counting", "chain_sum")


class FamilyError(OneLine, ValueError):
    """A family string that cannot name a Reasoning Gym task family; the message is one line."""


@dataclass(frozen=True)
class Family:
    name: str
    config: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.name not in DATASETS:
            close = difflib.get_close_matches(self.name, list(DATASETS), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else "; `python -m shortlist families` lists them"
            raise FamilyError(f"unknown family {self.name!r}{hint}")
        config_cls = DATASETS[self.name][1]
        known = {f.name for f in dataclasses.fields(config_cls)} - {"seed", "size"}
        for key in self.config:
            if key not in known:
                close = difflib.get_close_matches(key, sorted(known), n=2, cutoff=0.6)
                hint = f"; did you mean {', '.join(close)}?" if close else f"; it takes {', '.join(sorted(known))}"
                raise FamilyError(f"{self.name} has no setting {key!r}{hint}")
        try:  # the family's own validate() catches impossible values before any model loads
            reasoning_gym.create_dataset(self.name, seed=0, size=1, **self.config)
        except Exception as e:
            raise FamilyError(f"{self.key}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None

    @property
    def key(self) -> str:
        """The canonical spelling: parse(f.key) == f, and equal families have equal keys."""
        return spec.render(self.name, self.config)

    @property
    def slug(self) -> str:
        """A file-name-safe form of the key (letters, digits, '.', '_', '-')."""
        parts = [self.name] + [f"{k}-{self.config[k]!r}" for k in sorted(self.config)]
        return re.sub(r"[^A-Za-z0-9._-]+", "_", ".".join(parts)).strip("_")

    def task(self, seed: int) -> dict:
        return self.tasks([seed])[0]

    def tasks(self, seeds) -> list[dict]:
        """{"seed", "question", "answer"} per seed (answer None where the family has none), the same
        in every process whatever its hash seed (builder.py)."""
        return builder.build(self.name, self.config, [int(seed) for seed in seeds])

    def __hash__(self):  # the config is a dict, so hash by the canonical key
        return hash(self.key)


def parse(text: str | Family) -> Family:
    if isinstance(text, Family):
        return text
    try:
        name, config = spec.call(text, "family")
    except spec.SpecError as e:
        raise FamilyError(str(e)) from None
    return Family(name, config)


def parse_list(families: str | list | tuple) -> list[Family]:
    """Families from a list, or from one string separated by commas outside parentheses."""
    if isinstance(families, str):
        families = spec.split(families)
    parsed = [parse(f) for f in families if isinstance(f, Family) or f.strip()]
    if not parsed:
        raise FamilyError("no families given")
    keys = [f.key for f in parsed]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise FamilyError(f"family listed twice: {dup[0]}")
    return parsed


def creatable() -> list[str]:
    """Every registered family that builds with its default config (composite needs one)."""
    names = []
    for name in sorted(DATASETS):
        try:
            reasoning_gym.create_dataset(name, seed=0, size=1)
            names.append(name)
        except Exception:
            pass
    return names


def fingerprint(tasks: list[dict]) -> str:
    """SHA-256 of tasks (Family.tasks(): seeds, questions and answers) as canonical JSON: equal
    fingerprints, equal tasks, in any process."""
    text = json.dumps(tasks, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()
