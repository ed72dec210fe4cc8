import dataclasses

import pytest
from reasoning_gym.factory import DATASETS, create_curriculum

from shortlist.sources import levels as curricula
from shortlist import sources
from shortlist.sources import reasoning_gym as rg
from shortlist.sources.levels import Level, LevelError


def curriculum_tasks(name: str, level: int, seeds) -> list[dict]:
    """The tasks Reasoning Gym itself builds from the curriculum's config at a level, one dataset per seed."""
    c = create_curriculum(name)
    c.set_global_level(level)
    config = c.generate_configuration()
    dataset_cls = DATASETS[name][0]
    out = []
    for seed in seeds:
        entry = dataset_cls(dataclasses.replace(config, seed=seed, size=1))[0]
        out.append({"seed": seed, "question": entry["question"], "answer": entry["answer"]})
    return out


def test_the_easiest_level_is_the_easy_config_written_as_a_spec():
    level = curricula.at("chain_sum", 0)
    assert level == Level("chain_sum", 0, 11, "chain_sum(max_digits=1, max_terms=2)", 0.0)
    assert curricula.at("chain_sum", 1).spec == "chain_sum(max_digits=2, max_terms=3)"
    assert curricula.count("leg_counting") == 36 and curricula.first("leg_counting") == 0


@pytest.mark.parametrize("name, level", [("chain_sum", 0), ("chain_sum", 3), ("leg_counting", 2), ("aiw", 0),
                                         ("basic_arithmetic", 4), ("word_sorting", 1)])
def test_a_spec_builds_exactly_the_tasks_of_the_curriculums_config(name, level):
    spec = curricula.at(name, level).spec
    family = sources.parse(spec)
    assert family.key == spec  # canonical: `proof run --families` gets it unchanged
    assert family.tasks(range(500, 503)) == curriculum_tasks(name, level, range(500, 503))


def test_levels_that_repeat_a_config_are_skipped_and_the_walk_ends_at_the_top():
    # word_sorting's levels 3 and 4 give the same config once both attributes top out
    assert curricula.at("word_sorting", 3).spec == curricula.at("word_sorting", 4).spec
    assert curricula.following("word_sorting", 2) == 3 and curricula.following("word_sorting", 3) is None
    assert curricula.following("chain_sum", 0) == 1 and curricula.following("chain_sum", 10) is None


def test_a_family_without_a_curriculum_has_one_level_its_defaults():
    assert curricula.first("acre") is None
    assert curricula.at("acre", None) == Level("acre", None, 1, "acre")
    assert curricula.following("acre", None) is None


def test_a_config_that_cannot_be_written_as_a_literal_is_one_line(monkeypatch):
    real = rg.level
    monkeypatch.setattr(rg, "level", lambda name, level: real(name, level) | {"max_terms": float("inf")})
    with pytest.raises(LevelError) as e:
        curricula.at("chain_sum", 0)
    assert "cannot be written as a spec" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("build, fragment", [
    (lambda: curricula.check_name("chan_sum"), "did you mean chain_sum"),
    (lambda: Level("chain_sum", 0, 11, "leg_counting"), "names leg_counting"),
    (lambda: Level("chain_sum", 11, 11, "chain_sum"), "not one of its 11"),
    (lambda: Level("acre", None, 3, "acre"), "not one of its 3"),
])
def test_bad_levels_are_refused_in_one_line(build, fragment):
    with pytest.raises(LevelError) as e:
        build()
    assert fragment in str(e.value) and "\n" not in str(e.value)
