"""The wider grid (sources/grid.py, levels.at(..., grid=True)) and the catalog's walk up it (--grid)."""
import dataclasses

import pytest
from reasoning_gym.factory import DATASETS

from shortlist import sources
from shortlist.catalog import run as catalog
from shortlist.sources import grid, levels
from tests.shortlist.test_walk import fake_screens, plan  # noqa: F401  the fixture, a screen without a model


def test_a_wide_step_is_divided_geometrically_a_narrow_one_linearly_and_an_easier_value_never_crosses_zero():
    assert grid.between(1000, 1_000_000) == [10_000, 100_000]  # count_bits' level 0 -> 1
    assert grid.between(100, 1000) == [320] and grid.between(2, 3) == [] and grid.between(4, 8) == [5, 7]
    assert grid.between(-10, -100) == [-32] and grid.between(0.1, 0.3) == [0.17, 0.23]
    assert grid.between([1, 0], [0, 1]) == [] and grid.between(True, False) == []
    assert grid.easier((2, 5, 8)) == [1]  # not -1: decimal_arithmetic's config takes min_terms=-1, its generator not
    assert grid.easier((10, 1000)) == [1, 9] and grid.easier((0, 2)) == [] and grid.easier(("a", "b")) == []


def numeric_fields(name):
    return [{k: v for k, v in o.items() if grid.numeric(v)} for _, o in levels.points(name)]


@pytest.mark.parametrize("name", ["products", "count_bits", "gcd", "advanced_geometry", "leg_counting"])
def test_the_grid_goes_from_easiest_to_hardest_one_attribute_at_a_time_through_every_curriculum_level(name):
    found = levels.points(name)
    positions = [p for p, _ in found]
    assert positions == sorted(positions) and len(set(map(str, (o for _, o in found)))) == len(found)
    on_levels = [levels.at(name, i, grid=True).spec for i, (p, _) in enumerate(found) if p >= 0 and p == int(p)]
    curriculum = {levels.at(name, at).spec for at in range(levels.count(name))}
    assert set(on_levels) == curriculum  # every curriculum level is a grid point, exactly its config
    fields = set().union(*numeric_fields(name))
    defaults = dataclasses.asdict(DATASETS[name][1]())  # the config's own defaults, where a point leaves a field
    for field in fields:  # each setting moves one way only (a harder config never steps back)
        values = [f.get(field, defaults.get(field)) for f in numeric_fields(name)]
        values = [v for v in values if v is not None]
        assert values == sorted(values) or values == sorted(values, reverse=True), (field, values)


def test_below_level_0_where_the_config_allows_it_and_between_levels_where_the_step_is_wide():
    specs = [levels.at("count_bits", i, grid=True) for i in range(levels.count("count_bits", grid=True))]
    assert specs[0].spec == "count_bits(max_n=10)" and specs[0].position == -1.0  # min_n 1, the smallest it takes
    assert [s.spec for s in specs[2:6]] == ["count_bits(max_n=1000, min_n=10)", "count_bits(max_n=10000, min_n=10)",
                                            "count_bits(max_n=100000, min_n=10)", "count_bits(max_n=1000000, min_n=10)"]
    assert [s.position for s in specs[2:6]] == [0.0, 0.3333, 0.6667, 1.0]
    assert levels.points("acre") == ((0.0, {}),) and levels.at("acre", None, grid=True).spec == "acre"


@pytest.mark.parametrize("name", ["chain_sum", "basic_arithmetic", "number_sequence", "coin_flip"])
def test_every_grid_point_is_a_spec_that_builds_exactly_its_config(name):
    for i, (_, overrides) in enumerate(levels.points(name)):
        spec = levels.at(name, i, grid=True).spec
        family = sources.parse(spec)  # builds one task: the family's own validation
        assert {k: v for k, v in family.config.items()} == overrides, spec
        assert family.tasks([500])[0]["question"]


@pytest.mark.slow
def test_every_grid_point_builds_or_is_one_line_and_only_the_curriculums_own_levels_or_points_below_them_fail():
    """Reasoning Gym 0.1.25's own curricula hold levels their configs refuse (caesar_cipher's level 2 rotates
    by up to 50 where its config takes 25, rubiks_cube's level 4, survo's, modulo_grid's max_target=0): those
    stay on the grid and fail as the catalog's failed rows. Between two levels the grid leaves out what the
    config refuses; a point may still fail to build within the budget (jugs between its levels 2 and 3, whose
    own level 3 takes minutes and fails), and below level 0 (the walk then goes on at level 0)."""
    between, raw, no_level_0 = {}, {}, {}
    for name in sources.source.get().names():
        points = levels.points(name)
        for i, (position, _) in enumerate(points):
            spec = levels.at(name, i, grid=True).spec if len(points) > 1 else name
            try:
                sources.parse(spec)
            except sources.FamilyError as e:
                if "\n" in str(e) or "Traceback" in str(e):
                    raw[spec] = str(e)
                if position != int(position) and position > 0 and "refuses this config" in str(e):
                    between[spec] = str(e)[:120]  # the config's own check, which the grid asks between levels
                if position == 0:
                    no_level_0[name] = str(e)[:120]
            except Exception as e:  # noqa: BLE001  anything but a one-line refusal
                raw[spec] = f"{type(e).__name__}: {e}"[:200]
    assert raw == {} and between == {}, (raw, between)
    # the families whose curriculum's level 0 does not build (the catalog lists them as failed)
    assert set(no_level_0) <= {"knight_swap", "composite", "decimal_arithmetic"}, no_level_0


def test_the_grid_walk_goes_on_at_level_0_after_a_degenerate_point_below_it_and_stops_below_the_band(
        tmp_path, fake_screens):  # noqa: F811
    screened = fake_screens({"products": {1: "improves", 2: "improves"}})  # else too hard
    lines = []
    found = catalog.run(plan(tmp_path, ["products"], grid=True), log=lines.append)
    assert screened == [("products", i) for i in range(5)]  # index 0: one term; 3 and 4 below the band
    assert lines[0].startswith("cpu [1/1] products: L-1 too hard") and "improves at L0, L0.5" in lines[0]
    assert [r.position for r in found.rows] == [-1.0, 0.0, 0.5, 1.0, 1.5]
    assert found.rows[1].spec == levels.at("products", 0).spec  # level 0 itself, as --levels screens it
    again = fake_screens({})
    assert catalog.run(plan(tmp_path, ["products"], grid=True)).rows == found.rows and again == []  # all kept


def test_a_levels_catalog_resumed_on_the_grid_keeps_the_levels_it_screened_and_numbers_them_as_grid_points(
        tmp_path, fake_screens):  # noqa: F811
    fake_screens({"count_bits": {0: "improves"}})
    first = catalog.run(plan(tmp_path, ["count_bits"]))
    assert [r.level for r in first.rows] == [0, 1, 2]
    screened = fake_screens({"count_bits": {0: "improves", 1: "improves", 3: "improves", 4: "too hard"}})
    found = catalog.run(plan(tmp_path, ["count_bits"], grid=True))
    assert ("count_bits", 2) not in screened  # the grid's level 0 is --levels' level 0: kept
    kept = next(r for r in found.rows if r.spec == first.rows[0].spec)
    assert (kept.level, kept.levels, kept.position, kept.tasks_sha256) == (2, 10, 0.0, first.rows[0].tasks_sha256)
    assert ("count_bits", 5) not in screened and found.rows[-1].spec == first.rows[1].spec  # level 1, kept
    assert [r.level for r in found.rows] == [0, 1, 2, 3, 4, 5] and found.rows[-1].screen.verdict == "too hard"
