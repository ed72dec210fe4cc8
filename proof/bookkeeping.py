"""A family's bookkeeping across the processes that train it: what the run has spent (Bookkeeping), and the Trainer
callback that puts it into every checkpoint (checkpoint.PROGRESS), so that a resumed family's timings, scorer counts
and micro-batches are those of the whole run; and the short line each logged step prints."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from proof import checkpoint, files, steptime
from shortlist import scoring
from shortlist.models import precision


@dataclass
class Bookkeeping:
    """What a family's run has spent so far, across the processes that ran parts of it."""
    scoring: dict = field(default_factory=dict)  # ScoreCounts fields, summed
    timings: dict = field(default_factory=dict)
    engine: dict = field(default_factory=dict)  # phase -> the status() of its own engine.phase() record
    resumed_at_step: int | None = None
    trainer: str = ""  # "fast", or TRL's own and why


def counts(scorer: scoring.Scorer, key: str) -> dict:
    return vars(scorer.counts.get(key, scoring.ScoreCounts())).copy()


def plus(a: dict, b: dict, sign: int = 1) -> dict:
    return {k: a.get(k, 0) + sign * b.get(k, 0) for k in a.keys() | b.keys()}


def callback(scorer: scoring.Scorer, key: str, prior: dict, log, checkpoints: Path,
             clock: steptime.StepClock | None = None, batch: int | None = None):
    """Puts checkpoint.PROGRESS into every checkpoint the Trainer stages and publishes it whole into checkpoints;
    times the first step (compilation shows there), and each step on clock (where its seconds go). batch: this
    process's micro-batch, kept beside those of the processes before it (a speed setting a resumed run may change)
    once this process has trained a step at it (a rerun resumed at the last step trains none)."""
    clock = clock or steptime.StepClock()  # where none is given, one nobody reads
    from transformers import TrainerCallback

    class Bookkeeper(TrainerCallback):
        def __init__(self):
            self.started, self.counts_at_start, self.first_step_s = time.perf_counter(), counts(scorer, key), None
            self.stepped = False  # whether this process trained a step (at batch)

        def train_s(self) -> float:
            return prior.get("train_s", 0.0) + time.perf_counter() - self.started

        def scoring(self) -> dict:
            return plus(prior.get("scoring", {}), plus(counts(scorer, key), self.counts_at_start, -1))

        def micro_batches(self) -> list[int]:
            return sorted(set(prior.get("batch_per_device", [])) | ({batch} if batch and self.stepped else set()))

        def on_train_begin(self, args, state, control, **kwargs):
            self.first = state.global_step  # a resumed run starts at its checkpoint's step
            self.begun = time.perf_counter()  # steps are timed from here: not the trainer's construction
            log(f"{key}: trainer ready ({self.begun - self.started:.0f} s); step {state.global_step + 1} of "
                f"{state.max_steps} under way")

        def on_step_begin(self, args, state, control, **kwargs):
            precision.check(f"{key}, GRPO step {state.global_step + 1}")
            clock.begin()

        def on_step_end(self, args, state, control, **kwargs):
            clock.end()
            self.stepped = True
            if self.first_step_s is None:
                self.first_step_s = time.perf_counter() - self.started

        def on_save(self, args, state, control, **kwargs):
            # called right after the Trainer wrote the checkpoint: the counts are those of the state it holds
            staged = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            files.write_json(staged / checkpoint.PROGRESS, {"step": state.global_step, "train_s": self.train_s(),
                                                 "scoring": self.scoring(), "batch_per_device": self.micro_batches()})
            checkpoint.publish(staged, checkpoints)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:  # one short line per logged step: papermill shows it, no bar floods
                log(progress_line(key, state.global_step, state.max_steps, logs,
                                  time.perf_counter() - self.begun, state.global_step - self.first))
    return Bookkeeper()


def progress_line(key: str, step: int, steps: int, logs: dict, seconds: float, done: int) -> str:
    """One logged GRPO step: the family, the step, its reward, seconds per step and the time left, from the
    steps this process ran (a resumed run's earlier steps are not timed here)."""
    per = seconds / done if done > 0 else float("nan")
    left = per * (steps - step)
    # the time left is training's: the evaluation after it comes next, so the last step says that, not "0.0 min"
    eta = ("evaluation next" if step >= steps else
           f"{left / 60:.1f} min left" if left == left else "time left unknown")
    return (f"{key} step {step}/{steps}: reward {logs['reward']:.3f} ± {logs.get('reward_std', 0):.3f}, zero-std "
            f"{logs.get('frac_reward_zero_std', 0):.2f}, clipped {logs.get('completions/clipped_ratio', 0):.2f}, "
            f"length {logs.get('completions/mean_length', 0):.0f}, {per:.1f} s/step, {eta}")
