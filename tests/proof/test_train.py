"""Integration: predict -> train 2 GRPO steps -> evaluate -> compare, on the offline tiny model."""
from pathlib import Path

import pytest

from shortlist.generation import compile_cache
from proof import commit, evaluate, files, records, settings as settings_, train
from shortlist.generation import sampling


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    s = settings_.make("smoke", out=str(tmp_path_factory.mktemp("proof") / "run"))
    lines = []
    commit.predict(s, log=lines.append)
    result = train.run_family(s, s.families[0], log=lines.append)
    return s, result, lines


def test_result_file_holds_everything_the_report_needs(run):
    s, result, _ = run
    stored = records.read(files.result(s.out, result.slug), commit.verified(s)[1])
    assert stored == result and isinstance(stored, records.FamilyResult)
    assert result.predictions_sha256 == commit.verified(s)[1] and result.trainee == s.profile.as_dict()
    for e in (result.before, result.after):
        assert len(e.scores) == len(e.completions) == len(e.answers) == len(e.clipped) == s.eval_n
        assert list(e.seeds) == list(commit.held_out(commit.verified(s)[0], result.family).seeds)
        assert 0 <= e.accuracy <= e.mean_score <= 1 and 0 <= e.clipped_share <= 1
    assert set(result.gain) == {"gain", "ci95", "p"}
    assert result.held == (result.improved == (result.prediction["prediction"] == "improves"))
    t = result.timings
    assert t["train_s"] > 0 and 0 < t["median_step_s"] <= t["train_s"] and t["eval_before_s"] > 0
    assert t["seconds_per_step"] == t["train_s"] / s.steps and t["resumed_at_step"] is None
    # every answer scored in this family's run: before, GRPO's group x prompts per step, after
    assert result.scoring["answers"] == 2 * s.eval_n + s.steps * s.prompts_per_step * s.group
    assert set(result.engine) == {"before", "train", "after"}


def test_reward_curve_has_a_row_per_logged_step(run):
    s, result, _ = run
    curve = result.reward_curve
    assert [row["step"] for row in curve] == list(range(1, s.steps + 1))
    for row in curve:
        assert 0 <= row["reward"] <= 1 and row["reward_std"] >= 0 and 0 <= row["frac_reward_zero_std"] <= 1
        assert row["completion_length"] > 0 and 0 <= row["clipped_ratio"] <= 1


def test_progress_is_a_short_line_per_logged_step(run):
    s, _, lines = run
    steps = [line for line in lines if line.startswith("step ")]
    assert len(steps) == s.steps and all(len(line) < 120 for line in steps)


def test_rescoring_a_stored_result_needs_no_model(run, scorer, no_model_loads):
    s, result, _ = run
    again = evaluate.rescore(scorer, s.profile, result.family, result.after)
    assert again == result.after


def test_a_finished_family_is_not_run_again(run, no_model_loads):
    s, result, _ = run
    assert train.run_family(s, s.families[0], log=lambda *_: None) == result


def test_a_rerun_resumes_from_the_evaluation_and_the_last_checkpoint(run):
    s, result, _ = run
    files.result(s.out, result.slug).unlink()  # as if the run had died after its last checkpoint
    again = train.run_family(s, s.families[0], log=lambda *_: None)
    assert again.before == result.before and again.after == result.after
    assert again.reward_curve == result.reward_curve  # restored with the checkpoint, not retrained
    assert again.timings["resumed_at_step"] == s.steps
    # the bookkeeping is the whole run's: the stored evaluation's time, the checkpoint's training time
    assert again.timings["eval_before_s"] == result.timings["eval_before_s"]
    saved = files.read_json(files.work(s.out, result.slug) / "checkpoints" / f"checkpoint-{s.steps}" / train.PROGRESS)
    assert result.timings["train_s"] >= saved["train_s"] > 0 and again.timings["train_s"] >= saved["train_s"]
    assert again.scoring["answers"] == result.scoring["answers"]


def test_a_corrupt_result_is_read_as_corrupt_and_run_again(run):
    s, result, _ = run
    path = files.result(s.out, result.slug)
    record = files.read_json(path)
    record["after"]["accuracy"] = 1.0  # hand-edited: no longer what the scores say
    files.write_json(path, record)
    found = records.read(path, result.predictions_sha256)
    assert isinstance(found, records.Corrupt) and "accuracy disagrees with the scores" in found.reason
    again = train.run_family(s, s.families[0], log=lambda *_: None)  # not taken as done: resumed, rewritten
    assert (again.before, again.after, again.gain) == (result.before, result.after, result.gain)
    assert records.read(path, result.predictions_sha256) == again


def test_grpo_config_is_the_seeds_in_fp32(tmp_path):
    s = settings_.make()
    cfg = train.grpo_config(s, str(tmp_path))
    assert (cfg.bf16, cfg.fp16, cfg.learning_rate, cfg.max_steps) == (False, False, 5e-5, 100)
    assert (cfg.per_device_train_batch_size, cfg.gradient_accumulation_steps, cfg.num_generations) == (4, 8, 8)
    assert cfg.generation_batch_size == 32 and cfg.max_completion_length == s.profile.max_new_tokens == 128
    assert cfg.chat_template_kwargs == {"enable_thinking": False}





def test_training_a_family_compiles_into_the_run_folder(synthetic, monkeypatch, no_model_loads):
    from proof import files, train
    from shortlist import sources as families
    key = "chain_sum(max_terms=2, max_digits=1)"
    s = synthetic({key: {"before": [0.0] * 4, "after": [1.0] * 4}})
    files.result(s.out, families.parse(key).slug).unlink()  # not trained yet
    used = []
    monkeypatch.setattr(compile_cache, "use", used.append)
    monkeypatch.setattr(train.commit, "tasks_verified", lambda *_: None)  # synthetic fingerprints are zeros
    with pytest.raises(AssertionError, match="a model was loaded"):
        train.run_family(s, key, log=lambda *_: None)
    assert used == [Path(s.out) / "work" / "compile"]
