"""What a question means (shortlist/sources/meaning.py): the key the proof reserves it by, read from the real
Reasoning Gym generators: twins share it, questions with other answers never do."""
import collections

import pytest

from shortlist import sources
from shortlist.sources import meaning, reasoning_gym


@pytest.mark.parametrize("a, b", [("3 * 7", "7 * 3"), ("5 - 2 + 1", "1 + 5 - 2"), ("2 + -3", "2 - 3"),
                                  ("9 - (4 - 1)", "9 + 1 - 4"), ("2 * (3 * 4)", "4 * 3 * 2"), ("5 - 0", "5 + 0"),
                                  ("( -3 - -6 )", "-3 + 6"), ("-(2 + 3)", "-3 - 2")])
def test_sums_and_products_in_another_order_are_one_question(a, b):
    assert meaning.arithmetic(a) == meaning.arithmetic(b)


@pytest.mark.parametrize("a, b", [("7 - 3", "3 - 7"), ("8 / 2", "2 / 8"), ("2 * 3 + 4", "2 * (3 + 4)"),
                                  ("2 ** 3", "3 ** 2"), ("-3 * 2", "3 * 2"), ("1 << 4", "4 << 1")])
def test_what_changes_the_value_keeps_questions_apart(a, b):
    assert meaning.arithmetic(a) != meaning.arithmetic(b)


def test_what_is_not_arithmetic_is_refused():
    for text in ("x + 1", "'a' * 3", "f(2)", "1 if 2 else 3"):
        with pytest.raises(ValueError):
            meaning.arithmetic(text)


def test_basic_arithmetic_without_parentheses_is_read_left_to_right_as_its_generator_evaluates_it():
    # its simple tasks evaluate 3 + 4 * 2 as (3 + 4) * 2: precedence would merge it with 4 * 2 + 3 (11, not 14)
    left = {"question": "Calculate 3 + 4 * 2.", "answer": "14", "metadata": {"expression": "3 + 4 * 2"}}
    right = {"question": "Calculate 4 * 2 + 3.", "answer": "11", "metadata": {"expression": "4 * 2 + 3"}}
    natural = {"question": "What is 3 + 4 * 2?", "answer": "14", "metadata": {"expression": "3 + 4 * 2"}}
    flat = {"allow_parentheses": False}
    assert meaning.key("basic_arithmetic", flat, left) == meaning.key("basic_arithmetic", flat, natural)
    assert meaning.KEYS["basic_arithmetic"][1](left, flat) != meaning.KEYS["basic_arithmetic"][1](right, flat)


# a spec of each registered family, at the easiest levels the catalog screens, where its twins are found
TWINS = {"products": "products(max_digits=1)", "chain_sum": "chain_sum(max_digits=1, max_terms=2)",
         "decimal_chain_sum": "decimal_chain_sum(max_decimal_places=1, max_digits=1, max_terms=2)",
         "basic_arithmetic": "basic_arithmetic(max_digits=1, max_terms=2)",
         "tsumego": "tsumego(max_board_size=5, max_stones=5, min_board_size=5)",
         "calendar_arithmetic": "calendar_arithmetic(offset_upper_bound=30, tasks=['weekday_of_date'])",
         "time_intervals": "time_intervals(max_date_difference_days=1, max_time_difference_seconds=60)",
         "bf": "bf", "family_relationships": "family_relationships(max_family_size=3, min_family_size=3)",
         "sentence_reordering": "sentence_reordering(min_words_in_sentence=5)",
         "letter_jumble": "letter_jumble(max_corruption_level=0.3, max_word_len=10, max_words=10, min_word_len=5, "
                          "min_words=5)"}


def test_every_registered_family_has_an_example():
    assert set(meaning.KEYS) == set(TWINS)


@pytest.mark.parametrize("spec", TWINS.values())
def test_a_registered_family_merges_its_twins_and_only_questions_with_one_answer(spec):
    family = sources.parse(spec)
    rare = family.name in ("time_intervals", "family_relationships")  # about 3 twins in 1,000 tasks
    tasks = family.tasks(range(300_000, 301_000 if rare else 300_400), keyed=True)
    by_key = collections.defaultdict(list)
    for t in tasks:
        by_key[t["meaning"]].append(t)
    texts = {meaning.normalized(t["question"]) for t in tasks}
    assert len(by_key) < len(texts)  # some questions asked two ways are one
    assert all(len({t["answer"] for t in group}) == 1 for group in by_key.values())
    assert family.meaning == f"{family.name}/1"


def test_a_go_board_is_its_own_key_whatever_its_template():
    tasks = sources.parse(TWINS["tsumego"]).tasks(range(300_000, 300_400), keyed=True)
    boards = collections.defaultdict(set)
    for t in tasks:
        boards[t["meaning"]].add(t["question"].split("```")[1])  # the board the question shows
    assert all(len(shown) == 1 for shown in boards.values())
    assert any(len({meaning.normalized(t["question"]) for t in tasks if t["meaning"] == k}) > 1 for k in boards)


def test_every_level_of_a_registered_family_is_read():
    for name in meaning.KEYS:
        for level in range(reasoning_gym.levels(name)):
            config = reasoning_gym.level(name, level)
            for seed in (0, 1, 2):
                try:
                    entry = reasoning_gym.entry(name, config, seed)
                except RuntimeError:  # the generator's own failure (tsumego at some levels): no task to read
                    continue
                assert meaning.key(name, config, entry), (name, level)


def test_a_family_not_registered_is_reserved_by_its_text_and_builds_no_key():
    family = sources.parse("gcd")
    assert family.meaning == meaning.QUESTION and all("meaning" not in t for t in family.tasks([1, 2], keyed=True))


def test_building_the_keys_changes_no_task_and_no_fingerprint():
    family = sources.parse(TWINS["products"])
    plain, keyed = family.tasks(range(40)), family.tasks(range(40), keyed=True)
    assert [{k: v for k, v in t.items() if k != "meaning"} for t in keyed] == plain
    assert sources.fingerprint(plain) == sources.fingerprint(keyed)


@pytest.mark.parametrize("name", sorted(meaning.KEYS))
def test_a_malformed_task_raises_rather_than_giving_a_key(name):
    # a task of another version of Reasoning Gym: the builder says so in one line (test_heldout.py), no key is made up
    for entry in ({"question": "", "answer": "1", "metadata": {}},
                  {"question": "What?", "answer": "1", "metadata": {"expression": "import os", "source_index": 0}}):
        with pytest.raises(Exception):
            meaning.key(name, {}, entry)
