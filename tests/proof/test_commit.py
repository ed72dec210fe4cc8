import json

from pathlib import Path

import pytest

from shortlist.generation import compile_cache
from proof import commit, files, settings as settings_, train
from proof.commit import CommitError
from shortlist import screening


@pytest.fixture
def committed(tmp_path):
    """Predictions for the smoke families, committed without a model (synthetic screens)."""
    s = settings_.make("smoke", out=str(tmp_path / "run"))
    screens = [screening.summarize(f, [[1.0, 0.0] * 4] * 8, 1.0, s.profile).as_dict() for f in s.families]
    built = {f: commit.family_tasks(s, f) for f in s.families}
    sha = commit.write(s, screens, {"name": "tiny", "path": "/nowhere", "revision": "x"}, {"deadline_s": 1.0},
                       {"engine": "static", "why": None, "checks": []},
                       {f: commit.fingerprints(b) for f, b in built.items()}, {f: b["heldout"] for f, b in built.items()})
    return s, sha


def test_write_then_verify(committed):
    s, sha = committed
    body, recorded = commit.verified(s)
    assert recorded == sha == commit.digest(files.predictions(s.out).read_bytes())
    assert files.predictions_hash(s.out).read_text() == f"{sha}  predictions.json\n"
    assert body["families"] == list(s.families) and body["settings"] == s.protocol()
    for field in ("written_at", "versions", "device", "model", "trainee", "seed_ranges", "scoring", "engine", "tasks",
                  "heldout", "not_judged"):
        assert field in body
    assert body["trainee"] == s.profile.as_dict()  # the trainee actually used, every field, once
    assert "max_new_tokens" not in body["settings"] and "group" not in body["settings"]
    assert set(body["tasks"][s.families[0]]) == {"predict", "train", "eval"}
    assert commit.prediction_for(body, s.families[1])["family"] == s.families[1]


def test_a_one_byte_change_is_refused_before_any_model_loads(committed, no_model_loads):
    s, _ = committed
    path = files.predictions(s.out)
    data = bytearray(path.read_bytes())
    data[data.index(b'"improves"') + 1] ^= 0x20  # "improves" -> "Improves"
    path.write_bytes(bytes(data))
    with pytest.raises(CommitError, match="does not match predictions.sha256") as e:
        train.run_family(s, s.families[0])
    assert "\n" not in str(e.value)


def test_missing_hash_or_predictions_are_refused(committed, no_model_loads):
    s, _ = committed
    files.predictions_hash(s.out).unlink()
    with pytest.raises(CommitError, match="no committed predictions"):
        train.run_family(s, s.families[0])


def test_in_a_notebook_the_refusal_names_the_parameters_cells_line_not_a_flag(committed, no_model_loads,
                                                                               monkeypatch):
    from proof import settings as settings_
    s, _ = committed
    monkeypatch.setattr(settings_, "_IN_NOTEBOOK", False)  # restored after the test: a kernel's state
    settings_.from_namespace({"out": s.out})  # what a notebook's first cell does
    with pytest.raises(CommitError) as e:
        train.run_family(s.replace(steps=5), s.families[0])
    assert "restore it (steps = 4 in the parameters cell), or give a new out to commit" in str(e.value)
    assert "--" not in str(e.value)
    with pytest.raises(CommitError, match=r"restore it \(model = 'tiny' in the parameters cell\)"):
        train.run_family(s.replace(model="Qwen/Qwen3-0.6B"), s.families[0])


@pytest.mark.parametrize("change, fragment", [
    ({"steps": 5}, "steps=5 differs from the committed steps=4: restore it (--set steps=4), or give a new --out"),
    ({"model": "Qwen/Qwen3-0.6B"}, "trainee model='Qwen/Qwen3-0.6B' differs from the committed model='tiny': "
                                   "restore it (--model tiny), or give a new --out"),
    ({"trainee": "qwen3(max_new_tokens=17)"}, "trainee max_new_tokens=17 differs from the committed max_new_tokens=16: "
                                              "restore it (the trainee's max_new_tokens=16), or give a new --out"),
    ({"trainee": "smollm2", "model": "tiny"}, "trainee profile='smollm2' differs from the committed profile='qwen3': "
                                              "restore it (the trainee's profile='qwen3')"),
    ({"eval_n": 30}, "eval_n=30 differs"),
])
def test_training_under_other_settings_is_refused_naming_the_way_out(committed, no_model_loads, change, fragment):
    s, _ = committed
    with pytest.raises(CommitError) as e:
        train.run_family(s.replace(**change), s.families[0])
    message = str(e.value)
    assert fragment in message and "\n" not in message, message
    assert message.endswith(f"({files.predictions(s.out)} holds these)")


def test_another_micro_batch_trains_on_the_commitment_an_older_one_recorded_too(committed):
    """The out-of-memory advice (shortlist/models/memory.py: "set batch_per_device=2") can be followed on an
    existing commitment: the micro-batch is speed only, also where an older commitment recorded it."""
    s, _ = committed
    assert "batch_per_device" not in s.protocol() and "batch_per_device" in settings_.SPEED_ONLY
    commit.verified(s.replace(batch_per_device=2))
    path = files.predictions(s.out)
    body = json.loads(path.read_text())
    body["settings"]["batch_per_device"] = 4  # as commitments made before it was speed only hold it
    path.write_text(json.dumps(body))
    files.predictions_hash(s.out).write_text(f"{commit.digest(path.read_bytes())}  predictions.json\n")
    assert commit.verified(s.replace(batch_per_device=16))[0]["settings"]["batch_per_device"] == 4
    with pytest.raises(CommitError, match="steps=5 differs from the committed steps=4"):
        commit.verified(s.replace(batch_per_device=16, steps=5))


def test_a_family_without_a_prediction_is_refused(committed, no_model_loads):
    s, _ = committed
    with pytest.raises(CommitError, match="has no committed prediction"):
        train.run_family(s, "chain_sum")


def test_a_profile_changed_after_committing_is_refused(committed, no_model_loads, monkeypatch):
    from shortlist import trainee
    s, _ = committed
    monkeypatch.setitem(trainee.PROFILES, "qwen3", trainee.QWEN3.replace(pass_min=0.01))  # an edited package
    with pytest.raises(CommitError, match="trainee pass_min=0.01 differs from the committed pass_min=0.05"):
        commit.verified(s.replace())  # the same spelling, resolved again


def test_tasks_that_differ_from_the_committed_ones_are_refused_before_any_model_loads(committed, no_model_loads,
                                                                                       monkeypatch):
    from shortlist.sources import Family
    s, _ = committed
    real = Family.tasks

    def other(self, seeds, keyed=False):  # as another reasoning-gym, or another hash seed, would build them
        return [t | {"answer": "?"} if t["seed"] == seeds[0] else t for t in real(self, seeds, keyed)]
    monkeypatch.setattr(Family, "tasks", other)
    with pytest.raises(CommitError, match=r"the train tasks built here differ from the committed ones") as e:
        train.run_family(s, s.families[0])
    assert "\n" not in str(e.value)


def test_tasks_whose_keys_differ_from_the_committed_reservations_are_refused_before_any_model_loads(
        committed, no_model_loads, monkeypatch):
    from shortlist.sources import Family
    s, _ = committed
    body, _ = commit.verified(s)
    assert commit.held_out(body, s.families[0]).reservation.meaning == "chain_sum/1"
    real = Family.tasks

    def other(self, seeds, keyed=False):  # a key function that reads the same tasks otherwise here (its fingerprints hold)
        return [t | {"meaning": t["meaning"] + "?"} if "meaning" in t else t for t in real(self, seeds, keyed)]
    monkeypatch.setattr(Family, "tasks", other)
    with pytest.raises(CommitError, match=r"chain_sum.*: its tasks do not keep the committed reservation \(\d+ of its "
                                          r"eval tasks .* not reserved by chain_sum/1.*\): commit anew") as e:
        train.run_family(s, s.families[0])
    assert "\n" not in str(e.value)


def test_a_commitment_of_schema_4_is_read_by_its_texts_and_not_trained_again(tmp_path, no_model_loads):
    """Schema 4 reserved every question by its text and recorded no key: this version reads it so, never
    reserving it again by meaning; it trains schema 5 only (its results keep an adapter and are sealed, which a
    schema-4 commitment's results cannot be checked for), refused in one line before any model loads."""
    from proof import heldout
    s = settings_.make("smoke", out=str(tmp_path / "run"))
    screens = [screening.summarize(f, [[1.0, 0.0] * 4] * 8, 1.0, s.profile).as_dict() for f in s.families]
    drawn = {f: heldout.draw(f, s, meaning=False) for f in s.families}
    commit.write(s, screens, {"name": "tiny", "path": "/nowhere", "revision": "x"}, {"deadline_s": 1.0},
                 {"engine": "static", "why": None, "checks": []},
                 {f: commit.fingerprints(b) for f, (_, b) in drawn.items()}, {f: h for f, (h, _) in drawn.items()})
    body = json.loads(files.predictions(s.out).read_text())
    body["schema"] = 4
    for record in body["heldout"].values():
        del record["reservation"]["meaning"]  # what schema 4 wrote
    data = (json.dumps(body, indent=1) + "\n").encode()
    files.predictions(s.out).write_bytes(data)
    files.predictions_hash(s.out).write_text(f"{commit.digest(data)}  predictions.json\n")
    held = commit.held_out(commit.committed(s.out, commit.READABLE)[0], s.families[0])
    assert held.reservation.meaning == "question" and held == drawn[s.families[0]][0]
    with pytest.raises(commit.CommitError, match="has schema 4, this version reads 5"):
        train.run_family(s, s.families[0])


def test_predict_keeps_committed_predictions_and_never_overwrites_others(committed, no_model_loads):
    s, sha = committed
    _, kept = commit.predict(s, log=lambda *_: None)
    assert kept == sha
    with pytest.raises(CommitError, match="other families"):
        commit.predict(s.replace(families=("chain_sum",)), log=lambda *_: None)
    with pytest.raises(CommitError, match=r"already holds other predictions: steps=5 differs .* or give a new --out"):
        commit.predict(s.replace(steps=s.steps + 1), log=lambda *_: None)
    assert commit.verified(s)[1] == sha


def test_predictions_json_is_plain_json(committed):
    s, _ = committed
    assert json.loads(files.predictions(s.out).read_text())["schema"] == commit.SCHEMA



def test_predicting_compiles_into_the_run_folder(tmp_path, monkeypatch, no_model_loads):
    from proof import commit, settings
    s = settings.make("smoke", out=str(tmp_path / "run"))
    used = []
    monkeypatch.setattr(compile_cache, "use", used.append)
    with pytest.raises(AssertionError, match="a model was loaded"):
        commit.predict(s, log=lambda *_: None)
    assert used == [Path(s.out) / "work" / "compile"]


def test_the_evaluation_tasks_are_committed_reserved_and_every_family_says_whether_it_can_be_judged(committed):
    from proof import heldout
    from shortlist import sources
    s, _ = committed
    body, _ = commit.verified(s)
    for key in s.families:
        held = commit.held_out(body, key)
        family = sources.parse(key)
        assert held.reservation is not None and len(held.train) == s.steps * s.prompts_per_step
        seen = {heldout.normalized(t["question"]) for t in family.tasks(list(held.train) + list(held.predict))}
        evaluated = family.tasks(held.seeds)
        assert held.n == s.eval_n and not seen & {heldout.normalized(t["question"]) for t in evaluated}
        assert sources.fingerprint(evaluated) == held.sha256 == body["tasks"][key]["eval"]
        assert body["heldout"][key]["distinct"] == held.distinct and body["not_judged"][key] == []


def test_a_family_is_trained_only_as_it_was_screened(tmp_path):
    """The default trainee leaves its prompt and extraction to the source: a source whose convention changed
    after the commit would train and evaluate the family otherwise than it was screened."""
    s = settings_.make("smoke", out=str(tmp_path / "run"))
    asked = [s.profile.for_source("reasoning_gym")] * len(s.families)
    asked[0] = asked[0].replace(extraction="last_number")  # as screened before the source's convention changed
    screens = [screening.summarize(f, [[1.0, 0.0] * 4] * 8, 1.0, s.profile).as_dict() |
               {"system_prompt": t.system_prompt, "extraction": t.extraction} for f, t in zip(s.families, asked)]
    built = {f: commit.family_tasks(s, f) for f in s.families}
    commit.write(s, screens, {"name": "tiny", "path": "/nowhere", "revision": "x"}, {"deadline_s": 1.0},
                 {"engine": "static", "why": None, "checks": []},
                 {f: commit.fingerprints(b) for f, b in built.items()}, {f: b["heldout"] for f, b in built.items()})
    assert commit.verified(s, s.families[1])  # asked and read as it was screened
    with pytest.raises(CommitError) as e:
        commit.verified(s, s.families[0])
    assert "the trainee now asks with extraction='answer_tags' but the family was screened with 'last_number'" \
        in str(e.value) and "\n" not in str(e.value)


def _commit_smoke(s, extraction: str):
    """Commit made-up screens of the smoke families under s, each screen recording the given extraction."""
    asked = s.profile.for_source("reasoning_gym")
    screens = [screening.summarize(f, [[1.0, 0.0] * 4] * 8, 1.0, s.profile).as_dict() |
               {"system_prompt": asked.system_prompt, "extraction": extraction} for f in s.families]
    built = {f: commit.family_tasks(s, f) for f in s.families}
    commit.write(s, screens, {"name": "tiny", "path": "/nowhere", "revision": "x"}, {"deadline_s": 1.0},
                 {"engine": "static", "why": None, "checks": []},
                 {f: commit.fingerprints(b) for f, b in built.items()}, {f: b["heldout"] for f, b in built.items()})


def test_a_run_committed_before_trainees_left_their_convention_to_the_source_still_resumes(tmp_path):
    s = settings_.make("smoke", out=str(tmp_path / "run"))
    assert s.profile.extraction is None  # the default trainee leaves it to the source
    explicit = s.profile.for_source("reasoning_gym").as_dict()  # what such a run recorded: the same asking
    body = {"trainee": explicit, "families": list(s.families)}
    assert all(commit._left_to_the_same(s, body, n) for n in ("system_prompt", "extraction"))
    other = dict(explicit, extraction="last_number")  # set outright to another reading: not the same
    assert not commit._left_to_the_same(s, {"trainee": other, "families": list(s.families)}, "extraction")


def test_a_finished_run_is_read_again_as_its_screen_recorded_not_as_the_source_reads_now(tmp_path):
    s = settings_.make("smoke", out=str(tmp_path / "run"))
    _commit_smoke(s, extraction="last_number")  # screened while the source read the last number
    body, _ = commit.committed(s.out)
    family = s.families[0]
    assert commit.asked(body, family).extraction == "last_number"
    assert commit.asked(body, family).system_prompt == s.profile.for_source("reasoning_gym").system_prompt


def test_a_reason_not_to_judge_prints_its_shares_at_the_precision_they_carry():
    from proof import commit
    why = commit.not_judged({"verdict": "guessable", "ceiling": 1.0, "guess": 22 / 24, "guess_answer": "'0'"}, None)
    assert why == ["guessable (ceiling 1.00, guess rate 0.92 by '0')"]


def test_a_model_whose_files_changed_since_the_commitment_is_refused_before_it_loads(tmp_path, no_model_loads):
    """A local folder's revision is its files' digest (models.config.identity, recorded by sampling.load): training
    the same name after its weights changed would train another model than the one screened, and reuse the stored
    evaluation before training of the first."""
    import shutil
    from shortlist.models import config as models, tiny
    folder = tmp_path / "model"
    shutil.copytree(tiny.ensure(), folder)
    s = settings_.make("smoke", model=str(folder), cpu=True, out=str(tmp_path / "run"))
    screens = [screening.summarize(f, [[1.0, 0.0] * 4] * 8, 1.0, s.profile).as_dict() for f in s.families]
    built = {f: commit.family_tasks(s, f) for f in s.families}
    here = models.identity(str(folder))
    assert here["revision"].startswith("files:") and here["revision"] != models.identity(tiny.NAME)["revision"]
    commit.write(s, screens, here | {"path": str(folder)}, {"deadline_s": 1.0}, {"engine": "static", "why": None,
                 "checks": []}, {f: commit.fingerprints(b) for f, b in built.items()},
                 {f: b["heldout"] for f, b in built.items()})
    body, _ = commit.verified(s)
    train.check(s, s.families[0])  # the same files: no refusal (and no model loaded)
    weights = next(p for p in folder.iterdir() if p.suffix == ".safetensors")
    weights.write_bytes(weights.read_bytes()[:-1] + bytes([weights.read_bytes()[-1] ^ 1]))  # one bit of the weights
    with pytest.raises(CommitError, match=rf"the model {folder} is revision files:\w+ here, not the committed "
                                          rf"{here['revision']}: restore the committed files, or give a new --out") as e:
        train.run_family(s, s.families[0])
    assert "\n" not in str(e.value)
    commit.same_model(s, body | {"model": here | {"revision": None}}, models.identity(str(folder)))  # none recorded
    with pytest.raises(CommitError, match=r"not the committed a{40}: give a new --out to commit new predictions"):
        commit.same_model(s, body | {"model": {"name": "Qwen/Qwen3-0.6B", "revision": "a" * 40}},
                          {"name": "Qwen/Qwen3-0.6B", "revision": "b" * 40})  # a hub's copy cannot be restored here
    from proof import runner
    with pytest.raises(CommitError, match=r"not the committed .*, or give a new --out to commit"):
        runner.run(s, log=lambda line: None)  # the batch says it once, before any family's notebook starts
    assert not list(files.notebooks(s.out).glob("02*")) and not list(Path(s.out).glob("families/*.json"))


def test_a_loaded_local_folders_revision_is_the_one_training_checks(tmp_path):
    """sampling.load records what predictions.json commits: a local folder's files digest (it recorded None)."""
    import shutil
    from shortlist.generation import sampling
    from shortlist.models import config as models, tiny
    folder = tmp_path / "model"
    shutil.copytree(tiny.ensure(), folder)
    assert sampling.load(str(folder)).source["revision"] == models.identity(str(folder))["revision"] != None  # noqa: E711
