"""A family: one environment of a source, with config overrides, and its tasks.

A family is written as one string, on a command line or as a papermill parameter:
    chain_sum
    chain_sum(max_terms=2, max_digits=1)
    basic_arithmetic(operators=("+", "-"), allow_parentheses=False)
    myenv.task(x=1)                     a family of another registered source (source.py)
Values are Python literals. Several families are separated by commas outside parentheses. A
string is parsed once into a Family (parse() remembers what it read), which is validated when it
is made: an unknown name or setting, or a value the family refuses, is one line.
"""
from __future__ import annotations

import difflib
import functools
import hashlib
import json
import re
from dataclasses import dataclass, field

from shortlist import spec
from shortlist.errors import OneLine, one_line
from shortlist.sources import source as source_
from shortlist.sources import tasks as tasks_

# The seed's six families, at Reasoning Gym's default difficulty
DEFAULT = ("basic_arithmetic", "propositional_logic", "word_sorting", "leg_counting", "letter_counting", "chain_sum")


class FamilyError(OneLine, ValueError):
    """A family string that cannot name a family; the message is one line."""


def unknown(name: str, source: str = source_.DEFAULT) -> FamilyError:
    """The refusal of a family name its source does not offer, with close names."""
    close = difflib.get_close_matches(name, source_.get(source).names(), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `python -m shortlist families` lists them"
    return FamilyError(f"unknown family {name!r}{hint}")


def check_name(name: str, source: str = source_.DEFAULT) -> str:
    """A family name its source offers, or one line suggesting close ones (nothing is built)."""
    if name not in source_.get(source).names():
        raise unknown(name, source)
    return name


@dataclass(frozen=True)
class Family:
    name: str
    config: dict = field(default_factory=dict)
    source: str = source_.DEFAULT

    def __post_init__(self):
        try:
            src = source_.get(self.source)
        except KeyError as e:
            raise FamilyError(str(e).strip("'\"")) from None
        check_name(self.name, self.source)
        known = src.settings(self.name)
        for key in self.config:
            if key not in known:
                close = difflib.get_close_matches(key, sorted(known), n=2, cutoff=0.6)
                hint = f"; did you mean {', '.join(close)}?" if close else f"; it takes {', '.join(sorted(known))}"
                raise FamilyError(f"{self.name} has no setting {key!r}{hint}")
        try:  # the family's own checks catch impossible values before any model loads
            src.validate(self.name, self.config)
        except Exception as e:  # noqa: BLE001  whatever a source raises, the user reads one line
            raise FamilyError(f"{self.key}: {one_line(e)}") from None

    @property
    def key(self) -> str:
        """The canonical spelling: parse(f.key) == f, and equal families have equal keys."""
        name = self.name if self.source == source_.DEFAULT else f"{self.source}.{self.name}"
        return spec.render(name, self.config)

    @property
    def slug(self) -> str:
        """A file-name-safe form of the key (letters, digits, '.', '_', '-')."""
        parts = [self.key.split("(")[0]] + [f"{k}-{self.config[k]!r}" for k in sorted(self.config)]
        return re.sub(r"[^A-Za-z0-9._-]+", "_", ".".join(parts)).strip("_")

    def task(self, seed: int) -> dict:
        return self.tasks([seed])[0]

    def tasks(self, seeds) -> list[dict]:
        """{"seed", "question", "answer"} per seed (answer None where the family has none), the same
        in every process whatever its hash seed (tasks.py)."""
        return tasks_.build(self.source, self.name, self.config, [int(seed) for seed in seeds])

    def __hash__(self):  # the config is a dict, so hash by the canonical key
        return hash(self.key)


def parse(text: str | Family) -> Family:
    if isinstance(text, Family):
        return text
    return _parse(text.strip())


@functools.lru_cache(maxsize=1024)
def _parse(text: str) -> Family:
    """A family string read once: every later parse of the same text is this Family (validating it
    builds a task, which some families take seconds to do)."""
    try:
        name, config = spec.call(text, "family")
    except spec.SpecError as e:
        raise FamilyError(str(e)) from None
    source, _, name = name.rpartition(".")
    return Family(name, config, source or source_.DEFAULT)


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


def creatable(source: str = source_.DEFAULT) -> list[str]:
    """Every family of a source that builds with its default config (Reasoning Gym's composite needs one)."""
    src, names = source_.get(source), []
    for name in src.names():
        try:
            src.validate(name, {})
            names.append(name)
        except Exception:  # noqa: BLE001
            pass
    return names


def fingerprint(tasks: list[dict]) -> str:
    """SHA-256 of tasks (Family.tasks(): seeds, questions and answers) as canonical JSON: equal
    fingerprints, equal tasks, in any process."""
    text = json.dumps(tasks, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()
