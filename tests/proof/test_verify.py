"""A finished family is verified again whenever it is used: every edit of bench/edits.py to a real (smoke) result is
found, an honest result passes, a rerun moves a failing result aside and trains the family again, and the report
marks it naming the file."""
import shutil
from pathlib import Path

import pytest

from bench import edits
from proof import commit, files, records, report, runner, verify
from shortlist import sources

LIGHT = shutil.ignore_patterns("checkpoints", "compile", "notebooks")  # what verification does not read


def test_the_smoke_runs_results_verify(smoke_run, scorer):
    s, _, _ = smoke_run
    body, sha = commit.committed(s.out)
    for key in s.families:
        result = records.read(files.result(s.out, sources.parse(key).slug), sha)
        assert isinstance(result, records.FamilyResult)
        assert verify.family(s.out, body, sha, result, scorer).reasons == ()


@pytest.mark.parametrize("name", edits.ALL)
def test_every_edit_to_a_finished_result_is_detected(smoke_run, scorer, tmp_path, name):
    s, _, _ = smoke_run
    tried = 0
    for i, key in enumerate(s.families):
        copy = tmp_path / f"run{i}"
        shutil.copytree(s.out, copy, ignore=LIGHT)
        try:
            edits.apply(copy, key, name)
        except edits.Skip:
            continue
        tried += 1
        assert edits.detected(copy, key, scorer) is not None, f"{name} on {key} was used as sound"
    if not tried:
        pytest.skip(f"{name}: neither smoke family offers anything to edit")


@pytest.mark.parametrize("schema", [2, 3])
def test_the_schema_a_result_must_meet_is_its_commitments_not_its_own(synthetic, schema):
    """A result marked as an older schema, its before.json deleted, was read as an old result (checked without
    its before.json); the commitment says which schema its results are."""
    s = synthetic({"chain_sum": {"before": [0.0, 1.0] * 6, "after": [1.0] * 12}})
    body, sha = commit.committed(s.out)
    assert verify.family(s.out, body, sha, records.read(files.result(s.out, "chain_sum"), sha), None).ok
    edits.apply(s.out, "chain_sum", f"marked schema {schema}, before.json removed")
    reasons = verify.family(s.out, body, sha, records.read(files.result(s.out, "chain_sum"), sha), None).reasons
    assert f"it says schema {schema}, but its predictions were committed under schema {commit.SCHEMA}" in reasons
    assert any("before.json made against these predictions" in why for why in reasons)


def test_the_reasons_name_the_file_and_what_differs(smoke_run, scorer, tmp_path):
    s, _, _ = smoke_run
    key = s.families[0]
    shutil.copytree(s.out, tmp_path / "run", ignore=LIGHT)
    edits.apply(tmp_path / "run", key, "evaluation starts at a training seed")
    body, sha = commit.committed(tmp_path / "run")
    result = records.read(files.result(tmp_path / "run", sources.parse(key).slug), sha)
    line = verify.family(tmp_path / "run", body, sha, result, scorer).line(tmp_path / "run")
    assert line.startswith(f"families/{sources.parse(key).slug}.json: ")
    assert "not the committed ones in order" in line and "uses a training seed" in line


def test_a_rejected_family_is_marked_in_the_report_and_trained_again_on_rerun(smoke_run, tmp_path):
    s, _, _ = smoke_run
    key, other = s.families
    slug = sources.parse(key).slug
    done = records.read(files.result(s.out, slug))
    copy = s.replace(out=str(tmp_path / "run"))
    shutil.copytree(s.out, copy.out)
    edits.apply(copy.out, key, "one per-task score edited, summaries recomputed")

    status = report.status(report.load(copy.out), key)
    assert status.startswith(f"corrupt result: families/{slug}.json: after: 1 of ") and "differ when" in status

    log: list[str] = []
    assert runner.run(copy, log=log.append).failed == {}
    said = [line for line in log if "failed verification" in line]
    assert len(said) == 1 and said[0].startswith(f"{key}: ") and f"families/{slug}.json" in said[0]
    assert [line for line in log if ": started" in line] == [f"02 {key}: started"]  # the other one was kept
    aside = files.result(copy.out, slug).with_name(f"{slug}.json{verify.REJECTED}")
    assert aside.exists() and "differ when the answers are scored again" in \
        aside.with_name(aside.name + ".why").read_text()
    again = records.read(files.result(copy.out, slug))
    assert isinstance(again, records.FamilyResult) and (again.before, again.after, again.gain) == \
        (done.before, done.after, done.gain)


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "smollm2"  # a real run (H200), held out by seed only


def test_a_real_run_verifies_and_its_edits_are_found(scorer, tmp_path):
    body, sha = commit.committed(EXAMPLE, commit.READABLE)
    key = body["families"][0]
    result = records.read(files.result(EXAMPLE, sources.parse(key).slug), sha)
    assert verify.family(EXAMPLE, body, sha, result, scorer).reasons == ()  # 400 answers scored again, as they were
    for name in ("one per-task score edited, summaries recomputed", "evaluation starts at a training seed",
                 "scoring answers 12345"):
        copy = tmp_path / name.split()[0]
        shutil.copytree(EXAMPLE, copy)
        edits.apply(copy, key, name)
        assert edits.detected(copy, key, scorer) is not None, f"{name} was used as sound"
