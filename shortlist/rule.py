"""Shortlist's rule: the verdicts, their thresholds, the rule itself and its text, in one room that
screening, the catalog and the proof import. The thresholds are fields of a Trainee (trainee.py), so
predictions.json records them with everything else that decides what "the model can do"; every
function here takes anything that carries them (a Trainee) as `t`.

The rule, and why each threshold sits where it does:
- GRPO's advantage is a reward minus its group's mean, so a group whose rewards are all equal
  contributes no gradient at all. Only groups that mix correct and incorrect answers push the
  model towards correctness; groups that differ only in partial credit (which many scorers pay
  for wrong answers, e.g. 0.05 for garbage in propositional_logic) teach partial credit. So the
  rule reads the signal on correctness (score >= 1), not on the raw reward.
- Learnability peaks where p(1-p) does, at pass@1 = 0.5, and vanishes at both ends.
  pass_min = 0.05: below it fewer than 1 sample in 20 is right; at k = 8 a task with p = 0.05
  mixes in only 1 - 0.95^8 = 34% of its groups, so most prompts teach nothing. -> "too hard".
- pass_max = 0.9, on the mean score: the reward itself has under 10% headroom, and greedy
  accuracy sits well above sampled pass@1 (0.735 vs 0.32 measured on SmolLM2 products), so the
  greedy evaluation has nothing left to gain. -> "already solved".
- grpo_signal_min = 0.25: with 4 prompts per step, at least one prompt per step on average must
  carry a correctness gradient. A family can sit inside the pass@1 band and still fall short,
  when some tasks are always solved and the rest never are. -> "no signal".
Three verdicts come before those, from the scorer audit (audit.py), because they say the reward
cannot tell what the rule needs it to tell:
- ceiling_min = 0.5: where the gold answer, written as the trainee is asked to write answers and
  read back by its extraction, scores 1 on fewer than half the tasks, most of the reward measures
  the extraction, not the model, and "too hard" would be forced (the last number cannot read
  "cat", nor a fraction whole). -> "unscorable".
- no answer to check: where no task carries a gold answer or one known to be valid, nothing shows
  that any completion can score, so a zero pass@1 says nothing of the model. -> "unverified
  ceiling", never "too hard" by default.
- guessable: where a policy that does not solve the task (a constant, the most frequent gold answer,
  another task's answer, or a number or word copied from the question) earns full score on at least
  as many tasks as the model's own samples (pass@1) and on pass_min of them, it is a way to the
  reward found as fast as learning is (its answers are sampled at least as often as correct ones)
  and rewarded as well, so the reward cannot say which GRPO reinforced. -> "guessable". A policy
  below the model's own pass@1 is no threat to the verdict, however high: printing it would lower
  the model's reward, and a gain it explains shows as no real learning after training, where the
  trained model must beat the best policy on the same evaluation tasks (proof/analysis.py). The
  share is read on the screen's own 24 tasks. Design v1 also called a family guessable wherever a
  policy reached a fifth of the tasks (guess_min = 0.2), even far below the model: easy products
  (policy 5/24, SmolLM2 at pass@1 0.8, 0.83 -> 0.99 after training) was then a control the proof
  could not judge. Design v2 (docs/design-v2.md) dropped that floor, after examples/smollm2-22 and
  before v3's catalog; guess_min is read from older records and ignored (trainee.RETIRED).
These values were fixed before any proof run (the audit's two on 2026-12-01, before the first proof
that used them; the policies that read the question, the unverified ceiling and the second reach
of "guessable" on 2026-12-02, from the design of the test, before the proof that uses them; the
floor's removal on 2026-12-03, before v3's catalog, the first proof that uses it);
predictions.json records them.
"""
from __future__ import annotations

VERDICTS = ("improves", "too hard", "already solved", "no signal", "unscorable", "unverified ceiling", "guessable")
AUDIT_VERDICTS = ("unscorable", "unverified ceiling", "guessable")  # the reward cannot tell: controls, never judged
# the thresholds, each a Trainee field of this name, with its default (the values above)
THRESHOLDS = {"pass_min": 0.05, "pass_max": 0.9, "grpo_signal_min": 0.25,
              "ceiling_min": 0.5}  # the scorer audit's (audit.py): below it, "unscorable"


def refusal(t) -> tuple[str, str] | None:
    """(threshold, why) for the first threshold of t the rule cannot use, or None."""
    for name in THRESHOLDS:
        if not 0 <= getattr(t, name) <= 1:
            return name, "must lie in [0, 1]"
    if not t.pass_min < t.pass_max:
        return "pass_min", f"must be below pass_max={t.pass_max}"
    return None


def verdict(t, pass1: float, mean: float, signal: float, ceiling: float | None = None,
            guess: float | None = None, checkable: bool = True) -> str:
    """The verdict under t's thresholds, from the scorer audit (ceiling, guess: shares of full scores;
    None: not measured; checkable: some task had an answer to check the ceiling with), then sampled
    pass@1, mean score and the GRPO signal on correctness."""
    if not checkable:
        return "unverified ceiling"
    if ceiling is not None and ceiling < t.ceiling_min:
        return "unscorable"
    if guess is not None and guess >= max(pass1, t.pass_min):
        return "guessable"
    if mean >= t.pass_max:
        return "already solved"
    if pass1 < t.pass_min:
        return "too hard"
    if signal < t.grpo_signal_min:
        return "no signal"
    return "improves"


def text(t) -> str:
    """The rule in words, with t's thresholds (what the catalog and the report print beside the verdicts)."""
    return (f"unverified ceiling if no task has a gold or known-valid answer; else unscorable if that answer, "
            f"written as the trainee writes it, scores on < {t.ceiling_min} of the tasks; else guessable if a "
            f"policy that does not solve the task scores fully on at least pass@1 of them and >= {t.pass_min}; "
            f"else already solved if mean score >= {t.pass_max}; else too hard if pass@1 < "
            f"{t.pass_min}; else no signal if GRPO signal on correctness < {t.grpo_signal_min}; else improves")


def prediction(verdict: str) -> str:
    """What a verdict predicts GRPO does to the held-out accuracy: "improves", or "no change"."""
    return "improves" if verdict == "improves" else "no change"
