"""bench/throughput.py's reading of modes and results: what it says about equal and equivalent modes."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import throughput  # noqa: E402

from shortlist import output  # noqa: E402


@pytest.mark.parametrize("mode, flags", [("8", ["--per-gpu", "8"]), ("8mps", ["--per-gpu", "8", "--mps"]),
                                         ("8mps-again", ["--per-gpu", "8", "--mps"]), ("1-x", ["--per-gpu", "1"])])
def test_modes_read_as_proof_runs_flags(mode, flags):
    assert throughput.mode_flags(mode) == flags


@pytest.mark.parametrize("mode", ["mps", "8x", "8mps-", "-8", "eight"])
def test_a_malformed_mode_is_refused(mode):
    with pytest.raises(SystemExit, match="--modes"):
        throughput.mode_flags(mode)


def family(folder: Path, name: str, before: list[int], after: list[int]):
    record = {"status": "done", "started_at": "2026-12-06T07:00:00+00:00", "written_at": "2026-12-06T07:05:00+00:00",
              "before": {"scores": before}, "after": {"scores": after},
              "timings": {"median_step_s": 1.0, "eval_before_s": 2.0}}
    output.write_json(folder / "families" / f"{name}.json", record)


def test_equal_scores_are_equal_and_a_differing_after_is_named(tmp_path):
    ref, mode = tmp_path / "1", tmp_path / "8mps"
    before = [1, 0] * 100
    for i in range(8):
        family(ref, f"f{i}", before, [1, 1, 0, 0] * 50)
        family(mode, f"f{i}", before, [1, 1, 0, 0] * 50 if i else [1, 0, 1, 0] + [1, 1, 0, 0] * 49)  # 2 tasks swap
    got = throughput.measure(mode, throughput.results(ref), wall_s=900.0)
    assert got["families"] == 8 and got["families_per_hour"] == 96.0  # over the families' own 5 minutes
    assert got["run_families_per_hour"] == 32.0  # over the whole run's 15 (predictions and report included)
    assert got["results_equal"] is False and got["differing"] == ["f0"] and got["before_equal"] is True
    # the same mean, 2 of 200 tasks the other way round: within the margin for every family, over 8 families
    assert got["equivalence"]["equivalent"] is True
    assert got["equivalence"]["per_family"]["f0"]["difference"] == 0.0


def test_a_differing_evaluation_before_training_is_said(tmp_path):
    ref, mode = tmp_path / "1", tmp_path / "8mps"
    family(ref, "f0", [1, 0] * 100, [1] * 200)
    family(mode, "f0", [0, 1] * 100, [1] * 200)
    got = throughput.measure(mode, throughput.results(ref))
    assert got["before_equal"] is False and got["differing"] == ["f0"]
    assert throughput.measure(mode, {})["before_equal"] is False  # nothing compared: nothing said equal


def test_a_shift_beyond_the_margin_is_not_equivalent(tmp_path):
    ref, mode = tmp_path / "1", tmp_path / "8mps"
    for i in range(8):
        family(ref, f"f{i}", [0] * 200, [1] * 100 + [0] * 100)
        family(mode, f"f{i}", [0] * 200, [1] * 100 + [0] * 100 if i else [1] * 140 + [0] * 60)  # 0.70 against 0.50
    got = throughput.measure(mode, throughput.results(ref))["equivalence"]
    assert got["per_family"]["f0"]["equivalent"] is False and got["equivalent"] is False
    assert got["per_family"]["f0"]["difference_ci95"][0] > 0


def test_few_tasks_cannot_show_equivalence_however_close(tmp_path):
    # 20 tasks a family, 0.50 -> 0.65 everywhere: too few to place the difference within 0.05 (not "inside an interval")
    ref, mode = tmp_path / "1", tmp_path / "8mps"
    for i in range(8):
        family(ref, f"f{i}", [0] * 20, [1] * 10 + [0] * 10)
        family(mode, f"f{i}", [0] * 20, [1] * 13 + [0] * 7)
    assert throughput.measure(mode, throughput.results(ref))["equivalence"]["equivalent"] is False


def test_families_whose_tasks_differ_in_number_are_not_comparable(tmp_path):
    ref, mode = tmp_path / "1", tmp_path / "8mps"
    family(ref, "f0", [0] * 10, [1] * 10)
    family(mode, "f0", [0] * 10, [1] * 9)
    got = throughput.measure(mode, throughput.results(ref))["equivalence"]["per_family"]["f0"]
    assert got == {"comparable": False, "tasks": [10, 9], "equivalent": False}


def test_too_few_families_cannot_show_equivalence(tmp_path):
    ref, mode = tmp_path / "1", tmp_path / "8mps"
    for i in range(3):
        family(ref, f"f{i}", [0] * 10, [1, 0] * 5)
        family(mode, f"f{i}", [0] * 10, [1, 0] * 5)
    got = throughput.measure(mode, throughput.results(ref))
    assert got["results_equal"] is True
    assert got["equivalence"]["families"] == 3 and got["equivalence"]["equivalent"] is False


def test_warm_starts_later_modes_on_the_first_modes_compile_cache_and_its_commitment(tmp_path, monkeypatch):
    from proof import files
    seen = {}

    def fake_run(cmd, log):
        folder = Path(cmd[cmd.index("--out") + 1])
        seen[folder.name] = sorted(p.name for p in files.compile_cache(folder).glob("*"))
        if folder.name == "8mps":  # the first mode: it commits, and compiles
            (folder / "predictions.json").write_text("{}")
            files.compile_cache(folder).mkdir(parents=True)
            (files.compile_cache(folder) / "inductor").mkdir()
        else:
            assert (folder / "predictions.json").read_text() == "{}"
            if (files.compile_cache(folder) / "mine").exists():  # a later mode's own cache is never replaced
                assert not (files.compile_cache(folder) / "inductor").exists()
        return 0, 1.0, {}
    monkeypatch.setattr(throughput, "run", fake_run)
    kept = tmp_path / "kept" / "8mps-again"
    (files.compile_cache(kept) / "mine").mkdir(parents=True)
    for warm in (["--warm"], [], ["--warm", "kept"]):
        out = tmp_path / ("kept" if "kept" in warm else "warm" if warm else "cold")
        warm = warm[:1]
        monkeypatch.setattr(sys, "argv", ["throughput.py", "--model", "m", "--families", "chain_sum", "--out", str(out),
                                          "--json", str(out / "t.json"), "--modes", "8mps,8mps-again", *warm])
        assert throughput.main() == 0
        expected = ["mine"] if out.name == "kept" else ["inductor"] if warm else []
        assert seen == {"8mps": [], "8mps-again": expected}


def test_a_mode_set_reaches_its_own_mode_only_and_is_recorded(tmp_path, monkeypatch):
    commands = {}

    def fake_run(cmd, log):
        folder = Path(cmd[cmd.index("--out") + 1])
        commands[folder.name] = [cmd[i + 1] for i, x in enumerate(cmd) if x == "--set"]
        return 0, 1.0, {}
    monkeypatch.setattr(throughput, "run", fake_run)
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["throughput.py", "--model", "m", "--families", "chain_sum", "--out", str(out),
                                      "--json", str(out / "t.json"), "--modes", "8mps,8mps-b16", "--set", "steps=100",
                                      "--mode-set", "8mps-b16:batch_per_device=16"])
    assert throughput.main() == 0
    assert commands == {"8mps": ["steps=100"], "8mps-b16": ["steps=100", "batch_per_device=16"]}
    assert output.read_json(out / "t.json")["modes"]["8mps-b16"]["settings"] == ["steps=100", "batch_per_device=16"]


@pytest.mark.parametrize("given", ["8mps-b8:batch_per_device=8", "8mps-b16", "batch_per_device=16"])
def test_a_mode_set_for_no_mode_is_refused(given):
    with pytest.raises(SystemExit, match="--mode-set: .* is not MODE:NAME=VALUE for one of --modes"):
        throughput.mode_settings([given], ["8mps", "8mps-b16"])


def test_each_family_is_kept_as_a_fingerprint_that_tells_one_task_apart(tmp_path):
    family(tmp_path / "a", "f0", [1, 0] * 100, [1, 1, 0, 0] * 50)
    family(tmp_path / "b", "f0", [1, 0] * 100, [1, 0, 1, 0] + [1, 1, 0, 0] * 49)  # the same mean, 2 tasks swapped
    a, b = (throughput.measure(tmp_path / n, None)["per_family"]["f0"] for n in "ab")
    assert a["before_mean"] == b["before_mean"] == 0.5 and a["after_mean"] == b["after_mean"] == 0.5
    assert a["before_sha256"] == b["before_sha256"] and a["after_sha256"] != b["after_sha256"]
    assert a["median_step_s"] == 1.0 and a["eval_before_s"] == 2.0


def _against(tmp_path, monkeypatch, earlier: dict, after0: list, mode: str = "") -> dict:
    """A run of mode 8mps whose families f0..f2 are written as given, measured --against an earlier JSON."""
    def fake_run(cmd, log):
        folder = Path(cmd[cmd.index("--out") + 1])
        for i in range(3):
            family(folder, f"f{i}", [1, 0] * 100, after0 if i == 0 else [1] * 200)
        return 0, 1.0, {}
    monkeypatch.setattr(throughput, "run", fake_run)
    output.write_json(tmp_path / "earlier.json", earlier)
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["throughput.py", "--model", "m", "--families", "chain_sum", "--out", str(out),
                                      "--json", str(out / "t.json"), "--modes", "8mps",
                                      "--against", str(tmp_path / "earlier.json") + mode])
    assert throughput.main() == 0
    return output.read_json(out / "t.json")


def test_against_an_earlier_run_compares_task_by_task_and_names_a_family_that_moved(tmp_path, monkeypatch):
    scores = {f"f{i}": [1] * 200 for i in range(3)} | {"f0": [1, 0] * 100}
    earlier = {"modes": {"8mps": {"per_family": {k: {"before_sha256": throughput.fingerprint([1.0, 0.0] * 100),
                                                     "after_sha256": throughput.fingerprint(v), "after_scores": v}
                                                 for k, v in scores.items()}}}}
    same = _against(tmp_path / "same", monkeypatch, earlier, [1, 0] * 100)
    told = same["modes"]["8mps"]["against"]
    assert told["equal"] is True and same["equal_to_earlier"] == {"8mps": True}
    assert (told["by_scores"], told["by_means"]) == (3, 0) and "equivalence" not in told
    moved = _against(tmp_path / "moved", monkeypatch, earlier, [0, 1] * 100)  # the same mean, every task the other way
    told = moved["modes"]["8mps"]["against"]
    assert told["equal"] is False and told["differing"] == ["f0"] and moved["equal_to_earlier"] == {"8mps": False}
    assert told["equivalence"]["per_family"]["f0"]["difference"] == 0.0  # the scores kept: the same result?
    assert told["equivalence"]["equivalent"] is False  # ... not shown over 1 family of the 8 it needs


def test_against_an_older_file_with_means_only_says_it_compared_means(tmp_path, monkeypatch):
    earlier = {"modes": {"8mps-b8": {"per_family": {f"f{i}": {"before_mean": 0.5, "after_mean": 0.5 if i == 0 else 1.0}
                                                    for i in range(3)}}}}
    named = ":8mps-b8"
    got = _against(tmp_path, monkeypatch, earlier, [0, 1] * 100, named)
    told = got["modes"]["8mps"]["against"]
    assert told["equal"] is True and (told["by_scores"], told["by_means"]) == (0, 3) and told["mode"] == "8mps-b8"
    earlier["modes"]["8mps-b8"]["per_family"]["f0"]["after_mean"] = 0.505
    told = _against(tmp_path / "off", monkeypatch, earlier, [0, 1] * 100, named)["modes"]["8mps"]["against"]
    assert told["equal"] is False and told["differing"] == ["f0"] and "equivalence" not in told  # no scores to test


def test_against_a_mixed_file_compares_each_family_its_own_way(tmp_path, monkeypatch):
    """One family kept as means only must not make the others' fingerprints go unread."""
    right = {"before_sha256": throughput.fingerprint([1, 0] * 100), "after_sha256": throughput.fingerprint([1] * 200)}
    earlier = {"modes": {"8mps": {"per_family": {
        "f0": {"before_sha256": throughput.fingerprint([1, 0] * 100),
               "after_sha256": throughput.fingerprint([1, 0] * 100)},  # f0 ran [0, 1] * 100: the same mean
        "f1": {"before_mean": 0.5, "after_mean": 1.0}, "f2": right}}}}
    told = _against(tmp_path, monkeypatch, earlier, [0, 1] * 100)["modes"]["8mps"]["against"]
    assert (told["by_scores"], told["by_means"]) == (2, 1) and told["differing"] == ["f0"] and told["equal"] is False


def test_against_a_partial_run_or_another_set_of_families_is_not_equal(tmp_path, monkeypatch):
    right = {"before_sha256": throughput.fingerprint([1, 0] * 100), "after_sha256": throughput.fingerprint([1] * 200)}
    earlier = {"modes": {"8mps": {"per_family": {"f1": right, "f2": right, "gone": right}}}}
    told = _against(tmp_path, monkeypatch, earlier, [1] * 200)["modes"]["8mps"]["against"]
    assert told["differing"] == [] and told["missing"] == ["gone"] and told["new"] == ["f0"]
    assert told["equal"] is False


@pytest.mark.parametrize("earlier, named", [(None, ""), ({"modes": {"8": {"per_family": {"f0": {}}}}}, ""),
                                            ({"modes": {"8mps": {"families": 0}}}, ""),
                                            ({"modes": {"8mps": {"per_family": {"f0": {}}}}}, ":8mps-b8")])
def test_against_nothing_comparable_is_refused_before_anything_runs(tmp_path, monkeypatch, earlier, named):
    monkeypatch.setattr(throughput, "run", lambda cmd, log: pytest.fail("ran"))
    if earlier is not None:
        output.write_json(tmp_path / "earlier.json", earlier)
    monkeypatch.setattr(sys, "argv", ["throughput.py", "--model", "m", "--families", "chain_sum", "--out",
                                      str(tmp_path / "out"), "--json", str(tmp_path / "t.json"), "--modes", "8mps",
                                      "--against", str(tmp_path / "earlier.json") + named])
    with pytest.raises(SystemExit, match="--against"):
        throughput.main()
    assert not (tmp_path / "t.json").exists()


def test_a_fingerprint_is_of_the_scores_not_of_how_they_were_written():
    assert throughput.fingerprint([1, 0]) == throughput.fingerprint([1.0, 0.0]) != throughput.fingerprint([0, 1])
