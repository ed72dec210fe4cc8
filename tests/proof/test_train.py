"""Integration: predict -> train 2 GRPO steps -> evaluate -> compare, on the offline tiny model."""
import shutil
import subprocess
from pathlib import Path

import pytest

from shortlist import output, sources
from shortlist.generation import compile_cache
from proof import adapter, checkpoint, commit, evaluate, files, records, seal, settings as settings_, train
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
    # where each step went: every step timed, generation and scoring inside it, the rest what is left
    parts = t["step_parts"]
    assert parts["steps"] == s.steps and parts["generation_timed"] is True
    for split in (parts["first"], parts["median"]):
        assert split["generation_s"] > 0 and split["scoring_s"] > 0 and split["rest_s"] >= 0
        assert split["generation_s"] + split["scoring_s"] <= split["step_s"] + 0.002  # rounded to the ms
    # every answer scored in this family's run: before, GRPO's group x prompts per step, after
    assert result.scoring["answers"] == 2 * s.eval_n + s.steps * s.prompts_per_step * s.group
    assert set(result.engine) == {"before", "train", "after"}
    # the final adapter is kept, and the run's files sealed, the chain starting at the commitment
    assert sorted(p.name for p in files.adapter(s.out, result.slug).iterdir()) == list(adapter.FILES)
    sealed = files.read_json(seal.path(s.out, result.slug))
    assert [x["file"] for x in sealed["links"]] == [f"work/{result.slug}/before.json", *(
        f"work/{result.slug}/adapter/{name}" for name in adapter.FILES), f"families/{result.slug}.json"]
    assert seal.chain(result.predictions_sha256, s.out, result.slug) == sealed


def test_reward_curve_has_a_row_per_logged_step(run):
    s, result, _ = run
    curve = result.reward_curve
    assert [row["step"] for row in curve] == list(range(1, s.steps + 1))
    for row in curve:
        assert 0 <= row["reward"] <= 1 and row["reward_std"] >= 0 and 0 <= row["frac_reward_zero_std"] <= 1
        assert row["completion_length"] > 0 and 0 <= row["clipped_ratio"] <= 1


def test_progress_is_a_short_line_per_logged_step(run):
    s, _, lines = run
    key = s.families[0]
    steps = [line.removeprefix(key) for line in lines if line.startswith(f"{key} step ")]
    assert len(steps) == s.steps and all(len(line) < 100 for line in steps), steps


def test_rescoring_a_stored_result_needs_no_model(run, scorer, no_model_loads):
    s, result, _ = run
    again = evaluate.rescore(scorer, s.profile, result.family, result.after)
    assert again == result.after


def test_a_finished_family_is_not_run_again(run, monkeypatch):
    """Nothing is trained: the model loads only to draw its answers again from its adapter (proof/verify.py)."""
    s, result, _ = run
    monkeypatch.setattr(train, "train", lambda *args, **kwargs: pytest.fail("a finished family was trained again"))
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
    saved = files.read_json(files.work(s.out, result.slug) / "checkpoints" / f"checkpoint-{s.steps}" / checkpoint.PROGRESS)
    assert result.timings["train_s"] >= saved["train_s"] > 0 and again.timings["train_s"] >= saved["train_s"]
    assert again.scoring["answers"] == result.scoring["answers"]
    # a rerun at another micro-batch that resumes at the last step trains nothing: it records none of its own
    files.result(s.out, result.slug).unlink()
    other = train.run_family(s.replace(batch_per_device=2 * s.micro_batch), s.families[0], log=lambda *_: None)
    assert other.timings["resumed_at_step"] == s.steps and result.timings["batch_per_device"] == [s.micro_batch]
    assert other.timings["batch_per_device"] == result.timings["batch_per_device"]


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


# --- checkpoints that cannot poison a rerun -------------------------------------------------------
def same_outcome(a: records.FamilyResult, b: records.FamilyResult) -> None:
    """Two runs of one family gave the same results and the same counts (timings aside)."""
    assert (a.before, a.after, a.gain, a.improved, a.held) == (b.before, b.after, b.gain, b.improved, b.held)
    untimed = lambda curve: [{k: v for k, v in row.items() if k != "step_time"} for row in curve]  # noqa: E731
    assert untimed(a.reward_curve) == untimed(b.reward_curve)
    assert {k: v for k, v in a.scoring.items() if k != "seconds"} == {k: v for k, v in b.scoring.items() if k != "seconds"}


def fresh_folder(run, out: Path) -> settings_.Settings:
    """The fixture run's predictions and stored evaluation in a new folder: its family to train again."""
    s, result, _ = run
    for name in ("predictions.json", "predictions.sha256", f"work/{result.slug}/before.json"):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(Path(s.out) / name, out / name)
    return s.replace(out=str(out))


def test_another_micro_batch_trains_the_same_family_on_the_same_commitment(run, tmp_path):
    """batch_per_device is speed only: at 16 instead of 8 (2 accumulation steps instead of 4) the same commitment
    trains, the samples and rewards are the same step by step, the evaluation after training the same task by task,
    and the result records the micro-batch it trained at."""
    s = fresh_folder(run, tmp_path / "run").replace(batch_per_device=16)
    again = train.run_family(s, s.families[0], log=lambda *_: None)
    reference = run[1]
    assert again.timings["batch_per_device"] == [16] and reference.timings["batch_per_device"] == [8]
    assert (again.before, again.after, again.improved, again.held) == (reference.before, reference.after,
                                                                       reference.improved, reference.held)
    rewards = lambda result: [(r["step"], r["reward"], r["reward_std"]) for r in result.reward_curve]  # noqa: E731
    assert rewards(again) == rewards(reference)
    assert [r["loss"] for r in again.reward_curve] == pytest.approx([r["loss"] for r in reference.reward_curve],
                                                                     rel=1e-4, abs=1e-6)
    # the trained weights: 1.3e-6 apart at 16 against 4; a loss normalised per micro-batch (bnpo) left them 9e-3 apart
    # with the same rewards and answers, so the weights are what shows the split did not change the gradient
    from safetensors.torch import load_file
    ours, theirs = (load_file(files.adapter(out, again.slug) / "adapter_model.safetensors") for out in (s.out, run[0].out))
    assert ours.keys() == theirs.keys() and max((ours[k] - theirs[k]).abs().max().item() for k in ours) < 1e-4
    # verify --reproduce trains it again at the micro-batch the result records (entropy is a per-micro-batch mean)
    from proof import reproduce
    assert reproduce.reproduce(s.out, s.families[0], log=lambda *_: None) == []


class Killed(BaseException):
    """What SIGKILL does to a run, raised where a test chooses: nothing after it runs."""


@pytest.fixture(scope="module")
def stopped(run, tmp_path_factory):
    """The fixture run's family trained again in a fresh folder and killed inside the save of its last
    checkpoint: the checkpoint before it is whole, the last one still in the staging folder."""
    s = fresh_folder(run, tmp_path_factory.mktemp("stopped") / "run")
    last = f"checkpoint-{s.steps}"

    def killed_at_last(staged, checkpoints):
        if staged.name == last:
            raise Killed()
        return publish(staged, checkpoints)
    publish = checkpoint.publish
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checkpoint, "publish", killed_at_last)
        with pytest.raises(Killed):
            train.run_family(s, s.families[0], log=lambda *_: None)
    return s


def copy_of(s: settings_.Settings, out: Path, skip=()) -> settings_.Settings:
    shutil.copytree(s.out, out, ignore=shutil.ignore_patterns(*skip))
    return s.replace(out=str(out))


def checkpoints(s: settings_.Settings) -> Path:
    return files.work(s.out, sources.parse(s.families[0]).slug) / "checkpoints"


def test_a_kill_inside_a_save_leaves_the_last_whole_checkpoint(stopped):
    folder = checkpoints(stopped)
    assert [step for step, _ in checkpoint.checkpoints_in(folder)] == [stopped.steps - 1]
    assert checkpoint.complete(folder / f"checkpoint-{stopped.steps - 1}", stopped.steps - 1) is None
    assert (folder / checkpoint.STAGING / f"checkpoint-{stopped.steps}").is_dir()  # never renamed into place
    assert not files.result(stopped.out, sources.parse(stopped.families[0]).slug).exists()


def test_empty_and_half_written_checkpoints_are_removed_and_the_rerun_matches_an_uninterrupted_run(
        run, stopped, tmp_path):
    s = copy_of(stopped, tmp_path / "run")
    folder, steps = checkpoints(s), s.steps
    staged = folder / checkpoint.STAGING / f"checkpoint-{steps}"
    # what the save window left before checkpoints were staged: one without the bookkeeping (a kill between
    # the Trainer's save and on_save), one without the Trainer's state (a full disk), one empty (a kill at once)
    shutil.copytree(staged, folder / f"checkpoint-{steps}")
    (folder / f"checkpoint-{steps}" / checkpoint.PROGRESS).unlink()
    shutil.copytree(staged, folder / f"checkpoint-{steps + 1}")
    (folder / f"checkpoint-{steps + 1}" / "trainer_state.json").unlink()
    (folder / f"checkpoint-{steps + 2}").mkdir()
    lines = []
    again = train.run_family(s, s.families[0], log=lines.append)
    removed = [line for line in lines if line.startswith("removing checkpoint-")]
    assert [line.split(",")[0] for line in removed] == [f"removing checkpoint-{steps + 2}",
                                                        f"removing checkpoint-{steps + 1}", f"removing checkpoint-{steps}"]
    assert "no shortlist.json" in removed[2] and "no trainer_state.json" in removed[1]
    assert again.timings["resumed_at_step"] == steps - 1
    same_outcome(again, run[1])
    assert [p.name for p in folder.iterdir()] == [f"checkpoint-{steps}"]  # the staging folder went too
    assert checkpoint.complete(folder / f"checkpoint-{steps}", steps) is None


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of 16 MiB (root only: CI runs as root), unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip() or mounted.returncode}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """A file that leaves `leave` bytes free on the disk."""
    filler = disk / "filler"
    with open(filler, "wb") as f:
        for _ in range(max(0, shutil.disk_usage(disk).free - leave) >> 16):
            f.write(bytes(1 << 16))
    return filler


def test_a_full_disk_is_one_line_and_the_rerun_finishes_once_space_is_back(run, stopped, small_disk):
    s = copy_of(stopped, small_disk / "run", skip=(checkpoint.STAGING,))
    folder, steps = checkpoints(s), s.steps
    filler = fill(small_disk, 64 << 10)  # the last checkpoint (~600 KB on the tiny model) cannot be written
    with pytest.raises(output.DiskFull) as e:
        train.run_family(s, s.families[0], log=lambda *_: None)
    assert "\n" not in str(e.value) and str(e.value).startswith("disk full: cannot write a checkpoint")
    assert f"resumes from checkpoint-{steps - 1}" in str(e.value)
    # nothing a rerun would trust: the half-written checkpoint is gone, the whole one before it stays
    assert [p.name for p in folder.iterdir()] == [f"checkpoint-{steps - 1}"]
    assert checkpoint.complete(folder / f"checkpoint-{steps - 1}", steps - 1) is None
    assert not files.result(s.out, run[1].slug).exists()
    filler.unlink()
    again = train.run_family(s, s.families[0], log=lambda *_: None)
    assert again.timings["resumed_at_step"] == steps - 1
    same_outcome(again, run[1])


def damage(kind: str, path: Path) -> None:
    if kind == "empty":
        shutil.rmtree(path)
        path.mkdir()
    elif kind.startswith("no "):
        (path / kind[3:]).unlink()
    elif kind == "unreadable trainer_state.json":
        (path / "trainer_state.json").write_text('{"global_step": ')
    elif kind == "bookkeeping of another step":
        files.write_json(path / checkpoint.PROGRESS, files.read_json(path / checkpoint.PROGRESS) | {"step": 1})
    else:  # "<file> cut short"
        name = kind.split()[0]
        (path / name).write_bytes((path / name).read_bytes()[: (path / name).stat().st_size // 2])


@pytest.mark.parametrize("kind, why", [
    ("empty", "no trainer_state.json"), ("no trainer_state.json", "no trainer_state.json"),
    ("no shortlist.json", "no shortlist.json"), ("no adapter_model.safetensors", "no adapter_model.safetensors"),
    ("no optimizer.pt", "no optimizer.pt"), ("unreadable trainer_state.json", "unreadable"),
    ("bookkeeping of another step", "not the bookkeeping at step"),
    ("adapter_model.safetensors cut short", "cut short"), ("optimizer.pt cut short", "unreadable"),
])
def test_a_checkpoint_that_is_not_whole_is_not_resumed_from(run, tmp_path, kind, why):
    s, result, _ = run
    whole = files.work(s.out, result.slug) / "checkpoints" / f"checkpoint-{s.steps}"
    folder = tmp_path / "checkpoints"
    older = folder / f"checkpoint-{s.steps - 1}"  # an older whole one (made up from the last): what a rerun takes
    shutil.copytree(whole, older)
    for name, key in (("trainer_state.json", "global_step"), (checkpoint.PROGRESS, "step")):
        files.write_json(older / name, files.read_json(older / name) | {key: s.steps - 1})
    shutil.copytree(whole, folder / f"checkpoint-{s.steps}")
    (folder / checkpoint.STAGING / "checkpoint-9").mkdir(parents=True)
    assert checkpoint.complete(folder / f"checkpoint-{s.steps}", s.steps) is None
    damage(kind, folder / f"checkpoint-{s.steps}")
    assert why in checkpoint.complete(folder / f"checkpoint-{s.steps}", s.steps)
    lines = []
    assert checkpoint.resumable(folder, lines.append) == folder / f"checkpoint-{s.steps - 1}"
    assert sorted(p.name for p in folder.iterdir()) == [f"checkpoint-{s.steps - 1}"]
    assert len(lines) == 1 and why in lines[0] and "\n" not in lines[0]


def test_grpo_config_is_the_seeds_in_fp32(tmp_path):
    s = settings_.make()
    cfg = train.grpo_config(s, str(tmp_path))
    assert (cfg.bf16, cfg.fp16, cfg.learning_rate, cfg.max_steps) == (False, False, 5e-5, 100)
    # the seed's split is 4 x 8; the default's is 8 x 4: the same step (batch_per_device is speed only)
    assert (cfg.per_device_train_batch_size, cfg.gradient_accumulation_steps, cfg.num_generations) == (8, 4, 8)
    seeds = train.grpo_config(s.replace(batch_per_device=4), str(tmp_path))
    assert (seeds.per_device_train_batch_size, seeds.gradient_accumulation_steps) == (4, 8)
    assert cfg.generation_batch_size == 32 and cfg.max_completion_length == s.profile.max_new_tokens == 128
    assert cfg.chat_template_kwargs == {"enable_thinking": False}
    assert cfg.tf32 is False  # unset, a compiled run on a TF32 GPU trains in TF32 (shortlist/models/precision.py)


def test_tf32_turned_on_while_the_trainer_is_built_is_off_for_every_step(run, tmp_path, monkeypatch):
    # accelerate turns TF32 on inside the trainer's construction on a GPU (its dynamo plugin); here a config
    # that does so stands in for it: the steps must still run at fp32 (each checks) and give the same outcome
    import torch
    from shortlist.models import precision
    built = train.grpo_config

    def turning_tf32_on(*args, **kwargs):
        config = built(*args, **kwargs)
        torch.backends.fp32_precision, torch.backends.cuda.matmul.allow_tf32 = "tf32", True
        return config
    monkeypatch.setattr(train, "grpo_config", turning_tf32_on)
    s = fresh_folder(run, tmp_path)
    try:
        again = train.run_family(s, s.families[0], log=lambda *_: None)
    finally:
        tf32_left = precision.reduced()
        precision.fp32()
    assert tf32_left == [] and set(again.engine["train"]["fp32_precision"].values()) == {precision.IEEE}
    same_outcome(run[1], again)


def test_tf32_turned_on_once_training_runs_stops_it_in_one_line_at_the_next_step(run, tmp_path, monkeypatch):
    import torch
    from transformers import TrainerCallback
    from shortlist.models import precision
    started = train.run_trainer

    class TurnsTf32On(TrainerCallback):  # after run_trainer's fp32(): what only the per-step check can see
        def on_train_begin(self, args, state, control, **kwargs):
            torch.backends.fp32_precision, torch.backends.cuda.matmul.allow_tf32 = "tf32", True

    def with_tf32_turned_on(trainer, *args):
        trainer.add_callback(TurnsTf32On())
        return started(trainer, *args)
    monkeypatch.setattr(train, "run_trainer", with_tf32_turned_on)
    s = fresh_folder(run, tmp_path)
    try:
        with pytest.raises(RuntimeError) as e:
            train.run_family(s, s.families[0], log=lambda *_: None)
    finally:
        precision.fp32()
    assert str(e.value).startswith(f"{run[1].family}, GRPO step 1: fp32 matmuls would run at reduced precision")
    assert not files.result(s.out, run[1].slug).exists()





def test_training_a_family_compiles_into_the_run_folder(synthetic, monkeypatch, no_model_loads):
    from proof import files, train
    key = "chain_sum(max_terms=2, max_digits=1)"
    s = synthetic({key: {"before": [0.0] * 4, "after": [1.0] * 4}})
    files.result(s.out, sources.parse(key).slug).unlink()  # not trained yet
    used = []
    monkeypatch.setattr(compile_cache, "use", used.append)
    monkeypatch.setattr(train.commit, "tasks_verified", lambda *_: None)  # synthetic fingerprints are zeros
    with pytest.raises(AssertionError, match="a model was loaded"):
        train.run_family(s, key, log=lambda *_: None)
    assert used == [Path(s.out) / "work" / "compile"]


def test_a_progress_line_names_the_family_and_times_the_steps_this_process_ran():
    from proof.bookkeeping import progress_line
    logs = {"reward": 0.25, "reward_std": 0.1}
    line = progress_line("chain_sum", 6, 10, logs, seconds=8.0, done=4)  # resumed at step 2: 4 steps in 8 s
    assert line.startswith("chain_sum step 6/10: reward 0.250 ± 0.100, zero-std 0.00") and line.endswith(
        "2.0 s/step, 0.1 min left")
    # the last step: the evaluation after training is still to come, so no "0.0 min left"
    assert progress_line("chain_sum", 10, 10, logs, seconds=8.0, done=8).endswith(
        "1.0 s/step, evaluation next")
    assert progress_line("chain_sum", 4, 10, logs, seconds=1.0, done=0).endswith("time left unknown")


def test_a_gpu_too_small_for_a_step_is_refused_in_one_line_before_any_model_loads(synthetic, monkeypatch,
                                                                                   no_model_loads):
    from shortlist.models import config as models, memory
    key = "chain_sum(max_terms=2, max_digits=1)"
    s = synthetic({key: {"before": [0.0] * 4, "after": [1.0] * 4}})
    files.result(s.out, sources.parse(key).slug).unlink()  # not trained yet
    monkeypatch.setattr(train.commit, "tasks_verified", lambda *_: None)  # synthetic fingerprints are zeros
    monkeypatch.setattr(models, "check_device", lambda *_: None)  # as if on a GPU ...
    monkeypatch.setattr(memory, "usable_bytes", lambda: memory.GIB // 4)  # ... of a quarter of a GiB
    s = settings_.Settings(**{**s.__dict__, "cpu": False}) if s.cpu else s
    with pytest.raises(models.ModelError) as e:
        train.check(s, key, log=lambda *_: None)
    family = sources.parse(key).key
    assert s.batch_per_device == 0  # auto: none fits, so the refusal is at 1 completion per forward/backward
    assert str(e.value).startswith(f"{family}: a GRPO step at batch_per_device=1 and max_new_tokens=")
    assert "\n" not in str(e.value) and "0.0 GiB" not in str(e.value)  # the tiny's need in MiB, not a rounded 0
    monkeypatch.setattr(memory, "usable_bytes", lambda: 64 * memory.GIB)  # a GPU that holds it: no refusal
    assert train.check(s, key, log=lambda *_: None).family.key == family


def test_a_family_of_long_prompts_is_judged_at_its_longest_training_prompt(synthetic, monkeypatch, no_model_loads):
    """The memory check's fixed prompt allowance (160 tokens) is a floor: a family whose training prompts are longer
    needs more per completion, and a GPU that holds the allowance but not those prompts is refused before any model
    loads, the line saying how long they are."""
    from shortlist.models import config as models, memory
    key = "chain_sum(max_terms=2, max_digits=1)"
    s = synthetic({key: {"before": [0.0] * 4, "after": [1.0] * 4}})
    files.result(s.out, sources.parse(key).slug).unlink()  # not trained yet
    s = s.replace(cpu=False, batch_per_device=8)  # set: auto would take fewer
    monkeypatch.setattr(train.commit, "tasks_verified", lambda *_: None)  # synthetic fingerprints are zeros
    monkeypatch.setattr(models, "check_device", lambda *_: None)  # as if on a GPU that holds the allowance exactly
    config = models.model_config(s.profile.model)
    allowance = memory.need(config, s.batch_per_device, memory.PROMPT_TOKENS + s.profile.max_new_tokens, s.fast)
    monkeypatch.setattr(memory, "usable_bytes", lambda: allowance.total + int(memory.CONTEXT_GIB * memory.GIB))
    assert train.check(s, key, log=lambda *_: None).family.key == sources.parse(key).key  # short prompts: it fits
    tasks, made = train.commit.family_tasks, []  # the synthetic commitment draws no training tasks: its
    monkeypatch.setattr(train.commit, "family_tasks", lambda *a, **k: {  # evaluation's, made long
        **(built := tasks(*a, **k)), "train": made.extend(dict(t, question=t["question"] + " and then" * (300 + i))
                                                          for i, t in enumerate(built["eval"])) or made})
    with pytest.raises(models.ModelError) as e:
        train.check(s, key, log=lambda *_: None)
    longest = int(str(e.value).split("(prompts of up to ")[1].split()[0])
    from shortlist.generation import sampling  # the chat prompt GRPO sends: the system prompt and template too
    trainee = s.profile.for_source(sources.parse(key).source)
    assert longest == len(sampling.prompt_ids(sampling.tokenizer_of(trainee.model), trainee, [made[-1]["question"]])[0])
    assert longest > 600 and "\n" not in str(e.value), str(e.value)


def test_batch_per_device_0_takes_the_most_up_to_8_that_the_gpu_holds(synthetic, monkeypatch, no_model_loads):
    """The default, batch_per_device=0: 8 completions per forward/backward where the GPU holds them (measured
    faster, results the same: proof/settings.AUTO_MICRO_BATCH), fewer where it does not (a T4 under Qwen3-0.6B),
    said in the log; the run's settings carry the number, which GRPO's configuration and the result then use."""
    from shortlist.models import config as models, memory
    key = "chain_sum(max_terms=2, max_digits=1)"
    s = synthetic({key: {"before": [0.0] * 4, "after": [1.0] * 4}})
    files.result(s.out, sources.parse(key).slug).unlink()  # not trained yet
    s = s.replace(cpu=False)
    assert s.batch_per_device == 0 and s.micro_batch == 8 and s.grad_accum == 4
    monkeypatch.setattr(train.commit, "tasks_verified", lambda *_: None)  # synthetic fingerprints are zeros
    monkeypatch.setattr(models, "check_device", lambda *_: None)
    config = models.model_config(s.profile.model)
    tokens = memory.PROMPT_TOKENS + s.profile.max_new_tokens
    for holds, expected in ((8, 8), (7, 4), (4, 4), (3, 2)):  # a GPU that holds exactly `holds` completions
        need = memory.need(config, holds, tokens, s.fast).total + int(memory.CONTEXT_GIB * memory.GIB)
        monkeypatch.setattr(memory, "usable_bytes", lambda: need)
        said = []
        run = train.check(s, key, log=said.append)
        assert (run.settings.batch_per_device, run.settings.grad_accum) == (expected, 32 // expected)
        assert train.grpo_config(run.settings, str(run.work / "staging")).per_device_train_batch_size == expected
        assert [line for line in said if "completions per forward/backward" in line] == [
            f"{run.family.key}: {expected} completions per forward/backward (batch_per_device=0: the most up to 8 "
            f"that this GPU's {memory.size(need)} holds)"]
    monkeypatch.setattr(memory, "usable_bytes", lambda: None)  # a CPU: the ceiling, no memory asked
    assert train.check(s, key, log=lambda *_: None).settings.batch_per_device == 0
