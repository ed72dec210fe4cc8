"""The decode step's attention (shortlist/generation/decode_attention.py): the same numbers as transformers' sdpa
for one new token, sdpa itself for anything else, and engaged only inside the fast engine's decode loop."""
import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from shortlist.generation import decode_attention, engine, sampling
from shortlist.trainee import resolve


class Grouped(torch.nn.Module):
    num_key_value_groups = 2
    is_causal = True


def tensors(rows=3, heads=4, groups=2, length=1, cache=11, dim=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(rows, heads, length, dim, generator=g)
    k, v = (torch.randn(rows, groups, cache, dim, generator=g) for _ in range(2))
    return q, k, v


def test_one_new_token_equals_sdpa_with_a_boolean_or_float_mask_and_grouped_heads():
    q, k, v = tensors()
    keep = torch.rand(3, 1, 1, 11, generator=torch.Generator().manual_seed(1)) > 0.3
    keep[..., 0] = True  # every row attends somewhere, as a left-padded row attends to itself
    additive = torch.zeros(keep.shape).masked_fill(~keep, torch.finfo(torch.float32).min)
    for mask in (None, keep, additive):
        ours, _ = decode_attention.attention(Grouped(), q, k, v, mask, scaling=0.3)
        theirs, _ = sdpa_attention_forward(Grouped(), q, k, v, mask, scaling=0.3)
        assert ours.shape == theirs.shape == (3, 1, 4, 8)
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
    # the mask is obeyed: a key hidden from every row changes nothing
    k2, v2 = k.clone(), v.clone()
    hidden = (~keep[:, 0, 0]).nonzero()
    k2[hidden[:, 0], :, hidden[:, 1]] = 50.0
    v2[hidden[:, 0], :, hidden[:, 1]] = 50.0
    torch.testing.assert_close(decode_attention.attention(Grouped(), q, k2, v2, keep, scaling=0.3)[0],
                               decode_attention.attention(Grouped(), q, k, v, keep, scaling=0.3)[0])


def test_values_of_another_head_size_than_queries_and_keys():
    """Multi-head latent attention (DeepSeek-V2/V3): queries and keys of 24, values of 8 a head."""
    q, k, _ = tensors(dim=24)
    v = torch.randn(3, 2, 11, 8, generator=torch.Generator().manual_seed(5))
    ours, _ = decode_attention.attention(Grouped(), q, k, v, None, scaling=0.2)
    theirs, _ = sdpa_attention_forward(Grouped(), q, k, v, None, scaling=0.2)
    assert ours.shape == theirs.shape == (3, 1, 4, 8)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)


def test_heads_are_matched_to_their_own_key_value_group():
    """Query head h reads key/value group h // (heads / groups), as repeat_kv arranges: a swap of the two groups'
    values changes the output of exactly the heads that read them."""
    q, k, v = tensors()
    ours, _ = decode_attention.attention(Grouped(), q, k, v, None)
    swapped, _ = decode_attention.attention(Grouped(), q, k, v.flip(1), None)
    theirs, _ = sdpa_attention_forward(Grouped(), q, k, v.flip(1), None)
    torch.testing.assert_close(swapped, theirs, rtol=0, atol=1e-6)
    assert not torch.allclose(ours, swapped)


def test_anything_but_one_plain_new_token_is_sdpa_itself(monkeypatch):
    calls = []
    real = sdpa_attention_forward

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)
    import transformers.integrations.sdpa_attention as sdpa
    monkeypatch.setattr(sdpa, "sdpa_attention_forward", spy)
    prompt = tensors(length=5)
    decode_attention.attention(Grouped(), *prompt, None)  # a prompt
    decode_attention.attention(Grouped(), *tensors(), None, dropout=0.1)  # a training pass with dropout
    decode_attention.attention(Grouped(), *tensors(), None, s_aux=torch.zeros(4))  # attention sinks
    with pytest.raises(ValueError, match="softcap"):  # soft-capped scores: sdpa's own refusal, not ignored
        decode_attention.attention(Grouped(), *tensors(), None, softcap=30.0)
    decode_attention.attention(Grouped(), *tensors(), None, position_bias=torch.zeros(3, 4, 1, 11))  # ALiBi-like
    decode_attention.attention(Grouped(), *tensors(), None, indices=torch.zeros(3, 1, 2, dtype=torch.long))  # sparse
    assert len(calls) == 6
    decode_attention.attention(Grouped(), *tensors(), None)
    assert len(calls) == 6  # one plain new token: ours


@pytest.fixture
def trainee():
    return resolve("qwen3(max_new_tokens=10)").for_source("reasoning_gym")


def test_engaged_only_inside_the_decode_loop_and_restored_after(tiny_model, trainee, monkeypatch):
    model, tok = tiny_model.model, tiny_model.tokenizer
    assert model.config._attn_implementation == "sdpa"
    seen = []
    real = decode_attention.attention

    def spy(module, query, *args, **kwargs):
        seen.append(query.shape[2])
        return real(module, query, *args, **kwargs)
    monkeypatch.setattr(decode_attention, "attention", spy)  # register() registers whatever attention is now
    rows = sampling.prompt_ids(tok, trainee, ["What is 2 + 3?", "Name a prime."])
    eos = sampling.eos_token_ids(model, tok)
    engine.reset()
    config = sampling.generation_config(model, tok, trainee, greedy=True, fast=True,
                                        max_cache_len=sampling.cache_length(rows, 10))
    sampling.generate_ids(model, rows, config, 2, tok.pad_token_id, eos)
    assert engine.status()["engine"] == "static" and engine.status()["checks"][0]["passed"]
    assert 1 in seen  # the decode loop's new tokens went through it
    assert model.config._attn_implementation == "sdpa"  # restored: generate() and training run sdpa
    before = len(seen)
    plain = sampling.generation_config(model, tok, trainee, greedy=True, fast=False)
    ids, mask = sampling.left_pad(rows, tok.pad_token_id)
    with engine.quiet():
        model.generate(input_ids=ids, attention_mask=mask, generation_config=plain)
    assert len(seen) == before  # generate() outside the engine never reaches it


def test_greedy_decode_with_it_equals_generate_on_sdpa(tiny_model, trainee):
    """The whole model: the engine's greedy tokens with decode attention equal generate()'s on sdpa (the
    self-check's comparison, made here on purpose with the engine's tie margin at zero ties)."""
    model, tok = tiny_model.model, tiny_model.tokenizer
    rows = sampling.prompt_ids(tok, trainee, [f"What is {i} + {2 * i}?" for i in range(6)])
    ids, mask = sampling.left_pad(rows, tok.pad_token_id)
    eos = sampling.eos_token_ids(model, tok)
    config = sampling.generation_config(model, tok, trainee, greedy=True, fast=True,
                                        max_cache_len=sampling.cache_length(rows, 10))
    ours = engine.decode_static(model, ids, mask, config, eos)
    plain = sampling.generation_config(model, tok, trainee, greedy=True, fast=False)
    with engine.quiet():
        theirs = engine.completion_ids(model.generate(input_ids=ids, attention_mask=mask, generation_config=plain),
                                       ids.shape[1], eos)
    assert ours == theirs


def test_only_checked_model_types_on_sdpa_are_switched_and_a_failed_switch_is_undone(tiny_model, monkeypatch):
    model = tiny_model.model
    assert decode_attention.engageable(model)  # qwen3 on sdpa
    monkeypatch.setattr(model.config, "model_type", "glm_moe_dsa")  # branches on the implementation's name
    with decode_attention.engaged(model):
        assert model.config._attn_implementation == "sdpa"
    monkeypatch.undo()
    model.set_attn_implementation("eager")
    try:
        with decode_attention.engaged(model):
            assert model.config._attn_implementation == "eager"  # an eager model keeps its own
    finally:
        model.set_attn_implementation("sdpa")
    real = type(model).set_attn_implementation

    def half_done(self, name, **kwargs):  # sets the top config, then fails on a submodule, as transformers can
        if name == decode_attention.NAME:
            self.config._attn_implementation = name
            raise ValueError("a submodule refused")
        return real(self, name, **kwargs)
    monkeypatch.setattr(type(model), "set_attn_implementation", half_done)
    with pytest.raises(ValueError):
        with decode_attention.engaged(model):
            pass
    monkeypatch.undo()
    assert model.config._attn_implementation == "sdpa"
