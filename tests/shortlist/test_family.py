import pytest

from shortlist import sources
from shortlist.sources import Family, FamilyError


def test_parse_plain_and_configured():
    assert sources.parse("chain_sum") == Family("chain_sum")
    f = sources.parse("chain_sum(max_terms=2, max_digits=1)")
    assert f.name == "chain_sum" and f.config == {"max_terms": 2, "max_digits": 1}


def test_key_is_canonical_and_round_trips():
    a = sources.parse("chain_sum(max_terms=2,  max_digits=1)")
    b = sources.parse("chain_sum(max_digits=1, max_terms=2)")
    assert a.key == b.key == "chain_sum(max_digits=1, max_terms=2)"
    assert sources.parse(a.key) == a and hash(a) == hash(b)


def test_tuple_values_become_lists():
    f = sources.parse('basic_arithmetic(operators=("+", "-"))')
    assert f.config == {"operators": ["+", "-"]}
    assert sources.parse(f.key) == f


@pytest.mark.parametrize("text, fragment", [
    ("chan_sum", "did you mean chain_sum"),
    ("chain_sum(max_term=2)", "did you mean max_terms"),
    ("chain_sum(seed=3)", "no setting 'seed'"),
    ("chain_sum(max_terms=0)", "max_terms must be >= min_terms"),
    # the family's own assert, in our words: no "AssertionError", and which setting to change
    ("chain_sum(max_terms=-3)", "chain_sum(max_terms=-3): chain_sum refuses this config (max_terms must be >= "
                                "min_terms); change max_terms"),
    ("composite", "composite: composite does not build with its defaults (Must specify at least one dataset); give "
                  "it a config"),
    ("chain_sum(max_terms=two)", "Python literals"),
    ("chain_sum(2)", "name(key=value"),
    ("chain sum", "name(key=value"),
    ("zzzzzz", "python -m shortlist families"),
])
def test_bad_families_give_one_clear_line(text, fragment):
    with pytest.raises(FamilyError) as e:
        sources.parse(text)
    assert fragment in str(e.value) and "\n" not in str(e.value) and "Error" not in str(e.value)


def test_parse_list_splits_only_outside_parentheses():
    got = sources.parse_list("chain_sum(max_terms=2, max_digits=1), leg_counting ,basic_arithmetic(operators=['+', '-'])")
    assert [f.name for f in got] == ["chain_sum", "leg_counting", "basic_arithmetic"]
    assert sources.parse_list(["leg_counting"]) == [Family("leg_counting")]


def test_parse_list_refuses_duplicates_and_empty():
    with pytest.raises(FamilyError, match="twice"):
        sources.parse_list("chain_sum, chain_sum()")
    with pytest.raises(FamilyError, match="no families"):
        sources.parse_list(" , ")


def test_tasks_are_deterministic_in_the_seed_and_follow_the_config():
    f = sources.parse("chain_sum(max_terms=2, max_digits=1)")
    assert f.tasks(range(3, 6)) == f.tasks(range(3, 6))
    assert f.task(3) != f.task(4)
    assert all(len(t["question"].split("+") + t["question"].split("-")) <= 3 for t in f.tasks(range(20)))


def test_slug_is_file_name_safe_and_distinct():
    slugs = {sources.parse(t).slug for t in ["chain_sum", "chain_sum(max_terms=2)", "chain_sum(max_terms=3)",
                                              "basic_arithmetic(operators=['+', '-'])"]}
    assert len(slugs) == 4
    assert all(set(s) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") for s in slugs)


def test_a_long_config_still_names_files_that_can_be_made():
    a, b = (sources.parse(f"calendar_arithmetic(tasks={['weekday_offset'] * n!r})") for n in (12, 13))
    assert len(a.slug) == len(b.slug) == 200 < len(a.key) and a.slug != b.slug  # a file name holds 255 bytes
    assert a.slug == sources.parse(a.key).slug


def test_default_families_all_build():
    assert [f.name for f in sources.parse_list(list(sources.DEFAULT))] == list(sources.DEFAULT)


def test_fingerprint_is_the_canonical_json_of_the_tasks():
    import hashlib
    import json
    f = sources.parse("chain_sum(max_terms=2, max_digits=1)")
    tasks = f.tasks(range(5))
    text = json.dumps(tasks, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert sources.fingerprint(tasks) == hashlib.sha256(text.encode()).hexdigest()
    assert sources.fingerprint(tasks) != sources.fingerprint(f.tasks(range(6)))
    assert sources.fingerprint(tasks) != sources.fingerprint(sources.parse("chain_sum").tasks(range(5)))
    assert [set(t) for t in tasks] == [{"seed", "question", "answer"}] * 5




# --- values once accepted or refused by a traceback: refused in one line before anything is written ---
@pytest.mark.parametrize("text, fragment", [
    ("chain_sum(max_terms=1e309)", "chain_sum: max_terms=inf: not a finite number"),
    ("chain_sum(max_terms=-1e309)", "max_terms=-inf: not a finite number"),
    ("chain_sum(max_terms=2.5)", "chain_sum: max_terms=2.5: must be int"),
    ("chain_sum(max_digits='x')", "chain_sum: max_digits='x': must be int"),
    ("chain_sum(max_digits=True)", "max_digits=True: must be int"),
    ("chain_sum(allow_negation=1)", "allow_negation=1: must be bool"),
    ("chain_sum(max_terms={1, 2})", "max_terms={1, 2}: a set"),
    ("chain_sum(max_terms=1j)", "max_terms=1j: a complex"),
    ("chain_sum(max_terms=b'2')", "max_terms=b'2': a bytes"),
    ("basic_arithmetic(operators='+')", "operators='+': must be list"),
    pytest.param(f"basic_arithmetic(operators={['+'] * 1001!r})", "a list of more than 1,000 items", id="long list"),
    ("basic_arithmetic(operators=[[[[['+']]]]])", "nested deeper than 4"),
    pytest.param(f"basic_arithmetic(format_style={'x' * 10_001!r})", "a string of 10,001 characters", id="long string"),
    pytest.param(f"basic_arithmetic(operators={['x' * 9000] * 20!r})", "a config of 180,", id="long config"),
    ("chain_sum(max_terms=1000000)", "one task's question is"),  # builds in seconds, far past any context
])
def test_impossible_values_are_one_line_naming_the_setting(text, fragment):
    with pytest.raises(FamilyError) as e:
        sources.parse(text)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_configs_the_source_defines_are_not_built_but_others_are(monkeypatch):
    from shortlist.sources import budget
    built = []
    monkeypatch.setattr(budget, "build", lambda source, name, config: built.append(config) or 10)
    Family("chain_sum")  # its defaults
    Family("chain_sum", {"max_digits": 1, "max_terms": 2})  # its curriculum's level 0
    assert built == []
    Family("chain_sum", {"max_terms": 3})
    assert built == [{"max_terms": 3}]


@pytest.fixture
def budget_source(tmp_path, monkeypatch):
    """A source whose tasks spin or grow without end, registered for one test."""
    import os

    from shortlist.sources import source
    (tmp_path / "budget_source.py").write_text(
        "VERSION = '1'\n"
        "def names(): return ['spin', 'grow']\n"
        "def settings(family): return {'n'}\n"
        "def validate(family, config): pass\n"
        "def entry(family, config, seed):\n"
        "    if family == 'spin':\n"
        "        while True: pass\n"
        "    return {'question': 'x' * config.get('n', 1) * (1 << 30), 'answer': None}\n"
        "def scorer(family, config): return lambda answer, task: 0.0\n"
        "def levels(family): return 1\n"
        "def level(family, at): return {}\n"
        "def preload(): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(source, "SOURCES", dict(source.SOURCES))
    source.register("budget", "budget_source")
    yield "budget"
    source.reset()


def test_a_task_that_cannot_be_built_within_the_budget_is_refused_naming_the_setting(budget_source, monkeypatch):
    from shortlist.sources import budget
    monkeypatch.setattr(budget, "BUILD_CPU_S", 1)
    with pytest.raises(FamilyError) as e:
        Family("spin", {"n": 1}, budget_source)
    assert "one task takes more than 1 s of CPU to build; lower n" in str(e.value)
    with pytest.raises(FamilyError) as e:
        Family("grow", {"n": 4}, budget_source)  # 4 GiB of question
    assert "one task needs more than 512 MiB of memory to build; lower n" in str(e.value)


def test_a_question_far_longer_than_the_family_asks_is_refused_in_one_line():
    """letter_counting(min_words=100000000) built 50,322-character questions, 347 times its hardest level's,
    under every bound there was; a config somewhat harder than its curriculum still builds."""
    with pytest.raises(FamilyError) as e:
        sources.parse("letter_counting(min_words=100000000, max_words=100000000)")
    import re
    assert re.fullmatch(r"letter_counting\(max_words=100000000, min_words=100000000\): one task's question is 50,322 "
                        r"characters long, \d+ times the longest its own configs ask \(\d+; at most 16 times, or 4,000 "
                        r"characters\); lower max_words.*", str(e.value)), str(e.value)
    assert "\n" not in str(e.value)
    assert len(sources.parse("letter_counting(min_words=30, max_words=60)").task(0)["question"]) > 163
