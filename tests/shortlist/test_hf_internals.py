"""transformers' private internals the fast decoder leans on (shortlist/models/hf_internals.py):
present and called as the engine calls them on the pinned version, and named in one line where not."""
import torch

from shortlist import trainee
from shortlist.generation import sampling
from shortlist.models import hf_internals

SMOKE = trainee.resolve("qwen3(max_new_tokens=4)").replace(model="tiny")


def test_every_internal_is_there_on_the_pinned_transformers(tiny_model):
    assert hf_internals.check(tiny_model.model) is None


def test_a_model_without_them_is_named_in_one_line():
    class Plain(torch.nn.Module):
        pass
    why = hf_internals.check(Plain())
    assert why.startswith("transformers ") and "_prepare_generation_config" in why and "\n" not in why


def test_they_take_what_the_engine_passes_and_give_what_it_reads(tiny_model):
    model, tok = tiny_model.model, tiny_model.tokenizer
    config = sampling.generation_config(model, tok, SMOKE, greedy=True, fast=True, max_cache_len=64)
    used = hf_internals.prepared(model, config)
    assert used.do_sample is False and used.max_new_tokens == 4 and used.cache_implementation == "static"
    names = [type(p).__name__ for p in hf_internals.processors(model, used, 8, model.device)]
    assert all(n.endswith("LogitsWarper") or n.endswith("LogitsProcessor") for n in names)
    cache, length = hf_internals.static_cache(model, 2, 64)
    assert hf_internals.cache_shape(model) == (2, length) and length >= 64
    again, _ = hf_internals.static_cache(model, 2, 32)  # shorter: the longer cache is reused, reset
    assert again is cache
    assert callable(hf_internals.forward(model, used, cache))
    hf_internals.release(model)
    assert hf_internals.cache_shape(model) is None
