"""Where environments come from: the Source protocol and its registry.

A source is a module that offers task families, in the style of reasoning-gym's own registry: a
name per family, a config of overrides it validates, a task per seed, a scorer, and difficulty
levels. Two are built in: Reasoning Gym (sources/reasoning_gym.py, the only module that imports it),
the default, and an OpenEnv server (sources/openenv.py, scored at the server). A command takes the
source as a value (--source; a family spelled `name.family` names its own). Another kind of
environment (a user's own verifier) is one module more, registered by name:

    from shortlist.sources import source
    source.register("myenv", "mypackage.myenv_source")   # then families spell "myenv.task(x=1)"

A source travels between processes as its name and module: to the task builder and the scoring
zygotes with each request (wire(), arrive()), and to every process the run starts (a notebook's
kernel, a catalog worker) through SHORTLIST_SOURCES ("name=module,..."), which register() sets.
So a registered module must be importable in every process of the run.

What a source module defines (every function deterministic in its arguments):
    VERSION: str                                     recorded with every task fingerprint
    names() -> list[str]                             every family it offers
    settings(family) -> set[str] | None              the config keys a family takes (None: any, validate() judges)
    validate(family, config) -> None                 raises ValueError (one line) for impossible values
    entry(family, config, seed) -> dict              the task: "question", "answer" (None: none), more
    scorer(family, config) -> (answer, entry) -> float    made once per family, where answers are scored
    levels(family) -> int                            difficulty levels (1: its default config only)
    level(family, level) -> dict                     the config overrides at a level (None: default)
    preload() -> None                                imports to pay once, before scoring processes fork
    kinds(family) -> dict[str, tuple[type, ...]]     optional: the kinds each setting takes (family.py checks them)
    known_answer(family, config, entry) -> str | None    optional: where an entry has no gold answer, one
                                                     known to be valid (the audit's ceiling reads it)
    identity() -> dict                               optional: what served the tasks (a server's URL, name,
                                                     version), recorded with VERSION beside every fingerprint
    entries(family, config, seeds) -> list[dict]     optional: entry() for many seeds at once (one server session)
    served() -> str                                  optional: which server it reads now (parsed families are
                                                     kept per server)
    SYSTEM_PROMPT: str, EXTRACTION: str              optional: how its families are asked for an answer and how one
                                                     is read, where the trainee leaves that to the source (its
                                                     default): an extraction's name (extraction.py: answer_line,
                                                     last_number, whole, regex:<pattern>, or one a source brings);
                                                     each the default source's (Reasoning Gym's "direct" prompt,
                                                     <answer> tags) where it declares none
    EXTRACTORS: {name: (read, write)}                optional: extractions it brings, registered by name: read(text)
                                                     -> answer or None, write(answer) -> the answer as asked for
    REMOTE = True, scores(family, config, jobs)      optional: tasks and scores come from a server, so answers
                                                     are scored in the caller, not in the sandbox (which forbids
                                                     the network): [index, kind, value, refused] per job, as a
                                                     scoring zygote replies (sources/openenv.py)
"""
from __future__ import annotations

import importlib
import os
from types import ModuleType

DEFAULT = "reasoning_gym"
ENVIRONMENT = "SHORTLIST_SOURCES"  # "name=module,...": the sources registered by the process that started this one
BUILT_IN = {DEFAULT: "shortlist.sources.reasoning_gym", "openenv": "shortlist.sources.openenv"}
SOURCES = dict(BUILT_IN) | dict(  # source name -> module
    item.split("=", 1) for item in os.environ.get(ENVIRONMENT, "").split(",") if "=" in item)
REQUIRED = ("VERSION", "names", "settings", "validate", "entry", "scorer", "levels", "level", "preload")


def register(name: str, module: str) -> None:
    """Make a source module known under a name (an identifier: family specs spell `name.family`)."""
    if not name.isidentifier():
        raise ValueError(f"source name {name!r}: use letters, digits and _ only")
    SOURCES[name] = module
    _loaded.pop(name, None)
    os.environ[ENVIRONMENT] = ",".join(f"{k}={v}" for k, v in SOURCES.items() if k not in BUILT_IN)


_loaded: dict[str, ModuleType] = {}


def get(name: str = DEFAULT) -> ModuleType:
    """The source module registered under name, imported once and checked to be one."""
    if name not in _loaded:
        if name not in SOURCES:
            raise KeyError(f"unknown source {name!r}; sources: {', '.join(SOURCES)}")
        module = importlib.import_module(SOURCES[name])
        missing = [attr for attr in REQUIRED if not hasattr(module, attr)]
        if missing:
            raise TypeError(f"source module {SOURCES[name]} lacks {', '.join(missing)}")
        _loaded[name] = module
    return _loaded[name]


def wire(name: str) -> list[str]:
    """A source as it crosses a process boundary: its name and its module."""
    return [name, SOURCES[name]]


def arrive(wired) -> ModuleType:
    """The source a wire() names, registered in this process if it was not."""
    name, module = wired
    if SOURCES.get(name) != module:
        register(name, module)
    return get(name)


def remote(name: str) -> bool:
    """Whether a source's answers are scored at a server (in the caller) rather than in the sandbox."""
    return bool(getattr(get(name), "REMOTE", False))


def served() -> tuple:
    """Where the loaded sources that have a server take their tasks from now (their served()): a
    family read from one server is not the same family read from another."""
    return tuple(m.served() for m in _loaded.values() if hasattr(m, "served"))


def identity(name: str) -> dict:
    """What a source's tasks came from, as recorded beside their fingerprints: its name, module,
    VERSION, and its own identity() (a server's URL, environment and version) where it has one."""
    module = get(name)
    return {"source": name, "module": SOURCES[name], "version": module.VERSION,
            **(module.identity() if hasattr(module, "identity") else {})}
