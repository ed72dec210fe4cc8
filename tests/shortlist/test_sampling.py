import pytest
import torch

from shortlist import trainee
from shortlist.generation import engine, sampling
from shortlist.models import hf_internals
from shortlist.trainee import QWEN3

# the smoke preset's trainee, as it asks Reasoning Gym's families
SMOKE = trainee.resolve("qwen3(max_new_tokens=16)").replace(model="tiny").for_source("reasoning_gym")


def trainee_with(**changes):
    return SMOKE.replace(**changes)


def test_greedy_is_the_same_in_any_batch_size(tiny_model):
    questions = [f"State the final answer to the following arithmetic problem: {a} + {b} =" for a, b in
                 [(1, 2), (3, 4), (12, 7), (5, 5), (9, 1), (2, 8)]]
    one = sampling.Sampler(tiny_model, trainee_with(max_new_tokens=12), batch_size=1).complete(questions, greedy=True)
    many = sampling.Sampler(tiny_model, trainee_with(max_new_tokens=12), batch_size=4).complete(questions, greedy=True)
    assert one == many


@pytest.mark.parametrize("fast, expected", [(False, [16, 16, 8]), (True, [16, 16, 16])])  # fast: one shape
def test_batches_are_sized_by_the_setting(tiny_model, monkeypatch, fast, expected):
    sizes = []
    generate, decode = tiny_model.model.generate, engine.decode_static

    def counting_generate(*args, **kwargs):
        sizes.append(kwargs["input_ids"].shape[0])
        return generate(*args, **kwargs)

    def counting_decode(model, ids, *args):
        sizes.append(ids.shape[0])
        return decode(model, ids, *args)
    monkeypatch.setattr(tiny_model.model, "generate", counting_generate)
    monkeypatch.setattr(engine, "decode_static", counting_decode)
    monkeypatch.setattr(engine._this, "checked", engine.weakref.WeakSet([tiny_model.model]))  # no self-check here
    out = sampling.Sampler(tiny_model, trainee_with(max_new_tokens=4), batch_size=16, fast=fast).complete(list("abcde"),
                                                                                                       k=8)
    assert sizes == expected and [len(g) for g in out] == [8] * 5


def test_sampling_is_reproducible_under_a_seed(tiny_model):
    sampler = sampling.Sampler(tiny_model, trainee_with(max_new_tokens=8))
    torch.manual_seed(1)
    a = sampler.complete(["What is 2 + 2?"], k=8)
    torch.manual_seed(1)
    assert sampler.complete(["What is 2 + 2?"], k=8) == a


def test_completions_stop_at_the_first_eos():
    generated = torch.tensor([[9, 9, 5, 6, 2, 7, 0], [9, 9, 5, 5, 5, 5, 5]])
    assert engine.completion_ids(generated, 2, [2, 0]) == [[5, 6, 2], [5, 5, 5, 5, 5]]


def test_sampler_refuses_impossible_sizes(tiny_model):
    with pytest.raises(ValueError):
        sampling.Sampler(tiny_model, SMOKE, batch_size=-1)


def test_auto_batch_takes_what_fits(tiny_model, monkeypatch):
    assert sampling.auto_batch(tiny_model.model, 200, 256) == sampling.CPU_BATCH  # no GPU: GRPO's batch
    assert sampling.auto_batch(tiny_model.model, 5, 256) == 5

    class OnGpu:  # the tiny model's shape, on an 80 GiB GPU
        config, dtype, device = tiny_model.model.config, torch.float32, torch.device("cuda")
    gpu = {"free": 1 << 30, "reserved": 0, "allocated": 0, "fraction": 1.0}
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (gpu["free"], 80 << 30))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: gpu["reserved"])
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: gpu["allocated"])
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda device: gpu["fraction"])
    per_row = 2 * 2 * 2 * 16 * 256 * 4 + 8 * tiny_model.model.config.vocab_size  # K and V, 2 layers, 2 heads x 16
    fits = lambda available: int(available * sampling.MEMORY_SHARE // per_row)  # noqa: E731
    assert sampling.auto_batch(OnGpu, 10**6, 256) == fits(1 << 30)
    assert sampling.auto_batch(OnGpu, 200, 256) == 200
    # what torch holds but does not use is free to this process
    gpu.update(free=1 << 30, reserved=4 << 30, allocated=3 << 30)
    assert sampling.auto_batch(OnGpu, 10**6, 256) == fits(2 << 30)
    # a T4's 15 GiB set as a per-process fraction caps it, however much the GPU has free
    gpu.update(free=60 << 30, reserved=4 << 30, allocated=3 << 30, fraction=15 / 80)
    assert sampling.auto_batch(OnGpu, 10**6, 256) == fits(12 << 30)
    gpu.update(free=60 << 30, reserved=15 << 30, allocated=15 << 30)
    assert sampling.auto_batch(OnGpu, 10**6, 256) == 1  # nothing left: one row at a time, never zero


def test_release_gives_the_cache_back_and_sampling_goes_on(tiny_model):
    """After release nothing holds the static cache (its memory can be collected: GBs on a T4), and the
    next call builds one of the same shape that gives the same answers."""
    import weakref
    sampler = sampling.Sampler(tiny_model, SMOKE.replace(max_new_tokens=6), fast=True)
    first = sampler.complete(QUESTIONS, greedy=True)
    shape = hf_internals.cache_shape(tiny_model.model)
    assert shape[0] == len(QUESTIONS)  # (rows, length): one row a question, in one batch
    held = weakref.ref(hf_internals.static_cache(tiny_model.model, *shape)[0])  # the kept cache, reused
    sampling.release(tiny_model.model)
    assert held() is None and hf_internals.cache_shape(tiny_model.model) is None
    assert sampler.complete(QUESTIONS, greedy=True) == first and hf_internals.cache_shape(tiny_model.model) == shape


QUESTIONS = [f"State the final answer to the following arithmetic problem: {a} + {b} =" for a, b in
             [(1, 2), (3, 4), (12, 7), (5, 5)]]


def test_fast_greedy_matches_the_reference_generate_token_for_token(tiny_model):
    reference = sampling.Sampler(tiny_model, trainee_with(max_new_tokens=12), batch_size=3, fast=False)
    fast = sampling.Sampler(tiny_model, trainee_with(max_new_tokens=12), batch_size=3, fast=True)
    assert fast.complete(QUESTIONS, greedy=True) == reference.complete(QUESTIONS, greedy=True)


def test_fast_sampling_draws_what_the_reference_draws(tiny_model):
    """Same seed, same batches: the same samples, unless the distribution (a top_k, a temperature) differs."""
    draws = {}
    for fast in (False, True):
        torch.manual_seed(3)
        draws[fast] = sampling.Sampler(tiny_model, trainee_with(max_new_tokens=10), batch_size=16,
                                       fast=fast).complete(QUESTIONS, k=8)
    assert draws[True] == draws[False]
    assert len({t for group in draws[True] for t in group}) > 4  # they are samples, not one greedy answer


def test_a_longer_static_cache_draws_the_same_samples():
    # the catalog pads every family's cache to a power of two so that few shapes compile; the padding
    # is masked, so the seeded samples must not change
    loaded = sampling.load("tiny")  # its own model: a cache only grows, and the session's must stay short
    draws, lengths = [], []
    for floor in (0, 512):
        torch.manual_seed(3)
        sampler = sampling.Sampler(loaded, trainee_with(max_new_tokens=10), batch_size=16, min_cache_len=floor)
        draws.append(sampler.complete(QUESTIONS, k=4))
        lengths.append(hf_internals.cache_shape(loaded.model)[1])  # (rows, length) of the cache used
    assert lengths[0] < lengths[1] == 512 and draws[0] == draws[1]


def test_a_plain_copy_takes_neither_the_compiled_forward_nor_shares_weights(tiny_model):
    model = tiny_model.model
    model._compiled_call = model.__call__  # what a compiled generate() leaves on the model
    try:
        copy = hf_internals.plain_copy(model)
        assert "_compiled_call" not in copy.__dict__ and model.__dict__["_compiled_call"] == model.__call__
        assert next(copy.parameters()).data_ptr() != next(model.parameters()).data_ptr()
        assert torch.equal(next(copy.parameters()), next(model.parameters()))
    finally:
        del model._compiled_call

def test_a_loaded_model_is_frozen_for_sampling_as_the_engines_copy_is(tiny_model):
    # the decode graph a later process compiles from the loaded model must be the one an earlier process's GRPO
    # compiled from the engine's frozen copy (tests/shortlist/test_compile_cache.py: the cache's contract)
    from proof.fast_grpo import InferenceCopy
    assert not any(p.requires_grad for p in tiny_model.model.parameters())
    copy = InferenceCopy(tiny_model.model).model
    assert [p.requires_grad for p in copy.parameters()] == [p.requires_grad for p in tiny_model.model.parameters()]
