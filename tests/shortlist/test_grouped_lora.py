"""Several families' adapters in one batch (shortlist/generation/grouped_lora.py): each family's rows must come out
as its own merged model gives them, and a batch or adapter that does not fit is refused, not silently mixed."""
import copy

import pytest
import torch

from shortlist.generation import engine, grouped_lora, sampling
from shortlist.trainee import resolve

FAMILIES, ROWS, RANK, SCALE = 3, 2, 4, 2.0


@pytest.fixture(scope="module")
def models():
    base = sampling.load("tiny", on="cpu")
    names = grouped_lora.linear_names(base.model)
    adapters = [grouped_lora.random_adapter(base.model, names, RANK, seed=f, spread=0.3) for f in range(FAMILIES)]
    grouped = grouped_lora.group(copy.deepcopy(base.model), names, FAMILIES, ROWS, RANK, SCALE)
    for f, adapter in enumerate(adapters):
        assert grouped_lora.load(grouped, f, adapter) == len(names)
    merged = [grouped_lora.merge(copy.deepcopy(base.model), adapter, SCALE) for adapter in adapters]
    return base, names, adapters, grouped, merged


def prompts(base, n: int) -> list[list[int]]:
    trainee = resolve("qwen3(max_new_tokens=12)").for_source("reasoning_gym")
    return sampling.prompt_ids(base.tokenizer, trainee, [f"What is {i} + {i + 3}? Answer briefly." for i in range(n)])


def test_each_familys_rows_are_its_merged_models_logits(models):
    base, names, _, grouped, merged = models
    assert names and "lm_head" not in names  # all-linear, as PEFT adapts: not the output head
    ids, mask = sampling.left_pad(prompts(base, FAMILIES * ROWS), base.tokenizer.pad_token_id)
    with torch.no_grad():
        together = grouped(input_ids=ids, attention_mask=mask).logits
        for f in range(FAMILIES):
            rows = slice(f * ROWS, (f + 1) * ROWS)
            alone = merged[f](input_ids=ids[rows], attention_mask=mask[rows]).logits
            # fp32 in another order of sums: within what two correct decoders may differ (engine.TIE_RELATIVE)
            scale = float(alone.abs().max())
            torch.testing.assert_close(together[rows], alone, rtol=0, atol=engine.TIE_RELATIVE * scale)
            other = merged[(f + 1) % FAMILIES](input_ids=ids[rows], attention_mask=mask[rows]).logits
            assert (together[rows] - other).abs().max() > 0.05 * scale  # the adapters differ: rows are told apart


def test_greedy_completions_through_the_fast_engine_are_each_familys_own(models):
    """The engine decodes the grouped model as it decodes any (static cache, its self-check first): family f's
    greedy completions equal those of its merged model alone."""
    base, _, _, grouped, merged = models
    trainee = resolve("qwen3(max_new_tokens=12)").for_source("reasoning_gym")
    rows = prompts(base, FAMILIES * ROWS)
    pad, eos = base.tokenizer.pad_token_id, sampling.eos_token_ids(base.model, base.tokenizer)

    def config(model):
        return sampling.generation_config(model, base.tokenizer, trainee, greedy=True, fast=True,
                                          max_cache_len=sampling.cache_length(rows, trainee.max_new_tokens))
    together = sampling.generate_ids(grouped, rows, config(grouped), len(rows), pad, eos)
    # where the engine steps aside (another transformers, a failed self-check), generate() serves the grouped model
    plain = sampling.generation_config(grouped, base.tokenizer, trainee, greedy=True, fast=False)
    assert sampling.generate_ids(grouped, rows, plain, len(rows), pad, eos) == together
    for f in range(FAMILIES):
        mine = rows[f * ROWS:(f + 1) * ROWS]
        assert together[f * ROWS:(f + 1) * ROWS] == sampling.generate_ids(merged[f], mine, config(merged[f]), ROWS,
                                                                          pad, eos)


def test_a_model_with_conv1d_layers_is_refused_not_served_without_their_updates():
    from transformers.pytorch_utils import Conv1D
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Conv1D(4, 4))
    with pytest.raises(ValueError, match="Sequential has Conv1D layers \\(1, ...\\): grouped LoRA takes nn.Linear only"):
        grouped_lora.linear_names(model)
    assert grouped_lora.linear_names(torch.nn.Sequential(torch.nn.Linear(4, 4))) == ["0"]


def test_a_batch_that_is_not_one_group_per_family_is_refused(models):
    base, _, _, grouped, _ = models
    for rows in (FAMILIES * ROWS - 1, FAMILIES):  # one short; as many rows as families, but not the size grouped
        ids, mask = sampling.left_pad(prompts(base, rows), base.tokenizer.pad_token_id)
        with pytest.raises(ValueError, match="serves exactly 3 families x 2 rows, in family order"):
            grouped(input_ids=ids, attention_mask=mask)


def test_a_caller_that_splits_the_batch_is_refused_not_given_other_families_rows(models):
    """Sampling in batches smaller than the grouped batch would hand each part's rows the first families' updates:
    refused in its one line instead."""
    base, _, _, grouped, _ = models
    trainee = resolve("qwen3(max_new_tokens=4)").for_source("reasoning_gym")
    rows = prompts(base, FAMILIES * ROWS)
    config = sampling.generation_config(grouped, base.tokenizer, trainee, greedy=True, fast=True,
                                        max_cache_len=sampling.cache_length(rows, trainee.max_new_tokens))
    with pytest.raises(ValueError, match="a batch of 2 rows where this grouped model serves exactly 3 families"):
        sampling.generate_ids(grouped, rows, config, ROWS, base.tokenizer.pad_token_id,
                              sampling.eos_token_ids(base.model, base.tokenizer))


def test_an_adapter_that_does_not_fit_is_refused_before_anything_is_written(models):
    _, names, adapters, grouped, _ = models
    layer = dict(grouped.named_modules())[names[0]]
    before = layer.A[0].clone()
    wrong = dict(adapters[1])
    a, b = wrong[names[-1]]
    wrong[names[-1]] = (a[:-1], b[:, :-1])  # the last layer's rank one short
    with pytest.raises(ValueError, match=r"A \(3, "):
        grouped_lora.load(grouped, 0, wrong)
    with pytest.raises(ValueError, match="the adapter and the grouped layers differ"):
        grouped_lora.load(grouped, 0, {k: v for k, v in adapters[1].items() if k != names[0]})
    assert torch.equal(layer.A[0], before)  # the first layer was not written either
    with pytest.raises(ValueError, match="not nn.Linear modules"):
        grouped_lora.group(copy.deepcopy(grouped), ["model.no_such_layer"], FAMILIES, ROWS, RANK, SCALE)
