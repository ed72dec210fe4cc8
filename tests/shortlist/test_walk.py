import json
import os
import time

import pytest

from shortlist.catalog import run as catalog
from shortlist import screening, scoring
from shortlist import trainee
from shortlist.catalog import walk
from shortlist.catalog.records import Row

TRAINEE = trainee.resolve("qwen3(group=2, max_new_tokens=8)").replace(model="tiny")
# two samples per task, scored so that the trainee's rule gives each verdict
GROUPS = {"improves": [[1.0, 0.0]] * 2, "too hard": [[0.0, 0.0]] * 2, "already solved": [[1.0, 1.0]] * 2,
          "no signal": [[1.0, 1.0], [0.0, 0.0]]}


@pytest.fixture
def fake_screens(monkeypatch):
    """Screens without a model: verdicts[family][level] decides (else "too hard"). Returns what was screened."""
    screened = []

    def install(verdicts: dict, each=None) -> list:
        def screen(self, b):
            screened.append((b.family, b.level))
            if each:
                each(b)
            groups = GROUPS[verdicts.get(b.family, {}).get(b.level, "too hard")]
            return Row(b.family, b.level, b.where.levels, b.where.spec,
                       screening.summarize(b.where.spec, groups, 1.0, TRAINEE), b.sha, 0.0, b.where.position)
        monkeypatch.setattr(walk.Screener, "screen", screen)
        screened.clear()
        return screened
    return install


def plan(tmp_path, names, **settings):
    return catalog.plan(TRAINEE, names, **{"walk": True, "tasks": 2, "out": str(tmp_path / "cat"), "builders": 0}
                        | settings)


def test_the_walk_goes_up_until_two_levels_in_a_row_are_too_hard_and_stops_there(tmp_path, fake_screens):
    screened = fake_screens({"chain_sum": {0: "already solved", 1: "improves", 2: "too hard", 3: "no signal",
                                           4: "too hard", 5: "too hard", 6: "improves"}})
    lines = []
    found = catalog.run(plan(tmp_path, ["chain_sum"]), log=lines.append)
    assert screened == [("chain_sum", i) for i in range(6)]  # not 6: two below the band in a row, 4 and 5
    assert [r.screen.verdict for r in found.rows] == ["already solved", "improves", "too hard", "no signal",
                                                      "too hard", "too hard"]
    assert found.shortlist()[0]["levels"] == [1] and not found.unreached
    assert len(lines) == 1 and "L4-5 too hard" in lines[0] and "improves at L1" in lines[0]  # one line per family


def test_without_levels_each_family_is_screened_at_its_easiest_level_that_builds(tmp_path, fake_screens):
    screened = fake_screens({"chain_sum": {0: "improves"}})
    found = catalog.run(plan(tmp_path, ["chain_sum", "knight_swap", "acre"], walk=False))
    assert sorted(screened) == [("acre", None), ("chain_sum", 0)]  # knight_swap builds at no level
    assert {r.spec for r in found.rows} == {"acre", "chain_sum(max_digits=1, max_terms=2)"}


def test_a_family_that_fails_to_build_is_listed_with_its_reason_and_the_others_go_on(tmp_path, fake_screens,
                                                                                      monkeypatch):
    fake_screens({"leg_counting": {0: "improves"}})
    real = walk.sources.Family.tasks

    def tasks(self, seeds):
        if self.name == "chain_sum":
            raise ValueError("<script>alert(1)</script> cannot be built")
        return real(self, seeds)
    monkeypatch.setattr(walk.sources.Family, "tasks", tasks)
    found = catalog.run(plan(tmp_path, ["chain_sum", "composite", "knight_swap", "leg_counting"], walk=False))
    why = {(f.family, f.level): f.reason for f in found.failures}
    assert why[("composite", None)] == "AssertionError: Must specify at least one dataset"
    assert why[("knight_swap", 0)] == "AssertionError: min_nodes must be >= 6"
    assert why[("chain_sum", 0)] == "ValueError: <script>alert(1)</script> cannot be built"
    assert all(f.stage == "build" for f in found.failures) and not found.unreached
    assert [s["family"] for s in found.shortlist()] == ["leg_counting"]
    out = tmp_path / "cat"
    assert "failed to build" in (out / "shortlist.csv").read_text()
    html = (out / "shortlist.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    assert "Must specify at least one dataset" in html


def test_a_rerun_keeps_what_was_screened_under_the_same_model_trainee_tasks_and_seeds(tmp_path, fake_screens):
    verdicts = {"chain_sum": {0: "improves", 1: "too hard"}, "leg_counting": {0: "improves", 1: "improves"}}
    screened = fake_screens(verdicts)
    first = catalog.run(plan(tmp_path, ["chain_sum", "leg_counting"]))
    assert len(screened) == 7  # chain_sum 0, 1, 2; leg_counting 0, 1, 2, 3
    screened.clear()
    lines = []
    again = catalog.run(plan(tmp_path, ["chain_sum", "leg_counting"]), log=lines.append)
    assert screened == [] and again.rows == first.rows
    assert all("(kept)" in line for line in lines) and len(lines) == 2
    for changed in ({"tasks": 3}, {"first_seed": 600}, {"seed": 1}):  # other tasks, or samples drawn otherwise
        screened.clear()
        catalog.run(plan(tmp_path, ["chain_sum"], **changed))
        assert screened == [("chain_sum", 0), ("chain_sum", 1), ("chain_sum", 2)], changed
    screened.clear()
    other = TRAINEE.replace(max_new_tokens=9)  # any field of the trainee record
    catalog.run(catalog.plan(other, ["chain_sum"], walk=True, tasks=2, out=str(tmp_path / "cat"), builders=0))
    assert screened == [("chain_sum", 0), ("chain_sum", 1), ("chain_sum", 2)]


def test_a_rerun_screens_again_under_another_model_revision(tmp_path, fake_screens, monkeypatch):
    screened = fake_screens({})
    catalog.run(plan(tmp_path, ["chain_sum"]))
    real = catalog.model_config.identity
    monkeypatch.setattr(catalog.model_config, "identity", lambda name: real(name) | {"revision": "retrained"})
    screened.clear()
    catalog.run(plan(tmp_path, ["chain_sum"]))
    assert screened == [("chain_sum", 0), ("chain_sum", 1)]  # two below the band: the walk's stop


def test_a_walk_written_before_screens_scored_again_past_their_deadline_is_screened_again(tmp_path, fake_screens):
    screened = fake_screens({})
    catalog.run(plan(tmp_path, ["chain_sum"]))
    walk = tmp_path / "cat" / "families" / "chain_sum.json"
    written = json.loads(walk.read_text())
    assert written["identity"]["score_retries"] == scoring.RETRIES
    del written["identity"]["score_retries"]  # as f9ada33's parent wrote it: its zeros may be timeouts
    walk.write_text(json.dumps(written))
    screened.clear()
    catalog.run(plan(tmp_path, ["chain_sum"]))
    assert screened == [("chain_sum", 0), ("chain_sum", 1)]


def test_the_budget_stops_new_screens_and_reports_what_it_did_not_reach(tmp_path, fake_screens, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(walk, "clock", lambda: now[0])
    screened = fake_screens({"basic_arithmetic": {0: "improves"}, "chain_sum": {0: "improves", 1: "improves"}},
                            each=lambda b: now.__setitem__(0, now[0] + 40))  # every screen takes 40 s
    names = ["basic_arithmetic", "chain_sum", "leg_counting"]
    found = catalog.run(plan(tmp_path, names, budget_min=1))  # 0 s and 40 s start; 80 s does not
    assert len(screened) == 2
    assert screened == [("basic_arithmetic", 0), ("chain_sum", 0)]
    assert {(u.family, u.level) for u in found.unreached} == {("basic_arithmetic", 1), ("chain_sum", 1),
                                                              ("leg_counting", 0)}
    body = json.loads((tmp_path / "cat" / "shortlist.json").read_text())
    assert {u["family"] for u in body["unreached"]} == {u.family for u in found.unreached}
    assert all(u["why"] == "the budget ran out" for u in body["unreached"])
    assert "not reached" in (tmp_path / "cat" / "shortlist.csv").read_text()
    screened.clear()
    rest = catalog.run(plan(tmp_path, names))  # no budget: the rest, and nothing screened twice
    assert not rest.unreached and len(screened) == len(rest.rows) - 2


def test_a_worker_that_died_leaves_its_families_not_reached_with_the_reason(tmp_path):
    from shortlist import executors
    p = plan(tmp_path, ["chain_sum", "leg_counting", "products"]).replace(model_identity={"name": "tiny", "revision": "x"})

    class TwoSlots:  # an executor whose second worker is killed (-9) and whose third is lost with its node
        name = "fake"

        def capacity(self):
            return 3

        def run(self, jobs, out, done, log):
            ends = [(0, None, {}), (-9, "killed", {"gpu": "1"}), (None, "its Ray worker was lost: node died", {})]
            for job, (rc, why, where) in zip(jobs, ends):
                done(executors.Ran(job, rc, why, where))
    exits = catalog._fan_out(p, TwoSlots(), log=lambda line: None)
    found = catalog.assemble(p, exits, 1.0)
    assert [(u.family, u.why) for u in found.unreached] == [
        ("chain_sum", "the budget ran out"),  # its worker ended well: it only ran out of time
        ("leg_counting", "its worker (worker 2, GPU 1) exited with -9"),
        ("products", "its Ray worker (worker 3) was lost: node died")]


def test_builders_build_ahead_in_their_own_process_and_a_build_past_the_budget_is_killed():
    builders = walk.Builders(1, 500, 24)
    builders.submit("sokoban", 0)  # its 24 tasks took 694 s on one core here: still running when the budget ends
    builders.submit("chain_sum", 0)
    assert builders.next(timeout=0.5) is None and builders.pending == 2
    deadline = time.monotonic() + 60
    while not builders.pids() and time.monotonic() < deadline:  # the builder says its pid as it starts
        time.sleep(0.1)
    pids = builders.pids()
    builders.close()
    assert len(pids) == 1
    while any(os.path.exists(f"/proc/{pid}") and _state(pid) != "Z" for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(os.path.exists(f"/proc/{pid}") and _state(pid) != "Z" for pid in pids)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_prompts_share_a_few_cache_lengths():
    assert [walk.tier(n, 8192) for n in (10, 64, 65, 300, 513, 5000)] == [64, 64, 128, 512, 1024, 8192]
    assert walk.tier(900, 1000) == 1000 and walk.tier(1100, 1000) == 2048  # too long: the sampler refuses it


def test_short_prompts_go_first_and_slow_builds_last():
    def built(name, chars, seconds):
        return walk.Built(name, 0, None, None, [{"question": "x" * chars}] * 2, "0" * 64, None, seconds)
    ready = [built("long", 900, 0.1), built("slow", 50, 2 * 2 * walk.SLOW_TASK_S), built("short", 60, 0.1)]
    order = []
    while ready:
        order.append(walk.first(ready).family)
        ready.remove(next(b for b in ready if b.family == order[-1]))
    assert order == ["short", "long", "slow"]


def test_a_page_that_cannot_be_rendered_leaves_the_numbers_and_says_so(tmp_path, fake_screens, monkeypatch):
    fake_screens({})

    def broken(*_):
        raise FileNotFoundError("nbconvert's 'lab' template is in none of []")
    monkeypatch.setattr(catalog.store.page, "page", broken)
    lines = []
    found = catalog.run(plan(tmp_path, ["chain_sum"], walk=False), log=lines.append)
    assert len(found.rows) == 1 and not (tmp_path / "cat" / "shortlist.html").exists()
    assert json.loads((tmp_path / "cat" / "shortlist.json").read_text())["rows"][0]["family"] == "chain_sum"
    assert lines[-1].startswith("error: shortlist.html not written (FileNotFoundError")
