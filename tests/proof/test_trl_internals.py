"""TRL's private internals the fast trainer leans on (proof/trl_internals.py), and that the sampler
draws exactly as the GRPOTrainer the proof configures."""
from pathlib import Path

import pytest
import torch

from proof import settings as settings_
from proof import bookkeeping, fast_grpo, files, train, trl_internals
from shortlist import sources
from shortlist.generation import sampling

SMOKE = settings_.make("smoke").profile.for_source("reasoning_gym")  # the qwen3 profile at 16 new tokens, on tiny



@pytest.fixture(scope="module")
def grpo_trainer(tmp_path_factory):
    return _grpo_trainer(tmp_path_factory.mktemp("grpo"))


def _grpo_trainer(folder):
    """A GRPOTrainer on a fresh tiny model whose own generation_config disagrees with everything."""
    from datasets import Dataset
    from trl import GRPOTrainer
    loaded = sampling.load("tiny")
    loaded.model.generation_config.update(top_k=20, top_p=0.95, temperature=0.6, repetition_penalty=1.3, min_p=0.2,
                                          do_sample=True)
    settings = settings_.make("smoke")
    dataset = Dataset.from_list([{"prompt": SMOKE.messages("What is 1 + 1?"), "seed": 0}] * 8)
    trainer = GRPOTrainer(model=loaded.model, processing_class=loaded.tokenizer,
                          reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
                          args=train.grpo_config(settings, str(folder)), train_dataset=dataset)
    return trainer, loaded


def test_generation_config_equals_grpo_trainers_field_by_field(grpo_trainer):
    trainer, loaded = grpo_trainer
    ours = sampling.generation_config(loaded.model, loaded.tokenizer, SMOKE)
    assert ours.to_dict() == trainer.generation_config.to_dict()


def test_what_generate_uses_is_the_same_whatever_the_models_own_config_says(grpo_trainer):
    trainer, loaded = grpo_trainer
    model = loaded.model
    ours = sampling.generation_config(model, loaded.tokenizer, SMOKE)
    used_by_us, _ = model._prepare_generation_config(ours)
    used_by_trl, _ = model._prepare_generation_config(trainer.generation_config)
    assert used_by_us.to_dict() == used_by_trl.to_dict()
    # the model's top_k=20, top_p=0.95 and temperature=0.6 did not leak in
    assert (used_by_us.top_k, used_by_us.top_p, used_by_us.temperature) == (SMOKE.top_k, SMOKE.top_p,
                                                                           SMOKE.temperature)


def test_prompts_are_tokenized_as_grpo_tokenizes_them(grpo_trainer):
    trainer, loaded = grpo_trainer
    questions = ["What is 1 + 1?", "How many legs do 3 cats have?"]
    trl_ids, _, _ = trainer._tokenize_prompts([SMOKE.messages(q) for q in questions])
    assert sampling.prompt_ids(loaded.tokenizer, SMOKE, questions) == [list(ids) for ids in trl_ids]


def test_the_fast_engine_changes_only_engine_fields(grpo_trainer):
    trainer, loaded = grpo_trainer
    fast = sampling.generation_config(loaded.model, loaded.tokenizer, SMOKE, fast=True, max_cache_len=128)
    trl = trainer.generation_config.to_dict()
    changed = {k for k in set(fast.to_dict()) | set(trl) if fast.to_dict().get(k) != trl.get(k)}
    assert changed == {"cache_implementation", "disable_compile", "max_cache_len"} == sampling.ENGINE_FIELDS
    used_fast, _ = loaded.model._prepare_generation_config(fast)
    used_trl, _ = loaded.model._prepare_generation_config(trainer.generation_config)
    assert {k: v for k, v in used_fast.to_dict().items() if k not in sampling.ENGINE_FIELDS} == \
        {k: v for k, v in used_trl.to_dict().items() if k not in sampling.ENGINE_FIELDS}



@pytest.fixture(scope="module")
def fast_and_trl(tmp_path_factory):
    """A FastGRPOTrainer whose LoRA weights were moved away from zero, and prompts for it."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig

    loaded = sampling.load("tiny")
    s = settings_.make("smoke")
    trainer = trl_internals.fast_trainer(
        fast_grpo.InferenceCopy(loaded.model), fast_grpo.generate, model=loaded.model, processing_class=loaded.tokenizer,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=train.grpo_config(s, str(tmp_path_factory.mktemp("grpo"))),
        train_dataset=Dataset.from_list([{"prompt": SMOKE.messages("1 + 1 = ?"), "seed": 0}] * 8),
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in trainer.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 3.0)  # far enough that greedy answers differ from the base model's, whichever tiny
    questions = [f"State the final answer to the following arithmetic problem: {a} + {b} =" for a, b in
                 [(1, 2), (3, 4), (12, 7), (5, 5)]]
    rows = [ids for ids in sampling.prompt_ids(loaded.tokenizer, SMOKE, questions) for _ in range(8)]
    return trainer, rows


def test_the_fast_trainer_compiles_by_region(fast_and_trl):
    trainer, _ = fast_and_trl  # where torch_compile is on (a GPU), accelerate compiles one layer for all
    assert trainer.accelerator.state.dynamo_plugin.use_regional_compilation is trl_internals.REGIONAL_COMPILATION is True


def test_inference_copy_syncs_every_lora_layer(fast_and_trl):
    trainer, _ = fast_and_trl
    assert trainer.engine.sync(trainer.model) == 2 * 7  # 2 layers x (q, k, v, o, gate, up, down)


@pytest.mark.parametrize("greedy", [True, False])
def test_fast_grpo_generation_draws_what_trls_own_draws(fast_and_trl, greedy):
    import copy

    import torch
    from trl import GRPOTrainer
    trainer, rows = fast_and_trl
    original = trainer.generation_config
    trainer.generation_config = copy.deepcopy(original)
    trainer.generation_config.do_sample = not greedy
    try:
        torch.manual_seed(1)
        ours, _ = trainer._generate_single_turn(rows, None, {}, 8)
        torch.manual_seed(1)
        theirs, _ = GRPOTrainer._generate_single_turn(trainer, rows, None, {}, 8)
        base = sampling.generate_ids(sampling.load("tiny").model, rows, trainer.generation_config, len(rows),
                                     trainer._tokenizer.pad_token_id, trainer.eos_token_ids)
    finally:
        trainer.generation_config = original
    assert ours == theirs
    if greedy:
        assert base != ours  # the adapted weights were used, not the base model's


def test_the_pinned_trl_is_the_verified_one_and_its_internals_are_there():
    from pathlib import Path
    pinned = next(line.split("==")[1].split()[0] for line in (Path(__file__).resolve().parents[2] / "requirements.txt")
                  .read_text().splitlines() if line.startswith("trl=="))
    assert pinned in trl_internals.VERIFIED and trl_internals.version() == pinned
    assert trl_internals.gate() is None


def test_another_trl_version_or_changed_internals_close_the_gate(monkeypatch):
    from trl import GRPOTrainer
    monkeypatch.setattr(trl_internals, "version", lambda: "0.0.1")
    assert "0.0.1 is not one the fast trainer was verified on" in trl_internals.gate()
    monkeypatch.undo()

    def other(self, prompt_ids, images, num_generations):  # a release that changed the signature
        return None
    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", other)
    assert "_generate_single_turn is not the one the fast trainer overrides" in trl_internals.gate()


def test_a_closed_gate_trains_with_trls_own_trainer_and_says_why(monkeypatch, tmp_path):
    monkeypatch.setattr(trl_internals, "gate", lambda: "trl 9.9 is not one the fast trainer was verified on")
    books = bookkeeping.Bookkeeping()
    s = settings_.make("smoke", steps=1, out=str(tmp_path / "run"))
    from shortlist import scoring, sources
    with scoring.Scorer(workers=1) as scorer:
        family = sources.parse(s.families[0])
        train.train(sampling.load("tiny"), s, family, family.tasks(range(4)), scorer, str(tmp_path / "ck"), books,
                    log=lambda *_: None)
    assert books.trainer == "trl (trl 9.9 is not one the fast trainer was verified on)"


def test_the_renamed_alias_is_what_trl_still_touches_and_only_its_warning_is_silenced(tmp_path):
    """The contract of trl_internals.renamed_alias(): TRL's GRPOConfig still sets gradient_checkpointing, which
    transformers 5 renamed (a FutureWarning each time); inside the hack that warning goes and any other stays. When
    a release stops touching the alias, the first assertion fails and the hack can go."""
    import contextlib
    import warnings

    from trl import GRPOConfig

    def made(hack):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with hack():  # its filter goes in front of "always", as it does in front of a user's own
                GRPOConfig(output_dir=str(tmp_path), max_steps=1, bf16=False, fp16=False)
                warnings.warn("another FutureWarning", FutureWarning)
        return [str(w.message) for w in seen if issubclass(w.category, FutureWarning)]
    assert any("gradient_checkpointing" in m for m in made(contextlib.nullcontext))
    assert made(trl_internals.renamed_alias) == ["another FutureWarning"]


def test_timed_generation_times_the_trainers_own_generate_and_leaves_what_it_returns(tmp_path):
    """The contract proof/steptime.py leans on: GRPOTrainer._generate(prompts) exists, and timing it changes
    nothing it returns (the same seed, the same completions). A trainer of its own: generating needs the
    accelerator state its construction set, which other tests in a worker may have reset since."""
    from proof import steptime
    trainer, _ = _grpo_trainer(tmp_path)
    prompts = [SMOKE.messages("What is 1 + 1?")] * 2
    torch.manual_seed(3)
    plain = trainer._generate(prompts)
    clock = steptime.StepClock()
    assert trl_internals.timed_generation(trainer, clock) is True
    try:
        clock.begin()
        torch.manual_seed(3)
        timed = trainer._generate(prompts)
        clock.end()
    finally:
        del trainer._generate  # the class's own again
    assert repr(timed) == repr(plain)
    assert 0 < clock.steps[0]["generation_s"] <= clock.steps[0]["step_s"]


def test_timed_generation_changes_nothing_where_trl_has_no_generate_of_prompts():
    from proof import steptime

    class Other:
        def _generate(self, prompts, images):
            return prompts
    other = Other()
    assert trl_internals.timed_generation(object(), steptime.StepClock()) is False
    assert trl_internals.timed_generation(other, steptime.StepClock()) is False and "_generate" not in vars(other)


def test_the_loss_is_split_invariant_on_the_pinned_trl_and_a_split_dependent_one_is_refused(tmp_path):
    """The contract behind batch_per_device being a speed setting (proof/settings.py): the protocol's loss is
    normalised over the whole generation batch, so the split into micro-batches changes float order only."""
    s = settings_.make("smoke", out=str(tmp_path / "run"))
    config = train.grpo_config(s, str(tmp_path / "staging"))
    assert config.loss_type == trl_internals.LOSS == "dapo" and trl_internals.split_invariant(config) is None
    assert config.steps_per_generation == config.gradient_accumulation_steps == s.grad_accum
    config.loss_type = "bnpo"  # each micro-batch normalised by its own tokens
    assert "'bnpo' normalises each micro-batch on its own" in trl_internals.split_invariant(config)
    config.loss_type, config.top_entropy_quantile = "dapo", 0.2  # the entropy mask's quantile is a micro-batch's
    assert "an entropy mask or bonus is taken per micro-batch" in trl_internals.split_invariant(config)
    config.top_entropy_quantile, config.steps_per_generation = 1.0, 2 * config.gradient_accumulation_steps
    assert "a generation batch would span several optimizer steps" in trl_internals.split_invariant(config)


def test_a_trl_whose_loss_depends_on_the_split_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(trl_internals, "LOSS", "bnpo")  # as if another TRL's loss were the protocol's
    with pytest.raises(RuntimeError) as e:
        train.grpo_config(settings_.make("smoke", out=str(tmp_path / "run")), str(tmp_path / "staging"))
    assert "so batch_per_device would change results; install requirements.txt's trl" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_split_dependent_trl_is_refused_by_the_check_before_any_model_loads(synthetic, monkeypatch, no_model_loads):
    """The refusal comes with the family's other checks (train.check), before the evaluation spends its minutes,
    and writes nothing: not once the model is loaded and evaluated."""
    key = "chain_sum(max_terms=2, max_digits=1)"
    s = synthetic({key: {"before": [0.0] * 4, "after": [1.0] * 4}})
    files.result(s.out, sources.parse(key).slug).unlink()  # not trained yet
    monkeypatch.setattr(train.commit, "tasks_verified", lambda *_: None)  # synthetic fingerprints are zeros
    assert train.check(s, key, log=lambda *_: None).family.key == sources.parse(key).key  # the pinned TRL passes
    before = sorted(p.relative_to(s.out) for p in Path(s.out).rglob("*"))
    monkeypatch.setattr(trl_internals, "LOSS", "bnpo")  # as if another TRL's loss were the protocol's
    with pytest.raises(RuntimeError) as e:
        train.check(s, key, log=lambda *_: None)
    assert "so batch_per_device would change results" in str(e.value) and "\n" not in str(e.value)
    assert sorted(p.relative_to(s.out) for p in Path(s.out).rglob("*")) == before
