import dataclasses

import pytest

from shortlist import screening
from shortlist import rule, trainee
from shortlist.generation.sampling import Sampler
from shortlist.trainee import QWEN3


def test_summarize_on_known_groups():
    groups = [[1.0, 1.0, 0.0, 0.0],  # mixed: correctness signal
              [0.05, 0.05, 0.0, 0.05],  # partial credit only: raw signal, no correctness signal
              [0.0, 0.0, 0.0, 0.0],  # nothing
              [1.0, 1.0, 1.0, 1.0]]  # solved
    s = screening.summarize("f", groups, 0.75, QWEN3)
    assert s.k == 4 and s.tasks == 4
    assert s.pass1 == pytest.approx(6 / 16)
    assert s.passk == pytest.approx(2 / 4)
    assert s.mean == pytest.approx((2 + 0.15 + 4) / 16)
    assert s.signal_raw == pytest.approx(2 / 4)
    assert s.signal_correct == pytest.approx(1 / 4)
    assert s.learnability == pytest.approx(0.25 / 4)
    assert s.verdict == rule.verdict(QWEN3, s.pass1, s.mean, s.signal_correct)
    assert s.extracted == 0.75


def test_partial_credit_alone_is_too_hard_not_improves():
    s = screening.summarize("f", [[0.05, 0.0, 0.05, 0.0]] * 10, 1.0, QWEN3)
    assert s.signal_raw == 1.0 and s.signal_correct == 0.0
    assert s.verdict == "too hard" and s.prediction == "no change"


def test_screen_on_the_tiny_model_is_reproducible(tiny_model, scorer):
    sampler = Sampler(tiny_model, QWEN3.replace(model="tiny", max_new_tokens=16, group=4))
    family = "leg_counting(min_animals=1, max_animals=1, max_instances=2)"
    a = screening.screen(sampler, scorer, family, tasks=6)
    b = screening.screen(sampler, scorer, family, tasks=6)
    assert dataclasses.replace(a, scoring={}) == dataclasses.replace(b, scoring={})  # wall time aside
    assert a.tasks == 6 and a.k == 4 and 0 <= a.pass1 <= a.mean <= 1 and a.pass1 <= a.passk
    assert a.extracted > 0.5  # the tiny model was taught the <answer> format
    assert a.verdict in rule.VERDICTS
    assert a.scoring["answers"] == 24 and 0 <= a.clipped <= 1 and 0 <= a.repetitive <= 1


def test_screening_counts_what_a_trainee_cannot_extract(tiny_model, scorer):
    # the tiny model writes <answer> tags: a trainee reading "Answer:" lines finds nothing, and every
    # such sample scores 0 without reaching a scorer
    sampler = Sampler(tiny_model, QWEN3.replace(model="tiny", max_new_tokens=16, extraction="answer_line"))
    # seeds 600..603: answers 156, -6, -3 and 78, which no constant answer (nor another task's) matches
    s = screening.screen(sampler, scorer, "chain_sum(max_terms=2, max_digits=2)", tasks=4, first_seed=600)
    assert s.extracted == 0 and s.pass1 == 0 and s.guess == 0 and s.verdict == "too hard"
    assert s.scoring["unextracted"] == s.scoring["answers"] == 32


def test_table_has_a_row_per_family():
    s = screening.summarize("chain_sum", [[1.0, 0.0]], 1.0, QWEN3)
    lines = screening.table([s, s]).splitlines()
    assert len(lines) == 4 and "verdict" in lines[0] and lines[2].startswith("chain_sum")


def test_a_scorer_that_pays_any_answer_is_guessable_before_any_training(tiny_model, scorer):
    # game_of_life_halting's scorer gives full credit to any non-empty answer: "0" earns 1.0 everywhere
    sampler = Sampler(tiny_model, QWEN3.replace(model="tiny", max_new_tokens=8, group=2))
    s = screening.screen(sampler, scorer, "game_of_life_halting", tasks=4)
    assert s.guess == 1.0 and s.guess_mean == 1.0 and s.ceiling == 1.0
    assert s.verdict == "guessable" and s.prediction == "no change"
    assert s.scoring["answers"] == 8  # the audit's own answers are not counted as the model's


def test_a_trainee_whose_extraction_cannot_read_the_gold_answer_is_unscorable(tiny_model, scorer):
    # letter_jumble's answers are words; read by the last number in the text, no answer can ever score
    t = QWEN3.replace(model="tiny", max_new_tokens=8, group=2, extraction="last_number")
    s = screening.screen(Sampler(tiny_model, t), scorer, "letter_jumble", tasks=4)
    assert s.ceiling == 0.0 and s.verdict == "unscorable"


def test_a_verdict_on_a_threshold_flips_often_and_a_clear_one_never():
    from shortlist import screening, trainee
    t = trainee.QWEN3
    clear = [[1.0, 0.0] * 4] * 24  # pass@1 0.5, every task mixed: "improves" in every resample
    assert screening.summarize("x", clear, 1.0, t).flip == 0.0
    # 10 correct samples of 192 (pass@1 0.052, just above pass_min 0.05), one per task: a resample often drops below
    edge = [[1.0] + [0.0] * 7 if i < 10 else [0.0] * 8 for i in range(24)]
    s = screening.summarize("x", edge, 1.0, t)
    assert s.verdict == "improves" and screening.BORDERLINE <= s.flip < 1.0  # a resample often has pass@1 < 0.05
    nothing = [[0.0] * 8] * 24
    assert screening.summarize("x", nothing, 1.0, t).flip == 0.0  # "too hard" however it is resampled
    assert screening.flip(edge, t, s.verdict) == s.flip  # rng seed 0: the same screen, the same chance
