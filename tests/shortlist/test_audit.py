"""The scorer audit (shortlist/audit.py): the ceiling a trainee's extraction allows, and what answers
that say nothing of the question earn."""
import pytest

from shortlist import audit, rule, sources, trainee
from shortlist.sources import source

QWEN3 = trainee.QWEN3  # <answer> tags
LAST_NUMBER = trainee.SMOLLM2  # an "Answer:" line, read by its last number


@pytest.fixture
def toy():
    source.register("toy", "toy_source")  # tests/fixtures/sources/toy_source.py
    yield
    source.reset()


def test_a_scorer_that_pays_any_answer_has_a_guess_rate_of_one(scorer, toy):
    family = sources.parse("toy.pays_anything")
    a = audit.audit(scorer, QWEN3, family, family.tasks(range(500, 512)))
    assert a.ceiling == 1.0 and a.guess.accuracy == 1.0 and a.guess.mean == 1.0


def test_an_extraction_that_cannot_read_the_gold_answer_has_a_ceiling_of_zero(scorer):
    family = sources.parse("letter_jumble")  # its answers are words; the last number reads none of them
    tasks = family.tasks(range(500, 512))
    assert audit.audit(scorer, LAST_NUMBER, family, tasks).ceiling == 0.0
    assert audit.audit(scorer, QWEN3, family, tasks).ceiling == 1.0  # the same gold, in tags, reads back


def test_the_guess_rate_is_the_best_content_free_answer_written_as_the_trainee_writes(scorer):
    family = sources.parse("coin_flip(max_trials=3)")
    tasks = family.tasks(range(500, 540))
    a = audit.audit(scorer, QWEN3, family, tasks)
    zero = scorer.score(family, [t["seed"] for t in tasks], ["0"] * len(tasks))
    assert a.guess.accuracy >= sum(s >= 1 for s in zero) / len(tasks) > 0.5  # "0" alone is right most of the time
    assert a.ceiling == 1.0


def test_policies_do_not_look_at_their_own_tasks_answer():
    tasks = [{"seed": i, "question": f"q{i}", "answer": str(i % 3)} for i in range(6)]
    answers = audit.policies(tasks)
    assert answers["another task's gold answer"] == ["1", "2", "0", "1", "2", "0"]  # each task gets the next one's
    # golds 0 1 2 0 1 2: without its own, each task's most frequent other answer is never its own
    assert answers["the most frequent gold answer of the other tasks"] == ["1", "0", "0", "1", "0", "0"]
    distinct = [{"seed": i, "question": f"q{i}", "answer": str(100 + i)} for i in range(4)]
    assert all(a != t["answer"] for a, t in zip(audit.policies(distinct)["the most frequent gold answer of the "
                                                                        "other tasks"], distinct))
    assert audit.policies(tasks, frequent="7")['the most frequent gold answer "7"'] == ["7"] * 6
    assert 'the most frequent gold answer "0"' not in audit.policies(tasks, frequent="0")  # already a constant
    assert audit.most_frequent_gold(tasks) == "0" and audit.most_frequent_gold([{"answer": None}]) is None


def test_policies_that_read_the_question_copy_its_numbers_and_last_word():
    task = {"seed": 0, "question": "Numbers: 3, -12, 7.5 and 40. What comes next?", "answer": "41"}
    got = {name: answers[0] for name, answers in audit.policies([task]).items()}
    assert got["the first number in the question"] == "3" and got["the last number in the question"] == "40"
    assert got["the largest number in the question"] == "40" and got["the smallest number in the question"] == "-12"
    assert got["the count of numbers in the question"] == "4" and got["the question's last word"] == "next"
    empty = {name: answers[0] for name, answers in audit.policies([{"seed": 0, "question": "?", "answer": "x"}]).items()}
    assert empty["the first number in the question"] == "" and empty["the question's last word"] == ""


def test_copying_a_number_of_the_question_is_found_as_gaming_and_named(scorer):
    # number_sequence: the last number of the question is the answer on about a third of easy tasks
    family = sources.parse("number_sequence(max_complexity=2)")
    a = audit.audit(scorer, LAST_NUMBER, family, family.tasks(range(10_000, 10_024)))
    assert a.guess.answer == "the last number in the question" and a.guess.accuracy >= 0.2
    assert rule.verdict(LAST_NUMBER, 0.057, 0.06, 0.25, a.ceiling, a.guess.accuracy, a.verified) == "guessable"


def test_a_scorer_that_pays_any_answer_is_found_as_gaming(scorer):
    family = sources.parse("game_of_life_halting")  # its scorer pays 1 for "0" (any answer, it turns out)
    a = audit.audit(scorer, QWEN3, family, family.tasks(range(10_000, 10_024)))
    assert a.guess.accuracy == 1.0 and a.guess.answer == '"0"'
    assert rule.verdict(QWEN3, 0.0, 0.0, 0.0, a.ceiling, a.guess.accuracy, a.verified) == "guessable"


@pytest.mark.parametrize("name", ["graph_color", "propositional_logic", "rubiks_cube"])
def test_a_family_without_gold_answers_is_checked_with_an_answer_known_to_be_valid(scorer, name):
    family = sources.parse(name)
    tasks = family.tasks(range(10_000, 10_006))
    assert all(t["answer"] is None and t["valid"] for t in tasks)
    a = audit.audit(scorer, QWEN3, family, tasks)
    assert a.ceiling == 1.0 and a.ceiling_from == "known-valid answers" and a.verified


@pytest.mark.parametrize("name", ["rush_hour", "boxnet"])
def test_a_family_with_no_answer_to_check_is_unverified_never_too_hard(scorer, name):
    family = sources.parse(name)
    a = audit.audit(scorer, QWEN3, family, family.tasks(range(10_000, 10_006)))
    assert a.ceiling is None and a.golds == 0 and not a.verified
    assert rule.verdict(QWEN3, 0.0, 0.0, 0.0, a.ceiling, a.guess.accuracy, a.verified) == "unverified ceiling"


def test_a_known_valid_answer_never_changes_a_committed_fingerprint():
    family = sources.parse("graph_color")
    tasks = family.tasks([10_000])
    assert sources.fingerprint(tasks) == sources.fingerprint([{k: v for k, v in t.items() if k != "valid"}
                                                              for t in tasks])


def test_constants_say_what_the_models_own_most_common_answer_earns(scorer):
    family = sources.parse("coin_flip(max_trials=3)")
    tasks = family.tasks(range(100_000, 100_040))
    zero = scorer.score(family, [t["seed"] for t in tasks], ["0"] * len(tasks))
    c = audit.constants(scorer, QWEN3, family, tasks, ["0"] * len(tasks))
    assert c["distinct_answers"] == 1 / len(tasks)
    assert c["mode"] == {"answer": '"0"', "accuracy": sum(s >= 1 for s in zero) / len(tasks), "mean": sum(zero) / len(tasks)}
    nothing = audit.constants(scorer, QWEN3, family, tasks, [None] * len(tasks))
    assert nothing["mode"]["accuracy"] == 0.0 and nothing["distinct_answers"] == 1 / len(tasks)


def test_a_policy_that_does_what_the_question_asks_is_the_task_not_a_guess(scorer):
    # number_format asks for the largest or the smallest number listed: picking it is the task itself
    family = sources.parse("number_format")
    tasks = family.tasks(range(10_000, 10_024))
    t = LAST_NUMBER.for_source(family.source)
    largest = [t.clean(t.written(a)) for a in audit.policies(tasks)["the largest number in the question"]]
    assert sum(s >= 1.0 for s in scorer.score(family, [x["seed"] for x in tasks], largest)) > 0  # what it would earn
    a = audit.audit(scorer, LAST_NUMBER, family, tasks)
    assert a.guess.answer not in audit.TASK_POLICIES["number_format"]
    other = audit.audit(scorer, LAST_NUMBER, sources.parse("chain_sum"), sources.parse("chain_sum").tasks(range(24)))
    assert other.guess.answer  # every other family keeps every policy
