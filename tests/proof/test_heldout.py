"""Held-out means unseen (proof/heldout.py): evaluation questions never seen in training or screening."""
import pytest

from proof import heldout, settings as settings_
from shortlist import sources
from shortlist.sources import source


@pytest.fixture
def toy():
    source.register("toy", "toy_source")  # tests/fixtures/sources/toy_source.py: "Repeat the number n."
    yield
    source.SOURCES.pop("toy", None)
    source._loaded.pop("toy", None)


def test_an_evaluation_question_seen_in_training_is_skipped_and_recorded(toy):
    # two digits: 100 possible questions, 16 of them among the 16 training tasks' (some repeat)
    s = settings_.make("smoke", families=["toy.echo(digits=2)"], eval_n=30, min_unseen=5)
    family = sources.parse("toy.echo(digits=2)")
    seen = family.tasks(s.seed_ranges()["train"]) + family.tasks(s.seed_ranges()["predict"])
    record, tasks = heldout.select(family, s, seen)
    questions = {heldout.normalized(t["question"]) for t in seen}
    assert record.n == 30 and [t["seed"] for t in tasks] == list(record.seeds)
    assert all(heldout.normalized(t["question"]) not in questions for t in tasks)  # none was seen
    assert record.skipped and all(heldout.normalized(family.task(k)["question"]) in questions for k in record.skipped)
    assert record.seeds[0] >= s.eval_seed and record.searched == 30 + len(record.skipped)
    assert sorted(set(record.seeds) | set(record.skipped)) == list(range(s.eval_seed, s.eval_seed + record.searched))
    assert record.distinct == len({t["question"] for t in tasks}) <= 30
    assert heldout.HeldOut.from_dict(record.as_dict()) == record and heldout.select(family, s, seen)[0] == record


def test_a_family_whose_questions_were_all_seen_has_no_evaluation_and_cannot_be_judged(toy):
    # one digit: 10 possible questions, every one among the training tasks
    s = settings_.make("smoke", families=["toy.echo(digits=1)"], eval_n=5, eval_search=4, min_unseen=2)
    family = sources.parse("toy.echo(digits=1)")
    seen = family.tasks(s.seed_ranges()["train"])
    record, tasks = heldout.select(family, s, seen)
    assert tasks == [] and record.n == 0 and record.searched == 20  # the search stops at its bound
    assert "only 0 distinct unseen evaluation questions" in heldout.judgeable(record, s)


def test_normalization_ignores_case_and_whitespace():
    assert heldout.normalized("What is  2 +\n3?") == heldout.normalized("what is 2 + 3?")


def test_an_older_runs_evaluation_is_recovered_task_by_task(toy):
    family = sources.parse("toy.echo(digits=1)")
    seen = family.tasks(range(0, 3))  # the numbers 0, 9 and 8
    unseen, groups = heldout.recover(family, [0, 1, 10, 11, 4], seen)  # 0, 9, 0, 9 and 6
    assert unseen == [False, False, False, False, True] and groups == [0, 1, 0, 1, 2]
