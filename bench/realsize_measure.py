"""What each process of bench/realsize.py measures: one side (the seed's configuration, ours, or
the shape model's build) run as a family of the proof runs, its phases timed and written to its
JSON after every change (Record). bench/realsize.py starts one process per side with --role.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from pathlib import Path

FAMILY = "chain_sum"  # the seed's own, at default difficulty: prompt lengths vary as a real family's do
GIB = 1 << 30


class Record:
    """One process's measurements, written (atomically) after every change."""

    def __init__(self, path: Path, **head):
        self.path, self.data = path, {**head, "phases": {}}
        self.write()

    def phase(self, name: str, **values) -> dict:
        self.data["phases"].setdefault(name, {}).update(values)
        self.write()
        return self.data["phases"][name]

    def write(self) -> None:
        from shortlist import output
        output.write_text(self.path, json.dumps(self.data, indent=1, default=str))


def sync() -> None:
    import torch
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def release_memory() -> None:
    import gc

    import torch
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def memory_reset() -> None:
    import torch
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def memory_peak() -> dict:
    import torch
    if not torch.cuda.is_available():
        return {}
    return {"peak_allocated_gib": torch.cuda.max_memory_allocated() / GIB,
            "peak_reserved_gib": torch.cuda.max_memory_reserved() / GIB,
            "allocated_after_gib": torch.cuda.memory_allocated() / GIB}


def timed_phase(record: Record, name: str, fn, **extra):
    """Run fn as one phase: seconds, peak memory, compile-cache counts."""
    from shortlist.generation import compile_cache
    from shortlist.generation import engine
    memory_reset()
    sync()
    started = time.perf_counter()
    out = fn()
    sync()
    record.phase(name, seconds=time.perf_counter() - started, **memory_peak(), compile=compile_cache.counts(),
                 engine=engine.status(), **extra)  # which decoder served: a fallback would make ours slow, not wrong
    return out


def cap_memory(gib: float | None) -> dict:
    import torch
    if not gib or not torch.cuda.is_available():
        return {"memory_cap_gib": None}
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, gib * GIB / total))
    return {"memory_cap_gib": gib, "gpu_total_gib": total / GIB}


def workload(args) -> dict:
    from shortlist import sources
    family = sources.parse(FAMILY)
    return {"family": family, "max_new": 16 if args.quick else 128,
            "screen": [t["question"] for t in family.tasks(range(500, 500 + (2 if args.quick else 24)))],
            "eval_seeds": range(100_000, 100_000 + (8 if args.quick else 200))}


def ours(args, record: Record) -> None:
    """A family as proof.train.run_family runs it (load, evaluate, GRPO, evaluate), then steady state."""
    from proof import bookkeeping, evaluate, settings as settings_, train
    from shortlist.generation import compile_cache
    from shortlist.generation import sampling
    from shortlist import scoring
    w = workload(args)
    compile_cache.use(args.cache)
    checkpoints = str(Path(args.work) / f"checkpoints-{Path(args.json).stem}")  # none written; nothing to resume
    shutil.rmtree(checkpoints, ignore_errors=True)
    s = settings_.make(model=args.model, trainee=f"qwen3(max_new_tokens={w['max_new']})", families=[w["family"].key],
                       steps=args.steps, logging_steps=1, checkpoint_every=0, eval_n=len(w["eval_seeds"]),
                       sample_batch=0, fast=True,  # --quick's 8 evaluation tasks: judged at 8 distinct questions
                       min_unseen=min(settings_.DEFAULTS["min_unseen"], len(w["eval_seeds"])),
                       **({"batch_per_device": args.batch_per_device} if args.batch_per_device else {}))
    from shortlist.models import config as models, memory
    if not args.batch_per_device and memory.usable_bytes():  # as proof/train.check fits batch_per_device=0
        s = s.replace(batch_per_device=memory.most_that_fits(
            models.model_config(args.model), s.micro_batch, s.profile.max_new_tokens, s.fast, memory.usable_bytes(),
            s.prompts_per_step * s.group))
    record.data["batch_per_device"] = s.micro_batch
    eval_tasks = w["family"].tasks(w["eval_seeds"])
    started = time.perf_counter()
    loaded = timed_phase(record, "load", lambda: sampling.load(args.model))
    eval_rows = sampling.prompt_ids(loaded.tokenizer, s.profile.for_source(w["family"].source),
                                    [t["question"] for t in eval_tasks])
    length = sampling.cache_length(eval_rows, w["max_new"])

    def evaluation(model):
        sampler = sampling.Sampler(sampling.Loaded(model, loaded.tokenizer, loaded.source), s.profile, 0, True)
        return lambda: evaluate.evaluate(sampler, scorer, w["family"], eval_tasks)

    with scoring.Scorer() as scorer:
        timed_phase(record, "eval_before", evaluation(loaded.model),
                    batch=sampling.auto_batch(loaded.model, len(eval_rows), length), cache_length=length,
                    prompt_tokens_mean=statistics.mean(map(len, eval_rows)))
        sampling.release(loaded.model)
        steps = record.phase("grpo", steps_s=[])["steps_s"]
        books = bookkeeping.Bookkeeping()
        with clocked_steps(record, steps, deadline=args.deadline - args.reserve_s):
            trained, _ = timed_phase(record, "grpo", lambda: train.train(
                loaded, s, w["family"], w["family"].tasks(s.seed_ranges()["train"]), scorer, checkpoints,
                books, log=lambda line: print(line, flush=True)))
        # where a step's seconds went (proof/steptime.py): generation, scoring, the rest (TRL's training pass)
        record.phase("grpo", step_parts=books.timings.get("step_parts"))
        loaded.model = trained  # as proof.train.train_family: the base model PEFT wrapped is let go
        sampling.release(trained)
        timed_phase(record, "eval_after", evaluation(trained),
                    batch=sampling.auto_batch(trained, len(eval_rows), length))
        record.data["family_wall_s"] = time.perf_counter() - started
        record.write()
        if args.steady:  # the same evaluation again (nothing left to compile), then screening's sampling
            timed_phase(record, "eval_steady", evaluation(trained),
                        batch=sampling.auto_batch(trained, len(eval_rows), length))
            for name in ("sampling_first", "sampling"):
                tokens = timed_phase(record, name, lambda: len(ours_sample(trained, loaded.tokenizer, s.profile, w)))
                record.phase(name, tokens=tokens)


def ours_sample(model, tokenizer, trainee, w) -> list[int]:
    """Screening's workload (24 tasks x 8), as Sampler.complete draws it; returns every token drawn."""
    from shortlist.generation import sampling
    trainee = trainee.for_source(w["family"].source)
    rows = [ids for ids in sampling.prompt_ids(tokenizer, trainee, w["screen"]) for _ in range(trainee.group)]
    length = sampling.cache_length(rows, w["max_new"])
    config = sampling.generation_config(model, tokenizer, trainee, False, True, length)
    batch = sampling.auto_batch(model, len(rows), length)
    ids = sampling.generate_ids(model, rows, config, batch, tokenizer.pad_token_id,
                                sampling.eos_token_ids(model, tokenizer), same_shape=True)
    return [t for row in ids for t in row]


class clocked_steps:
    """Time every GRPO step (train.train's bookkeeping callback, wrapped), and stop training once the
    deadline has come, after at least three steps (the first, and two for a median)."""

    def __init__(self, record: Record, steps: list, deadline: float):
        self.record, self.steps, self.deadline = record, steps, deadline

    def __enter__(self):
        from proof import bookkeeping
        self.original, record, steps, deadline = bookkeeping.callback, self.record, self.steps, self.deadline

        def progress(*args, **kwargs):
            inner = self.original(*args, **kwargs)

            class Clocked(type(inner)):
                def on_train_begin(self, args, state, control, **kwargs):
                    super().on_train_begin(args, state, control, **kwargs)  # the bookkeeper's own clock starts here
                    sync()
                    self.last = time.perf_counter()

                def on_step_end(self, args, state, control, **kwargs):
                    super().on_step_end(args, state, control, **kwargs)
                    sync()
                    now = time.perf_counter()
                    steps.append(now - self.last)
                    self.last = now
                    record.write()
                    if time.time() > deadline and len(steps) >= 3:
                        record.phase("grpo", stopped_early_at=len(steps))
                        control.should_training_stop = True
            return Clocked()
        bookkeeping.callback = progress
        return self

    def __exit__(self, *exc):
        from proof import bookkeeping
        bookkeeping.callback = self.original


def seed(args, record: Record) -> None:
    """The seed's configuration (bench/generation.py's), as its grpo_proof.py runs a family."""
    import generation
    from shortlist.generation import sampling
    w = workload(args)
    loaded = timed_phase(record, "load", lambda: sampling.load(args.model))
    questions = [t["question"] for t in w["family"].tasks(w["eval_seeds"])]

    def evaluation():
        ids = generation.seed_sample(loaded, questions, 1, True, w["max_new"])
        texts = loaded.tokenizer.batch_decode(ids, skip_special_tokens=True)
        return generation.seed_reward(w["family"])(None, texts, list(w["eval_seeds"]))

    timed_phase(record, "eval_before", evaluation, batch=32)
    tokens = timed_phase(record, "sampling", lambda: sum(map(len, generation.seed_sample(
        loaded, w["screen"][:4], 8, False, w["max_new"]))))  # one call: 4 prompts x 8, the seed's batch
    record.phase("sampling", tokens=tokens)
    del loaded  # the seed loads a fresh model for each family's training
    release_memory()
    grpo = timed_phase(record, "grpo", lambda: generation.grpo_seconds_per_step(
        args.model, False, 1, args.steps - 1, str(Path(args.work) / "seed-grpo"), FAMILY))
    record.phase("grpo", steps_s=grpo["steps"], mean_reward=grpo["mean_reward"])


def build(args, record: Record) -> None:
    from shortlist.models import shapes
    small = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 16} if args.quick else {}
    path = timed_phase(record, "build", lambda: shapes.ensure(Path(args.model_path), **small))
    record.phase("build", path=str(path), quick_shape=small or None)


def role(args) -> None:
    import torch
    from shortlist import provenance
    record = Record(Path(args.json), role=args.role, model=args.model, pid=os.getpid(), **provenance.stamp(),
                    **cap_memory(args.memory_gb), torch_threads=torch.get_num_threads())
    {"seed": seed, "ours": ours, "build": build}[args.role](args, record)
    record.data["done"] = True
    record.write()
