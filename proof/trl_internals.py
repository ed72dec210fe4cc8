"""Every private internal of TRL (and of the Trainer under it) the proof leans on, in one place.

The fast GRPO trainer generates on a merged copy of the model through shortlist's fast engine
instead of TRL's own non-vLLM generation, and compiles the LoRA pass by region. To do that it
overrides two private methods of GRPOTrainer and reads some of its attributes:
- `_generate_single_turn(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)`,
  which must return (completion ids per prompt row, logprobs or None);
- `_build_accelerator_args(**kw)`, whose "dynamo_plugin" carries torch_compile's options;
- the trainer's `use_vllm`, `use_transformers_continuous_batching`, `generation_config`,
  `max_completion_length`, `eos_token_ids`, `_tokenizer` and `state.global_step`;
- `_generate(prompts)`, timed (not changed) for the step's split between generation and the rest
  (timed_generation: proof/steptime.py);
- and GRPOConfig's `_n_gpu`, set to at most 1: GRPOTrainer cannot use nn.DataParallel, which Trainer
  picks when one process sees several GPUs (Run All on Kaggle's T4 x2).
gate() keeps the fast trainer off outside the TRL releases it was verified on, or where these are
missing (TRL's own trainer runs instead, and the result records why); tests/test_trl_internals.py
fails loudly on a version whose internals changed.
"""
from __future__ import annotations

import copy
import importlib.metadata
import inspect
import warnings
from contextlib import contextmanager

VERIFIED = ("1.16.0",)  # TRL versions on which the fast trainer's samples equalled TRL's own (tests)
GENERATE_PARAMETERS = ("prompt_ids", "images", "multimodal_fields", "num_generations", "has_tool_images")
TRAINER_ATTRIBUTES = ("use_vllm", "use_transformers_continuous_batching", "generation_config",
                      "max_completion_length", "eos_token_ids", "_tokenizer")
REGIONAL_COMPILATION = True  # one decoder layer compiled and reused for all (accelerate's compile_regions)


def version() -> str:
    return importlib.metadata.version("trl")


def gate() -> str | None:
    """Why the fast trainer may not replace TRL's generation in this process, or None."""
    from trl import GRPOTrainer
    if version() not in VERIFIED:
        return f"trl {version()} is not one the fast trainer was verified on ({', '.join(VERIFIED)})"
    method = getattr(GRPOTrainer, "_generate_single_turn", None)
    if method is None or tuple(inspect.signature(method).parameters)[1:] != GENERATE_PARAMETERS:
        return f"trl {version()}: GRPOTrainer._generate_single_turn is not the one the fast trainer overrides"
    if not hasattr(GRPOTrainer, "_build_accelerator_args"):
        return f"trl {version()}: the Trainer has no _build_accelerator_args"
    return None


PEFT_PREFIX, COMPILED_PREFIX = "base_model.model.", "_orig_mod."  # PEFT's wrapper, torch.compile's wrapper


def plain_name(name: str) -> str:
    """A module's name in the trained (PEFT-wrapped, perhaps compiled) model, as the plain model names it."""
    return name.removeprefix(COMPILED_PREFIX).removeprefix(PEFT_PREFIX)


# batch_per_device is a speed setting (proof/settings.py) because, with these losses, GRPOTrainer normalises a
# micro-batch's loss by the whole generation batch (dapo: its token count; grpo, dr_grpo: its completions, the
# micro-batch's mean divided by the accumulation steps): the step's gradient is the same sum however it is split.
# bnpo normalises by each micro-batch's own tokens, so its gradient would depend on the split.
LOSS = "dapo"  # TRL 1.16's default, set explicitly so that another TRL's default cannot change the loss unseen
SPLIT_INVARIANT = ("dapo", "grpo", "dr_grpo")


def split_invariant(config) -> str | None:
    """Why this GRPO configuration's gradient would depend on how a step is split into micro-batches, or None."""
    from trl import GRPOTrainer
    if config.loss_type not in SPLIT_INVARIANT:
        return f"loss_type {config.loss_type!r} normalises each micro-batch on its own"
    if getattr(config, "top_entropy_quantile", 1.0) != 1.0 or getattr(config, "entropy_coef", 0.0) != 0.0:
        return "an entropy mask or bonus is taken per micro-batch"
    if config.steps_per_generation != config.gradient_accumulation_steps:
        return (f"steps_per_generation {config.steps_per_generation} is not the {config.gradient_accumulation_steps} "
                f"accumulation steps: a generation batch would span several optimizer steps")
    if not getattr(GRPOTrainer, "loss_is_scaled_for_ga", False):
        return f"trl {version()}: GRPOTrainer does not scale its loss for gradient accumulation itself"
    return None


def one_gpu(config) -> None:
    """Train on the first GPU a process sees, never through nn.DataParallel."""
    config._n_gpu = min(config.n_gpu, 1)


def fast_trainer(engine_copy, generate, **kwargs):
    """A GRPOTrainer whose generation runs generate(model, prompt_ids, config, pad_id, eos) on
    engine_copy (a fast_grpo.InferenceCopy of the model, synced once per step), with the trainer's own
    generation_config changed only in its engine fields. Where TRL's own path is needed (vLLM,
    continuous batching, images), TRL's own runs."""
    from trl import GRPOTrainer

    class FastGRPOTrainer(GRPOTrainer):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            missing = [name for name in TRAINER_ATTRIBUTES if not hasattr(self, name)]
            if missing:  # the gate passed, so this is a TRL that changed under a verified version number
                raise RuntimeError(f"trl {version()}: GRPOTrainer lacks {', '.join(missing)}; use fast=False")
            self.engine, self._synced_at = engine_copy, None

        def _build_accelerator_args(self, **kw):
            args = super()._build_accelerator_args(**kw)
            if "dynamo_plugin" in args:  # read where torch_compile is on
                args["dynamo_plugin"].use_regional_compilation = REGIONAL_COMPILATION
            return args

        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
            if self.use_vllm or self.use_transformers_continuous_batching or images or multimodal_fields:
                return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations,
                                                     has_tool_images)
            if self._synced_at != self.state.global_step:
                self.engine.sync(self.model)
                self._synced_at = self.state.global_step
            ids = generate(self.engine.model, prompt_ids, copy.deepcopy(self.generation_config),
                           self.max_completion_length, self._tokenizer.pad_token_id, self.eos_token_ids)
            if ids is None:  # the engine is off in this process: TRL's own generation
                return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations,
                                                     has_tool_images)
            return ids, None

    return FastGRPOTrainer(**kwargs)


def timed_generation(trainer, clock) -> bool:
    """Times every call of the trainer's _generate (the completions of a step: the fast engine's or TRL's own)
    as clock's "generation_s"; False, and nothing changed, where this TRL has no _generate(prompts)."""
    method = getattr(trainer, "_generate", None)
    if method is None or tuple(inspect.signature(method).parameters) != ("prompts",):
        return False

    def generate(prompts):
        with clock.part("generation_s"):
            return method(prompts)
    trainer._generate = generate
    return True


@contextmanager
def renamed_alias():
    """TRL still reads and sets gradient_checkpointing, an alias transformers 5 renamed (and PEFT reads
    is_gradient_checkpointing as it loads an adapter): the value (False) is what matters, so its FutureWarning
    is silenced where TRL and PEFT touch it, and only there."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.*deprecated", category=FutureWarning)
        yield
