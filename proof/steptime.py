"""Where a GRPO step's seconds go: generating the completions, scoring them with the family's reward, and
the rest (TRL's own work around them: padding, advantages, metrics; the log-probabilities, the loss, backward
and the optimizer), per optimizer step. Each part's median is taken on its own: the medians need not add up.
With the protocol's settings (steps_per_generation = gradient accumulation, one iteration) a step generates
once; settings that generate every few steps would show steps with no generation.

The trainer's generation is timed around TRL's `_generate` (proof/trl_internals.timed_generation: the fast
engine's weight sync and sampling, or TRL's own generate), the scoring around the reward function; the
step itself from the Trainer's step-begin to its step-end callback. "rest" is the step less the two.
A GPU is synchronised before a timed part ends, so kernels queued in it are counted in it, not in the next.
"""
from __future__ import annotations

import statistics
import time
from contextlib import contextmanager

PARTS = ("generation_s", "scoring_s")


def _synchronise() -> None:
    import torch
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class StepClock:
    """Seconds per part of each step this process ran; summary() gives the first step's split (compilation
    shows there) and the median of each part over the steps after it."""

    def __init__(self):
        self.steps: list[dict] = []
        self._current = dict.fromkeys(PARTS, 0.0)
        self._begun: float | None = None

    @contextmanager
    def part(self, name: str):
        if name not in PARTS:
            raise ValueError(f"step part {name!r}: one of {', '.join(PARTS)}")
        started = time.perf_counter()
        try:
            yield
        finally:
            _synchronise()
            self._current[name] += time.perf_counter() - started

    def begin(self) -> None:
        _synchronise()
        self._begun, self._current = time.perf_counter(), dict.fromkeys(PARTS, 0.0)

    def end(self) -> None:
        if self._begun is None:  # a step-end without its begin (the Trainer always sends both): nothing to time
            return
        _synchronise()
        step = time.perf_counter() - self._begun
        self.steps.append({"step_s": step, **self._current,
                           "rest_s": max(0.0, step - sum(self._current.values()))})
        self._begun = None

    def summary(self) -> dict:
        """{"steps": n, "first": split of the first step, "median": median split of the later ones} (None where
        no step of that kind ran); seconds rounded to the millisecond."""
        def rounded(split: dict) -> dict:
            return {k: round(v, 3) for k, v in split.items()}
        later = self.steps[1:]
        median = {k: statistics.median(s[k] for s in later) for k in later[0]} if later else None
        return {"steps": len(self.steps), "first": rounded(self.steps[0]) if self.steps else None,
                "median": rounded(median) if median else None}
