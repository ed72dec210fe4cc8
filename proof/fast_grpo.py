"""GRPO's generation on the fast engine: a plain copy of the model being trained, and the call TRL's
trainer makes for its completions (proof/trl_internals.fast_trainer overrides TRL's generation with it).

Generating through the PEFT model runs every LoRA layer as extra small kernels; InferenceCopy runs
W + scale * B @ A as one weight. sync() writes the merged weights in place, so a compiled engine (CUDA
graphs hold pointers) sees them without recompiling. Only LoRA-adapted weights change during training,
so only those are copied. What this leans on beyond public API is in its adapters: transformers'
attributes a copy must not take (shortlist.models.hf_internals.plain_copy) and the names PEFT and
torch.compile give wrapped modules (trl_internals.plain_name).
"""
from __future__ import annotations

import torch

from proof import trl_internals
from shortlist.generation import engine, sampling
from shortlist.models import hf_internals


class InferenceCopy:
    """A plain copy of a model that GRPO trains with LoRA, kept equal to the adapted model."""

    def __init__(self, model):
        self.model = hf_internals.plain_copy(model).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def sync(self, peft_model) -> int:
        """Copy the merged weights of every LoRA layer; returns how many were copied."""
        from peft.tuners.lora import LoraLayer
        targets = dict(self.model.named_modules())
        copied = 0
        for name, module in peft_model.named_modules():
            if isinstance(module, LoraLayer) and hasattr(module, "base_layer"):
                target = targets[trl_internals.plain_name(name)]
                merged = module.base_layer.weight.detach().clone()
                for adapter in module.active_adapters:
                    if adapter in module.lora_A:
                        merged += module.get_delta_weight(adapter).to(merged.dtype)
                target.weight.copy_(merged)
                copied += 1
        return copied


def generate(model, prompt_ids, config, max_new_tokens: int, pad_id: int, eos: list[int]):
    """GRPO's completions from the fast engine on the merged copy: TRL's own generation_config with only
    the engine fields changed, so the samples come from the same distribution. None where the engine is
    off in this process (TRL's own generation serves)."""
    if engine.gate():
        return None
    config.update(cache_implementation="static", disable_compile=False,
                  max_cache_len=sampling.cache_length(prompt_ids, max_new_tokens))
    return sampling.generate_ids(model, prompt_ids, config, len(prompt_ids), pad_id, eos)
