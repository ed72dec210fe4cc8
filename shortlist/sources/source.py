"""Where environments come from: the Source protocol and its registry.

A source is a module that offers task families, in the style of reasoning-gym's own registry: a
name per family, a config of overrides it validates, a task per seed, a scorer, and difficulty
levels. Two are built in: Reasoning Gym (sources/reasoning_gym.py, the only module that imports it),
the default, and an OpenEnv server (sources/openenv.py, scored at the server). A command takes the
source as a value (--source; a family spelled `name.family` names its own). Another kind of
environment (a user's own verifier) is one module more, registered by name:

    from shortlist.sources import source
    source.register("myenv", "mypackage.myenv_source")   # then families spell "myenv.task(x=1)"

A run's sources are one value, a Choice: which source unprefixed families are (--source), that
source's options (its OPTIONS: a server's URL) and the modules registered beyond the built-in ones.
It travels with what already crosses to other processes (the proof's Settings, the catalog's Plan),
and each process configures its registry from it (Choice.configure()); the task builder and the
scoring zygotes get a source with each request (as_request(), from_request()). Nothing travels
through the environment, so a registered module must only be importable in every process of the run.

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
    describe(family) -> str                          optional: one line on what a family asks (`families` lists it)
    meaning(family) -> str                           optional: which key its questions are reserved by, with a
                                                     version ("products/1"; "question": the text, the default)
    meaning_of(family, config, entry) -> str         with meaning(): an entry's key under it (sources/meaning.py)
    identity() -> dict                               optional: what served the tasks (a server's URL, name,
                                                     version), recorded with VERSION beside every fingerprint
    entries(family, config, seeds) -> list[dict]     optional: entry() for many seeds at once (one server session)
    served() -> str                                  optional: which server it reads now (parsed families are
                                                     kept per server)
    offers() -> str                                  optional: what `python -m shortlist families` prints for it
                                                     (a server: its families, or the one environment it offers)
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
    OPTIONS = {option: help}                         optional, a literal dict (read without importing the module,
                                                     so --help imports no environment): the options the source
                                                     takes, each a flag of both CLIs (env_url: --env-url)
    configure(**options) -> None                     optional: take the options in this process (each checked;
                                                     a bad one is one line); called with none to forget them
    serving(options) -> context manager of options   optional: what must run while the run does (a local server
                                                     started and stopped), the options to use meanwhile
    HERE_ONLY = (option, ...)                        optional: options whose serving() serves on this machine
                                                     alone (refused when jobs run on a cluster)
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import importlib.util
from dataclasses import dataclass
from types import ModuleType

from shortlist.errors import OneLine

DEFAULT = "reasoning_gym"
BUILT_IN = {DEFAULT: "shortlist.sources.reasoning_gym", "openenv": "shortlist.sources.openenv"}
SOURCES = dict(BUILT_IN)  # source name -> module: the built-in ones and those register()ed in this process
REQUIRED = ("VERSION", "names", "settings", "validate", "entry", "scorer", "levels", "level", "preload")


class ChoiceError(OneLine, ValueError):
    """A source choice that cannot be: an unknown source, an option it does not take; one line."""


def register(name: str, module: str) -> None:
    """Make a source module known under a name (an identifier: family specs spell `name.family`), in this
    process; a run's Choice carries it to the others. A name already taken by another module is refused
    (a built-in one too): families spelled `name.family` would silently change meaning; the same module
    again is a no-op."""
    if not name.isidentifier():
        raise ValueError(f"source name {name!r}: use letters, digits and _ only")
    if SOURCES.get(name, module) != module:
        raise ChoiceError(f"source name {name!r} is taken by {SOURCES[name]}: register {module} under another name")
    SOURCES[name] = module


def reset() -> None:
    """Forget every source registered in this process (the built-in ones stay, imported once), and the
    choice configured here: a test that registers a source leaves the registry as it found it."""
    global _current
    for name in [n for n in SOURCES if n not in BUILT_IN]:
        del SOURCES[name]
        _loaded.pop(name, None)
        _options.pop(name, None)
    SOURCES.update(BUILT_IN)
    if _current.name not in BUILT_IN:
        _current = Choice()


_loaded: dict[str, ModuleType] = {}
_options: dict[str, dict] = {}  # source name -> the options it was configured with in this process


def get(name: str = DEFAULT) -> ModuleType:
    """The source module registered under name, imported once and checked to be one."""
    if name not in _loaded:
        if name not in SOURCES:
            raise KeyError(f"unknown source {name!r}; sources: {', '.join(SOURCES)}")
        try:
            module = importlib.import_module(SOURCES[name])
        except Exception as e:  # noqa: BLE001  a user's module: whatever its import raises is one line here
            raise ChoiceError(f"source {name!r}: its module {SOURCES[name]} cannot be imported "
                              f"({type(e).__name__}: {str(e)[:120]})") from None
        missing = [attr for attr in REQUIRED if not hasattr(module, attr)]
        if missing:
            raise TypeError(f"source module {SOURCES[name]} lacks {', '.join(missing)}")
        _loaded[name] = module
    return _loaded[name]


def options(name: str) -> dict:
    """A source's OPTIONS (option -> help), read from its module's text where it is not imported yet:
    building a CLI's flags imports no environment."""
    if name in _loaded:
        return _checked_options(name, getattr(_loaded[name], "OPTIONS", {}))
    try:
        spec = importlib.util.find_spec(SOURCES[name])
    except (ImportError, ValueError):  # its package is missing: get() says so in one line
        spec = None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return _checked_options(name, getattr(get(name), "OPTIONS", {}))
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(getattr(t, "id", None) == "OPTIONS" for t in targets) and node.value is not None:
            try:
                return _checked_options(name, ast.literal_eval(node.value))
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                raise ChoiceError(f"source {name!r}: OPTIONS must be a literal dict of option -> help "
                                  "(it is read without importing the module)") from None
    return {}


def _checked_options(name: str, found) -> dict:
    if not isinstance(found, dict) or not all(isinstance(k, str) and k.isidentifier() and isinstance(v, str)
                                              for k, v in found.items()):
        raise ChoiceError(f"source {name!r}: OPTIONS must be a dict of option names (letters, digits, _) -> help")
    return dict(found)


@dataclass(frozen=True)
class Choice:
    """The run's sources, as one value that travels with the run: the source unprefixed families are
    (--source), its options (OPTIONS: e.g. env_url) and the modules registered beyond the built-in
    ones. Recorded with what a run writes; configure() makes it this process's."""
    name: str = DEFAULT
    options: tuple = ()  # ((option, value), ...), sorted; a dict is taken
    modules: tuple = ()  # ((source name, module), ...), sorted; a dict is taken

    def __post_init__(self):
        for field in ("options", "modules"):
            value = getattr(self, field)
            pairs = value.items() if isinstance(value, dict) else value
            try:
                pairs = tuple(sorted((str(k), v) for k, v in pairs))
            except (TypeError, ValueError):
                raise ChoiceError(f"source {field}={str(value)[:80]}: give a dict") from None
            object.__setattr__(self, field, pairs)
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ChoiceError(f"source {str(self.name)[:40]!r}: give a source's name; sources: {', '.join(SOURCES)}")
        if not all(isinstance(m, str) and n.isidentifier() for n, m in self.modules):
            raise ChoiceError(f"source modules={dict(self.modules)}: give name -> module, both strings")

    @classmethod
    def of(cls, value) -> "Choice":
        """A Choice from itself, its as_dict(), or a source's name (this process's choice where it names the
        same source, with its options), or None: this process's own (current())."""
        if value is None or isinstance(value, str) and value == _current.name:
            return current()
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls(name=value, modules=current().modules)
        if isinstance(value, dict) and set(value) <= {"name", "options", "modules"}:
            return cls(**value)
        raise ChoiceError(f"source={str(value)[:80]}: give a source's name or a dict of name, options, modules")

    def as_dict(self) -> dict:
        return {"name": self.name, "options": dict(self.options), "modules": dict(self.modules)}

    def replace(self, **changes) -> "Choice":
        return dataclasses.replace(self, **changes)

    def configure(self) -> "Choice":
        """Make this choice this process's: its modules registered, its source given its options (checked:
        a bad one is one line, an option the source does not take too). Returns itself."""
        global _current
        for name, module in self.modules:
            if SOURCES.get(name) != module:
                register(name, module)
        if self.name not in SOURCES:
            raise ChoiceError(f"--source {self.name}: unknown; sources: {', '.join(SOURCES)}")
        given, taken = dict(self.options), options(self.name)
        if unknown := sorted(set(given) - set(taken)):
            raise ChoiceError(f"{_flag(unknown[0])} is not an option of --source {self.name}"
                              + (f" (its options: {', '.join(map(_flag, taken))})" if taken else ""))
        _configure(self.name, given)
        _current = self
        return self

    @contextlib.contextmanager
    def serving(self, remote: bool = False):
        """The choice while what its source must run runs (serving(): a local server started, then
        stopped, whatever ends the block), configured in this process; the choice itself where it needs none.
        remote: the run's jobs go to other machines, which cannot reach what serves on this one (HERE_ONLY)."""
        module = get(self.name)
        here_only = [option for option in getattr(module, "HERE_ONLY", ()) if dict(self.options).get(option)]
        if remote and here_only:
            raise ChoiceError(f"{_flag(here_only[0])} serves on this machine, which jobs on other machines cannot "
                              f"reach: with a cluster, serve it where every node reaches it and give its address")
        if not hasattr(module, "serving"):
            yield self.configure()
            return
        with module.serving(dict(self.options)) as given:
            yield self.replace(options=given).configure()


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def _configure(name: str, given: dict) -> None:
    if _options.get(name) == given:
        return
    module = get(name)
    if hasattr(module, "configure"):
        module.configure(**given)
    _options[name] = dict(given)


_current = Choice()


def current() -> Choice:
    """This process's choice (the last configured), with every module registered here."""
    return _current.replace(modules={n: m for n, m in SOURCES.items() if BUILT_IN.get(n) != m})


def as_request(name: str) -> list:
    """A source as a request to another process carries it: its name, module, and options here."""
    return [name, SOURCES[name], _options.get(name, {})]


def from_request(request) -> ModuleType:
    """The source a request names (as_request()), registered and configured in this process as it was there."""
    name, module, given = request
    if SOURCES.get(name) != module:
        register(name, module)
    _configure(name, given)
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
