"""The proof on one family: evaluate, train with GRPO + LoRA on the family's reward, evaluate again.

run_family() is the whole of notebook 02, and the notebook runs its steps one cell each: check() the commitment and
the tasks (one line, before any model loads), evaluate_before(), train(), evaluate_after(), record(). A dead run
resumes from what it left: the evaluation before training (work/<family>/before.json) and the last LoRA checkpoint,
inside which each save records the training seconds and scorer counts so far, so a resumed family's timings and
counts are those of the whole run, not of its last part.

A checkpoint cannot poison a rerun (proof/checkpoint.py: written whole or not at all, checked before resuming). A
full disk ends in one line (shortlist.output.DiskFull), with the half-written checkpoint removed.
"""
from __future__ import annotations

import math
import random
import shutil
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from proof import (adapter, bookkeeping, checkpoint, commit, evaluate, fast_grpo, files, records, seal, stats,
                   steptime, trl_internals, verify)
from proof.records import Evaluation, FamilyResult
from proof.settings import AUTO_MICRO_BATCH, Settings
from shortlist import audit, executors, output, provenance, scoring, sources
from shortlist.generation import compile_cache, engine, sampling
from shortlist.models import config as models, memory, precision
from shortlist.sources import Family
from shortlist.trainee import Trainee

CURVE_KEYS = {"reward": "reward", "reward_std": "reward_std", "frac_reward_zero_std": "frac_reward_zero_std",
              "completion_length": "completions/mean_length", "clipped_ratio": "completions/clipped_ratio",
              "entropy": "entropy", "loss": "loss", "step_time": "step_time"}


def grpo_config(settings: Settings, output_dir: str):
    import torch
    from trl import GRPOConfig
    trainee = settings.profile
    with trl_internals.renamed_alias():
        config = GRPOConfig(
            output_dir=output_dir, max_steps=settings.steps, learning_rate=settings.lr, seed=settings.seed,
            per_device_train_batch_size=settings.micro_batch, gradient_accumulation_steps=settings.grad_accum,
            num_generations=trainee.group, max_completion_length=trainee.max_new_tokens, **trainee.sampling(),
            loss_type=trl_internals.LOSS,
            chat_template_kwargs={"enable_thinking": trainee.enable_thinking},
            bf16=False, fp16=False, tf32=False,  # fp32 (models/precision.py): a T4 has no bf16; fp16 NaNs Qwen3
            gradient_checkpointing=False, logging_steps=settings.logging_steps, report_to=[], disable_tqdm=True,
            # output_dir is the staging folder: the bookkeeper publishes each checkpoint whole and keeps the last
            save_strategy="steps" if settings.checkpoint_every else "no", save_steps=settings.checkpoint_every or 1,
            save_total_limit=None, dataloader_pin_memory=torch.cuda.is_available(),
            # with generation fast, the step's bulk is LoRA forward/backward: a launch-bound pass that
            # compiling fuses (the first step pays the compilation); on a CPU compiling costs more than it saves
            torch_compile=settings.fast and torch.cuda.is_available())
    trl_internals.one_gpu(config)  # the batch runner gives each family process a GPU of its own
    if why := trl_internals.split_invariant(config):  # batch_per_device is speed only on that condition
        raise RuntimeError(f"trl {trl_internals.version()}: {why}, so batch_per_device would change results; "
                           f"install requirements.txt's trl")
    return config


def reward_function(scorer: scoring.Scorer, family: Family, trainee: Trainee, clock=None):
    def reward(prompts, completions, seed, **_):
        texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
        with clock.part("scoring_s") if clock is not None else nullcontext():
            return scorer.score(family, seed, [trainee.clean(t) for t in texts])
    return reward


def run_trainer(trainer, resume: Path | None, folder: Path) -> None:
    """trainer.train() from a checkpoint. A full disk ends in one line, its half-written checkpoint removed
    (its space back, nothing a rerun would trust); the staging folder goes in any case (TRL's model card)."""
    precision.fp32()  # building the trainer turned TF32 on (accelerate's dynamo plugin): fp32 is fp32
    try:
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    except Exception as e:
        if memory.out_of_memory(e):  # beyond the estimate of check() (a family's long prompts): one line
            s = trainer.args
            raise models.ModelError(f"out of GPU memory in a GRPO step at {s.per_device_train_batch_size} completions "
                                    f"a forward/backward and {s.max_completion_length} new tokens: set a smaller "
                                    f"batch_per_device (gradient accumulation covers the rest) or max_new_tokens; "
                                    f"a rerun resumes from the last checkpoint") from None
        if not output.disk_full(e):
            raise
        shutil.rmtree(folder / checkpoint.STAGING, ignore_errors=True)
        last = checkpoint.checkpoints_in(folder)
        raise output.full(folder, f"a checkpoint under {folder}",
                          last[-1][1].name if last else "the start of training") from None
    shutil.rmtree(folder / checkpoint.STAGING, ignore_errors=True)


def train(loaded: sampling.Loaded, settings: Settings, family: Family, rows: list[dict],
          scorer: scoring.Scorer, checkpoints: str, books: bookkeeping.Bookkeeping, log=print,
          keep: Path | None = None):
    """GRPO + LoRA from the last checkpoint, if any; returns the trained model and the log history. keep: where
    the final LoRA adapter goes (proof/adapter.py), before it is merged into the model."""
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import PrinterCallback
    from trl import GRPOTrainer

    trainee = settings.profile.for_source(family.source)  # asked and read as screening asked the family
    rows = list(rows)
    random.Random(0).shuffle(rows)
    dataset = Dataset.from_list([{"prompt": trainee.messages(r["question"]), "seed": r["seed"]} for r in rows])
    folder = Path(checkpoints)
    resume = checkpoint.resumable(folder, log)
    prior = files.read_json(resume / checkpoint.PROGRESS) if resume else {}  # whole: checkpoint.complete() read it
    clock = steptime.StepClock()
    keeper = bookkeeping.callback(scorer, family.key, prior, log, folder, clock, settings.micro_batch)
    arguments = dict(
        model=loaded.model, processing_class=loaded.tokenizer,
        reward_funcs=[reward_function(scorer, family, trainee, clock)],
        args=grpo_config(settings, str(folder / checkpoint.STAGING)), train_dataset=dataset, callbacks=[keeper],
        peft_config=LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha, target_modules="all-linear",
                               task_type="CAUSAL_LM"))
    books.trainer = "fast" if settings.fast and not trl_internals.gate() else \
        f"trl ({trl_internals.gate() or 'fast off'})"
    with trl_internals.renamed_alias():
        if books.trainer == "fast":  # the copy is taken before PEFT injects its layers into the model
            trainer = trl_internals.fast_trainer(fast_grpo.InferenceCopy(loaded.model), fast_grpo.generate,
                                                 **arguments)
        else:
            trainer = GRPOTrainer(**arguments)
        trainer.remove_callback(PrinterCallback)  # the bookkeeper logs a short line instead of every metric
        generation_timed = trl_internals.timed_generation(trainer, clock)
        if resume:
            books.resumed_at_step = int(checkpoint.CHECKPOINT.fullmatch(resume.name).group(1))
            log(f"{family.key}: resumed at step {books.resumed_at_step} of {settings.steps} (from {resume})")
        run_trainer(trainer, resume, folder)
        if generation_timed:  # the wrapper holds the trainer (a cycle): its GPU buffers go with the trainer
            del trainer._generate
    if keep is not None:
        adapter.save(trainer, keep)
    # where this process's steps went (a resumed run's earlier steps are not in it); untimed generation is in "rest"
    books.timings |= {"train_s": keeper.train_s(), "first_step_s": keeper.first_step_s,
                      "batch_per_device": keeper.micro_batches(),  # the micro-batches the steps were trained at
                      "step_parts": clock.summary() | {"generation_timed": generation_timed}}
    books.scoring = bookkeeping.plus(books.scoring, keeper.scoring())
    if books.trainer == "fast":
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


# --- the steps of notebook 02 ---------------------------------------------------------------------
@dataclass
class Run:
    """One family's run in progress: what check() found, and what each step added."""
    settings: Settings
    family: Family
    body: dict  # the committed predictions
    sha: str
    tasks: dict  # seed range name -> tasks, built once
    started_at: str = field(default_factory=provenance.now)
    books: bookkeeping.Bookkeeping = field(default_factory=bookkeeping.Bookkeeping)
    done: FamilyResult | None = None  # a finished result already there
    loaded: sampling.Loaded | None = None
    scorer: scoring.Scorer | None = None
    before: Evaluation | None = None
    trained: object = None
    history: list = field(default_factory=list)
    after: Evaluation | None = None

    @property
    def work(self):
        return files.work(self.settings.out, self.family.slug)

    def sampler(self, model=None) -> sampling.Sampler:
        loaded = self.loaded if model is None else sampling.Loaded(model, self.loaded.tokenizer, self.loaded.source)
        return sampling.Sampler(loaded, self.settings.profile, self.settings.sample_batch, self.settings.fast)

    def close(self) -> None:
        if self.scorer is not None:
            self.scorer.close()


def check(settings: Settings, family, log=print) -> Run:
    """The commitment, the trainee, the settings and the tasks, checked before any model loads; a finished result
    is kept only if it verifies again (proof/verify.py)."""
    family = sources.parse(family)
    body, sha = commit.verified(settings, family.key)
    run = Run(settings, family, body, sha, {})
    with verify.scorer_for(body) as scorer:  # a result that fails verification is moved aside: trained again
        old = verify.done(settings.out, body, sha, family.key, scorer, log)
    if old is not None:
        log(f"{family.key}: result already there ({files.result(settings.out, family.slug)})")
        run.done = old
        return run
    run.tasks = commit.family_tasks(settings, family, commit.held_out(body, family.key))
    commit.tasks_verified(body, family, run.tasks)
    config = models.model_config(settings.profile.model)
    commit.same_model(settings, body, models.identity(settings.profile.model))  # so a stored before.json is this model's
    models.check_fits(config, settings.profile)
    models.check_device(settings.profile.model, settings.cpu)
    gpu = None if settings.cpu else memory.usable_bytes()
    completions, longest = settings.prompts_per_step * settings.group, gpu and longest_prompt(settings, run)
    if gpu and not settings.batch_per_device:  # auto: the most up to the ceiling that this GPU holds
        settings = run.settings = settings.replace(batch_per_device=memory.most_that_fits(
            config, settings.micro_batch, settings.profile.max_new_tokens, settings.fast, gpu, completions, longest))
        log(f"{family.key}: {settings.batch_per_device} completions per forward/backward (batch_per_device=0: the "
            f"most up to {AUTO_MICRO_BATCH} that this GPU's {memory.size(gpu)} holds)")
    why = gpu and memory.check(config, settings.micro_batch, settings.profile.max_new_tokens, settings.fast,
                               gpu, completions, longest)
    if why:  # a step this GPU cannot hold, refused before the evaluation spends its minutes
        raise models.ModelError(f"{family.key}: {why}")
    # the GRPO configuration train() will build (nothing written): a TRL whose loss depends on the micro-batch
    # (trl_internals.split_invariant) is refused here, in its one line, not after the evaluation
    grpo_config(settings, str(run.work / "checkpoints" / checkpoint.STAGING))
    return run


def longest_prompt(settings: Settings, run: Run) -> int:
    """Tokens in the longest chat prompt of the family's training tasks, as GRPO tokenizes them (no model loads)."""
    questions = [t["question"] for t in run.tasks["train"]]
    if not questions:
        return 0
    trainee = settings.profile.for_source(run.family.source)
    return max(map(len, sampling.prompt_ids(sampling.tokenizer_of(trainee.model), trainee, questions)))


def evaluate_before(run: Run, log=print) -> Evaluation:
    """The held-out tasks, greedily, before training: stored, so a resumed run does not redo it."""
    if run.done:
        return run.done.before
    compile_cache.use(files.compile_cache(run.settings.out))  # what an earlier family compiled, this one reuses
    run.loaded = run.loaded or sampling.load(run.settings.profile.model)
    run.scorer = run.scorer or scoring.Scorer(deadline_s=run.settings.score_deadline_s)
    path = run.work / "before.json"
    stored = files.made_against(path, run.sha)
    try:
        run.before = Evaluation.from_dict(stored["evaluation"]) if stored else None
    except records.RecordError:
        run.before = None
    if run.before is not None:
        run.books.timings["eval_before_s"] = stored["seconds"]
        run.books.scoring = bookkeeping.plus(run.books.scoring, stored["scoring"])
        run.books.engine["before"] = stored["engine"]
    else:
        started, counts = time.perf_counter(), bookkeeping.counts(run.scorer, run.family.key)
        with engine.phase() as phase:
            run.before = evaluate.evaluate(run.sampler(), run.scorer, run.family, run.tasks["eval"])
        seconds, spent = time.perf_counter() - started, bookkeeping.plus(bookkeeping.counts(run.scorer, run.family.key), counts, -1)
        run.books.timings["eval_before_s"], run.books.engine["before"] = seconds, phase.status()
        run.books.scoring = bookkeeping.plus(run.books.scoring, spent)
        files.write_json(path, {"predictions_sha256": run.sha, "evaluation": run.before.as_dict(), "seconds": seconds,
                                "scoring": spent, "engine": run.books.engine["before"]})
    log(f"{run.family.key}: before training, accuracy {run.before.accuracy:.3f}, mean score "
        f"{run.before.mean_score:.3f}, extracted {run.before.extracted:.2f}, clipped {run.before.clipped_share:.2f}")
    return run.before


def train_family(run: Run, log=print) -> list[dict]:
    """GRPO + LoRA on the family's own reward; returns the reward curve."""
    if run.done:
        return list(run.done.reward_curve)
    sampling.release(run.loaded.model)  # the evaluation's cache: memory training needs on a T4
    with engine.phase() as phase:
        run.trained, run.history = train(run.loaded, run.settings, run.family, run.tasks["train"], run.scorer,
                                         str(run.work / "checkpoints"), run.books, log,
                                         files.adapter(run.settings.out, run.family.slug))
    run.books.engine["train"] = phase.status() | {"trainer": run.books.trainer}
    # the base model PEFT wrapped is not used again (with fast on, the trained model is another copy:
    # ~2.2 GB at 0.6B in fp32); dropping it lets release() give its memory back before evaluation
    run.loaded.model = run.trained
    sampling.release(run.trained)  # GRPO's cache and the trainer's leftovers, before the evaluation sizes its batch
    return curve(run.history)


def evaluate_after(run: Run, log=print) -> Evaluation:
    if run.done:
        return run.done.after
    started, counts = time.perf_counter(), bookkeeping.counts(run.scorer, run.family.key)
    with engine.phase() as phase:
        run.after = evaluate.evaluate(run.sampler(run.trained), run.scorer, run.family, run.tasks["eval"])
    run.books.timings["eval_after_s"] = time.perf_counter() - started
    run.books.scoring = bookkeeping.plus(run.books.scoring, bookkeeping.plus(bookkeeping.counts(run.scorer, run.family.key), counts, -1))
    run.books.engine["after"] = phase.status()
    log(f"{run.family.key}: after training, accuracy {run.after.accuracy:.3f}, mean score {run.after.mean_score:.3f}")
    return run.after


def record(run: Run, log=print) -> FamilyResult:
    """The family's result, validated and written atomically, after the seal of the family's files with it."""
    if run.done:
        return run.done
    s, books = run.settings, run.books
    timings = books.timings | step_times(run.history, books.timings["train_s"], s.steps) | {
        "resumed_at_step": books.resumed_at_step,
        "compile": compile_cache.counts()}  # this process's cache hits and misses: a warm start shows as hits
    # what a constant answer earns on the same tasks: a gain it matches is collapse, not learning
    baselines = audit.constants(run.scorer, s.profile.for_source(run.family.source), run.family, run.tasks["eval"],
                                list(run.after.answers), audit.most_frequent_gold(run.tasks["predict"]))
    result = outcome(s, run.family.key, run.sha, commit.prediction_for(run.body, run.family.key), run.before,
                     run.after, curve(run.history), model=run.loaded.source, engine=books.engine,
                     scoring=books.scoring, timings=timings, started_at=run.started_at, baselines=baselines)
    path = files.result(s.out, run.family.slug)
    seal.write(run.sha, s.out, run.family.slug, {path: records.encoded(result)})  # first: a kill then leaves no result
    records.write(path, result)
    run.close()
    run.done = result
    # not "held": whether the verdict held is the report's judgement (reserved questions, the audit, real learning)
    log(f"{result.family}: predicted {result.prediction['prediction']}; mean score {result.before.mean_score:.3f} -> "
        f"{result.after.mean_score:.3f} (gain {result.gain['gain']:+.3f}, p={result.gain['p']:.3f}), "
        f"improved: {'yes' if result.improved else 'no'}; recorded, the report judges whether the verdict held")
    return result


def run_family(settings: Settings, family, log=print) -> FamilyResult:
    """Notebook 02's steps in one call."""
    run = check(settings, family, log)
    try:
        evaluate_before(run, log)
        train_family(run, log)
        evaluate_after(run, log)
        return record(run, log)
    finally:
        run.close()


def outcome(settings: Settings, key: str, sha: str, prediction: dict, before: Evaluation, after: Evaluation,
            reward_curve: list[dict], **extra) -> FamilyResult:
    """A family's result: the evaluations and the seed's analysis of them (improved, held)."""
    gain = stats.paired_gain(before.scores, after.scores, settings.bootstrap_n)
    improved = stats.improved(gain, settings.alpha)
    extra = {"model": {}, "engine": {}, "scoring": {}, "timings": {}, "started_at": provenance.now()} | extra
    return FamilyResult(family=key, slug=sources.parse(key).slug, predictions_sha256=sha,
                        trainee=settings.profile.as_dict(), settings=settings.protocol(), prediction=prediction,
                        before=before, after=after, gain=gain, improved=improved,
                        held=improved == (prediction["prediction"] == "improves"), reward_curve=reward_curve,
                        **provenance.stamp(executors.with_peak(executors.placement_of_this_job())), **extra)
