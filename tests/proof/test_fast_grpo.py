"""GRPO's generation on the fast engine (proof/fast_grpo.py): the plain copy it generates with."""
import torch

from proof import fast_grpo, trl_internals


def test_an_inference_copy_is_frozen_and_follows_the_lora_weights_it_syncs(tiny_model):
    from peft import LoraConfig, get_peft_model
    copy = fast_grpo.InferenceCopy(tiny_model.model)
    assert all(not p.requires_grad for p in copy.model.parameters())
    peft = get_peft_model(fast_grpo.hf_internals.plain_copy(tiny_model.model),
                          LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.fill_(0.01)  # LoRA's B starts at zero: a delta that shows
    assert copy.sync(peft) > 0
    merged = peft.merge_and_unload()
    for (name, a), (_, b) in zip(merged.named_parameters(), copy.model.named_parameters()):
        assert torch.allclose(a, b, atol=1e-6), name


def test_a_wrapped_modules_name_is_the_plain_models():
    assert trl_internals.plain_name("_orig_mod.base_model.model.model.layers.0.mlp") == "model.layers.0.mlp"
    assert trl_internals.plain_name("model.layers.0") == "model.layers.0"
