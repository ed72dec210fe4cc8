import json

import pytest

from shortlist import extraction, trainee
from shortlist.trainee import QWEN3, SMOLLM2, Trainee, TraineeError

RG = QWEN3.for_source("reasoning_gym")  # the default trainee, as it asks and reads Reasoning Gym's families


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
def test_qwen3_extracts_the_last_tagged_answer(text, answer):
    assert RG.clean(text) == answer


@pytest.mark.parametrize("name, text, answer", [
    ("last_number", "3 times 4 is 12.\nAnswer: 12", "12"),
    ("last_number", "The total is -1,234.5 legs", "-1234.5"),
    ("last_number", "no digits here", None),
    ("answer_line", "work...\nAnswer: **blue, red**.", "blue, red"),
    ("answer_line", "The answer is: 7", "7"),
    ("answer_line", "no line", None),
    ("regex:FINAL=(\\w+)", "FINAL=a then FINAL=b", "b"),
    ("regex:\\d+", "1 and 22", "22"),
    ("whole", "  blue, red \n", "blue, red"),
    ("whole", "<think>hm</think> 7", "7"),
    ("whole", " \n", None),
])
def test_extractions(name, text, answer):
    assert QWEN3.replace(extraction=name).clean(text) == answer


def test_messages_use_the_profiles_system_prompt():
    from reasoning_gym.utils import SYSTEM_PROMPTS, extract_answer
    assert RG.messages("What is 2+2?") == [{"role": "system", "content": SYSTEM_PROMPTS["direct"]},
                                           {"role": "user", "content": "What is 2+2?"}]
    assert (RG.extraction, extraction.extractor(RG.extraction)) == ("answer_tags", extract_answer)  # as before
    assert QWEN3.replace(system_prompt="").messages("q") == [{"role": "user", "content": "q"}]


def test_what_the_default_leaves_to_the_source_is_only_read_through_it():
    assert (QWEN3.system_prompt, QWEN3.extraction) == (trainee.SOURCE, trainee.SOURCE)
    for use in (lambda: QWEN3.messages("q"), lambda: QWEN3.clean("<answer>1</answer>"), lambda: QWEN3.written("1")):
        with pytest.raises(TraineeError, match="to the source: ask and read through"):
            use()
    assert SMOLLM2.for_source("reasoning_gym") is SMOLLM2  # set for every source: nothing to resolve


def test_profiles_sample_on_policy():
    # TRL's loss uses softmax(logits / T) without truncation: anything else samples off-policy
    for t in trainee.PROFILES.values():
        assert (t.top_p, t.top_k, t.min_p, t.repetition_penalty) == (1.0, 0, None, 1.0)


def test_qwen3_is_the_seeds_default_and_smollm2_its_own_format():
    assert (QWEN3.model, QWEN3.max_new_tokens, QWEN3.group, QWEN3.enable_thinking) == ("Qwen/Qwen3-0.6B", 128, 8, False)
    assert (QWEN3.pass_min, QWEN3.pass_max, QWEN3.grpo_signal_min) == (0.05, 0.9, 0.25)
    assert SMOLLM2.model == "HuggingFaceTB/SmolLM2-135M-Instruct" and SMOLLM2.extraction != "answer_tags"
    assert SMOLLM2.clean("3 x 4 = 12. The answer is 12.") == "12"


def test_a_trainee_is_frozen_and_round_trips_through_json():
    with pytest.raises(Exception):
        QWEN3.model = "x"  # type: ignore[misc]
    again = Trainee.from_dict(json.loads(json.dumps(SMOLLM2.as_dict())))
    assert again == SMOLLM2 and again.as_dict() == SMOLLM2.as_dict()


@pytest.mark.parametrize("spec, field, value", [
    ("qwen3", "model", "Qwen/Qwen3-0.6B"),
    ("smollm2", "extraction", SMOLLM2.extraction),
    ("qwen3(max_new_tokens=16, model='tiny')", "max_new_tokens", 16),
    ("qwen3(temperature=1)", "temperature", 1.0),  # an int where a float is due
])
def test_resolve_named_profiles_and_overrides(spec, field, value):
    assert getattr(trainee.resolve(spec), field) == value


@pytest.mark.parametrize("spec, fragment", [
    ("qwen4", "did you mean qwen3"),
    ("qwen3(max_new_token=16)", "did you mean max_new_tokens"),
    ("qwen3(group=1)", "group=1: must lie in 2..256"),
    ("qwen3(temperature=0)", "temperature=0.0: must lie in [0.01, 10.0]"),
    ("qwen3(temperature=1e308)", "temperature=1e+308: must lie in [0.01, 10.0]"),
    ("qwen3(temperature=1e-300)", "temperature=1e-300"),
    ("qwen3(temperature=1e309)", "temperature=inf: must be finite"),
    ("qwen3(top_k=1e30)", "top_k=1e+30: must be int"),
    (f"qwen3(top_k={10**30})", "top_k=1000000000000000000000000000000: must be 0 (off) or up to 1,048,576"),
    ("qwen3(top_k=-1)", "top_k=-1"),
    ("qwen3(repetition_penalty=1e-300)", "repetition_penalty=1e-300: must lie in [0.1, 10.0]"),
    ("qwen3(repetition_penalty=1e300)", "repetition_penalty=1e+300"),
    ("qwen3(min_p=1.0)", "min_p=1.0"),
    ("qwen3(group=10**6)", "Python literals"),
    ("qwen3(max_new_tokens=0)", "max_new_tokens=0"),
    pytest.param(f"qwen3(system_prompt={'x' * 10_000_000!r})", "10,000,000 characters, more than", id="10 MB prompt"),
    pytest.param(f"qwen3(system_prompt={'x' * 32_769!r})", "32,769 characters, more than 32,768", id="long prompt"),
    pytest.param(f"qwen3(model={'m' * 4097!r})", "4,097 characters, more than 4,096", id="long model"),
    (r"qwen3(model='a\x00b')", "holds no NUL or newline"),
    ("qwen3(model='')", "model='': must not be empty"),
    ("qwen3(extraction='regex:(a+)+$')", "it backtracks"),
    (r"qwen3(extraction='regex:(\\w+\\s?)+$')", "it backtracks"),
    ("qwen3(extraction='regex:(x|xx)+y$')", "it backtracks"),  # the pattern's own letters are probed
    pytest.param(f"qwen3(extraction={'regex:' + 'a' * 1001!r})", "a pattern of 1,001 characters", id="long regex"),
    ("qwen3(temperature=float('nan'))", "Python literals"),
    ("qwen3(top_p=1.5)", "top_p=1.5"),
    ("qwen3(max_new_tokens=100000)", "max_new_tokens=100000"),
    ("qwen3(pass_min=0.95)", "must be below pass_max"),
    ("qwen3(extraction='tags')", "unknown extraction 'tags'; use one of answer_line, last_number, whole, answer_tags"),
    ("qwen3(extraction='regex:(')", "extraction 'regex:('"),
    (r"qwen3(extraction='regex:(-)?(\\d+)')", "a match can leave its first group unset"),
    (r"qwen3(extraction='regex:Answer: (\\d+)|(none)')", "a match can leave its first group unset"),
    (r"qwen3(extraction='regex:(?:x(\\d))*y')", "a match can leave its first group unset"),
    ("qwen3(enable_thinking='no')", "enable_thinking='no': must be bool"),
    ("qwen3(", "cannot read trainee"),
])
def test_bad_trainees_are_one_line(spec, fragment):
    with pytest.raises(TraineeError) as e:
        trainee.resolve(spec)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_a_user_defines_a_profile_in_a_json_file_without_editing_the_package(tmp_path):
    mine = tmp_path / "my_model.json"
    mine.write_text(json.dumps({"extends": "qwen3", "model": "/models/mine", "system_prompt": "Reply with a number.",
                                "extraction": "last_number", "max_new_tokens": 64}))
    t = trainee.resolve(str(mine))
    assert (t.profile, t.model, t.extraction, t.max_new_tokens) == ("my_model", "/models/mine", "last_number", 64)
    assert t.group == QWEN3.group and t.clean("so 7") == "7"
    whole = tmp_path / "whole.json"
    whole.write_text(json.dumps({"model": "m", "system_prompt": "", "enable_thinking": False, "extraction": "answer_line"}))
    assert trainee.resolve(str(whole)).pass_min == 0.05  # the rule's defaults apply
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps({"model": "m"}))
    with pytest.raises(TraineeError, match="missing enable_thinking, extraction, system_prompt"):
        trainee.resolve(str(missing))
    with pytest.raises(TraineeError, match="does not exist"):
        trainee.resolve(str(tmp_path / "nope.json"))


def test_a_registered_profile_is_resolved_by_name():
    mine = trainee.register(QWEN3.replace(profile="test_profile", max_new_tokens=32))
    try:
        assert trainee.resolve("test_profile") == mine
    finally:
        del trainee.PROFILES["test_profile"]


@pytest.mark.parametrize("name, written", [("answer_tags", "<answer>7</answer>"), ("answer_line", "Answer: 7"),
                                           ("last_number", "Answer: 7"), ("regex:(\\d+)", "7"), ("whole", "7")])
def test_an_answer_is_written_as_the_trainee_is_asked_to_write_it_and_reads_back(name, written):
    t = QWEN3.replace(extraction=name)
    assert t.written("7") == written and t.clean(t.written("7")) == "7"


def test_a_sound_regex_is_not_refused_and_reads_its_answer():
    t = QWEN3.replace(extraction=r"regex:Answer: ((\d+, )*\d+)")  # a nested quantifier that cannot backtrack
    assert t.clean("so Answer: 1, 22, 333 done") == "1, 22, 333"


def test_a_regex_past_its_timeout_on_a_completion_holds_no_answer(monkeypatch):
    monkeypatch.setattr(extraction, "_probes", lambda source: [])  # as if the probes had missed it
    extraction._by_pattern.cache_clear()
    try:
        t = QWEN3.replace(extraction="regex:(a+)+$")
        assert t.clean("a" * 5000 + "!") is None  # past REGEX_TIMEOUT_S: scores 0, never hangs the run
        assert t.clean("aaa") == "aaa"
    finally:
        extraction._by_pattern.cache_clear()


def test_trainee_files_that_cannot_be_read_whole_are_one_line(tmp_path):
    import os
    looped = tmp_path / "looped.json"
    looped.write_text(json.dumps({"extends": str(looped)}))
    (tmp_path / "a.json").write_text(json.dumps({"extends": "b.json"}))  # relative: read beside it
    (tmp_path / "b.json").write_text(json.dumps({"extends": "a.json", "max_new_tokens": 16}))
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"extends": "qwen3", "system_prompt": "x" * 10_000_000}))
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # opening it would block until a writer came
    (tmp_path / "bad_base.json").write_text(json.dumps({"extends": ["qwen3"]}))
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    for path, fragment in [(looped, "extends itself: looped.json -> looped.json"),
                           (tmp_path / "a.json", "extends itself: a.json -> b.json -> a.json"),
                           (big, "more than 1,048,576 bytes"), (fifo, "is not a regular file"),
                           (tmp_path / "bad_base.json", "extends=['qwen3']: give a profile name or a .json file"),
                           (tmp_path / "deep.json", "trainee file")]:
        with pytest.raises(TraineeError) as e:
            trainee.resolve(str(path))
        assert fragment in str(e.value) and "\n" not in str(e.value)


def test_a_trainee_file_extends_a_file_beside_it(tmp_path):
    (tmp_path / "base.json").write_text(json.dumps({"extends": "qwen3", "max_new_tokens": 16}))
    (tmp_path / "mine.json").write_text(json.dumps({"extends": "base.json", "model": "tiny"}))
    t = trainee.resolve(str(tmp_path / "mine.json"))
    assert (t.profile, t.model, t.max_new_tokens) == ("mine", "tiny", 16)


def test_an_unset_group_reads_as_no_answer_where_the_pattern_is_only_regexs():
    """re cannot read \\p{L}, so no check refuses the pattern: a match without group 1 is no answer, not a crash."""
    t = trainee.resolve(r"qwen3(extraction='regex:\\p{L}(-)?(\\d+)?')")
    assert t.clean("x-4") == "-" and t.clean("x4") is None and t.clean("nothing") is None
    required = trainee.resolve(r"qwen3(extraction='regex:(-?\\d+)')")
    assert required.clean("a 3 b -12") == "-12"


def test_a_record_with_the_retired_guess_floor_is_read_and_the_floor_ignored():
    from shortlist import rule
    old = QWEN3.as_dict() | {"guess_min": 0.2}  # a commitment made under design v1
    t = Trainee.from_dict(old)
    assert t == QWEN3 and "guess_min" not in t.as_dict()
    assert rule.verdict(t, 0.8, 0.8, 0.8, ceiling=1.0, guess=0.25) == "improves"
