"""The scorer audit (shortlist/audit.py): the ceiling a trainee's extraction allows, and what answers
that say nothing of the question earn."""
import pytest

from shortlist import audit, sources, trainee
from shortlist.sources import source

QWEN3 = trainee.QWEN3  # <answer> tags
LAST_NUMBER = trainee.SMOLLM2  # an "Answer:" line, read by its last number


@pytest.fixture
def toy():
    source.register("toy", "toy_source")  # tests/fixtures/sources/toy_source.py
    yield
    source.SOURCES.pop("toy", None)
    source._loaded.pop("toy", None)


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


def test_content_free_answers_do_not_look_at_their_own_task():
    tasks = [{"seed": i, "question": f"q{i}", "answer": str(i % 3)} for i in range(6)]
    answers = audit.content_free(tasks)
    assert answers["another task's gold answer"] == ["1", "2", "0", "1", "2", "0"]  # each task gets the next one's
    # golds 0 1 2 0 1 2: without its own, each task's most frequent other answer is never its own
    assert answers["the most frequent gold answer of the other tasks"] == ["1", "0", "0", "1", "0", "0"]
    distinct = [{"seed": i, "question": f"q{i}", "answer": str(100 + i)} for i in range(4)]
    assert all(a != t["answer"] for a, t in zip(audit.content_free(distinct)["the most frequent gold answer of the "
                                                                            "other tasks"], distinct))
    assert audit.content_free(tasks, frequent="7")['the most frequent gold answer "7"'] == ["7"] * 6
    assert 'the most frequent gold answer "0"' not in audit.content_free(tasks, frequent="0")  # already a constant
    assert audit.most_frequent_gold(tasks) == "0" and audit.most_frequent_gold([{"answer": None}]) is None


def test_constants_say_what_the_models_own_most_common_answer_earns(scorer):
    family = sources.parse("coin_flip(max_trials=3)")
    tasks = family.tasks(range(100_000, 100_040))
    zero = scorer.score(family, [t["seed"] for t in tasks], ["0"] * len(tasks))
    c = audit.constants(scorer, QWEN3, family, tasks, ["0"] * len(tasks))
    assert c["distinct_answers"] == 1 / len(tasks)
    assert c["mode"] == {"answer": '"0"', "accuracy": sum(s >= 1 for s in zero) / len(tasks), "mean": sum(zero) / len(tasks)}
    nothing = audit.constants(scorer, QWEN3, family, tasks, [None] * len(tasks))
    assert nothing["mode"]["accuracy"] == 0.0 and nothing["distinct_answers"] == 1 / len(tasks)
