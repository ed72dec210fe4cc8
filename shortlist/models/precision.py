"""fp32 means fp32: TensorFloat-32 off wherever a library turned it on, and a check that it stays off.

The trainee runs in fp32 (a T4 has no bf16, fp16 gives NaN losses with Qwen3). Two libraries switch an
Ampere-or-newer GPU's fp32 matmuls to TF32 (10 mantissa bits) while the trainer of a compiled run is built, as
GRPO's is here (proof/train.py: torch_compile on CUDA):
- transformers' TrainingArguments, with tf32=None and no fp16/bf16, calls enable_tf32(True)
  (training_args.py, step 9, "TF32 ... to speedup torch compile"): torch.backends.fp32_precision = "tf32";
- accelerate's AcceleratorState, with a dynamo backend and mixed precision "no", sets
  torch.backends.cuda.matmul.allow_tf32 = True (state.py).
So every compiled GPU run trained, and evaluated after training, in TF32, while its evaluation before training
ran in fp32, and a T4 (no TF32) runs all of it in fp32. The runs' own self-checks show it
(bench/results/tf32.h100.txt): the two decoders' logits 3e-4 to 1.4e-3 of the logit scale apart in training,
against ~1e-6 in the same processes' evaluation before it; the check refused the fast engine for one family of 8
(3x slower steps from then on). It also split the compile cache: Inductor's FX graph cache keys on
torch.backends.cuda.matmul.fp32_precision, so the decode graph GRPO compiled (TF32; dynamic in the batch, which
Dynamo's profile then asks for everywhere) was never the one a later process's evaluation before training (fp32)
looked for: the likely reason its first evaluation missed on a warm cache (bench/results/realsize.frozen.h100.txt;
to be confirmed on the GPU).

fp32() sets every switch, the legacy ones first and then the new API (torch >= 2.9 raises on reading a mix of
the two), to full fp32; state() reads them without the legacy getters that raise; check() raises where a switch
that governs matmuls is not full fp32 (cuDNN's convolution switches, "tf32" in a fresh process, are recorded,
not checked: a transformer LM has no convolution). The trainer is built, then fp32() runs (proof/train.py);
sampling.load() runs it too; every sampling call (evaluations, screens) and every GRPO step checks.
"""
from __future__ import annotations

IEEE = "ieee"


SWITCHES = ("cuda.matmul", "cudnn", "cudnn.conv", "cudnn.rnn", "mkldnn", "mkldnn.matmul", "mkldnn.conv", "mkldnn.rnn")
MATMUL = ("backends", "cuda.matmul", "mkldnn", "mkldnn.matmul", "matmul", "cuda.matmul.allow_tf32")  # check() reads


def _switches() -> dict:
    """The new API's fp32 precision switches (torch >= 2.9), by name; those this torch lacks are left out."""
    import torch
    found = {"backends": torch.backends}
    for path in SWITCHES:
        module = torch.backends
        for part in path.split("."):
            module = getattr(module, part, None)
        found[path] = module
    return {name: module for name, module in found.items() if hasattr(module, "fp32_precision")}


def fp32() -> None:
    """Every fp32 matmul and convolution at full fp32 precision, whatever turned TF32 (or bf16) on."""
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


def reduced(found: dict | None = None, only=MATMUL) -> list[str]:
    """The switches (of only; None: all) that let fp32 run at less than full precision: TF32 on a GPU, bf16 on a
    CPU (empty: full fp32). "none" on the new API inherits its parent, which is a switch of its own here."""
    found = state() if found is None else found
    return [name for name, value in found.items()
            if (only is None or name in only) and value in ("tf32", "bf16", "high", "medium", True)]


def check(where: str) -> None:
    """Raises, in one line, where an fp32 matmul would not run at full precision."""
    on = reduced()
    if on:
        raise RuntimeError(f"{where}: fp32 matmuls would run at reduced precision, TF32 or bf16 ({', '.join(on)}); "
                           "the trainee is fp32 (shortlist.models.precision.fp32() turns it off)")
