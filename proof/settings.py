"""The proof's settings: one block of values, as in nanoGPT's train.py.

The same names are the notebooks' `parameters` cells, the keyword arguments of the library and
the `--set name=value` overrides of `python -m proof run`, so the three speak one vocabulary.
Defaults are the seed's protocol. validate() turns every impossible combination into one line
before any model loads or any file is written: a value of the wrong type, a number that is not
finite or lies outside its range, an empty `out` (it would write into the working directory),
seed ranges that overlap, and a scoring deadline below defaults.SCORE_DEADLINE_MIN_S, under which honest
answers time out (measured, below).
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
from dataclasses import dataclass, field, fields

import math
from typing import TYPE_CHECKING

from shortlist import defaults, output, sources
from shortlist.errors import OneLine

if TYPE_CHECKING:
    from shortlist.trainee import Trainee

# resampled scores the bootstrap holds at once (bootstrap_n x eval_n float64s, stats.bootstrap_means): 800 MB,
# 50x the seed's 10,000 x 200; the upper ends of both ranges at once would need 800 TB after training
BOOTSTRAP_CELLS_MAX = 100_000_000
SEED_MAX = defaults.SEED_MAX


def setting(default, help: str, within: tuple | None = None, why: str = "", why_high: str = ""):
    """A field of Settings with its help (`python -m proof run --help` lists it) and, where validate()
    holds it to one, its range: validate() reads `within` from here, so the help cannot drift from it.
    A float's `why` says why its floor is where the setting stops meaning anything, `why_high` its ceiling:
    a refusal explains the bound that was broken."""
    return field(default=default, metadata={"help": help, "within": within, "why": why, "why_high": why_high})


class SettingsError(OneLine, ValueError):
    """A bad setting; the message is one line."""


# batch_per_device=0's ceiling. Measured: 8 SmolLM2 families under MPS on an H100, 8 instead of 4 cut a shared step's
# rest from 1.37 to 0.76 s, every family's means before and after training the same (bench/results/
# throughput.b8.8mps100.h100.txt); at the Qwen3-0.6B shape 0.78 -> 0.62 s (realsize.b8.h100.txt), 11.5 GiB reserved at
# most under a 15 GiB cap, though the memory estimate (shortlist/models/memory.py) asks 13.8 GiB: on a T4 it gives 4
AUTO_MICRO_BATCH = 8


@dataclass(frozen=True)
class Settings:
    # no "=" in a help: papermill cannot read a parameters line holding two (proof/notebook.py writes it there)
    trainee: str = setting(defaults.TRAINEE, "a profile named in shortlist/trainee.py, one with overrides "
                                             "(as --trainee takes them), a .json file, or a record")
    model: str = setting("", 'a hub name, a local folder, or "tiny" (built offline); "": the trainee\'s own')
    families: tuple = setting(sources.DEFAULT, "comma-separated family specs")
    # whose families, with the source's options: a source.Choice, its as_dict(), or None: this process's.
    # Each process that makes the Settings (a notebook's kernel) configures it.
    source: object = setting(None, "whose families, with their options")
    out: str = setting("results", "every file a run writes goes under this folder (a notebook takes a relative "
                                  "one from the repository root)")
    # GRPO + LoRA (the seed's hyper-parameters)
    steps: int = setting(100, "GRPO steps per family", (1, 100_000))
    prompts_per_step: int = setting(4, "prompts per GRPO step; times the trainee's group: the completions of a "
                                       "step", (1, 4096))
    batch_per_device: int = setting(0, "completions per forward/backward; gradient accumulation covers the rest "
                                       "(speed only: the loss is normalised over the whole step, so the split "
                                       "changes float order only; proof/trl_internals.py); 0: the most, up to "
                                       f"{AUTO_MICRO_BATCH}, that divides a step's completions and fits the GPU",
                                    (0, 4096))
    lr: float = setting(5e-5, "LoRA's learning rate", (1e-8, 1.0), why="below 1e-8, Adam's steps (about lr each) "
                        "move a LoRA weight by at most 1e-3 in 100,000 steps: no training",
                        why_high="above 1, each Adam step (about lr) moves a LoRA weight by more than the weights "
                                 "themselves measure: training diverges (the protocol's is 5e-05, the smoke's 3e-03)")
    lora_r: int = setting(16, "LoRA's rank", (1, 4096))
    lora_alpha: int = setting(32, "LoRA's scaling numerator (the update is scaled by lora_alpha / lora_r)", (1, 1 << 16))
    seed: int = setting(0, "the training seed", (0, SEED_MAX))
    logging_steps: int = setting(5, "steps between logged rewards (the reward curves)", (1, 100_000))
    checkpoint_every: int = setting(25, "steps between LoRA checkpoints a rerun resumes from; 0: none", (0, 100_000))
    # Sampling and scoring (how the trainee samples is the trainee's)
    sample_batch: int = setting(defaults.SAMPLE_BATCH, "sequences per generate() call; 0: as many as fit (speed only)",
                                (0, 1 << 20))
    fast: bool = setting(True, "static-cache generation in CUDA graphs, compiled training (GPU): speed only, "
                               "same math")
    cpu: bool = setting(False, "train a model other than the tiny one without a GPU anyway (hours); False: such a "
                               "run is refused on a machine without one")
    score_deadline_s: float = setting(defaults.SCORE_DEADLINE_S, "seconds a scorer call may take; a longer one "
                                      "scores 0.0", (defaults.SCORE_DEADLINE_MIN_S, defaults.SCORE_DEADLINE_MAX_S))
    # Seed ranges and reserved questions: predict, train and evaluate on disjoint tasks (heldout.py)
    predict_tasks: int = setting(defaults.SCREEN_TASKS, "tasks per family screened for the prediction", (1, 100_000))
    predict_seed: int = setting(10_000, "the first prediction task's seed (with reserve: walked past reserved "
                                        "questions)", (0, SEED_MAX))
    train_seed: int = setting(0, "the first training task's seed", (0, SEED_MAX))
    eval_n: int = setting(200, "evaluation tasks per family, before and after training", (1, 100_000))
    eval_seed: int = setting(100_000, "evaluation tasks: the first eval_n seeds from here whose question is "
                                      "reserved", (0, SEED_MAX))
    eval_search: int = setting(20, "evaluation seeds looked at: at most eval_search x eval_n from eval_seed",
                               (1, 1000))
    min_unseen: int = setting(40, "distinct reserved (schema 3: unseen) evaluation questions a family needs to be "
                                  "judged", (1, 100_000))
    reserve: bool = setting(True, "evaluation questions reserved by a keyed hash first; False: a run committed "
                                  "before (schema 3)")
    reserve_key: str = setting("shortlist", "the keyed hash's key: which questions are reserved (1 to 256 "
                                            "characters)")
    census_n: int = setting(400, "tasks drawn to estimate each family's question space, which sizes its reserved "
                                 "share", (1, 100_000))
    census_seed: int = setting(200_000, "the first census task's seed", (0, SEED_MAX))
    # Analysis, declared before training
    alpha: float = setting(0.05, "the significance level of the bootstrap and the equivalence test", (1e-6, 0.5),
                           why="below 1e-6, no p the bootstrap (at most 1,000,000 resamples) reports can reach it",
                           why_high="above 0.5, a test would call significant what chance produces more often "
                                    "than not")
    bootstrap_n: int = setting(10_000, "bootstrap resamples", (100, 1_000_000))
    equivalence_margin: float = setting(0.05, '|gain| below this counts as "no change" (TOST)', (1e-4, 1.0),
                                        why="below 1e-4, finer than a mean score over 100,000 tasks can resolve",
                                        why_high="above 1, wider than any gain can be: scores lie in [0, 1]")

    def __post_init__(self):
        for f in fields(self):  # 1 means 1.0 where a float is due (a papermill or YAML int)
            if type(f.default) is float and type(getattr(self, f.name)) is int:
                object.__setattr__(self, f.name, float(getattr(self, f.name)))
        object.__setattr__(self, "source", sources.source.Choice.of(self.source).configure())
        fams = self.families
        if not (isinstance(fams, str) or isinstance(fams, (list, tuple)) and all(isinstance(f, (str, sources.Family))
                                                                                 for f in fams)):
            raise SettingsError(f"families={str(fams)[:80]}: give family specs, a list of strings or one string "
                                f"of them separated by commas")  # a notebook parameter can be of any type
        object.__setattr__(self, "families", tuple(f.key for f in sources.parse_list(fams)) if fams else ())
        # a record (Trainee.as_dict()) is how the batch hands the trainee to a kernel: a profile that only
        # this process registered arrives whole
        from shortlist import trainee as trainee_  # here, not above: `--help` imports settings, not the environments
        resolved = trainee_.resolve(self.trainee) if isinstance(self.trainee, (str, dict)) else None
        if resolved is not None and self.model:
            resolved = resolved.replace(model=self.model)
        object.__setattr__(self, "_profile", resolved)
        self.validate()  # once, where a Settings is made: every record in hand is a valid one

    @property
    def profile(self) -> Trainee:
        """The trainee these settings train: its profile, with `model` put in where one is given."""
        return self._profile

    @property
    def group(self) -> int:
        return self.profile.group

    @property
    def micro_batch(self) -> int:
        """batch_per_device, or where it is 0 the most completions, up to AUTO_MICRO_BATCH, that divide a step's
        (proof/train.check() also asks the GPU's memory, and sets it before a family trains)."""
        return self.batch_per_device or max(b for b in range(1, AUTO_MICRO_BATCH + 1)
                                            if (self.prompts_per_step * self.group) % b == 0)

    @property
    def grad_accum(self) -> int:
        return self.prompts_per_step * self.group // self.micro_batch

    def seed_ranges(self) -> dict[str, range]:
        """Where each kind of task comes from: the seeds each draw may look at (heldout.py walks them)."""
        walk = heldout_walk() if self.reserve else 1  # a walk passes over reserved questions: it looks further
        train = self.steps * self.prompts_per_step
        ranges = {"train": range(self.train_seed, self.train_seed + walk * train),
                  "predict": range(self.predict_seed, self.predict_seed + walk * self.predict_tasks),
                  "eval": range(self.eval_seed, self.eval_seed + self.eval_search * self.eval_n)}
        if self.reserve:
            ranges["census"] = range(self.census_seed, self.census_seed + self.census_n)
        return ranges

    def validate(self) -> "Settings":
        for f in fields(self):
            value, kind = getattr(self, f.name), type(f.default)
            if f.name == "trainee" and isinstance(value, dict) or f.name == "source":
                continue  # a trainee record, checked by Trainee.from_dict above; a Choice, checked by configure()
            if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
                raise SettingsError(f"{f.name}={value!r}: must be {kind.__name__}")
        for name, (low, high) in INTS.items():
            if not low <= getattr(self, name) <= high:
                raise SettingsError(f"{name}={getattr(self, name)}: must lie in {low}..{high}")
        if self.min_unseen > self.eval_n:
            raise SettingsError(f"min_unseen={self.min_unseen} exceeds eval_n={self.eval_n}: no family could be judged; "
                                f"raise eval_n or lower min_unseen")
        if self.reserve and self.census_n < 2 * self.min_unseen:
            raise SettingsError(f"census_n={self.census_n} is below 2 x min_unseen={self.min_unseen}: the census could "
                                f"not show the questions a family needs to be judged; raise census_n")
        completions = self.prompts_per_step * self.group
        if self.batch_per_device and completions % self.batch_per_device:
            raise SettingsError(f"batch_per_device={self.batch_per_device} does not divide the {completions} "
                                f"completions of a step (prompts_per_step {self.prompts_per_step} x the "
                                f"trainee's group {self.group})")
        for name, (low, high) in FLOATS.items():
            value = getattr(self, name)
            if not math.isfinite(value):
                raise SettingsError(f"{name}={value}: not a finite number in [{low:g}, {high:g}]")
            if not low <= value <= high:
                why = WHY[name] if value < low else WHY_HIGH[name]  # the bound that was broken, explained
                raise SettingsError(f"{name}={value}: must be a number in [{low:g}, {high:g}] ({why})")
        if defaults.deadline_refusal(self.score_deadline_s):
            raise SettingsError(defaults.deadline_refusal(self.score_deadline_s))
        if not self.reserve_key or len(self.reserve_key) > 256:
            raise SettingsError(f"reserve_key={self.reserve_key[:40]!r}: give 1 to 256 characters (it keys which "
                                f"questions are reserved for evaluation)")
        if (bad := output.path_error(self.out)) is not None:
            raise SettingsError(bad)
        if self.bootstrap_n * self.eval_n > BOOTSTRAP_CELLS_MAX:
            raise SettingsError(f"bootstrap_n={self.bootstrap_n} x eval_n={self.eval_n}: the bootstrap would hold "
                                f"{self.bootstrap_n * self.eval_n:,} resampled scores (at most {BOOTSTRAP_CELLS_MAX:,})")
        if self.logging_steps > self.steps:
            raise SettingsError(f"logging_steps={self.logging_steps} exceeds steps={self.steps}: no step would be "
                                f"logged and the reward curve would be empty")
        if not self.families:
            raise SettingsError("families: none given")
        ranges = list(self.seed_ranges().items())
        for name, r in ranges:
            if r.stop - 1 > SEED_MAX:
                raise SettingsError(f"{name} seeds run to {r.stop - 1}, past the largest seed {SEED_MAX}")
        for i, (a, ra) in enumerate(ranges):
            for b, rb in ranges[i + 1:]:
                if ra.start < rb.stop and rb.start < ra.stop:
                    raise SettingsError(f"{a} seeds {ra.start}..{ra.stop - 1} overlap {b} seeds "
                                        f"{rb.start}..{rb.stop - 1}: move {a}_seed or {b}_seed")
        return self

    def protocol(self) -> dict:
        """What predictions commit to: every setting but where the files go and how fast it runs
        (and the trainee, which predictions.json records resolved, field by field, on its own)."""
        return committed_part(self.as_dict())

    def as_dict(self) -> dict:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)} | {
            "source": self.source.as_dict()}

    def replace(self, **changes) -> "Settings":
        return dataclasses.replace(self, **changes)


def heldout_walk() -> int:
    from proof.heldout import WALK  # heldout imports sources, as settings does: no torch
    return WALK


DEFAULTS = {f.name: f.default for f in fields(Settings)}  # the seed's protocol, without making (checking) a Settings
# not compared as the protocol: the source is checked per family, by what served its tasks (commit.py), since a
# server started here (--env-local) has another port each run; predictions.json records it beside
# batch_per_device: TRL's loss is normalised over the step's whole generation batch, so how a step is split into
# micro-batches changes float order only (trl_internals.split_invariant checks it at run time); a result records
# the micro-batch it trained at (timings["batch_per_device"]). Commitments made before it was speed only hold it.
SPEED_ONLY = ("out", "families", "sample_batch", "fast", "cpu", "trainee", "model", "source", "batch_per_device")


def committed_part(recorded: dict) -> dict:
    """A recorded settings dict (a commitment's, a result's) without the speed-only settings an older version
    recorded there: what two records must agree on."""
    return {k: v for k, v in recorded.items() if k not in SPEED_ONLY}


# the ranges validate() holds each setting to, read from the fields (score_deadline_s's is
# defaults.deadline_refusal's, which every entry point checks)
INTS = {f.name: f.metadata["within"] for f in fields(Settings) if f.metadata["within"] and type(f.default) is int}
FLOATS = {f.name: f.metadata["within"] for f in fields(Settings) if f.metadata["why"]}
WHY = {name: f.metadata["why"] for f in fields(Settings) if (name := f.name) in FLOATS}
WHY_HIGH = {name: f.metadata["why_high"] for f in fields(Settings) if (name := f.name) in FLOATS}


def names() -> list[str]:
    return [f.name for f in fields(Settings)]


def described() -> list[tuple[str, str]]:
    """(name=default, what it is and the values it takes) for each setting, from the fields themselves:
    `python -m proof run --help` lists them."""
    rows = []
    for f in fields(Settings):
        head = {"families": "families (as --families)", "source": "source (as --source and its options)"}.get(
            f.name, f"{f.name}={f.default!r}")
        low_high = f.metadata["within"]
        valid = ("True or False" if type(f.default) is bool else
                 f"in {low_high[0]}..{low_high[1]}" if type(f.default) is int and low_high else
                 f"in [{low_high[0]:g}, {low_high[1]:g}]" if low_high else "")
        rows.append((head, f.metadata["help"] + (f"; {valid}" if valid else "")))
    return rows


def unknown(name: str) -> str:
    """An unknown setting's name, and the names close to it (or every name, where none is)."""
    close = difflib.get_close_matches(name, names(), n=3, cutoff=0.5)
    return (f"unknown setting {name!r}; " + (f"did you mean {' or '.join(close)}?" if close else
                                             f"settings: {', '.join(names())}"))


def make(preset: str | None = None, **overrides) -> Settings:
    """Settings from a preset and overrides, validated; unknown names and presets are one line."""
    if preset is not None and preset not in PRESETS:
        raise SettingsError(f"unknown preset {preset!r}; presets: {', '.join(PRESETS)}")
    strange = sorted(set(overrides) - set(names()))
    if strange:
        raise SettingsError(unknown(strange[0]))
    from shortlist.trainee import TraineeError
    try:
        return Settings(**{**PRESETS.get(preset or "full", {}), **overrides})
    except sources.FamilyError as e:
        raise SettingsError(f"families: {e}") from None
    except TraineeError as e:
        raise SettingsError(str(e)) from None


def from_namespace(namespace: dict) -> Settings:
    """Settings from a notebook's globals (its parameters cell, after papermill's injection). From here on this
    process is a notebook's kernel: a refusal names the parameters cell's line, not a command-line flag."""
    global _IN_NOTEBOOK
    _IN_NOTEBOOK = True
    return make(**{name: namespace[name] for name in names() if name in namespace})


_IN_NOTEBOOK = False  # set by from_namespace(): what spoken() says


def spoken(name: str, value) -> str:
    """How the person running this process sets a setting: `--set steps=4`, or in a notebook's kernel the line
    of its parameters cell, `steps = 4` (papermill: -p steps 4)."""
    if _IN_NOTEBOOK:
        return f"{name} = {value!r} in the parameters cell"
    return f"--{name} {value}" if name in FLAGS else f"--set {name}={value}"


FLAGS = ("out", "model")  # the settings `python -m proof run` takes as flags of their own


def spoken_name(name: str) -> str:
    """A setting's name as the person running this process gives it: --out, or a notebook's out."""
    return name if _IN_NOTEBOOK else f"--{name}" if name in FLAGS else f"--set {name}"


def parse_override(text: str) -> tuple[str, object]:
    """`name=value` from a command line, the value coerced to the setting's type (as nanoGPT does)."""
    name, sep, raw = text.partition("=")
    name = name.strip().replace("-", "_")
    if not sep:
        raise SettingsError(f"--set {text[:80]!r}: write name=value with a name from {', '.join(names())}")
    if name not in names():
        raise SettingsError(f"--set {text[:80]!r}: {unknown(name)}")
    if name == "source":
        raise SettingsError(f"--set {text[:80]!r}: give the source with --source and its options (--env-url...)")
    default = DEFAULTS[name]
    if isinstance(default, str):
        return name, raw
    if isinstance(default, tuple):
        return name, raw  # a family list: Settings parses it
    if isinstance(default, float):
        try:  # float() reads what literal_eval does not (nan, inf): validate() then says why they are refused
            return name, float(raw)
        except ValueError:
            pass
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise SettingsError(f"--set {text[:80]!r}: {raw[:60]!r} is not {_a(type(default))}") from None
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if type(value) is not type(default):
        raise SettingsError(f"--set {text[:80]!r}: {name} takes {_a(type(default))}")
    return name, value


def _a(kind: type) -> str:
    return f"{'an' if kind.__name__[0] in 'aeiou' else 'a'} {kind.__name__}"


# one the tiny model can learn ("improves") and one far beyond it ("too hard": a "no change" to judge),
# whose answers (three-digit leg counts) no content-free answer matches on the smoke's 8 screening tasks
SMOKE_FAMILIES = ("chain_sum(max_terms=2, max_digits=1)", "leg_counting")
PRESETS = {
    "full": {},  # the seed's protocol on Qwen3-0.6B
    "smoke": {  # the whole pipeline on the offline tiny model, in a few minutes on a CPU
        # lr is 60x the seed's so that 4 steps move the tiny model at all; its numbers mean nothing
        "model": "tiny", "trainee": "qwen3(max_new_tokens=16)", "families": SMOKE_FAMILIES, "out": "results/smoke",
        "steps": 4, "lr": 3e-3, "logging_steps": 1, "predict_tasks": 8, "eval_n": 24, "checkpoint_every": 1,
        "bootstrap_n": 2000, "min_unseen": 10, "census_n": 100,
    },
}
