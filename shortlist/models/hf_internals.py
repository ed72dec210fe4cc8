"""Every private internal of transformers the project leans on, in one place.

The fast decoder (engine.decode_static) does what generate()'s sampling loop does, so it uses what
generate() uses: _prepare_generation_config (the config generate() would really run with),
_get_logits_processor (the same processors, in the same order), get_compiled_call and
_valid_auto_compile_criteria (generate()'s own decision to compile, and its compiled forward), and
StaticCache. These are not public API: a transformers release may rename or change them, so
check() names what is missing in one line, the engine's version gate (engine.VERIFIED) keeps the
engine off outside the releases it was verified on, and tests/shortlist/test_hf_internals.py fails loudly on
a version whose internals changed.

The engine's static cache per model lives here, in a weak map, not as an attribute parked on the
model: a model copied for GRPO's generation (proof/fast_grpo.InferenceCopy) must not share it. The longest
cache length asked for is transformers' own memo on the model (_previous_max_cache_length), which
generate() sizes its caches by too. NOT_COPIED lists what transformers parks on a model that a copy
must not take (a compiled forward is bound to the model it was compiled for): plain_copy() leaves it.
A hub model's revision is the commit its cached config.json sits under (the snapshots/<commit>/ folder of the hub
cache, read by transformers' extract_commit_hash): revision(). transformers 5 no longer keeps config._commit_hash,
which this read before, so every hub model's revision was None and nothing could tell two commits apart.
"""
from __future__ import annotations

import weakref

import transformers

METHODS = ("_prepare_generation_config", "_get_logits_processor", "get_compiled_call",
           "_valid_auto_compile_criteria")
NOT_COPIED = ("_compiled_call", "_last_compile_config")
_caches: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # model -> ((rows, length), StaticCache)


def revision(name: str) -> str | None:
    """The hub commit a model's config is cached from (in an offline session, the cached one), or None where the
    hub cache has no snapshot of it."""
    from transformers.utils.hub import cached_file, extract_commit_hash
    return extract_commit_hash(cached_file(name, "config.json"), None)


def plain_copy(model):
    """A deep copy of a model without what transformers parks on it for generate() (NOT_COPIED)."""
    import copy
    kept = {name: model.__dict__.pop(name) for name in NOT_COPIED if name in model.__dict__}
    try:
        return copy.deepcopy(model)
    finally:
        model.__dict__.update(kept)


def check(model) -> str | None:
    """Why the engine cannot use this model's generate() internals (one line), or None."""
    missing = [name for name in METHODS if not callable(getattr(model, name, None))]
    if not hasattr(transformers, "StaticCache"):
        missing.append("transformers.StaticCache")
    if missing:
        return f"transformers {transformers.__version__} lacks {', '.join(missing)}"
    return None


def prepared(model, config):
    """The GenerationConfig generate() would run with: the model's own merged in, as generate() does."""
    used, _ = model._prepare_generation_config(config)
    return used


def processors(model, used, width: int, device):
    """generate()'s logits processors for a prepared config, in generate()'s order."""
    return model._get_logits_processor(generation_config=used, input_ids_seq_length=width, device=device,
                                       model_kwargs={})


def forward(model, used, cache):
    """The forward a decode step runs: generate()'s compiled call where generate() would compile."""
    if model._valid_auto_compile_criteria({"cache": cache}, used):
        return model.get_compiled_call(used.compile_config)
    return model.__call__


def static_cache(model, rows: int, length: int):
    """A static KV cache of rows x length for the model, reused (reset) when the shape repeats, so a
    captured CUDA graph replays on the same tensors. The length never shrinks: a shorter request
    reuses the longer cache, as generate() does."""
    length = max(length, getattr(model, "_previous_max_cache_length", 0))
    model._previous_max_cache_length = length
    key, cache = _caches.get(model, (None, None))
    if key == (rows, length):
        cache.reset()
    else:
        cache = transformers.StaticCache(config=model.config, max_cache_len=length)
        _caches[model] = ((rows, length), cache)
    return cache, length


def cache_shape(model) -> tuple | None:
    """(rows, length) of the static cache kept for a model, or None."""
    return _caches.get(model, (None, None))[0]


def release(model) -> None:
    """Forget the static cache kept for a model (its memory is then free to collect)."""
    _caches.pop(model, None)
