"""Held-out means reserved (proof/heldout.py): evaluation questions set aside by a keyed hash before
anything is drawn; and the older designs, re-analysed as committed."""
import math

import pytest

from proof import heldout, settings as settings_
from shortlist import sources
from shortlist.errors import OneLine
from shortlist.sources import source


@pytest.fixture
def meant():
    source.register("meant", "meant_source")  # tests/fixtures/sources/meant_source.py
    yield
    source.reset()


@pytest.fixture
def toy():
    source.register("toy", "toy_source")  # tests/fixtures/sources/toy_source.py: "Repeat the number n."
    yield
    source.reset()


def questions(tasks):
    return {heldout.normalized(t["question"]) for t in tasks}


def twins(family, built) -> int:
    """Evaluation tasks whose twin is trained: a training task asks the same question by its family's meaning
    (sources/meaning.py)."""
    family = sources.parse(family)
    keyed = {name: family.tasks([t["seed"] for t in built[name]], keyed=True) for name in ("train", "eval")}
    trained = {t["meaning"] for t in keyed["train"]}
    return sum(t["meaning"] in trained for t in keyed["eval"])


PRODUCTS, TSUMEGO = "products(max_digits=1)", "tsumego(max_board_size=5, max_stones=5, min_board_size=5)"


def test_reserved_by_its_text_no_evaluation_question_is_among_the_training_prompts_but_its_twin_is():
    # products(max_digits=1): ~100 questions, nearly all among 400 training draws: unjudgeable before reservation.
    # Reserved by the text (schema 4), "3 * 7" was kept out of training and "7 * 3" trained: 90 of 200
    s = settings_.make(families=[PRODUCTS])
    held, built = heldout.draw(PRODUCTS, s, meaning=False)
    assert held.reservation.meaning == "question" and sources.parse(PRODUCTS).meaning == "products/1"
    assert 80 < held.reservation.distinct <= 100 and held.reservation.reserved == 40  # min_unseen: at most half
    assert heldout.judgeable(held, s.min_unseen) is None and held.reserved >= s.min_unseen
    assert not questions(built["eval"]) & (questions(built["train"]) | questions(built["predict"]))
    assert len(built["train"]) == 400 and len(built["predict"]) == 24 and len(built["eval"]) == 200
    assert [t["seed"] for t in built["eval"]] == list(held.seeds) and list(held.train) == [t["seed"] for t in built["train"]]
    family = sources.parse(PRODUCTS)
    assert all(heldout.is_reserved(held.reservation, family, t) for t in built["eval"])
    assert not any(heldout.is_reserved(held.reservation, family, t) for t in built["train"] + built["predict"])
    assert set(held.skipped) | set(held.seeds) == set(range(s.eval_seed, s.eval_seed + held.searched))
    assert twins(PRODUCTS, built) == 90


def test_reserved_by_its_meaning_no_evaluation_questions_twin_is_trained_and_twins_are_one_question():
    # products(max_digits=1) by its meaning: 55 questions (the pairs of digits), so the census and Chao1 see 55,
    # at most half are reserved, and the family cannot be judged: what its text hid
    s = settings_.make(families=[PRODUCTS])
    held, built = heldout.draw(PRODUCTS, s)
    r = held.reservation
    assert r.meaning == "products/1" and 50 <= r.distinct <= 55 and r.estimate <= 56 and r.reserved == 27 and held.reserved == 29
    assert twins(PRODUCTS, built) == 0 and len(built["eval"]) == 200 and len(built["train"]) == 400
    assert "only 29 distinct reserved evaluation questions" in heldout.judgeable(held, s.min_unseen)
    assert held.distinct == len({t["meaning"] for t in built["eval"]}) < len(questions(built["eval"]))  # twins: one group
    expressions = {t["question"].split(": ")[1].split(".")[0]: held.groups[i] for i, t in enumerate(built["eval"])}
    pairs = [(e, " * ".join(e.split(" * ")[::-1])) for e in expressions if " * ".join(e.split(" * ")[::-1]) in expressions]
    assert pairs and all(expressions[a] == expressions[b] for a, b in pairs)  # "3 * 7" and "7 * 3", one question
    assert heldout.breaches(held, PRODUCTS, built) == []


def test_a_go_board_under_another_template_is_its_own_twin_and_is_reserved_with_it():
    # tsumego: one board asked by several templates; reserved by the text, 40 of 200 evaluation boards are trained
    s = settings_.make(families=[TSUMEGO])
    assert twins(TSUMEGO, heldout.draw(TSUMEGO, s, meaning=False)[1]) == 40
    held, built = heldout.draw(TSUMEGO, s)
    assert held.reservation.meaning == "tsumego/1" and twins(TSUMEGO, built) == 0 and len(built["eval"]) == 200
    assert heldout.judgeable(held, s.min_unseen) is None


def test_a_reservation_committed_before_meanings_is_read_by_its_text():
    s = settings_.make(families=[PRODUCTS])
    held, built = heldout.draw(PRODUCTS, s, meaning=False)
    old = held.as_dict()
    del old["reservation"]["meaning"]  # what schema 4 wrote
    again = heldout.HeldOut.from_dict(old)
    assert again == held and again.reservation.meaning == "question"
    rebuilt = heldout.rebuild(PRODUCTS, again)
    assert all("meaning" not in t for t in rebuilt["train"])  # the text is its key: no meaning is built
    assert heldout.breaches(again, PRODUCTS, rebuilt) == []
    assert all(heldout.is_reserved(again.reservation, PRODUCTS, t) for t in rebuilt["eval"])


def test_tasks_that_do_not_keep_their_reservation_are_named():
    s = settings_.make(families=[PRODUCTS])
    held, built = heldout.draw(PRODUCTS, s)
    swapped = built | {"train": built["train"][:-1] + built["eval"][:1]}  # an evaluation question trained
    assert heldout.breaches(held, PRODUCTS, swapped) == [
        f"1 of its train tasks (seed {built['eval'][0]['seed']} first) ask a question reserved by products/1"]


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


@pytest.mark.parametrize("family, why", [("unreadable", "KeyError: 'expression'"),
                                         ("garbage", "it gave \"{'not': 'a string'}\", not a non-empty string")])
def test_a_key_function_that_cannot_read_a_task_is_one_line_before_anything_is_drawn(meant, family, why):
    s = settings_.make("smoke", families=[f"meant.{family}"])
    with pytest.raises(OneLine) as e:
        heldout.draw(f"meant.{family}", s)
    assert "\n" not in str(e.value) and f"its meaning key {family}/1 cannot read the task of seed 200000" in str(e.value)
    assert why in str(e.value)
    assert sources.parse(f"meant.{family}").tasks([1])  # built unkeyed (screening, training), it is a task as ever


def test_a_sources_own_meaning_reserves_twins_together(meant):
    s = settings_.make("smoke", families=["meant.add"], min_unseen=10, census_n=100, eval_n=50)
    held, built = heldout.draw("meant.add", s)
    assert held.reservation.meaning == "add/1" and held.reservation.distinct <= 55
    assert not {t["meaning"] for t in built["eval"]} & {t["meaning"] for t in built["train"] + built["predict"]}
