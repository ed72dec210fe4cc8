import csv
import dataclasses
import json
import os
from pathlib import Path

import pytest

from shortlist.catalog import run as catalog
from shortlist import executors
from shortlist import screening
from shortlist import trainee
from shortlist.catalog.records import CatalogError, Row
from shortlist.sources import levels
from shortlist.sources.levels import LevelError
from tests.processes import alive

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


def test_kept_rows_are_matched_on_how_the_source_was_asked_and_read_not_on_what_the_trainee_leaves_to_it():
    p = catalog.plan(TRAINEE, ["chain_sum"])
    asked = p.identity()["trainee"]
    assert TRAINEE.extraction is None and asked["extraction"] == "answer_tags"  # Reasoning Gym's, resolved
    # a catalog kept by a version whose trainee named Reasoning Gym's convention outright matches
    assert dataclasses.replace(p, trainee=TRAINEE.for_source("reasoning_gym")).identity() == p.identity()
    assert dataclasses.replace(p, trainee=TRAINEE.replace(extraction="last_number")).identity() != p.identity()


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
        below = [r.screen.pass1 < p.trainee.pass_min for r in rows]
        assert not any(a and b for a, b in zip(below[:-2], below[1:-1]))  # the walk went on past one below the band...
        assert below[-2:] == [True, True] or rows[-1].level == rows[-1].levels - 1 or \
            rows[-1].screen.verdict == "unscorable"  # ...and stopped at the second
    body = json.loads((Path(p.out) / "shortlist.json").read_text())
    assert body["trainee"] == p.trainee.as_dict() and body["model"]["revision"] and body["versions"]["reasoning-gym"]
    assert body["workers"][0]["device"] == "cpu" and body["workers"][0]["engine"]["engine"]
    table = list(csv.DictReader((Path(p.out) / "shortlist.csv").open()))
    assert [(t["spec"], t["verdict"]) for t in table] == [(r["spec"], r["verdict"]) for r in body["rows"]]
    ranked = [s["learnability"] for s in body["shortlist"]]
    assert ranked == sorted(ranked, reverse=True)
    html = (Path(p.out) / "shortlist.html").read_text()
    assert "Shortlist: the catalog" in html and "smoke run" in html and "<script src" not in html


def test_families_fan_out_one_worker_job_per_slot_each_seeing_only_its_gpu(tmp_path, monkeypatch):
    # on this machine the "GPUs" show no device, so each worker samples on the CPU: what is tested is
    # the fan-out (a worker job per slot, each seeing only its own GPU, the walks merged), not a GPU
    monkeypatch.setattr(executors.local, "visible_gpus", lambda: ["3", "5"])
    p = catalog.plan(TRAINEE, ["chain_sum", "composite", "leg_counting"], tasks=2, out=str(tmp_path / "cat"))
    lines = []
    found = catalog.run(p, log=lines.append)
    workers = json.loads((tmp_path / "cat" / "shortlist.json").read_text())["workers"]
    assert sorted((w["label"], w["visible_devices"], w["families"], w["placement"]["gpu"], w["placement"]["slot"])
                  for w in workers) == [("worker 1", "3", 2, "3", 1), ("worker 2", "5", 1, "5", 2)]
    assert all(w["placement"]["executor"] == "local" and w["placement"]["per_gpu"] == 1 for w in workers)
    assert {r.family for r in found.rows} == {"chain_sum", "leg_counting"} and not found.unreached
    assert [f.family for f in found.failures] == ["composite"]
    assert "worker 1: started on GPU 3" in lines


def _screens(found):
    def plain(screen):
        return screen.as_dict() | {"scoring": {k: v for k, v in screen.scoring.items() if k != "seconds"}}
    return sorted((r.family, r.level, r.spec, r.tasks_sha256, json.dumps(plain(r.screen), sort_keys=True))
                  for r in found.rows)


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["local", "ray"])
def test_the_rows_do_not_depend_on_where_the_workers_ran(screened, tmp_path, monkeypatch, executor):
    """Two workers sharing one GPU (local, --per-gpu 2), or Ray tasks on fake GPUs: the walks come back
    to this process's folder, and every row is the in-process run's."""
    p, alone, _ = screened
    if executor == "ray":
        ray = __import__("ray") if os.environ.get("CI") else pytest.importorskip("ray")  # CI installs the extra
        monkeypatch.setenv("RAY_worker_niceness", "0")  # Ray's 15 starves its workers on a shared machine
        ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
        where = executors.Placement(executor="ray")
    else:
        monkeypatch.setattr(executors.local, "visible_gpus", lambda: ["0"])
        where = executors.Placement(per_gpu=2)
    try:
        found = catalog.run(p.replace(out=str(tmp_path / "cat")), log=lambda line: None, where=where)
    finally:
        if executor == "ray":
            ray.shutdown()
    assert _screens(found) == _screens(alone) and not found.unreached
    workers = json.loads((tmp_path / "cat" / "shortlist.json").read_text())["workers"]
    assert sorted((w["label"], w["placement"]["executor"], w["placement"]["gpu"]) for w in workers) == \
        ([("worker 1", "local", "0"), ("worker 2", "local", "0")] if executor == "local" else
         [("worker 1", "ray", "0"), ("worker 2", "ray", "1")])
    assert not (tmp_path / "cat" / "compile").exists() if executor == "ray" else True  # each machine keeps its own


@pytest.mark.slow
def test_a_signal_stops_the_catalog_s_workers_and_the_same_command_goes_on(tmp_path):
    """SIGINT, as a terminal's Ctrl-C sends it, to screen --levels fanned out over two (fake) GPUs: it
    exits 130 within 10 s with every worker and task builder gone, and the same command finishes the walks."""
    import signal
    import subprocess
    import sys
    import time
    out = tmp_path / "cat"
    argv = [sys.executable, "-m", "shortlist", "screen", "--levels", "--families", "chain_sum, leg_counting",
            "--model", "tiny", "--trainee", "qwen3(group=2, max_new_tokens=8)", "--tasks", "2", "--out", str(out)]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0,1")
    batch = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    deadline = time.monotonic() + 300
    while not list((out / "families").glob("*.json")) and time.monotonic() < deadline and batch.poll() is None:
        time.sleep(0.2)
    tree = _descendants(batch.pid)
    assert any("shortlist.catalog.walk" in cmd for cmd in tree.values()), "no worker was running"
    os.killpg(batch.pid, signal.SIGINT)
    assert batch.wait(timeout=10) == 130
    err = batch.stderr.read()
    assert err.strip().splitlines()[-1].startswith("stopped by SIGINT: every walk is kept as written")
    assert "Traceback" not in err
    assert [pid for pid in tree if alive(pid)] == []
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "0 families not reached" in done.stdout


def _descendants(pid: int) -> dict:
    return {p: open(f"/proc/{p}/cmdline").read().replace("\0", " ") for p in executors.descendants(pid)
            if os.path.exists(f"/proc/{p}/cmdline")}

