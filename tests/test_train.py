"""Integration: predict -> train 2 GRPO steps -> evaluate -> compare, on the offline tiny model."""
import pytest

from proof import commit, evaluate, files, settings as settings_, train
from shortlist import sampling


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    s = settings_.make("smoke", out=str(tmp_path_factory.mktemp("proof") / "run"))
    lines = []
    commit.predict(s, log=lines.append)
    result = train.run_family(s, s.families[0], log=lines.append)
    return s, result, lines


def test_result_file_holds_everything_the_report_needs(run):
    s, result, _ = run
    stored = files.read_json(files.result(s.out, result["slug"]))
    assert stored == result
    assert result["status"] == "done" and result["predictions_sha256"] == commit.verified(s)[1]
    for part in ("before", "after"):
        e = result[part]
        assert len(e["scores"]) == len(e["completions"]) == len(e["answers"]) == s.eval_n
        assert e["seeds"] == list(s.seed_ranges()["eval"])
        assert 0 <= e["accuracy"] <= e["mean_score"] <= 1
    assert set(result["gain"]) == {"gain", "ci95", "p"}
    assert result["held"] == (result["improved"] == (result["prediction"]["prediction"] == "improves"))
    for field in ("timings", "versions", "device", "written_at", "model", "settings", "scoring"):
        assert field in result
    assert result["timings"]["train_s"] > 0


def test_reward_curve_has_a_row_per_logged_step(run):
    s, result, _ = run
    curve = result["reward_curve"]
    assert [row["step"] for row in curve] == list(range(1, s.steps + 1))
    for row in curve:
        assert 0 <= row["reward"] <= 1 and row["reward_std"] >= 0 and 0 <= row["frac_reward_zero_std"] <= 1
        assert row["completion_length"] > 0


def test_progress_is_a_short_line_per_logged_step(run):
    s, _, lines = run
    steps = [line for line in lines if line.startswith("step ")]
    assert len(steps) == s.steps and all(len(line) < 120 for line in steps)


def test_rescoring_a_stored_result_needs_no_model(run, scorer, no_model_loads):
    _, result, _ = run
    again = evaluate.rescore(scorer, result["family"], result["after"])
    assert again["scores"] == result["after"]["scores"] and again["accuracy"] == result["after"]["accuracy"]


def test_a_finished_family_is_not_run_again(run, no_model_loads):
    s, result, _ = run
    assert train.run_family(s, s.families[0], log=lambda *_: None) == result


def test_a_rerun_resumes_from_the_evaluation_and_the_last_checkpoint(run):
    s, result, _ = run
    files.result(s.out, result["slug"]).unlink()  # as if the run had died after its last checkpoint
    again = train.run_family(s, s.families[0], log=lambda *_: None)
    assert "eval_before_s" not in again["timings"]  # the evaluation before training was kept
    assert again["before"] == result["before"]
    assert again["reward_curve"] == result["reward_curve"]  # restored with the checkpoint, not retrained
    assert again["after"]["scores"] == result["after"]["scores"]


def test_grpo_config_is_the_seeds_in_fp32():
    s = settings_.make()
    cfg = train.grpo_config(s, "/tmp/unused")
    assert (cfg.bf16, cfg.fp16, cfg.learning_rate, cfg.max_steps) == (False, False, 5e-5, 100)
    assert (cfg.per_device_train_batch_size, cfg.gradient_accumulation_steps, cfg.num_generations) == (4, 8, 8)
    assert cfg.generation_batch_size == 32 and cfg.max_completion_length == s.max_new_tokens
    assert cfg.chat_template_kwargs == {"enable_thinking": False}
