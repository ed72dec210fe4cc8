"""What every source owes the rest of Shortlist (shortlist/sources/source.py), checked over each
registered one: its tasks are the same when built again, its gold answers score the ceiling, bad
answers score 0 without raising, and what crosses into a scoring process pickles."""
import pickle

import pytest

from shortlist import sources
from shortlist.sources import source
from tests.conftest import needs_openenv

# one family of each built-in source, and of a user's own (tests/fixtures/sources/toy_source.py)
EXAMPLES = {"reasoning_gym": "chain_sum(max_digits=1, max_terms=2)",
            "openenv": "openenv.chain_sum(max_digits=1, max_terms=2)",  # through rg_openenv.py
            "toy": "toy.echo(digits=2)"}
BAD = ["", "garbage", "\x00" * 10, "9" * 5000, "<answer>nope</answer>", "-1e309"]


@pytest.fixture
def example(request, monkeypatch):
    name = request.param
    if name == "openenv":
        request.getfixturevalue("served")
    if name == "toy":
        source.register("toy", "toy_source")
        request.addfinalizer(source.reset)
    return sources.parse(EXAMPLES[name])


def test_every_built_in_source_has_an_example():
    assert set(source.SOURCES) <= set(EXAMPLES)


SOURCES = [pytest.param("openenv", marks=needs_openenv) if n == "openenv" else n for n in EXAMPLES]


@pytest.mark.parametrize("example", SOURCES, indirect=True)
def test_its_tasks_are_deterministic_and_its_golds_score_the_ceiling(example, scorer):
    seeds = list(range(5, 11))
    tasks = example.tasks(seeds)
    assert tasks == example.tasks(seeds) and [t["seed"] for t in tasks] == seeds
    assert all(isinstance(t["question"], str) and t["question"] for t in tasks)
    assert scorer.score(example, seeds, [t["answer"] for t in tasks]) == [1.0] * len(seeds)


@pytest.mark.parametrize("example", SOURCES, indirect=True)
def test_bad_answers_score_0_without_raising(example, scorer):
    assert scorer.score(example, [5] * len(BAD), BAD) == [0.0] * len(BAD)
    assert scorer.counts[example.key].crashes == 0


@pytest.mark.parametrize("example", SOURCES, indirect=True)
def test_what_a_scoring_process_receives_pickles(example, scorer):
    src = source.get(example.source)
    if source.remote(example.source):  # scored in the caller, at its server: no zygote, nothing crosses
        scorer.score(example, [5], ["1"])
        assert example.key not in scorer._zygotes
        return
    entry = src.entry(example.name, example.config, 5)
    assert pickle.loads(pickle.dumps(entry)) == entry
    assert src.scorer(example.name, example.config)(str(entry["answer"]), entry) == 1.0
