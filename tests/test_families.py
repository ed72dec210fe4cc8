import pytest

from shortlist import families
from shortlist.families import Family, FamilyError


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


HASH_SEEDED = ["isomorphic_strings", "knight_swap", "list_functions", "polynomial_multiplication", "ransom_note",
               "word_ladder"]  # reasoning-gym builds other tasks for a seed under another hash seed
BUILD = """
import hashlib, json, sys
import reasoning_gym
from shortlist import families
if sys.argv[1] == "raw":  # reasoning-gym alone, in this interpreter
    out = {}
    for name in json.loads(sys.argv[2]):
        tasks = [reasoning_gym.create_dataset(name, seed=s, size=1)[0] for s in range(3)]
        out[name] = hashlib.sha256(repr([(t["question"], t["answer"]) for t in tasks]).encode()).hexdigest()
else:  # Family.tasks(), for the families named, or every creatable one
    names = json.loads(sys.argv[2]) if len(sys.argv) > 2 else families.creatable()
    out = {name: families.fingerprint(families.parse(name).tasks(range(2))) for name in names}
print(chr(10) + json.dumps(out))  # some families print while they build
"""


def build_in_a_process(hash_seed: str, *args: str):
    """BUILD in a new interpreter with this hash seed; returns a function that waits for its result."""
    import json
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    process = subprocess.Popen([sys.executable, "-c", BUILD, *args], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": root})
    return lambda: json.loads(process.communicate(timeout=600)[0].splitlines()[-1])


def fingerprints_here(names) -> dict:
    return {name: families.fingerprint(families.parse(name).tasks(range(2))) for name in names}


def test_the_hash_seeded_families_build_the_same_tasks_in_every_process():
    """reasoning-gym alone builds other tasks for six families under another hash seed; Family.tasks()
    (and so the fingerprint) builds the same tasks in processes whose hash seeds differ (a subprocess
    with 1, and this one, whatever it has)."""
    import json
    names = HASH_SEEDED + ["chain_sum", "leg_counting"]
    raw = [build_in_a_process(seed, "raw", json.dumps(names)) for seed in ("1", "2")]
    other = build_in_a_process("1", "ours", json.dumps(names))
    one, two = (wait() for wait in raw)
    assert sorted(k for k in one if one[k] != two[k]) == HASH_SEEDED  # without the fix
    assert other() == fingerprints_here(names)  # with it


@pytest.mark.slow
def test_every_creatable_family_builds_the_same_tasks_in_every_process():
    """The same for every creatable family: a family reasoning-gym adds later may depend on the
    hash seed too."""
    other = build_in_a_process("1", "ours")
    here = fingerprints_here(families.creatable())
    assert other() == here and len(here) >= 100


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


def test_building_400_tasks_stays_cheap():
    import time
    f = families.parse("chain_sum")
    f.tasks(range(1))  # the helper interpreter, where this one's hash seed is not 0, starts once
    started = time.monotonic()
    assert [t["seed"] for t in f.tasks(range(400))] == list(range(400))
    assert time.monotonic() - started < 2.0
