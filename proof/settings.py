"""The proof's settings: one block of values, as in nanoGPT's train.py.

The same names are the notebooks' `parameters` cells, the keyword arguments of the library and
the `--set name=value` overrides of `python -m proof run`, so the three speak one vocabulary.
Defaults are the seed's protocol. validate() turns every impossible combination into one line
before any model loads.
"""
from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass, field, fields

from shortlist import families as families_
from shortlist import sampling, scoring, screening, trainee


class SettingsError(ValueError):
    """A bad setting; the message is one line."""


@dataclass(frozen=True)
class Settings:
    model: str = trainee.MODEL  # a hub name, a local folder, or "tiny" (built offline)
    families: tuple = families_.DEFAULT
    out: str = "results"  # every file a run writes goes under this folder
    # GRPO + LoRA (the seed's hyper-parameters)
    steps: int = 100
    group: int = trainee.GROUP  # completions per prompt
    prompts_per_step: int = 4
    batch_per_device: int = 4  # completions per forward/backward; gradient accumulation covers the rest
    lr: float = 5e-5
    lora_r: int = 16
    lora_alpha: int = 32
    seed: int = 0
    logging_steps: int = 5
    checkpoint_every: int = 25  # steps between LoRA checkpoints a rerun resumes from; 0: none
    # Sampling and scoring
    max_new_tokens: int = trainee.MAX_NEW_TOKENS
    sample_batch: int = sampling.SAMPLE_BATCH  # sequences per generate() call; 0: as many as fit (speed only)
    fast: bool = True  # static-cache generation in CUDA graphs, compiled training (GPU): speed only, same math
    score_deadline_s: float = scoring.DEADLINE_S
    # Seed ranges: predict, train and evaluate on disjoint tasks
    predict_tasks: int = screening.TASKS
    predict_seed: int = screening.PREDICT_SEED
    train_seed: int = 0
    eval_n: int = 200
    eval_seed: int = 100_000
    # Analysis, declared before training
    alpha: float = 0.05
    bootstrap_n: int = 10_000
    equivalence_margin: float = 0.05  # |gain| below this counts as "no change" (TOST)

    def __post_init__(self):
        for f in fields(self):  # 1 means 1.0 where a float is due (a papermill or YAML int)
            if type(f.default) is float and type(getattr(self, f.name)) is int:
                object.__setattr__(self, f.name, float(getattr(self, f.name)))
        fams = self.families
        object.__setattr__(self, "families", tuple(f.key for f in families_.parse_list(fams)) if fams else ())

    @property
    def grad_accum(self) -> int:
        return self.prompts_per_step * self.group // self.batch_per_device

    def seed_ranges(self) -> dict[str, range]:
        return {"train": range(self.train_seed, self.train_seed + self.steps * self.prompts_per_step),
                "predict": range(self.predict_seed, self.predict_seed + self.predict_tasks),
                "eval": range(self.eval_seed, self.eval_seed + self.eval_n)}

    def validate(self) -> "Settings":
        for f in fields(self):
            value, kind = getattr(self, f.name), type(f.default)
            if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
                raise SettingsError(f"{f.name}={value!r}: must be {kind.__name__}")
        at_least = {"steps": 1, "group": 2, "prompts_per_step": 1, "batch_per_device": 1, "eval_n": 1,
                    "predict_tasks": 1, "max_new_tokens": 1, "sample_batch": 0, "lora_r": 1, "logging_steps": 1,
                    "bootstrap_n": 100, "checkpoint_every": 0}
        for name, low in at_least.items():
            if getattr(self, name) < low:
                why = " (GRPO compares completions within a group)" if name == "group" else ""
                raise SettingsError(f"{name}={getattr(self, name)}: must be at least {low}{why}")
        completions = self.prompts_per_step * self.group
        if completions % self.batch_per_device:
            raise SettingsError(f"batch_per_device={self.batch_per_device} does not divide the {completions} "
                                f"completions of a step (prompts_per_step {self.prompts_per_step} x group {self.group})")
        for name in ("lr", "score_deadline_s", "equivalence_margin"):
            if not getattr(self, name) > 0:
                raise SettingsError(f"{name}={getattr(self, name)}: must be positive")
        if not 0 < self.alpha < 1:
            raise SettingsError(f"alpha={self.alpha}: must lie between 0 and 1")
        if not self.families:
            raise SettingsError("families: none given")
        ranges = list(self.seed_ranges().items())
        for i, (a, ra) in enumerate(ranges):
            for b, rb in ranges[i + 1:]:
                if ra.start < rb.stop and rb.start < ra.stop:
                    raise SettingsError(f"{a} seeds {ra.start}..{ra.stop - 1} overlap {b} seeds "
                                        f"{rb.start}..{rb.stop - 1}: move {a}_seed or {b}_seed")
        return self

    def protocol(self) -> dict:
        """What predictions commit to: every setting but where the files go and how fast it runs."""
        return {k: v for k, v in self.as_dict().items() if k not in SPEED_ONLY}

    def as_dict(self) -> dict:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}

    def replace(self, **changes) -> "Settings":
        return dataclasses.replace(self, **changes)


SPEED_ONLY = ("out", "families", "sample_batch", "fast")


def names() -> list[str]:
    return [f.name for f in fields(Settings)]


def make(preset: str | None = None, **overrides) -> Settings:
    """Settings from a preset and overrides, validated; unknown names and presets are one line."""
    if preset is not None and preset not in PRESETS:
        raise SettingsError(f"unknown preset {preset!r}; presets: {', '.join(PRESETS)}")
    unknown = sorted(set(overrides) - set(names()))
    if unknown:
        raise SettingsError(f"unknown setting {unknown[0]!r}; settings: {', '.join(names())}")
    try:
        return Settings(**{**PRESETS.get(preset or "full", {}), **overrides}).validate()
    except families_.FamilyError as e:
        raise SettingsError(f"families: {e}") from None


def from_namespace(namespace: dict) -> Settings:
    """Settings from a notebook's globals (its parameters cell, after papermill's injection)."""
    return make(**{name: namespace[name] for name in names() if name in namespace})


def parse_override(text: str) -> tuple[str, object]:
    """`name=value` from a command line, the value coerced to the setting's type (as nanoGPT does)."""
    name, sep, raw = text.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or name not in names():
        raise SettingsError(f"--set {text!r}: write name=value with a name from {', '.join(names())}")
    default = getattr(Settings(families=()), name)
    if isinstance(default, str):
        return name, raw
    if isinstance(default, tuple):
        return name, raw  # a family list: Settings parses it
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        raise SettingsError(f"--set {text!r}: {raw!r} is not a {type(default).__name__}") from None
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if type(value) is not type(default):
        raise SettingsError(f"--set {text!r}: {name} takes a {type(default).__name__}")
    return name, value


# one the tiny model can learn ("improves") and one far beyond it ("too hard": a "no change" to judge)
SMOKE_FAMILIES = ("chain_sum(max_terms=2, max_digits=1)", "basic_arithmetic")
PRESETS = {
    "full": {},  # the seed's protocol on Qwen3-0.6B
    "smoke": {  # the whole pipeline on the offline tiny model, in a few minutes on a CPU
        # lr is 60x the seed's so that 4 steps move the tiny model at all; its numbers mean nothing
        "model": "tiny", "families": SMOKE_FAMILIES, "out": "results/smoke", "steps": 4, "lr": 3e-3, "logging_steps": 1,
        "predict_tasks": 8, "eval_n": 24, "max_new_tokens": 16, "checkpoint_every": 1, "bootstrap_n": 2000,
    },
}
