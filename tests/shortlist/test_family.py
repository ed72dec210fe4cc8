import pytest

from shortlist import sources as families
from shortlist.sources import Family, FamilyError


def test_parse_plain_and_configured():
    assert families.parse("chain_sum") == Family("chain_sum")
    f = families.parse("chain_sum(max_terms=2, max_digits=1)")
    assert f.name == "chain_sum" and f.config == {"max_terms": 2, "max_digits": 1}


def test_key_is_canonical_and_round_trips():
    a = families.parse("chain_sum(max_terms=2,  max_digits=1)")
    b = families.parse("chain_sum(max_digits=1, max_terms=2)")
    assert a.key == b.key == "chain_sum(max_digits=1, max_terms=2)"
    assert families.parse(a.key) == a and hash(a) == hash(b)


def test_tuple_values_become_lists():
    f = families.parse('basic_arithmetic(operators=("+", "-"))')
    assert f.config == {"operators": ["+", "-"]}
    assert families.parse(f.key) == f


@pytest.mark.parametrize("text, fragment", [
    ("chan_sum", "did you mean chain_sum"),
    ("chain_sum(max_term=2)", "did you mean max_terms"),
    ("chain_sum(seed=3)", "no setting 'seed'"),
    ("chain_sum(max_terms=0)", "max_terms must be >= min_terms"),
    ("chain_sum(max_terms=two)", "Python literals"),
    ("chain_sum(2)", "name(key=value"),
    ("chain sum", "name(key=value"),
    ("zzzzzz", "python -m shortlist families"),
])
def test_bad_families_give_one_clear_line(text, fragment):
    with pytest.raises(FamilyError) as e:
        families.parse(text)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_parse_list_splits_only_outside_parentheses():
    got = families.parse_list("chain_sum(max_terms=2, max_digits=1), leg_counting ,basic_arithmetic(operators=['+', '-'])")
    assert [f.name for f in got] == ["chain_sum", "leg_counting", "basic_arithmetic"]
    assert families.parse_list(["leg_counting"]) == [Family("leg_counting")]


def test_parse_list_refuses_duplicates_and_empty():
    with pytest.raises(FamilyError, match="twice"):
        families.parse_list("chain_sum, chain_sum()")
    with pytest.raises(FamilyError, match="no families"):
        families.parse_list(" , ")


def test_tasks_are_deterministic_in_the_seed_and_follow_the_config():
    f = families.parse("chain_sum(max_terms=2, max_digits=1)")
    assert f.tasks(range(3, 6)) == f.tasks(range(3, 6))
    assert f.task(3) != f.task(4)
    assert all(len(t["question"].split("+") + t["question"].split("-")) <= 3 for t in f.tasks(range(20)))


def test_slug_is_file_name_safe_and_distinct():
    slugs = {families.parse(t).slug for t in ["chain_sum", "chain_sum(max_terms=2)", "chain_sum(max_terms=3)",
                                              "basic_arithmetic(operators=['+', '-'])"]}
    assert len(slugs) == 4
    assert all(set(s) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") for s in slugs)


def test_default_families_all_build():
    assert [f.name for f in families.parse_list(list(families.DEFAULT))] == list(families.DEFAULT)


def test_fingerprint_is_the_canonical_json_of_the_tasks():
    import hashlib
    import json
    f = families.parse("chain_sum(max_terms=2, max_digits=1)")
    tasks = f.tasks(range(5))
    text = json.dumps(tasks, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert families.fingerprint(tasks) == hashlib.sha256(text.encode()).hexdigest()
    assert families.fingerprint(tasks) != families.fingerprint(f.tasks(range(6)))
    assert families.fingerprint(tasks) != families.fingerprint(families.parse("chain_sum").tasks(range(5)))
    assert [set(t) for t in tasks] == [{"seed", "question", "answer"}] * 5


