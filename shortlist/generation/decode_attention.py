"""Attention for one new token, as two small matmuls: the fast engine's decode step (one hack, one module).

A static decode step attends one query token per row to the whole static cache. Through transformers'
"sdpa", torch.compile lowers that to PyTorch's memory-efficient kernel, whose 64x64 tiles waste 63 of
64 query rows, after copying keys and values once per query head (repeat_kv: under compilation
transformers does not pack grouped queries). On the H200 that was 43% of SmolLM2's compiled decode
step (bench/results/decode_profile.h200.txt: fmha_cutlassF_f32 32%, the fused copies 11%).

NAME is registered with transformers' AttentionInterface (and its mask interface, as "sdpa": the same
boolean mask). With one query token and nothing but a mask, it computes softmax(q k^T * scale) v with
the query heads of a key/value group side by side (no copy of k, v); with anything else (a prompt, a
training pass, dropout, a soft cap, a position bias, sinks, a sparse indexer's picks) it is transformers'
sdpa_attention_forward itself. Only model types in CHECKED are switched: renaming the implementation
changes the code path of models that branch on its name. Only the order of fp32 sums differs from
sdpa, so two decoders agree to within the engine's tie margin (engine.TIE_RELATIVE). Only the fast
engine's decode loop runs it (engaged()): the engine's self-check compares it against generate() on
"sdpa", never against itself.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

NAME = "shortlist_decode"
# Model types whose modeling code does nothing but call the attention function under its name: decoded with both
# implementations, their logits agreed within ~2e-7 (a review on the CPU, tiny configs, transformers 5.24). Others
# keep "sdpa": some branch on the name itself (sparse-attention models pass the indexer's picks as `indices` to any
# implementation but "eager" and "sdpa"), and a model not checked is not guessed at.
CHECKED = ("llama", "qwen2", "qwen3", "mistral", "mixtral", "gemma3_text", "cohere2", "phi3", "granite", "olmo2",
           "olmo3", "smollm3", "gpt_neox", "starcoder2", "exaone4")
# keyword arguments that change what attention computes: where one is given, sdpa's own function runs
_CHANGES = ("softcap", "position_bias", "s_aux", "sinks", "indices", "head_mask")


def attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, is_causal=None,
              **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    rows, heads, length, dim = query.shape
    groups = key.shape[1]
    plain = (length == 1 and not dropout and heads % groups == 0 and key.shape[-1] == dim
             and value.shape[1] == groups and all(kwargs.get(k) is None for k in _CHANGES)
             and not kwargs.get("output_attentions")
             and (attention_mask is None or attention_mask.dim() == 4 and attention_mask.shape[1] == 1))
    if not plain:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    scale = dim ** -0.5 if scaling is None else scaling
    q = query.reshape(rows, groups, heads // groups, dim)  # the query heads of a key/value group side by side
    scores = torch.matmul(q, key.transpose(-1, -2)) * scale  # rows, groups, heads per group, cache length
    if attention_mask is not None:  # rows (or 1), 1, 1, cache length: shared by every head
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attention_mask, float("-inf"))
        else:
            scores = scores + attention_mask
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(value.dtype)
    out = torch.matmul(weights, value)  # rows, groups, heads per group, value's dim (not always the query's)
    return out.reshape(rows, heads, 1, value.shape[-1]).transpose(1, 2).contiguous(), None


def register() -> str:
    """Make NAME an attention implementation transformers knows (idempotent); returns it."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
    AttentionInterface.register(NAME, attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)
    return NAME


def engageable(model) -> bool:
    """Whether engaged() switches this model: one on "sdpa" whose type is CHECKED."""
    config = model.config
    return getattr(config, "_attn_implementation", None) == "sdpa" and getattr(config, "model_type", None) in CHECKED


@contextmanager
def engaged(model):
    """Within it, an engageable() model decodes its single new tokens with attention(); any other keeps its own.
    Restored to "sdpa" on the way out, also where switching or decoding raised, so that generate(), training
    and the engine's self-check reference run "sdpa" as they would without the engine."""
    switched = engageable(model)
    try:
        if switched:
            model.set_attn_implementation(register())
        yield
    finally:
        if switched and model.config._attn_implementation != "sdpa":
            model.set_attn_implementation("sdpa")
