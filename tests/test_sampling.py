import pytest
import torch

from proof import settings as settings_
from proof import train
from shortlist import sampling, trainee


@pytest.fixture(scope="module")
def grpo_trainer():
    """A GRPOTrainer on a fresh tiny model whose own generation_config disagrees with everything."""
    from datasets import Dataset
    from trl import GRPOTrainer
    loaded = sampling.load("tiny")
    loaded.model.generation_config.update(top_k=20, top_p=0.95, temperature=0.6, repetition_penalty=1.3, min_p=0.2,
                                          do_sample=True)
    settings = settings_.make("smoke")
    dataset = Dataset.from_list([{"prompt": trainee.messages("What is 1 + 1?"), "seed": 0}] * 8)
    trainer = GRPOTrainer(model=loaded.model, processing_class=loaded.tokenizer,
                          reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
                          args=train.grpo_config(settings, "/tmp/shortlist-test-grpo"), train_dataset=dataset)
    return trainer, loaded


def test_generation_config_equals_grpo_trainers_field_by_field(grpo_trainer):
    trainer, loaded = grpo_trainer
    ours = sampling.generation_config(loaded.model, loaded.tokenizer, max_new_tokens=settings_.make("smoke").max_new_tokens)
    assert ours.to_dict() == trainer.generation_config.to_dict()


def test_what_generate_uses_is_the_same_whatever_the_models_own_config_says(grpo_trainer):
    trainer, loaded = grpo_trainer
    model = loaded.model
    ours = sampling.generation_config(model, loaded.tokenizer, max_new_tokens=settings_.make("smoke").max_new_tokens)
    used_by_us, _ = model._prepare_generation_config(ours)
    used_by_trl, _ = model._prepare_generation_config(trainer.generation_config)
    assert used_by_us.to_dict() == used_by_trl.to_dict()
    # the model's top_k=20, top_p=0.95 and temperature=0.6 did not leak in
    assert (used_by_us.top_k, used_by_us.top_p, used_by_us.temperature) == (trainee.TOP_K, trainee.TOP_P,
                                                                           trainee.TEMPERATURE)


def test_prompts_are_tokenized_as_grpo_tokenizes_them(grpo_trainer):
    trainer, loaded = grpo_trainer
    questions = ["What is 1 + 1?", "How many legs do 3 cats have?"]
    trl_ids, _, _ = trainer._tokenize_prompts([trainee.messages(q) for q in questions])
    assert sampling.prompt_ids(loaded.tokenizer, questions) == [list(ids) for ids in trl_ids]


def test_greedy_is_the_same_in_any_batch_size(tiny_model):
    questions = [f"State the final answer to the following arithmetic problem: {a} + {b} =" for a, b in
                 [(1, 2), (3, 4), (12, 7), (5, 5), (9, 1), (2, 8)]]
    one = sampling.Sampler(tiny_model, batch_size=1, max_new_tokens=12).complete(questions, greedy=True)
    many = sampling.Sampler(tiny_model, batch_size=4, max_new_tokens=12).complete(questions, greedy=True)
    assert one == many


def test_batches_are_sized_by_the_setting(tiny_model, monkeypatch):
    sizes = []
    generate = tiny_model.model.generate

    def counting(*args, **kwargs):
        sizes.append(kwargs["input_ids"].shape[0])
        return generate(*args, **kwargs)
    monkeypatch.setattr(tiny_model.model, "generate", counting)
    out = sampling.Sampler(tiny_model, batch_size=16, max_new_tokens=4).complete(["a", "b", "c", "d", "e"], k=8)
    assert sizes == [16, 16, 8] and [len(g) for g in out] == [8] * 5


def test_sampling_is_reproducible_under_a_seed(tiny_model):
    sampler = sampling.Sampler(tiny_model, max_new_tokens=8)
    torch.manual_seed(1)
    a = sampler.complete(["What is 2 + 2?"], k=8)
    torch.manual_seed(1)
    assert sampler.complete(["What is 2 + 2?"], k=8) == a


def test_completions_stop_at_the_first_eos():
    generated = torch.tensor([[9, 9, 5, 6, 2, 7, 0], [9, 9, 5, 5, 5, 5, 5]])
    assert sampling.completion_ids(generated, 2, [2, 0]) == [[5, 6, 2], [5, 5, 5, 5, 5]]


def test_sampler_refuses_impossible_sizes(tiny_model):
    with pytest.raises(ValueError):
        sampling.Sampler(tiny_model, batch_size=0)
