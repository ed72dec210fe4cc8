"""Shortlist's rule (shortlist/rule.py): each verdict on its side of the thresholds, the audit's first,
under the trainee's own thresholds."""
import pytest

from shortlist import rule
from shortlist.trainee import QWEN3


def test_rule_gives_each_verdict_on_its_side_of_the_thresholds():
    t = QWEN3
    assert rule.verdict(t, 0.5, 0.5, 0.8) == "improves"
    assert rule.verdict(t, t.pass_min - 0.01, 0.3, 0.8) == "too hard"  # partial credit keeps the mean up
    assert rule.verdict(t, 0.85, t.pass_max, 0.5) == "already solved"
    assert rule.verdict(t, 0.3, 0.3, t.grpo_signal_min - 0.01) == "no signal"


def test_rule_boundaries_are_inclusive_where_documented():
    t = QWEN3
    assert rule.verdict(t, t.pass_min, t.pass_min, t.grpo_signal_min) == "improves"
    assert rule.verdict(t, t.pass_max - 1e-9, t.pass_max - 1e-9, 1.0) == "improves"


def test_the_rule_reads_the_trainees_own_thresholds():
    strict = QWEN3.replace(pass_min=0.4)
    assert rule.verdict(QWEN3, 0.3, 0.3, 0.8) == "improves" and rule.verdict(strict, 0.3, 0.3, 0.8) == "too hard"
    assert "pass@1 < 0.4" in rule.text(strict)


@pytest.mark.parametrize("verdict", rule.VERDICTS)
def test_only_improves_predicts_a_change(verdict):
    assert rule.prediction(verdict) == ("improves" if verdict == "improves" else "no change")


def test_the_audits_verdicts_come_before_the_rest_of_the_rule():
    t = QWEN3
    assert rule.verdict(t, 0.5, 0.5, 0.8, ceiling=t.ceiling_min - 0.01, guess=1.0) == "unscorable"  # first of all
    assert rule.verdict(t, 0.5, 0.5, 0.8, ceiling=1.0, guess=1.0, checkable=False) == "unverified ceiling"  # before all
    assert rule.verdict(t, 0.5, 0.5, 0.8, ceiling=t.ceiling_min, guess=0.5) == "guessable"  # reaches pass@1
    assert rule.verdict(t, 0.5, 0.5, 0.8, ceiling=t.ceiling_min, guess=0.49) == "improves"  # below pass@1, however high
    assert rule.verdict(t, 0.8, 0.8, 0.8, ceiling=1.0, guess=0.21) == "improves"  # design v1's floor (0.2) is gone
    assert rule.verdict(t, 0.1, 0.1, 0.8, ceiling=1.0, guess=0.1) == "guessable"  # below the floor, but reaches pass@1
    assert rule.verdict(t, 0.1, 0.1, 0.8, ceiling=1.0, guess=0.09) == "improves"
    assert rule.verdict(t, 0.01, 0.01, 0.1, ceiling=1.0, guess=t.pass_min) == "guessable"  # reaches pass_min and pass@1
    assert rule.verdict(t, 0.01, 0.01, 0.1, ceiling=1.0, guess=t.pass_min - 0.01) == "too hard"  # below pass_min
    assert rule.verdict(t, 0.95, 0.95, 0.1, ceiling=1.0, guess=0.96) == "guessable"  # even where it would be "solved"
    assert rule.verdict(t, 0.0, 0.0, 0.0, ceiling=None, guess=None) == "too hard"  # not audited: the rule as it was
    assert "unscorable if" in rule.text(t) and "guessable if" in rule.text(t) and "unverified" in rule.text(t)
