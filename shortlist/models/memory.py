"""Whether a GPU holds a GRPO step of the trainee at the proof's settings, judged from the model's config alone.

A T4 (Kaggle's) has 15 GiB, less its CUDA context. Training Qwen3-0.6B in fp32 there, a setting pushed too far
(max_new_tokens=1024, batch_per_device=16) used to end in an out-of-memory error at the first GRPO step, after the
evaluation before training had spent its minutes. need() says, before any weights load, what the step takes:
- the weights, twice where the fast engine samples from a merged inference copy (fast_grpo.InferenceCopy);
- the logits of one forward/backward: batch x tokens x vocabulary, in fp32, LOGIT_COPIES times (the logits,
  their log-softmax and its gradient);
- the activations kept for the backward pass: ACTIVATION_FLOATS(hidden, intermediate) floats a token a layer.
Measured against it (bench/results/realsize.h200.json, the H200 capped at 15 GiB, Qwen3-0.6B's shape in fp32,
batch 4, 128 new tokens on chain_sum): GRPO's peak allocated 9.06 GiB, where need() says 9.1 at its prompt
allowance (tests/shortlist/test_memory.py reads that file). The evaluations size their batch to the memory
left (sampling.auto_batch), so only training's step is judged here. A family whose prompts are longer than
PROMPT_TOKENS is judged at its longest training prompt (proof/train.check tokenizes them). It is an estimate:
a step that still runs out is one line too (proof/train.py).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

GIB = 2 ** 30
ALLOCATOR = "expandable_segments:True"  # what allocator() sets: see there
CONTEXT_GIB = 0.5  # a CUDA context and the allocator's slack, beside what torch reserves
LOGIT_COPIES = 3
PROMPT_TOKENS = 160  # a Reasoning Gym prompt in Qwen3's chat template: the system prompt and a short question


def activation_floats(hidden: int, intermediate: int) -> int:
    """Floats kept per token per decoder layer for the backward pass, without checkpointing: the residual and
    norm inputs, q/k/v and attention's output (hidden-sized, ~10 of them) and the MLP's four intermediates."""
    return 10 * hidden + 4 * intermediate


@dataclass(frozen=True)
class Need:
    weights: int
    logits: int
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.logits + self.activations

    def gib(self) -> str:
        return (f"{size(self.total)} (weights {size(self.weights)}, logits {size(self.logits)}, "
                f"activations {size(self.activations)})")


def size(n: int) -> str:
    """Bytes as a person reads them: GiB to one decimal, MiB below one GiB (never a rounded '0.0 GiB')."""
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{max(1, round(n / 2 ** 20))} MiB"


def parameters(config) -> int:
    """The model's parameter count from its config alone: the model built on the meta device (no memory, no
    weights), so every architecture's own layers count (Qwen3's q/k norms, tied or untied embeddings)."""
    import torch
    from transformers import AutoModelForCausalLM
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def need(config, batch: int, tokens: int, fast: bool, dtype_bytes: int = 4, logit_tokens: int | None = None) -> Need:
    """What one GRPO forward/backward of `batch` completions of `tokens` tokens (prompt and completion) takes.
    logit_tokens: the tokens the logits are counted over, `tokens` unless given. TRL keeps the logits of the
    completion alone (logits_to_keep), so a prompt longer than the allowance adds activations, not logits; the
    logits' term keeps the allowance it was fitted with (check())."""
    t = config.get_text_config()
    rows = batch * tokens
    return Need(weights=parameters(config) * dtype_bytes * (2 if fast else 1),
                logits=batch * (logit_tokens or tokens) * t.vocab_size * 4 * LOGIT_COPIES,
                activations=rows * t.num_hidden_layers * activation_floats(t.hidden_size, t.intermediate_size)
                * dtype_bytes)


def check(config, batch: int, max_new_tokens: int, fast: bool, gpu_bytes: int, completions: int,
          prompt_tokens: int = 0) -> str | None:
    """Why this GPU (gpu_bytes usable by this process) cannot hold the step, in one line naming what to change,
    or None. completions: the step's completions, which batch must divide (the batch sizes suggested do).
    prompt_tokens: the family's longest training prompt; PROMPT_TOKENS is the floor (the estimate was fitted
    with it), so a family of longer prompts is judged at its own length (a micro-batch pads to its longest),
    in the activations it keeps for backward; the logits are the completion's and keep the fitted allowance."""
    tokens, fitted = max(PROMPT_TOKENS, prompt_tokens) + max_new_tokens, PROMPT_TOKENS + max_new_tokens
    found = need(config, batch, tokens, fast, logit_tokens=fitted)
    if found.total <= gpu_bytes - CONTEXT_GIB * GIB:
        return None
    smaller = _fitting(config, batch - 1, max_new_tokens, fast, gpu_bytes, completions, prompt_tokens)
    instead = (f"batch_per_device={smaller} (gradient accumulation covers the rest)" if smaller else
               "a smaller max_new_tokens or a GPU with more memory")
    prompts = f" (prompts of up to {prompt_tokens} tokens)" if prompt_tokens > PROMPT_TOKENS else ""
    return (f"a GRPO step at batch_per_device={batch} and max_new_tokens={max_new_tokens}{prompts} needs about {found.gib()}, "
            f"more than this GPU's {size(gpu_bytes)} less {CONTEXT_GIB} GiB for its context: set {instead}")


def _fitting(config, most: int, max_new_tokens: int, fast: bool, gpu_bytes: int, completions: int,
             prompt_tokens: int = 0) -> int | None:
    """The most completions per forward/backward, at most `most` and dividing `completions`, that this GPU holds
    by check()'s measure; None where none does."""
    tokens, fitted = max(PROMPT_TOKENS, prompt_tokens) + max_new_tokens, PROMPT_TOKENS + max_new_tokens
    have = gpu_bytes - CONTEXT_GIB * GIB
    return next((b for b in range(min(most, completions), 0, -1) if completions % b == 0
                 and need(config, b, tokens, fast, logit_tokens=fitted).total <= have), None)


def most_that_fits(config, most: int, max_new_tokens: int, fast: bool, gpu_bytes: int, completions: int,
                   prompt_tokens: int = 0) -> int:
    """The most completions per forward/backward, at most `most` and dividing `completions`, that check() lets this
    GPU hold; 1 where none fits (check() then refuses that in its own line)."""
    return _fitting(config, most, max_new_tokens, fast, gpu_bytes, completions, prompt_tokens) or 1


def usable_bytes() -> int | None:
    """This process's share of GPU 0's memory (cap_bytes), or None without a GPU."""
    import torch
    return cap_bytes(0) if torch.cuda.is_available() else None


def cap_bytes(device) -> int:
    """A GPU's memory as far as this process may take it: all of it, or the per-process fraction set on it
    (set_per_process_memory_fraction: a 15 GiB cap on a larger GPU, or a share of one)."""
    import torch
    total = torch.cuda.mem_get_info(device)[1]
    fraction = getattr(torch.cuda, "get_per_process_memory_fraction", None)  # torch >= 2.9
    return int(total * (fraction(device) if fraction is not None else 1.0))


def out_of_memory(e: BaseException) -> bool:
    """An allocation the GPU refused (torch's OutOfMemoryError, or the CUDA error it arrives as elsewhere)."""
    import torch
    return isinstance(e, torch.OutOfMemoryError) or "CUDA out of memory" in str(e)


def allocator() -> str | None:
    """Let torch's CUDA allocator grow its segments in place (expandable_segments) unless the user set
    PYTORCH_CUDA_ALLOC_CONF: the evaluation's batches of varying prompt widths otherwise leave the cache
    fragmented, and a T4 runs out with memory free. Measured on the H200 capped at 15 GiB (realsize.h200.json,
    Qwen3-0.6B's shape): the first evaluation reserved 14.6 GiB for a 9.7 GiB peak of allocations. Returns the
    setting in force. Call before the first CUDA allocation; after it, torch's own setter applies it to new
    segments (torch.cuda.memory._set_allocator_settings, a private function: tests/shortlist/test_memory.py
    checks it is still there)."""
    if "PYTORCH_CUDA_ALLOC_CONF" in os.environ:
        return os.environ["PYTORCH_CUDA_ALLOC_CONF"] or None
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = ALLOCATOR
    import torch
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.memory._set_allocator_settings(ALLOCATOR)
    return ALLOCATOR
