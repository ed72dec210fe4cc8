import pytest

from shortlist import trainee


def test_rule_gives_each_verdict_on_its_side_of_the_thresholds():
    assert trainee.rule(0.5, 0.5, 0.8) == "improves"
    assert trainee.rule(trainee.PASS_MIN - 0.01, 0.3, 0.8) == "too hard"  # partial credit keeps the mean up
    assert trainee.rule(0.85, trainee.PASS_MAX, 0.5) == "already solved"
    assert trainee.rule(0.3, 0.3, trainee.GRPO_SIGNAL_MIN - 0.01) == "no signal"


def test_rule_boundaries_are_inclusive_where_documented():
    assert trainee.rule(trainee.PASS_MIN, trainee.PASS_MIN, trainee.GRPO_SIGNAL_MIN) == "improves"
    assert trainee.rule(trainee.PASS_MAX - 1e-9, trainee.PASS_MAX - 1e-9, 1.0) == "improves"


@pytest.mark.parametrize("verdict", trainee.VERDICTS)
def test_only_improves_predicts_a_change(verdict):
    assert trainee.prediction(verdict) == ("improves" if verdict == "improves" else "no change")


@pytest.mark.parametrize("text, answer", [
    ("<answer>42</answer>", "42"),
    ("Let me see. <answer> 7 </answer>", "7"),
    ("<answer>1</answer> no wait <answer>2</answer>", "2"),  # the last tag counts, as in reasoning-gym
    ("<think>maybe <answer>9</answer></think><answer>3</answer>", "3"),
    ("<think>only thoughts <answer>9</answer></think>", None),
    ("The answer is 4.", None),  # no tags: nothing extracted, so it scores 0
    ("", None),
    ("<answer>unterminated", None),
])
def test_clean_extracts_the_last_tagged_answer(text, answer):
    assert trainee.clean(text) == answer


def test_messages_use_reasoning_gyms_system_prompt():
    from reasoning_gym.utils import SYSTEM_PROMPTS
    m = trainee.messages("What is 2+2?")
    assert m == [{"role": "system", "content": SYSTEM_PROMPTS["direct"]}, {"role": "user", "content": "What is 2+2?"}]


def test_sampling_is_on_policy():
    # TRL's loss uses softmax(logits / T) without truncation: anything else samples off-policy
    assert (trainee.TEMPERATURE, trainee.TOP_P, trainee.TOP_K, trainee.MIN_P) == (1.0, 1.0, 0, None)


def test_settings_record_thresholds_and_rule():
    s = trainee.settings()
    assert (s["pass_min"], s["pass_max"], s["grpo_signal_min"]) == (trainee.PASS_MIN, trainee.PASS_MAX,
                                                                    trainee.GRPO_SIGNAL_MIN)
    assert str(trainee.PASS_MIN) in s["rule"] and str(trainee.GRPO_SIGNAL_MIN) in s["rule"]
