"""Sources of environments (shortlist/sources/source.py): the registry, Reasoning Gym as the one
built in, and a source from outside the package going through everything a family goes through."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from shortlist import sources
from shortlist.sources import levels, source
from shortlist.sources import reasoning_gym as rg

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def toy():
    source.register("toy", "toy_source")  # tests/fixtures/sources/toy_source.py
    yield source.get("toy")
    source.reset()


def test_only_the_reasoning_gym_source_imports_reasoning_gym():
    importing = sorted(str(p.relative_to(ROOT)) for folder in ("shortlist", "proof") for p in (ROOT / folder).rglob("*.py")
                       if re.search(r"^\s*(import reasoning_gym|from reasoning_gym)", p.read_text(), re.M))
    assert importing == ["shortlist/sources/reasoning_gym.py"]


def test_reasoning_gym_is_a_source_and_the_default():
    assert source.get() is rg and set(source.REQUIRED) <= set(dir(rg))
    assert "chain_sum" in rg.names() and rg.settings("chain_sum") >= {"max_terms", "max_digits"}
    assert sources.parse("chain_sum").source == source.DEFAULT


def test_a_module_lacking_the_protocol_is_refused(monkeypatch):
    monkeypatch.setitem(source.SOURCES, "broken", "json")
    with pytest.raises(TypeError, match="json lacks VERSION"):
        source.get("broken")  # refused before it is kept: nothing to forget


def test_a_family_of_another_source_is_parsed_validated_and_spelled_with_its_source(toy):
    f = sources.parse("toy.echo(digits=2)")
    assert (f.source, f.name, f.config, f.key, f.slug) == ("toy", "echo", {"digits": 2}, "toy.echo(digits=2)",
                                                           "toy.echo.digits-2")
    assert sources.parse(f.key) == f
    for text, fragment in (("toy.echo(digits=9)", "digits must lie in 1..6"), ("toy.ech", "did you mean echo"),
                           ("toy.echo(digit=2)", "did you mean digits"), ("nowhere.echo", "unknown source 'nowhere'")):
        with pytest.raises(sources.FamilyError, match=re.escape(fragment)):
            sources.parse(text)


def test_its_tasks_are_built_in_the_hash_seeded_helper_and_its_levels_are_specs(toy):
    f = sources.parse("toy.echo(digits=2)")
    assert f.tasks([1, 2]) == [{"seed": 1, "question": "Repeat the number 19.", "answer": "19"},
                               {"seed": 2, "question": "Repeat the number 38.", "answer": "38"}]
    assert levels.at("echo", 1, "toy").spec == "toy.echo(digits=2)" and levels.following("echo", 0, "toy") == 1


def test_its_answers_are_scored_in_the_sandbox_by_its_own_scorer(toy):
    from shortlist.scoring import Scorer
    with Scorer(workers=1) as scorer:
        assert scorer.score("toy.echo(digits=2)", [1, 1, 2], ["19", "20", None]) == [1.0, 0.0, 0.0]
        assert scorer.score("toy.pays_anything", [1, 2], ["anything", ""]) == [1.0, 0.0]


def test_a_registered_source_reaches_a_process_by_the_choice_it_is_handed_and_never_through_the_environment(toy):
    environ = dict(os.environ)
    handed = json.dumps(source.current().as_dict())
    assert json.loads(handed)["modules"] == {"toy": "toy_source"} and os.environ == environ
    program = ("import json, sys; from shortlist import sources; from shortlist.sources import source\n"
               "if len(sys.argv) > 1: source.Choice.of(json.loads(sys.argv[1])).configure()\n"
               "print(sources.parse('toy.echo').key)")
    child = subprocess.run([sys.executable, "-c", program, handed], capture_output=True, text=True)
    assert child.stdout.strip() == "toy.echo", child.stderr
    alone = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)  # handed nothing
    assert alone.returncode != 0 and "unknown source 'toy'" in alone.stderr
