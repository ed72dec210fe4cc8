"""The trainee: which model, how it is asked, how it samples, and Shortlist's rule for it.

Everything that decides what "the model can do" lives here, so the screening that predicts and
the GRPO run that tests the prediction cannot drift apart.

Prompt and extraction follow reasoning-gym's own convention (SYSTEM_PROMPTS["direct"] and
utils.extract_answer): the answer goes between <answer> tags. The "direct" prompt, not the
step-by-step "default" one, because the completion budget is MAX_NEW_TOKENS = 128 (the seed's; a
GRPO step is ~95% generation) and a step-by-step answer cut off before its tag scores nothing.
Whether the trainee really writes the tags is measured, not assumed: screening and evaluation
report the share of answers clean() could extract.

Sampling is GRPO's: TRL computes the policy's log-probabilities as softmax(logits / temperature)
with no truncation, so only temperature 1.0 with top_k, top_p and min_p switched off samples
exactly from the policy the loss differentiates (Qwen3's own generation_config, top_k=20 and
top_p=0.95, would make every sample slightly off-policy). Greedy decoding is only for evaluation.

The rule, and why each threshold sits where it does:
- GRPO's advantage is a reward minus its group's mean, so a group whose GROUP rewards are all
  equal contributes no gradient at all. Only groups that mix correct and incorrect answers
  push the model towards correctness; groups that differ only in partial credit (which many
  scorers pay for wrong answers, e.g. 0.05 for garbage in propositional_logic) teach partial
  credit. So the rule reads the signal on correctness (score >= 1), not on the raw reward.
- Learnability peaks where p(1-p) does, at pass@1 = 0.5, and vanishes at both ends.
  PASS_MIN = 0.05: below it fewer than 1 sample in 20 is right; at k = 8 a task with p = 0.05
  mixes in only 1 - 0.95^8 = 34% of its groups, so most prompts teach nothing, and
  correct answers are too rare for 100 steps of 4 prompts to reinforce. -> "too hard".
- PASS_MAX = 0.9, on the mean score: the reward itself has under 10% headroom (the mean is at
  least pass@1, and it also counts near-misses the scorer already pays for), and greedy
  accuracy sits well above sampled pass@1 (0.735 vs 0.32 measured on SmolLM2 products), so the
  greedy evaluation has nothing left to gain. -> "already solved".
- GRPO_SIGNAL_MIN = 0.25: with 4 prompts per step, at least one prompt per step on average must
  carry a correctness gradient. A family can sit inside the pass@1 band and still fall short,
  when some tasks are always solved and the rest never are. -> "no signal".
These values were fixed before any proof run; predictions.json records them.
"""
from __future__ import annotations

import re

from reasoning_gym.utils import SYSTEM_PROMPTS, extract_answer

MODEL = "Qwen/Qwen3-0.6B"

# Prompt
SYSTEM_PROMPT = SYSTEM_PROMPTS["direct"]
ENABLE_THINKING = False  # Qwen3's thinking would spend the whole 128-token budget before the answer

# Sampling, exactly as TRL's GRPOTrainer is configured with them (proof.train passes these on)
TEMPERATURE = 1.0
TOP_P = 1.0
TOP_K = 0  # 0 switches top-k off, as TRL's default does
MIN_P = None
REPETITION_PENALTY = 1.0
MAX_NEW_TOKENS = 128
GROUP = 8  # completions per prompt: GRPO's num_generations, and the k of screening's pass@k

# Shortlist's rule
PASS_MIN = 0.05
PASS_MAX = 0.9
GRPO_SIGNAL_MIN = 0.25

VERDICTS = ("improves", "too hard", "already solved", "no signal")

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def messages(question: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]


def clean(text: str) -> str | None:
    """The answer inside the last <answer> tags, or None when the completion has none."""
    return extract_answer(_THINK.sub("", text))


def rule(pass1: float, mean: float, signal: float) -> str:
    """Shortlist's verdict from sampled pass@1, mean score and the GRPO signal on correctness."""
    if mean >= PASS_MAX:
        return "already solved"
    if pass1 < PASS_MIN:
        return "too hard"
    if signal < GRPO_SIGNAL_MIN:
        return "no signal"
    return "improves"


def prediction(verdict: str) -> str:
    return "improves" if verdict == "improves" else "no change"


def rule_text() -> str:
    return (f"already solved if mean score >= {PASS_MAX}; else too hard if pass@1 < {PASS_MIN}; "
            f"else no signal if GRPO signal on correctness < {GRPO_SIGNAL_MIN}; else improves")


def settings() -> dict:
    """Every trainee setting, as recorded with the predictions."""
    return {"model": MODEL, "system_prompt": SYSTEM_PROMPT, "enable_thinking": ENABLE_THINKING,
            "temperature": TEMPERATURE, "top_p": TOP_P, "top_k": TOP_K, "min_p": MIN_P,
            "repetition_penalty": REPETITION_PENALTY, "max_new_tokens": MAX_NEW_TOKENS, "group": GROUP,
            "pass_min": PASS_MIN, "pass_max": PASS_MAX, "grpo_signal_min": GRPO_SIGNAL_MIN,
            "rule": rule_text(), "extraction": "reasoning_gym.utils.extract_answer (<answer> tags)"}
