"""The proof on one family: evaluate, train with GRPO + LoRA on the family's reward, evaluate again.

run_family() checks the committed predictions first (one line, before any model loads), resumes
what a dead run left (the evaluation before training, the last LoRA checkpoint), and writes the
family's result atomically: metrics, every completion, the reward curve, timings, versions, the
device and the predictions hash it was checked against.
"""
from __future__ import annotations

import copy
import math
import os
import random
import time
import warnings

from proof import commit, evaluate, files, provenance, stats
from proof.settings import Settings
from shortlist import families as families_
from shortlist import compile_cache, sampling, scoring, trainee

# TRL's config still sets the alias transformers 5 renamed; the value (False) is what matters
warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.*deprecated", category=FutureWarning)

CURVE_KEYS = {"reward": "reward", "reward_std": "reward_std", "frac_reward_zero_std": "frac_reward_zero_std",
              "completion_length": "completions/mean_length", "clipped_ratio": "completions/clipped_ratio",
              "entropy": "entropy", "loss": "loss", "step_time": "step_time"}


def grpo_config(settings: Settings, output_dir: str):
    import torch
    from trl import GRPOConfig
    config = GRPOConfig(
        output_dir=output_dir, max_steps=settings.steps, learning_rate=settings.lr, seed=settings.seed,
        per_device_train_batch_size=settings.batch_per_device, gradient_accumulation_steps=settings.grad_accum,
        num_generations=settings.group, max_completion_length=settings.max_new_tokens,
        temperature=trainee.TEMPERATURE, top_p=trainee.TOP_P, top_k=trainee.TOP_K, min_p=trainee.MIN_P,
        repetition_penalty=trainee.REPETITION_PENALTY,
        chat_template_kwargs={"enable_thinking": trainee.ENABLE_THINKING},
        bf16=False, fp16=False,  # fp32: a T4 has no bf16, and fp16 gives NaN losses with Qwen3
        gradient_checkpointing=False, logging_steps=settings.logging_steps, report_to=[], disable_tqdm=True,
        save_strategy="steps" if settings.checkpoint_every else "no", save_steps=settings.checkpoint_every or 1,
        save_total_limit=1, dataloader_pin_memory=torch.cuda.is_available(),
        # with generation fast, the step's bulk is LoRA forward/backward: a launch-bound pass that
        # compiling fuses (the first step pays the compilation); on a CPU compiling costs more than it saves
        torch_compile=settings.fast and torch.cuda.is_available())
    # GRPOTrainer cannot use nn.DataParallel, which Trainer picks when one process sees several
    # GPUs (Run All on Kaggle's T4 x2): train on the first. The batch runner instead gives each
    # family process a GPU of its own.
    config._n_gpu = min(config.n_gpu, 1)
    return config


def reward_function(scorer: scoring.Scorer, family: families_.Family):
    def reward(prompts, completions, seed, **_):
        texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
        return scorer.score(family, seed, [trainee.clean(t) for t in texts])
    return reward


def progress_callback(log):
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        """One short line per logged step: papermill shows it, and no progress bar floods the notebook."""
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                log(f"step {state.global_step}/{state.max_steps}: reward {logs['reward']:.3f} "
                    f"(std {logs.get('reward_std', 0):.3f}, zero-std groups {logs.get('frac_reward_zero_std', 0):.2f}), "
                    f"length {logs.get('completions/mean_length', 0):.1f}")
    return Progress()


# Trainer's torch_compile, by region: one decoder layer compiled and reused for all of them (accelerate's
# compile_regions; embedding, norm and head apart) instead of the whole model. Measured on the CPU
# (bench/results/compile_probe.cpu.txt), 28-layer Qwen3 with LoRA: 247 s to compile instead of 790 s,
# a second process's first two calls 40 s instead of 102 s, steady calls no slower.
REGIONAL_COMPILATION = True


def fast_trainer(**kwargs):
    """A GRPOTrainer whose generation step runs on a sampling.InferenceCopy of the model.

    TRL's own non-vLLM step generates through the PEFT model with a dynamic cache and compilation
    off (disable_compile=True): 35 ms per decode step for SmolLM2-135M on an H200, where the
    same tokens cost 8 ms with a static cache in CUDA graphs (shared/docs/device.md). The config
    is TRL's own generation_config with only the engine fields changed, so the samples come from
    the same distribution; the weights are the adapted model's, merged, synced once per step."""
    from trl import GRPOTrainer

    class FastGRPOTrainer(GRPOTrainer):
        def __init__(self, *args, engine: sampling.InferenceCopy, **kw):
            super().__init__(*args, **kw)
            self.engine, self._synced_at = engine, None

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
            config = copy.deepcopy(self.generation_config)
            config.update(cache_implementation="static", disable_compile=False,
                          max_cache_len=sampling.cache_length(prompt_ids, self.max_completion_length))
            ids = sampling.generate_ids(self.engine.model, prompt_ids, config, len(prompt_ids),
                                        self._tokenizer.pad_token_id, self.eos_token_ids)
            return ids, None

    return FastGRPOTrainer(**kwargs)


def train(loaded: sampling.Loaded, settings: Settings, family: families_.Family, scorer: scoring.Scorer,
          checkpoints: str, log=print):
    """GRPO + LoRA from the last checkpoint, if any; returns the trained model and the log history."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import PrinterCallback
    from transformers.trainer_utils import get_last_checkpoint
    from trl import GRPOTrainer

    rows = family.tasks(settings.seed_ranges()["train"])
    random.Random(0).shuffle(rows)
    dataset = Dataset.from_list([{"prompt": trainee.messages(r["question"]), "seed": r["seed"]} for r in rows])
    arguments = dict(
        model=loaded.model, processing_class=loaded.tokenizer, reward_funcs=[reward_function(scorer, family)],
        args=grpo_config(settings, checkpoints), train_dataset=dataset, callbacks=[progress_callback(log)],
        peft_config=LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha, target_modules="all-linear",
                               task_type="CAUSAL_LM"))
    if settings.fast:  # the copy is taken before PEFT injects its layers into the model
        trainer = fast_trainer(engine=sampling.InferenceCopy(loaded.model), **arguments)
    else:
        trainer = GRPOTrainer(**arguments)
    trainer.remove_callback(PrinterCallback)  # Progress logs a short line instead of every metric
    resume = get_last_checkpoint(checkpoints) if os.path.isdir(checkpoints) else None
    if resume:
        log(f"resuming from {resume}")
    trainer.train(resume_from_checkpoint=resume)
    if settings.fast:
        trainer.engine.sync(trainer.model)  # the copy is the trained model, merged and already compiled
        return trainer.engine.model, trainer.state.log_history
    merged = trainer.model.merge_and_unload()
    merged.eval()
    return merged, trainer.state.log_history


def step_times(log_history: list[dict], train_s: float, steps: int) -> dict:
    """Seconds per step over the run, and the median logged step: the first steps pay compilation."""
    logged = sorted(h["step_time"] for h in log_history if "step_time" in h)
    return {"seconds_per_step": train_s / steps, "median_step_s": logged[len(logged) // 2] if logged else None}


def curve(log_history: list[dict]) -> list[dict]:
    def finite(x):  # JSON has no NaN; a step that logged none shows as a gap
        return x if isinstance(x, (int, float)) and math.isfinite(x) else None
    return [{"step": h["step"], **{k: finite(h.get(v)) for k, v in CURVE_KEYS.items()}}
            for h in log_history if "reward" in h]


def run_family(settings: Settings, family: str, log=print) -> dict:
    settings.validate()
    family = families_.parse(family)
    body, sha = commit.verified(settings, family.key)  # refuses before any model loads
    path = files.result(settings.out, family.slug)
    old = files.made_against(path, sha)
    if old and old["status"] == "done":
        log(f"{family.key}: result already there ({path})")
        return old
    work = files.work(settings.out, family.slug)
    started_at, timings = provenance.now(), {}
    compile_cache.use(files.compile_cache(settings.out))  # what an earlier family compiled, this one reuses
    loaded = sampling.load(settings.model)
    with scoring.Scorer(deadline_s=settings.score_deadline_s) as scorer:
        before_path = work / "before.json"
        stored = files.made_against(before_path, sha)
        if stored:
            before = stored["evaluation"]
        else:
            started = time.perf_counter()
            before = evaluate.evaluate(sampling.Sampler(loaded, settings.sample_batch, settings.max_new_tokens,
                                                        settings.fast),
                                       scorer, family, settings.seed_ranges()["eval"])
            timings["eval_before_s"] = time.perf_counter() - started
            files.write_json(before_path, {"predictions_sha256": sha, "evaluation": before})
        log(f"{family.key}: before training, accuracy {before['accuracy']:.3f}, mean score {before['mean_score']:.3f}")
        sampling.release(loaded.model)  # the evaluation's cache: memory training needs on a T4
        started = time.perf_counter()
        trained, history = train(loaded, settings, family, scorer, str(work / "checkpoints"), log)
        timings["train_s"] = time.perf_counter() - started
        sampling.release(trained)  # GRPO's cache and the trainer's leftovers, before the evaluation sizes its batch
        started = time.perf_counter()
        after = evaluate.evaluate(sampling.Sampler(sampling.Loaded(trained, loaded.tokenizer, loaded.source),
                                                   settings.sample_batch, settings.max_new_tokens,
                                                   settings.fast),
                                  scorer, family, settings.seed_ranges()["eval"])
        timings["eval_after_s"] = time.perf_counter() - started
        score_counts = vars(scorer.counts[family.key])
    result = outcome(settings, family.key, sha, commit.prediction_for(body, family.key), before, after,
                     curve(history)) | {"model": loaded.source, "started_at": started_at, "scoring": score_counts,
                                        "timings": timings | step_times(history, timings["train_s"], settings.steps)}
    files.write_json(path, result)
    log(f"{family.key}: predicted {result['prediction']['prediction']}; mean score {before['mean_score']:.3f} -> "
        f"{after['mean_score']:.3f} (gain {result['gain']['gain']:+.3f}, p={result['gain']['p']:.3f}); "
        f"held: {result['held']}")
    return result


def outcome(settings: Settings, key: str, sha: str, prediction: dict, before: dict, after: dict,
            reward_curve: list[dict]) -> dict:
    """A family's result: the evaluations and the seed's analysis of them (improved, held)."""
    gain = stats.paired_gain(before["scores"], after["scores"], settings.bootstrap_n)
    improved = stats.improved(gain, settings.alpha)
    return {"status": "done", "family": key, "slug": families_.parse(key).slug, "predictions_sha256": sha,
            "settings": settings.protocol(), "prediction": prediction, "before": before, "after": after,
            "gain": gain, "improved": improved, "held": improved == (prediction["prediction"] == "improves"),
            "reward_curve": reward_curve, **provenance.stamp()}
