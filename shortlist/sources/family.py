"""A family: one environment of a source, with config overrides, and its tasks.

A family is written as one string, on a command line or as a papermill parameter:
    chain_sum
    chain_sum(max_terms=2, max_digits=1)
    basic_arithmetic(operators=("+", "-"), allow_parentheses=False)
    myenv.task(x=1)                     a family of another registered source (source.py)
Values are Python literals. Several families are separated by commas outside parentheses. A
string is parsed once into a Family (parse() remembers what it read), which is validated when it
is made, before anything is written; each refusal is one line that names the setting:
- an unknown name or setting (with close names);
- a value that is not a number, a string, True/False/None or a list of them, a number that is not
  finite (1e309 reads as inf), a string over TEXT_MAX characters, a list over LIST_MAX items;
- a value of the wrong kind, where the source says which kinds a setting takes (its optional
  kinds(); Reasoning Gym's come from the config's annotations and defaults): max_terms=2.5 where
  an int is due, max_digits='x';
- a value the family's own validate() refuses;
- a config that cannot build one task within a budget, or builds a question far longer than the
  family's own configs ask (budget.py says the rule and why).
"""
from __future__ import annotations

import difflib
import functools
import hashlib
import json
import math
import re
from dataclasses import dataclass, field

from shortlist import spec
from shortlist.errors import OneLine, one_line
from shortlist.sources import budget
from shortlist.sources import source as source_
from shortlist.sources import tasks as tasks_

# The seed's six families, at Reasoning Gym's default difficulty
DEFAULT = ("basic_arithmetic", "propositional_logic", "word_sorting", "leg_counting", "letter_counting", "chain_sum")


class FamilyError(OneLine, ValueError):
    """A family string that cannot name a family; the message is one line. `cause`: where the source's own
    check refused it, that check's words as it raised them (the catalog lists a level that fails so)."""

    def __init__(self, message: str, cause: str | None = None):
        super().__init__(message)
        self.cause = cause


TEXT_MAX = 10_000  # characters in a string setting (Reasoning Gym's longest defaults are word lists of ~100)
LIST_MAX = 1_000  # items in a list setting, nested lists included
CONFIG_MAX = 100_000  # characters of a whole config as JSON: the key every record and message carries
SLUG_MAX = 200  # a file name holds 255 bytes, and the longest made from a slug adds 32 (a notebook's temporary name)


def unknown(name: str, source: str = source_.DEFAULT) -> FamilyError:
    """The refusal of a family name its source does not offer, with close names."""
    close = difflib.get_close_matches(name, source_.get(source).names(), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `python -m shortlist families` lists them"
    return FamilyError(f"unknown family {name!r}{hint}")


def check_name(name: str, source: str = source_.DEFAULT) -> str:
    """A family name its source offers, or one line suggesting close ones (nothing is built)."""
    try:
        offered = source_.get(source).names()
    except OneLine as e:  # a server-backed source whose server cannot say (sources/openenv.py)
        raise FamilyError(str(e)) from None
    if name not in offered:
        raise unknown(name, source)
    return name


def refused(key: str, name: str, config: dict, e: BaseException) -> str:
    """A config the family's own checks refuse, in one line of ours: the family's reason without the exception
    it came as (Reasoning Gym checks with assert), and the settings to change. Any other exception is a
    failure of the source, not a check, and keeps its type."""
    if isinstance(e, OneLine):
        return f"{key}: {e}"
    reason = one_line(e).removeprefix(f"{type(e).__name__}: ") if isinstance(e, (AssertionError, ValueError)) else ""
    if not reason:
        return f"{key}: cannot be built ({one_line(e)})"
    if not config:
        return f"{key}: {name} does not build with its defaults ({reason}); give it a config"
    return f"{key}: {name} refuses this config ({reason}); change {' or '.join(sorted(config))}"


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
        self._check_settings(src)
        try:  # the family's own checks catch impossible values before any model loads
            src.validate(self.name, self.config)
        except Exception as e:  # noqa: BLE001  whatever a source raises, the user reads one line
            if source_.remote(self.source):  # a server's line names it and what to change
                raise FamilyError(f"{self.key}: {one_line(e, 600)}") from None
            raise FamilyError(refused(self.key, self.name, self.config, e), cause=one_line(e)) from None
        if self.config and not source_.remote(self.source):
            why = budget.refusal(self.source, self.name, self.config)
            if why:
                raise FamilyError(f"{self.key}: {why}")

    def _check_settings(self, src) -> None:
        """Each setting known to the source, a literal within bounds, of a kind the source takes."""
        known = src.settings(self.name)
        for key in self.config if known is not None else ():  # None: any key, the source's validate() judges
            if key not in known:
                close = difflib.get_close_matches(key, sorted(known), n=2, cutoff=0.6)
                hint = f"; did you mean {', '.join(close)}?" if close else f"; it takes {', '.join(sorted(known))}"
                raise FamilyError(f"{self.name} has no setting {key!r}{hint}")
        kinds = src.kinds(self.name) if hasattr(src, "kinds") else {}
        for key, value in self.config.items():
            why = _not_literal(value) or (None if key not in kinds or _of_kind(value, kinds[key]) else
                                          f"must be {' or '.join(k.__name__ for k in kinds[key])}")
            if why:
                raise FamilyError(f"{self.name}: {key}={_short(value)}: {why}")
        if len(json.dumps(self.config)) > CONFIG_MAX:
            raise FamilyError(f"{self.name}: a config of {len(json.dumps(self.config)):,} characters as JSON "
                              f"(at most {CONFIG_MAX:,})")

    @property
    def key(self) -> str:
        """The canonical spelling: parse(f.key) == f, and equal families have equal keys."""
        name = self.name if self.source == source_.DEFAULT else f"{self.source}.{self.name}"
        return spec.render(name, self.config)

    @property
    def environment(self) -> str:
        """The family as its environment spells it, whichever source serves it (the key without the
        source): the same questions are reserved for a family read directly and through a server where both
        key them by their text. A server sends no metadata, so a family read through one is keyed by its
        text: products read directly, keyed by its meaning (sources/meaning.py), reserves other questions."""
        return spec.render(self.name, self.config)

    @property
    def slug(self) -> str:
        """A file-name-safe form of the key (letters, digits, '.', '_', '-'); past SLUG_MAX characters, its
        start and a hash of the key, so that every file named from it can be made."""
        parts = [self.key.split("(")[0]] + [f"{k}-{self.config[k]!r}" for k in sorted(self.config)]
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", ".".join(parts)).strip("_")
        if len(slug) <= SLUG_MAX:
            return slug
        return f"{slug[:SLUG_MAX - 17]}-{hashlib.sha256(self.key.encode()).hexdigest()[:16]}"

    def task(self, seed: int) -> dict:
        return self.tasks([seed])[0]

    def tasks(self, seeds, keyed: bool = False) -> list[dict]:
        """{"seed", "question", "answer"} per seed (answer None where the family has none), the same
        in every process whatever its hash seed (tasks.py); keyed: with "meaning", the key each task is
        reserved by, where the family's is not its text (meaning)."""
        return tasks_.build(self.source, self.name, self.config, [int(seed) for seed in seeds], keyed)

    @property
    def meaning(self) -> str:
        """Which key its questions are reserved by, with its version ("products/1"), or "question": the
        text, case and whitespace aside (sources/meaning.py)."""
        return tasks_.meaning(self.source, self.name)

    def __hash__(self):  # the config is a dict, so hash by the canonical key
        return hash(self.key)


def _not_literal(value, depth: int = 0) -> str | None:
    """Why a setting's value is not one a config can carry between processes (JSON), or None."""
    if value is None or isinstance(value, (bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else "not a finite number"
    if isinstance(value, str):
        return None if len(value) <= TEXT_MAX else f"a string of {len(value):,} characters (at most {TEXT_MAX:,})"
    if isinstance(value, list):
        if depth > 3 or _items(value) > LIST_MAX:
            return f"a list of more than {LIST_MAX:,} items or nested deeper than 4"
        return next((why for item in value if (why := _not_literal(item, depth + 1))), None)
    return f"a {type(value).__name__}: give a number, a string, True, False, None or a list of them"


def _items(value) -> int:
    return sum(1 + _items(v) for v in value) if isinstance(value, list) else 0


def _of_kind(value, kinds: tuple) -> bool:
    if isinstance(value, bool):  # an int is not a bool, nor a bool an int, here
        return bool in kinds
    return isinstance(value, tuple(k for k in kinds if k is not bool))


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse(text: str | Family, source: str = source_.DEFAULT) -> Family:
    """A family from its spec; a name without a source's prefix is one of `source`'s (--source)."""
    if isinstance(text, Family):
        return text
    return _parse(text.strip(), source, source_.served())


@functools.lru_cache(maxsize=1024)
def _parse(text: str, source_name: str = source_.DEFAULT, served: tuple = ()) -> Family:
    """A family string read once: every later parse of the same text, from the same servers, is this
    Family (validating it builds a task, which some families take seconds to do)."""
    try:
        name, config = spec.parse_call(text, "family")
    except spec.SpecError as e:
        raise FamilyError(str(e)) from None
    source, _, name = name.rpartition(".")
    return Family(name, config, source or source_name)


def parse_list(families: str | list | tuple, source: str = source_.DEFAULT) -> list[Family]:
    """Families from a list, or from one string separated by commas outside parentheses; names
    without a source's prefix are `source`'s."""
    if isinstance(families, str):
        families = spec.split(families)
    parsed = [parse(f, source) for f in families if isinstance(f, Family) or f.strip()]
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


FINGERPRINTED = ("seed", "question", "answer")


def fingerprint(tasks: list[dict]) -> str:
    """SHA-256 of tasks (Family.tasks(): seeds, questions and answers) as canonical JSON: equal
    fingerprints, equal tasks, in any process. Only what was asked and answered counts: what a task
    carries beside it (a known-valid answer for the audit) never changes a committed fingerprint."""
    core = [{k: t[k] for k in FINGERPRINTED if k in t} for t in tasks]
    text = json.dumps(core, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()
