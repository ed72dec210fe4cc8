"""A finished family is verified again whenever it is used: every edit of tests/proof/edits.py to a real (smoke) result is
found (with its seal left as it was, and sealed again: then all but those only the seal can see), an honest result
passes, issue 40's forgery (every answer the gold one, scored again, sealed again) is found by drawing the answers
again from the adapter, a rerun moves a failing result aside and trains the family again, and the report marks it
naming the file and exits 1."""
import shutil
from pathlib import Path

import pytest

from tests.proof import edits
from proof import adapter, commit, files, records, report, runner, seal, verify
from proof.__main__ import main
from shortlist import sources

LIGHT = shutil.ignore_patterns("checkpoints", "compile", "notebooks")  # what verification does not read


def test_the_smoke_runs_results_verify(smoke_run, scorer, regenerator):
    from proof import regenerate
    s, _, _ = smoke_run
    body, sha = commit.committed(s.out)
    for key in s.families:
        result = records.read(files.result(s.out, sources.parse(key).slug), sha)
        assert isinstance(result, records.FamilyResult)
        assert adapter.kept(files.adapter(s.out, result.slug)) and seal.check(sha, s.out, result.slug) == []
        assert sum(p.stat().st_size for p in files.adapter(s.out, result.slug).iterdir()) < 1 << 20
        assert verify.family(s.out, body, sha, result, scorer, regenerator) == verify.Verdict(
            str(files.result(s.out, result.slug)))  # nothing failed, every check ran
        with regenerate.Regenerator(sample=5) as sampled:  # five tasks: another batch shape than the evaluation's
            assert verify.family(s.out, body, sha, result, scorer, sampled).ok


@pytest.mark.parametrize("reseal", [False, True], ids=["seal left", "sealed again"])
@pytest.mark.parametrize("name", edits.ALL)
def test_every_edit_to_a_finished_result_is_detected(smoke_run, scorer, regenerator, tmp_path, name, reseal):
    if reseal and name in edits.SEALED_ONLY:
        pytest.skip(f"{name}: only the seal sees it (test_a_family_trained_again_finds_what_only_the_seal_sees)")
    s, _, _ = smoke_run
    tried = 0
    for i, key in enumerate(s.families):
        copy = tmp_path / f"run{i}"
        shutil.copytree(s.out, copy, ignore=LIGHT)
        try:
            edits.apply(copy, key, name, reseal)
        except edits.Skip:
            continue
        tried += 1
        assert edits.detected(copy, key, scorer, regenerator) is not None, f"{name} on {key} was used as sound"
    if not tried:
        pytest.skip(f"{name}: neither smoke family offers anything to edit")


def test_an_edit_made_without_running_the_family_again_breaks_its_seal(synthetic):
    """The reward curve: nothing recomputes it, every number still agrees; the seal of the family's files does not."""
    s = synthetic({"chain_sum": {"before": [0.0, 1.0] * 6, "after": [1.0] * 12}})
    body, sha = commit.committed(s.out)
    edits.apply(s.out, "chain_sum", "reward curve edited")
    result = records.read(files.result(s.out, "chain_sum"), sha)
    assert verify.family(s.out, body, sha, result, None).reasons == (
        "families/chain_sum.json changed after the family's run sealed it",)
    files.write_text(seal.path(s.out, "chain_sum"), "{")
    assert verify.family(s.out, body, sha, result, None).reasons == ("work/chain_sum/seal.json is unreadable "
                                                                      "(JSONDecodeError)",)


def test_a_result_from_a_commitment_that_recorded_no_revision_verifies_whatever_revision_it_ran_on(synthetic):
    """A commitment made before local folders were fingerprinted recorded revision None: the results a resumed
    run adds now record the folder's digest and must still verify (else each rerun trains the family again);
    a committed revision is matched exactly, and a result cannot drop its own to None to pass."""
    import dataclasses
    s = synthetic({"chain_sum": {"before": [0.0, 1.0] * 6, "after": [1.0] * 12}})
    body, sha = commit.committed(s.out)
    result = records.read(files.result(s.out, "chain_sum"), sha)
    assert body["model"]["revision"] is None
    now = dataclasses.replace(result, model=result.model | {"revision": "files:0123456789abcdef"})
    assert verify.committed(body, sha, now) == []
    pinned = body | {"model": body["model"] | {"revision": "files:fedcba9876543210"}}
    assert verify.committed(pinned, sha, now) == [
        f"its model ({{'name': 'tiny', 'revision': 'files:0123456789abcdef'}}) is not the committed one "
        f"({{'name': 'tiny', 'revision': 'files:fedcba9876543210'}})"]
    assert verify.committed(pinned, sha, dataclasses.replace(now, model=now.model | {"revision": None})) != []

def test_the_micro_batch_a_result_or_an_older_commitment_records_is_not_part_of_the_protocol(synthetic):
    """batch_per_device is speed only (proof/trl_internals.split_invariant): a result trained at another micro-batch,
    or one from before it was (its settings record batch_per_device), verifies against either commitment; a
    protocol setting that differs still fails."""
    import dataclasses
    s = synthetic({"chain_sum": {"before": [0.0, 1.0] * 6, "after": [1.0] * 12}})
    body, sha = commit.committed(s.out)
    result = records.read(files.result(s.out, "chain_sum"), sha)
    assert "batch_per_device" not in body["settings"] and "batch_per_device" not in result.settings
    older = body | {"settings": body["settings"] | {"batch_per_device": 4}}
    recorded = dataclasses.replace(result, settings=result.settings | {"batch_per_device": 16})
    for b, r in ((body, recorded), (older, result), (older, recorded)):
        assert verify.committed(b, sha, r) == []
    other = dataclasses.replace(result, settings=result.settings | {"steps": result.settings["steps"] + 1})
    assert verify.committed(older, sha, other) == ["its settings are not the committed ones"]


def test_the_report_says_which_checks_could_not_run(synthetic, monkeypatch):
    s = synthetic({"chain_sum": {"before": [0.0, 1.0] * 6, "after": [1.0] * 12}})
    monkeypatch.setattr(verify, "regenerated", lambda *args: ([], ["answers drawn again: the committed model tiny "
                                                                  "cannot be loaded here (OSError: gone)"]))
    html = report.top(report.load(s.out)).data
    assert "Checks that could not run</b> on these results: answers drawn again: the committed model tiny cannot be " \
           "loaded here (OSError: gone)." in html


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


def test_the_forgery_is_found_by_the_report_and_the_rerun_which_trains_the_family_again(smoke_run, scorer, tmp_path,
                                                                                       capsys):
    """Issue 40's forgery with the project's own functions: every completion after training rewritten to the gold
    answer, scored again in the sandbox, the baselines measured again, the summaries recomputed, the family's files
    sealed again. Every other check holds for it; the answers drawn again from the adapter do not."""
    s, _, _ = smoke_run
    key, other = s.families
    slug = sources.parse(key).slug
    done = records.read(files.result(s.out, slug))
    copy = s.replace(out=str(tmp_path / "run"))
    shutil.copytree(s.out, copy.out)
    edits.apply(copy.out, key, "the forgery: every completion the gold answer, scored again, baselines measured again",
                reseal=True)
    body, sha = commit.committed(copy.out)
    forged = records.read(files.result(copy.out, slug), sha)
    assert forged.after.accuracy == 1.0 > done.after.accuracy
    assert verify.rescored(body, forged, scorer) == [] and seal.check(sha, copy.out, slug) == []
    reasons = verify.family(copy.out, body, sha, forged, scorer).reasons
    assert len(reasons) == 1 and reasons[0].startswith("after: ") and "answers drawn again from the committed " \
        "model and the family's adapter are not the saved ones" in reasons[0]

    assert main(["report", "--out", copy.out]) == 1  # the report is written, marks the family, and exits 1
    assert capsys.readouterr().err.startswith(f"error: 1 family is corrupt (the report says so): {key} (families/")
    assert "answers drawn again" in runner.corrupt(copy.out)[key] and files.report(copy.out).exists()

    log: list[str] = []
    assert runner.run(copy, log=log.append).failed == {}
    said = [line for line in log if "failed verification" in line]
    assert len(said) == 1 and said[0].startswith(f"{key}: ") and f"families/{slug}.json" in said[0]
    assert [line for line in log if ": started" in line] == [f"02 {key}: started"]  # the other one was kept
    aside = files.result(copy.out, slug).with_name(f"{slug}.json{verify.REJECTED}")
    assert aside.exists() and "answers drawn again" in aside.with_name(aside.name + ".why").read_text()
    again = records.read(files.result(copy.out, slug))
    assert isinstance(again, records.FamilyResult) and (again.before, again.after, again.gain, again.baselines) == \
        (done.before, done.after, done.gain, done.baselines)
    assert runner.corrupt(copy.out) == {}


def test_a_family_trained_again_finds_what_only_the_seal_sees(smoke_run, tmp_path, capsys):
    """`python -m proof verify --reproduce`: the tiny model's training on a CPU is deterministic, so a family
    trained again from the commitment repeats every recorded number but the two edited and sealed again."""
    s, _, _ = smoke_run
    key = s.families[0]
    shutil.copytree(s.out, tmp_path / "run", ignore=shutil.ignore_patterns("checkpoints", "notebooks"))
    out = str(tmp_path / "run")
    for name in ("reward curve edited", "scoring timeouts one more, within range"):
        edits.apply(out, key, name, reseal=True)
    assert main(["verify", "--out", out]) == 0  # sealed again: no other check sees either
    capsys.readouterr()
    assert main(["verify", "--out", out, "--reproduce", key]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[1].strip() for line in lines] == ["reward_curve", "scoring"], lines
    assert not (files.work(out, sources.parse(key).slug) / "reproduce").exists()


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "smollm2"  # a real run (H200), held out by seed only


def test_a_real_run_verifies_and_its_edits_are_found(scorer, tmp_path):
    body, sha = commit.committed(EXAMPLE, commit.READABLE)
    key = body["families"][0]
    result = records.read(files.result(EXAMPLE, sources.parse(key).slug), sha)
    verdict = verify.family(EXAMPLE, body, sha, result, scorer)
    assert verdict.reasons == ()  # 400 answers scored again, as they were
    assert [c.split(" (")[0] for c in verdict.unchecked] == [  # committed under schema 2: published without them
        "the evaluation before training against the before.json its run kept",
        "the answers drawn again from the final adapter", "the seal of the family's files"]
    for name in ("one per-task score edited, summaries recomputed", "evaluation starts at a training seed",
                 "scoring answers 12345"):
        copy = tmp_path / name.split()[0]
        shutil.copytree(EXAMPLE, copy)
        edits.apply(copy, key, name)
        assert edits.detected(copy, key, scorer) is not None, f"{name} was used as sound"


def test_reproducing_compares_the_scorers_counts_not_the_machines_load():
    """`verify --reproduce` on a committed result (which records no `retried`): answers scored again after their
    deadline, like the seconds scoring took, say how loaded a machine was, not what the run did; a count that
    differs is still a difference."""
    from dataclasses import replace
    from proof import reproduce
    body, sha = commit.committed(EXAMPLE, commit.READABLE)
    result = records.read(files.result(EXAMPLE, sources.parse(body["families"][0]).slug), sha)
    assert "retried" not in result.scoring
    loaded = replace(result, scoring=dict(result.scoring, retried=7, seconds=result.scoring.get("seconds", 0) + 9))
    assert reproduce.differences(result, loaded) == []
    assert reproduce.differences(result, replace(result, scoring=dict(result.scoring, retried=0))) == []
    other = replace(result, scoring=dict(result.scoring, timeouts=result.scoring.get("timeouts", 0) + 1))
    assert [line.split(":")[0] for line in reproduce.differences(result, other)] == ["scoring"]


def _edit_output(notebook: Path, old: str, new: str) -> None:
    """A figure changed in an executed notebook, as a hand would: the first output that shows `old`."""
    import nbformat
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        for shown in cell.get("outputs", []):
            text = shown.get("text") or shown.get("data", {}).get("text/plain", "")
            if old in text:
                key = "text" if "text" in shown else None
                if key:
                    shown["text"] = text.replace(old, new, 1)
                else:
                    shown["data"]["text/plain"] = text.replace(old, new, 1)
                nbformat.write(nb, notebook)
                return
    raise AssertionError(f"no output of {notebook.name} shows {old!r}")


def test_the_batchs_notebooks_and_report_are_sealed_and_an_edit_of_either_is_found(smoke_run, tmp_path, capsys):
    """Seals of the executed notebooks (proof/seal.py): none of the family's result files changes, so only they
    can see an edit of what a notebook or the report shows."""
    import nbformat
    s, _, _ = smoke_run
    assert verify.record(s.out) == []
    slug = sources.parse(s.families[0]).slug
    trained = files.train_notebook(s.out, slug)
    stored = nbformat.read(trained, as_version=4).metadata["shortlist"]["seal"]
    assert stored["previous"] == files.read_json(seal.path(s.out, slug))["head"]  # chained from the family's seal

    copy = tmp_path / "run"
    shutil.copytree(s.out, copy, ignore=shutil.ignore_patterns("checkpoints", "compile"))
    shown = next(o.get("text", "") for c in nbformat.read(files.train_notebook(copy, slug), as_version=4).cells
                 for o in c.get("outputs", []) if o.get("name") == "stdout" and o.get("text", "").strip())
    _edit_output(files.train_notebook(copy, slug), shown.strip()[:20], shown.strip()[:20] + " (edited)")
    html = files.report(copy)
    html.write_text(html.read_text().replace("</body>", "<p>held on every family</p></body>", 1))
    found = verify.record(copy)
    assert found == [f"notebooks/{files.train_notebook(copy, slug).name} changed after its run sealed it",
                     "report.html is not the page 03_report.ipynb rendered"], found
    assert main(["verify", "--out", str(copy)]) == 1
    assert "record: FAILED notebooks/" in capsys.readouterr().out

    assert main(["report", "--out", str(copy)]) == 1  # a new report.html, which says the 02 notebook was edited
    err = capsys.readouterr().err
    assert err.startswith("error: the run's record was edited (the report says so): notebooks/02_train_family.")
    assert "The run&#x27;s record was edited" in files.report(copy).read_text() or \
        "The run's record was edited" in files.report(copy).read_text()
    assert verify.record(copy) == found[:1]  # 03 and the page it rendered are sealed again; the 02 edit stays


def test_reproducing_on_another_model_is_refused_naming_the_runs_own_folder(smoke_run, tmp_path, capsys):
    """A commitment whose model revision is not the model here cannot be trained again: one line that names the
    run's predictions.json (the scratch folder the retraining would use is never made)."""
    import json
    s, _, _ = smoke_run
    key = s.families[0]
    shutil.copytree(s.out, tmp_path / "run", ignore=shutil.ignore_patterns("checkpoints", "notebooks"))
    out = str(tmp_path / "run")
    body = json.loads(files.predictions(out).read_text())
    body["model"]["revision"] = "files:0123456789abcdef"  # screened on a model this machine does not hold
    data = json.dumps(body, indent=1).encode()
    files.predictions(out).write_bytes(data)
    files.predictions_hash(out).write_text(f"{commit.digest(data)}  predictions.json\n")
    assert main(["verify", "--out", out, "--reproduce", key]) != 0
    err = capsys.readouterr().err.strip()
    assert "cannot be trained again on another model" in err and str(files.predictions(out)) in err, err
    assert "\n" not in err and "reproduce" not in err.split("committed in")[1]
    assert not (files.work(out, sources.parse(key).slug) / "reproduce").exists()


def test_a_check_made_alone_scores_on_every_cpu_and_a_jobs_own_on_its_share(monkeypatch):
    """A report, a batch's check before its jobs and `proof verify` score ~4,000 answers a family with nothing else
    running: every CPU; a job's check (02 finding its family done) keeps a job's share beside the others."""
    from shortlist import process
    from shortlist.scoring import scorer
    body = {"settings": {"score_deadline_s": 1.0}}
    for cpus, expected in ((7, 7), (verify.ALONE_MOST + 30, verify.ALONE_MOST)):  # capped: see ALONE_MOST
        monkeypatch.setattr(process, "cpus", lambda: cpus)
        with verify.scorer_for(body, alone=True) as alone, verify.scorer_for(body) as job:
            for lazy in (alone, job):
                assert lazy.score("chain_sum", [1], [None]) == [0.0]
            assert (alone._scorer.workers, job._scorer.workers) == (expected, scorer.WORKERS)
