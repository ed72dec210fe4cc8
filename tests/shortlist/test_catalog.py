import csv
import dataclasses
import json
from pathlib import Path

import pytest

from shortlist.catalog import run as catalog
from shortlist import sources as families
from shortlist import placement as gpus
from shortlist import screening
from shortlist import trainee
from shortlist.catalog.records import CatalogError, Row
from shortlist.sources import levels
from shortlist.sources.levels import LevelError

TRAINEE = trainee.resolve("qwen3(group=2, max_new_tokens=8)").replace(model="tiny")


def test_bad_plans_are_refused_in_one_line():
    for names, settings, fragment in (
            (["chain_sum(max_terms=2)"], {}, "give the name alone"),
            (["chan_sum"], {}, "did you mean chain_sum"),
            (["chain_sum", "chain_sum"], {}, "listed twice"),
            ([], {}, "no families"),
            (["chain_sum"], {"budget_min": 0}, "--budget-min"),
            (["chain_sum"], {"tasks": 0}, "--tasks"),
            (["chain_sum"], {"builders": -1}, "builders=-1"),
            (["chain_sum"], {"score_deadline_s": 0}, "score_deadline_s=0")):
        with pytest.raises((CatalogError, LevelError)) as e:
            catalog.plan(TRAINEE, names, **settings)
        assert fragment in str(e.value) and "\n" not in str(e.value), fragment


def test_every_family_means_every_registered_one():
    p = catalog.plan(TRAINEE)
    assert len(p.families) >= 100 and {"chain_sum", "composite", "knight_swap"} <= set(p.families)


def test_a_row_is_validated_when_built():
    s = screening.summarize("chain_sum(max_digits=1, max_terms=2)", [[1.0, 0.0]], 1.0, TRAINEE)
    level = levels.at("chain_sum", 0)
    row = Row(level.family, level.level, level.levels, level.spec, s, "0" * 64, 1.0)
    assert row.screen.verdict == "improves" and row.screen.learnability == 0.25 and row.spec == level.spec
    assert Row.from_dict(row.as_dict()) == row
    for change, fragment in (({"screen": dataclasses.replace(s, verdict="great")}, "verdict"),
                             ({"screen": dataclasses.replace(s, pass1=1.5)}, "pass1"),
                             ({"tasks_sha256": "abc"}, "SHA-256"), ({"spec": "leg_counting"}, "names leg_counting")):
        with pytest.raises((CatalogError, LevelError)) as e:
            dataclasses.replace(row, **change)
        assert fragment in str(e.value)


@pytest.fixture(scope="module")
def screened(tmp_path_factory):
    """Two families walked on the tiny model, for real: what the proof is then handed."""
    out = tmp_path_factory.mktemp("catalog") / "cat"
    p = catalog.plan(trainee.resolve("qwen3(group=4, max_new_tokens=16)").replace(model="tiny"),
                     ["chain_sum", "leg_counting"], walk=True, tasks=3, out=str(out), builders=0)
    lines = []
    return p, catalog.run(p, log=lines.append), lines


def test_the_tiny_model_walks_up_to_too_hard_and_the_files_say_so(screened):
    p, found, lines = screened
    assert len(lines) == 2  # one progress line per family
    assert len(found.rows) > len(p.families)  # the tiny model improves at level 0 somewhere: a walk, not a step
    for name in p.families:
        rows = [r for r in found.rows if r.family == name]
        assert [r.level for r in rows] == list(range(len(rows)))
        assert all(r.screen.verdict != "too hard" for r in rows[:-1])  # the walk went on below "too hard"...
        assert rows[-1].screen.verdict == "too hard" or rows[-1].level == rows[-1].levels - 1  # ...and stopped there
    body = json.loads((Path(p.out) / "shortlist.json").read_text())
    assert body["trainee"] == p.trainee.as_dict() and body["model"]["revision"] and body["versions"]["reasoning-gym"]
    assert body["workers"][0]["device"] == "cpu" and body["workers"][0]["engine"]["engine"]
    table = list(csv.DictReader((Path(p.out) / "shortlist.csv").open()))
    assert [(t["spec"], t["verdict"]) for t in table] == [(r["spec"], r["verdict"]) for r in body["rows"]]
    ranked = [s["learnability"] for s in body["shortlist"]]
    assert ranked == sorted(ranked, reverse=True)
    html = (Path(p.out) / "shortlist.html").read_text()
    assert "Shortlist: the catalog" in html and "smoke run" in html and "<script src" not in html


def test_families_fan_out_one_worker_process_per_visible_gpu(tmp_path, monkeypatch):
    # on this machine the "GPUs" show no device, so each worker samples on the CPU: what is tested is
    # the fan-out (a process per GPU, each seeing only its own, the walks merged), not a GPU
    monkeypatch.setattr(gpus, "visible_gpus", lambda: ["3", "5"])
    p = catalog.plan(TRAINEE, ["chain_sum", "composite", "leg_counting"], tasks=2, out=str(tmp_path / "cat"))
    lines = []
    found = catalog.run(p, log=lines.append)
    workers = json.loads((tmp_path / "cat" / "shortlist.json").read_text())["workers"]
    assert sorted((w["label"], w["visible_devices"], w["families"]) for w in workers) == [
        ("gpu 3", "3", 2), ("gpu 5", "5", 1)]  # families 0 and 2 to the first GPU, family 1 to the second
    assert {r.family for r in found.rows} == {"chain_sum", "leg_counting"} and not found.unreached
    assert [f.family for f in found.failures] == ["composite"]
