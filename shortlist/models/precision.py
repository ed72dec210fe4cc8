"""fp32 means fp32: TensorFloat-32 off wherever a library turned it on, and a check that it stays off.

The trainee runs in fp32 (a T4 has no bf16, fp16 gives NaN losses with Qwen3). Two libraries switch an
Ampere-or-newer GPU's fp32 matmuls to TF32 (10 mantissa bits) when a run compiles, as GRPO does here
(proof/train.py: torch_compile on CUDA):
- transformers' TrainingArguments, with tf32=None and no fp16/bf16, calls enable_tf32(True)
  (training_args.py, "TF32 ... to speedup torch compile"): torch.backends.fp32_precision = "tf32";
- accelerate's AcceleratorState, with a dynamo backend and mixed precision "no", sets
  torch.backends.cuda.matmul.allow_tf32 = True (state.py).
So every GPU run trained, and evaluated after training, in TF32, while the evaluation before training ran in fp32,
and a T4 (no TF32) runs all of it in fp32. Measured on an H100 (bench/results/tf32.h100.txt): the engine's
self-check read the two decoders' logits apart by 5e-4 to 1.4e-3 of the logit scale inside training, against
1.1e-6 to 1.5e-6 in the same processes' evaluation before it, and refused the fast engine for one family of 8
(a step 3x slower for the rest of its run). It also split the compile cache: Inductor's FX graph cache keys
on torch.backends.cuda.matmul.fp32_precision, so the decode graph GRPO compiled (TF32; dynamic in the batch, which
Dynamo's profile then asks for everywhere) was never the one a later process's evaluation before training (fp32)
looked for: the likely reason its first evaluation missed on a warm cache (bench/results/realsize.frozen.h100.txt;
to be confirmed on the GPU).

fp32() sets every switch, the legacy ones first and then the new API (torch >= 2.9 raises on reading a mix of
the two), to full fp32; state() reads them without the legacy getters that raise; check() raises where any is
not full fp32. The trainer is built, then fp32() runs (proof/train.py); sampling.load() runs it too, and every
evaluation and GRPO generation checks.
"""
from __future__ import annotations

IEEE = "ieee"


def _switches():
    """The new API's fp32 precision switches (torch >= 2.9), by name; those this torch lacks are left out."""
    import torch
    b = torch.backends
    named = {"backends": b, "cuda.matmul": getattr(getattr(b, "cuda", None), "matmul", None),
             "cudnn": getattr(b, "cudnn", None), "cudnn.conv": getattr(getattr(b, "cudnn", None), "conv", None),
             "cudnn.rnn": getattr(getattr(b, "cudnn", None), "rnn", None)}
    return {name: module for name, module in named.items()
            if module is not None and hasattr(module, "fp32_precision")}


def fp32() -> None:
    """Every fp32 matmul and convolution at full fp32 precision, whatever turned TF32 on."""
    import torch
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for module in _switches().values():
        module.fp32_precision = IEEE


def state() -> dict:
    """Each switch's setting, as recorded with a result: the new API's values, or the legacy flags on a torch
    without it."""
    import torch
    found = {name: module.fp32_precision for name, module in _switches().items()}
    if not found:  # torch < 2.9: the legacy flags are the only ones, and reading them cannot raise
        found = {"matmul": torch.get_float32_matmul_precision(),
                 "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                 "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32}
    return found


def tf32_on(found: dict | None = None) -> list[str]:
    """The switches that let fp32 run as TF32 (empty: full fp32). "none" on the new API inherits its parent."""
    found = state() if found is None else found
    return [name for name, value in found.items()
            if value in ("tf32", "high", "medium", True)]


def check(where: str) -> None:
    """Raises, in one line, where fp32 would not run at full precision."""
    on = tf32_on()
    if on:
        raise RuntimeError(f"{where}: fp32 matmuls would run as TF32 ({', '.join(on)}); the trainee is fp32 "
                           "(shortlist.models.precision.fp32() turns it off)")
