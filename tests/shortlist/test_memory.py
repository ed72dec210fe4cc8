"""Whether a GPU holds a GRPO step (shortlist/models/memory.py): the estimate against the models it counts and the
H200 measurement it is checked on, and the refusal's one line."""
import json
from pathlib import Path

import pytest
from transformers import AutoConfig, AutoModelForCausalLM, Qwen3Config

from shortlist.models import memory, shapes, tiny

QWEN3 = Qwen3Config(**{k: v for k, v in shapes.CONFIG.items() if k != "architectures"})
T4 = 15 * memory.GIB
REALSIZE = Path(__file__).parents[2] / "bench" / "results" / "realsize.h200.json"


def test_the_parameter_count_is_the_models_own():
    """596 M for Qwen3-0.6B, as Qwen's card says; and exactly what the tiny model holds, counted tensor by tensor."""
    assert abs(memory.parameters(QWEN3) / 596e6 - 1) < 0.005
    folder = tiny.ensure()
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert memory.parameters(AutoConfig.from_pretrained(folder)) == sum(p.numel() for p in model.parameters())


def test_the_estimate_covers_the_step_measured_on_the_h200_and_is_not_far_above_it():
    """realsize.h200.json: ours (the fast engine) at batch 4, 128 new tokens, Qwen3-0.6B's shape in fp32, capped at
    15 GiB. An estimate below the measurement would let a T4 run out of memory; far above, it refuses runs that fit."""
    found = json.loads(REALSIZE.read_text())["sides"]
    measured = max(found[side]["phases"]["grpo"]["peak_allocated_gib"] for side in found if side.startswith("ours"))
    estimate = memory.need(QWEN3, 4, memory.PROMPT_TOKENS + 128, fast=True).total / memory.GIB
    assert measured <= estimate <= 1.25 * measured, (measured, estimate)


def test_the_default_trainee_fits_a_t4_and_a_longer_budget_is_refused_naming_a_batch_that_divides_the_step():
    assert memory.check(QWEN3, 4, 128, True, T4, 32) is None
    assert memory.check(QWEN3, 4, 256, True, T4, 32) is None
    why = memory.check(QWEN3, 4, 512, True, T4, 32)
    assert why.startswith("a GRPO step at batch_per_device=4 and max_new_tokens=512 needs about 15.")
    assert why.endswith("set batch_per_device=2 (gradient accumulation covers the rest)") and "\n" not in why
    assert memory.check(QWEN3, 2, 512, True, T4, 32) is None  # what it says to set, fits
    # 24 completions a step: 5 does not divide them, so the batch it names is 4, not 5
    assert "set batch_per_device=4 " in memory.check(QWEN3, 6, 384, True, T4, 24)


def test_where_no_batch_fits_it_says_what_else_to_change():
    why = memory.check(QWEN3, 4, 128, True, 6 * memory.GIB, 32)
    assert why.endswith("set a smaller max_new_tokens or a GPU with more memory")


@pytest.mark.parametrize("fast, copies", [(True, 2), (False, 1)])
def test_the_fast_engines_inference_copy_counts_its_weights_twice(fast, copies):
    assert memory.need(QWEN3, 1, 1, fast).weights == copies * memory.parameters(QWEN3) * 4


def test_the_allocator_grows_segments_in_place_unless_the_user_chose(monkeypatch):
    import torch
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    assert memory.allocator() == memory.ALLOCATOR == "expandable_segments:True"
    import os
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == memory.ALLOCATOR
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False")  # the user's own: kept
    assert memory.allocator() == "expandable_segments:False"
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:False"
    # after CUDA starts, torch's private setter is how it applies: a torch without it must fail here, not on a GPU
    assert callable(torch.cuda.memory._set_allocator_settings)


def test_loading_the_model_sets_the_allocator(monkeypatch, tiny_model):
    import os
    from shortlist.generation import sampling
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    sampling.load(tiny.NAME)
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == memory.ALLOCATOR


def test_a_longer_prompt_than_the_allowance_is_counted_and_a_shorter_one_is_not():
    """The allowance is the floor the estimate was fitted at (realsize's prompts averaged 79 tokens): a shorter
    prompt says exactly what no prompt says; 500-token prompts still fit a T4 at the default batch (they add
    activations, and TRL keeps logits for the completion alone); 1,200-token prompts do not, and the line names
    the prompts and a batch that holds them."""
    assert memory.check(QWEN3, 4, 512, True, T4, 32, prompt_tokens=40) == memory.check(QWEN3, 4, 512, True, T4, 32)
    assert memory.check(QWEN3, 4, 128, True, T4, 32, prompt_tokens=500) is None
    why = memory.check(QWEN3, 4, 128, True, T4, 32, prompt_tokens=1200)
    assert why.startswith("a GRPO step at batch_per_device=4 and max_new_tokens=128 (prompts of up to 1200 tokens)")
    batch = int(why.split("set batch_per_device=")[1].split()[0])
    assert batch < 4 and memory.check(QWEN3, batch, 128, True, T4, 32, prompt_tokens=1200) is None
    longer = memory.need(QWEN3, 4, 1200 + 128, True, logit_tokens=memory.PROMPT_TOKENS + 128)
    fitted = memory.need(QWEN3, 4, memory.PROMPT_TOKENS + 128, True)
    assert longer.logits == fitted.logits and longer.activations > fitted.activations
