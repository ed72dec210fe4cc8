"""Held-out means reserved (proof/heldout.py): evaluation questions set aside by a keyed hash before
anything is drawn; and the older designs, re-analysed as committed."""
import math

import pytest

from proof import heldout, settings as settings_
from shortlist import sources
from shortlist.sources import source


@pytest.fixture
def toy():
    source.register("toy", "toy_source")  # tests/fixtures/sources/toy_source.py: "Repeat the number n."
    yield
    source.reset()


def questions(tasks):
    return {heldout.normalized(t["question"]) for t in tasks}


def test_no_evaluation_question_is_among_the_training_or_prediction_prompts_of_a_small_family():
    # products(max_digits=1): ~100 questions, nearly all among 400 training draws: unjudgeable before reservation
    s = settings_.make(families=["products(max_digits=1)"])
    held, built = heldout.draw("products(max_digits=1)", s)
    assert 80 < held.reservation.distinct <= 100 and held.reservation.reserved == 40  # min_unseen: at most half
    assert heldout.judgeable(held, s.min_unseen) is None and held.reserved >= s.min_unseen
    assert not questions(built["eval"]) & (questions(built["train"]) | questions(built["predict"]))
    assert len(built["train"]) == 400 and len(built["predict"]) == 24 and len(built["eval"]) == 200
    assert [t["seed"] for t in built["eval"]] == list(held.seeds) and list(held.train) == [t["seed"] for t in built["train"]]
    family = sources.parse("products(max_digits=1)")
    assert all(heldout.is_reserved(held.reservation, family, t["question"]) for t in built["eval"])
    assert not any(heldout.is_reserved(held.reservation, family, t["question"]) for t in built["train"] + built["predict"])
    assert set(held.skipped) | set(held.seeds) == set(range(s.eval_seed, s.eval_seed + held.searched))


def test_a_family_of_many_questions_is_evaluated_on_a_neutral_sample():
    # gcd: ~1,000 distinct questions in 1,000 draws, "1" the answer to 23% of them. Reserving by a hash of
    # the question keeps that rate (the unseen search of schema 3 kept the rare questions, and their answers)
    s = settings_.make(families=["gcd"])
    held, built = heldout.draw("gcd", s)
    assert held.reservation.estimate > 1000 and held.reservation.share == heldout.SHARE_MIN
    fresh = sources.parse("gcd").tasks(range(500_000, 501_000))
    p_eval = sum(t["answer"] == "1" for t in built["eval"]) / len(built["eval"])
    p_fresh = sum(t["answer"] == "1" for t in fresh) / len(fresh)
    se = math.sqrt(p_fresh * (1 - p_fresh) * (1 / len(built["eval"]) + 1 / len(fresh)))
    assert abs(p_eval - p_fresh) < 3 * se
    assert not questions(built["eval"]) & questions(built["train"] + built["predict"])


def test_a_family_whose_census_shows_twice_min_unseen_is_always_judged(toy):
    # toy.echo(digits=2): 100 equally likely questions; any key reserves at least min_unseen of them
    for key in ("a", "b", "c", "shortlist"):
        s = settings_.make("smoke", families=["toy.echo(digits=2)"], reserve_key=key, min_unseen=50, census_n=200,
                           eval_n=100, eval_search=20)
        held, built = heldout.draw("toy.echo(digits=2)", s)
        assert held.reservation.distinct == 100 and held.reservation.reserved == 50, key
        assert heldout.judgeable(held, s.min_unseen) is None
        assert not questions(built["eval"]) & questions(built["train"] + built["predict"])


def test_the_reservation_is_a_function_of_the_key_and_the_question(toy):
    s = settings_.make("smoke", families=["toy.echo(digits=3)"])
    first, again = heldout.draw("toy.echo(digits=3)", s), heldout.draw("toy.echo(digits=3)", s)
    assert first[0] == again[0] and first[0].reservation.key == "shortlist"
    other = heldout.draw("toy.echo(digits=3)", s.replace(reserve_key="another"))[0]
    assert set(other.seeds) != set(first[0].seeds)  # another key reserves other questions
    assert heldout.HeldOut.from_dict(first[0].as_dict()) == first[0]
    assert heldout.question_hash("k", "f", "What is  2?") == heldout.question_hash("k", "f", "what is 2?")


def test_chao1_counts_what_a_sample_missed():
    assert heldout.chao1([3, 3, 3]) == 3  # no singletons: nothing was missed
    assert heldout.chao1([1, 1, 1, 1, 2]) == 5 + 4 * 3 / (2 * 2)


def test_a_family_with_too_few_questions_is_not_judged_and_says_why(toy):
    s = settings_.make("smoke", families=["toy.echo(digits=1)"], min_unseen=10, census_n=40)
    held, built = heldout.draw("toy.echo(digits=1)", s)  # 10 questions: 5 reserved at most
    why = heldout.judgeable(held, s.min_unseen)
    assert held.reservation.reserved == 5 and "only 5 distinct reserved evaluation questions" in why
    assert not questions(built["eval"]) & questions(built["train"])


def test_schema_3s_unseen_search_is_kept_for_the_runs_it_committed(toy):
    s = settings_.make("smoke", families=["toy.echo(digits=2)"], eval_n=30, min_unseen=5, reserve=False)
    family = sources.parse("toy.echo(digits=2)")
    seen = family.tasks(s.seed_ranges()["train"]) + family.tasks(s.seed_ranges()["predict"])
    record, tasks = heldout.select(family, s, seen)
    assert record.n == 30 and [t["seed"] for t in tasks] == list(record.seeds) and record.reservation is None
    assert not questions(tasks) & questions(seen)
    assert record.skipped and sorted(set(record.seeds) | set(record.skipped)) == list(
        range(s.eval_seed, s.eval_seed + record.searched))
    assert "distinct unseen evaluation questions" in (heldout.judgeable(record, 31) or "")


def test_an_older_runs_evaluation_is_recovered_task_by_task(toy):
    family = sources.parse("toy.echo(digits=1)")
    seen = family.tasks(range(0, 3))  # the numbers 0, 9 and 8
    unseen, groups = heldout.recover(family, [0, 1, 10, 11, 4], seen)  # 0, 9, 0, 9 and 6
    assert unseen == [False, False, False, False, True] and groups == [0, 1, 0, 1, 2]
