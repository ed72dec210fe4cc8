"""Generation speed: the seed's configuration against ours, in one process on one GPU.

    python bench/generation.py --model /root/smollm2 --out $OUT      # on the GPU machine
    python bench/generation.py --model tiny --quick                  # a CPU run of the script itself

Same model, same tasks, same protocol (fp32, 32 completions x <= 128 tokens per GRPO step):
- GRPO: seconds per step. Seed: TRL's own generation (through the PEFT model, dynamic cache,
  compilation off) and a reward that rebuilds the dataset per answer. Ours: FastGRPOTrainer
  (an InferenceCopy with a static cache, CUDA graphs) and the sandboxed Scorer.
- Sampling: tokens per second on a screening workload (24 tasks x 8 samples). Seed: generate()
  with num_return_sequences, 32 sequences a call, the model's own generation_config underneath.
  Ours: Sampler(fast=True).
- Evaluation: seconds for 200 greedy tasks, seed vs ours at several batch sizes; and the share
  of greedy completions that are the same token for token as the reference generate().
Warm-up (compilation) is timed apart: the ratios are for the steady state, the warm-up is listed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import reasoning_gym
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from shortlist import provenance
from proof import fast_grpo, settings as settings_, train, trl_internals  # noqa: E402
from shortlist import sources  # noqa: E402
from shortlist.generation import sampling
from shortlist.models import precision
from shortlist import scoring
from shortlist import trainee as trainee_

FAMILY = "chain_sum(max_terms=2, max_digits=1)"
TRAINEE = "qwen3"  # the default trainee's prompt and sampling, on whichever model is measured


def bench_trainee(max_new: int) -> trainee_.Trainee:
    return trainee_.resolve(TRAINEE).replace(max_new_tokens=max_new).for_source("reasoning_gym")  # FAMILY's


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn):
    sync()
    started = time.perf_counter()
    out = fn()
    sync()
    return out, time.perf_counter() - started


# --- the seed's configuration ----------------------------------------------------------------
def seed_sample(loaded, questions: list[str], n: int, greedy: bool, max_new: int) -> list[list[int]]:
    """Completion ids as the seed drew them: 32 // n prompts a call, num_return_sequences = n,
    temperature and top_p set, every other field inherited from the model's generation_config."""
    tok, model = loaded.tokenizer, loaded.model
    tok.padding_side = "left"
    eos = sampling.eos_token_ids(model, tok)
    out = []
    rows = max(1, 32 // n)
    for i in range(0, len(questions), rows):
        texts = [tok.apply_chat_template(bench_trainee(max_new).messages(q), tokenize=False, add_generation_prompt=True,
                                         enable_thinking=False) for q in questions[i:i + rows]]
        enc = tok(texts, return_tensors="pt", padding=True).to(model.device)
        with torch.no_grad():
            gen = model.generate(**enc, max_new_tokens=max_new, do_sample=not greedy,
                                 temperature=None if greedy else 1.0, top_p=None if greedy else 1.0,
                                 num_return_sequences=n, pad_token_id=tok.pad_token_id)
        out += sampling.completion_ids(gen, enc["input_ids"].shape[1], eos)
    return out


def seed_reward(family):
    def reward(prompts, completions, seed, **_):  # the dataset is rebuilt for every answer, as the seed did
        scores = []
        for s, c in zip(seed, completions):
            text = c[0]["content"] if isinstance(c, list) else c
            answer = trainee_.resolve(TRAINEE).for_source(family.source).clean(text)
            ds = reasoning_gym.create_dataset(family.name, seed=s, size=1, **family.config)
            try:
                scores.append(float(ds.score_answer(answer=answer, entry=ds[0])))
            except Exception:
                scores.append(0.0)
        return scores
    return reward


# --- GRPO ------------------------------------------------------------------------------------
def grpo_seconds_per_step(model_name: str, fast: bool, warmup: int, measured: int, out_dir: str,
                          family_key: str = FAMILY) -> dict:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import PrinterCallback, TrainerCallback
    from trl import GRPOTrainer

    s = settings_.make(model=model_name, trainee=TRAINEE, families=[family_key], steps=warmup + measured, logging_steps=1,
                       checkpoint_every=0, fast=fast, **({} if fast else {"batch_per_device": 4}))  # the seed's: 4 x 8
    family = sources.parse(family_key)
    loaded = sampling.load(model_name)
    rows = family.tasks(s.seed_ranges()["train"])
    asked = s.profile.for_source(family.source)
    dataset = Dataset.from_list([{"prompt": asked.messages(r["question"]), "seed": r["seed"]} for r in rows])
    ends, reward_seconds = [], []
    scorer = scoring.Scorer() if fast else None
    inner = train.reward_function(scorer, family, asked) if fast else seed_reward(family)

    def reward(prompts, completions, seed, **kw):
        result, seconds = timed(lambda: inner(prompts, completions, seed, **kw))
        reward_seconds.append(seconds)
        return result

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            sync()
            ends.append(time.perf_counter())

    arguments = dict(model=loaded.model, processing_class=loaded.tokenizer, reward_funcs=[reward],
                     args=train.grpo_config(s, out_dir), train_dataset=dataset, callbacks=[Clock()],
                     peft_config=LoraConfig(r=s.lora_r, lora_alpha=s.lora_alpha, target_modules="all-linear",
                                            task_type="CAUSAL_LM"))
    trainer = trl_internals.fast_trainer(fast_grpo.InferenceCopy(loaded.model), fast_grpo.generate, **arguments) if fast \
        else GRPOTrainer(**arguments)
    trainer.remove_callback(PrinterCallback)
    precision.fp32()  # as proof.train.run_trainer: building the trainer turned TF32 on (shortlist/models/precision.py)
    started = time.perf_counter()
    trainer.train()
    if scorer:
        scorer.close()
    steps = [b - a for a, b in zip([started] + ends[:-1], ends)]
    steady = steps[warmup:]
    per_step = statistics.median(steady)
    return {"seconds_per_step": per_step, "steps": steps, "warmup_seconds": sum(steps[:warmup]),
            "reward_seconds_per_step": statistics.median(reward_seconds[warmup:]),
            "reward_share": statistics.median(reward_seconds[warmup:]) / per_step,
            "mean_reward": statistics.mean(h["reward"] for h in trainer.state.log_history if "reward" in h)}


# --- sampling and evaluation -----------------------------------------------------------------
def sampling_rates(loaded, questions: list[str], k: int, max_new: int, batch: int) -> dict:
    torch.manual_seed(0)
    seed_ids, seed_s = timed(lambda: seed_sample(loaded, questions, k, False, max_new))
    t = bench_trainee(max_new)
    sampler = sampling.Sampler(loaded, t, batch, fast=True)
    _, warm_s = timed(lambda: sampler.complete(questions[:max(1, batch // k)], k=k))
    rows = [ids for ids in sampling.prompt_ids(loaded.tokenizer, t, questions) for _ in range(k)]
    config = sampling.generation_config(loaded.model, loaded.tokenizer, t, False, True,
                                        sampling.cache_length(rows, max_new))
    ours_ids, ours_s = timed(lambda: sampling.generate_ids(loaded.model, rows, config, batch,
                                                           loaded.tokenizer.pad_token_id, sampler.eos, True))
    seed_tokens, ours_tokens = sum(map(len, seed_ids)), sum(map(len, ours_ids))
    return {"seed_tokens_per_s": seed_tokens / seed_s, "ours_tokens_per_s": ours_tokens / ours_s,
            "seed_seconds": seed_s, "ours_seconds": ours_s, "ours_warmup_seconds": warm_s,
            "seed_tokens": seed_tokens, "ours_tokens": ours_tokens}


def evaluation_seconds(loaded, questions: list[str], max_new: int, batches: list[int]) -> dict:
    reference, seed_s = timed(lambda: seed_sample(loaded, questions, 1, True, max_new))
    out = {"seed_seconds": seed_s, "ours": {}}
    t = bench_trainee(max_new)
    for batch in batches:
        sampler = sampling.Sampler(loaded, t, batch, fast=True)
        _, warm_s = timed(lambda: sampler.complete(questions[:batch], greedy=True))
        rows = sampling.prompt_ids(loaded.tokenizer, t, questions)
        config = sampling.generation_config(loaded.model, loaded.tokenizer, t, True, True,
                                            sampling.cache_length(rows, max_new))
        ids, seconds = timed(lambda: sampling.generate_ids(loaded.model, rows, config, batch,
                                                           loaded.tokenizer.pad_token_id, sampler.eos, True))
        same = sum(a == b for a, b in zip(ids, reference)) / len(reference)
        out["ours"][batch] = {"seconds": seconds, "warmup_seconds": warm_s, "same_as_reference": same}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="a local model folder, or tiny")
    ap.add_argument("--out", default=".", help="where generation.json goes")
    ap.add_argument("--quick", action="store_true", help="tiny workloads: checks the script, measures nothing")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--measured", type=int, default=4)
    args = ap.parse_args()
    quick = args.quick
    max_new = 16 if quick else trainee_.resolve(TRAINEE).max_new_tokens
    family = sources.parse(FAMILY)
    loaded = sampling.load(args.model)
    screen_q = [t["question"] for t in family.tasks(range(500, 500 + (4 if quick else 24)))]
    eval_q = [t["question"] for t in family.tasks(range(100_000, 100_000 + (8 if quick else 200)))]
    report = {"model": args.model, "family": FAMILY, "max_new_tokens": max_new, **provenance.stamp()}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    phases = [("sampling", lambda: sampling_rates(loaded, screen_q, trainee_.resolve(TRAINEE).group, max_new, 32)),
              ("evaluation", lambda: evaluation_seconds(loaded, eval_q, max_new, [32] if quick else [32, 200]))]
    for name, fast in (("seed", False), ("ours", True)):
        phases.append((f"grpo_{name}", lambda fast=fast, name=name: grpo_seconds_per_step(
            args.model, fast, 1 if quick else args.warmup, 1 if quick else args.measured, f"/tmp/bench-grpo-{name}")))
    for name, phase in phases:  # each phase's numbers are kept even if a later one fails
        print(f"{name} ...", flush=True)
        try:
            report[name] = phase()
        except Exception as e:  # noqa: BLE001  a benchmark reports what broke and goes on
            report[name] = {"error": f"{type(e).__name__}: {e}"}
            print(f"{name} failed: {report[name]['error']}", flush=True)
        (out / "generation.json").write_text(json.dumps(report, indent=1, default=str))
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    print(summary(report))


def summary(r: dict) -> str:
    if any("error" in r.get(k, {"error": "missing"}) for k in ("sampling", "evaluation", "grpo_seed", "grpo_ours")):
        return json.dumps({k: r.get(k) for k in ("sampling", "evaluation", "grpo_seed", "grpo_ours")}, indent=1,
                          default=str)
    g_seed, g_ours = r["grpo_seed"]["seconds_per_step"], r["grpo_ours"]["seconds_per_step"]
    s = r["sampling"]
    e = r["evaluation"]
    best = min(e["ours"], key=lambda b: e["ours"][b]["seconds"])
    gpu = ", ".join(r["device"].get("gpus", [])) or "CPU"
    lines = [f"# {r['model']} on {gpu}, fp32, {r['family']}, <= {r['max_new_tokens']} new tokens, "
             f"torch {r['versions']['torch']}, transformers {r['versions']['transformers']}, trl {r['versions']['trl']}",
             f"GRPO seconds per step   seed {g_seed:8.3f}   ours {g_ours:8.3f}   ratio {g_seed / g_ours:6.2f}x"
             f"   (ours' warm-up {r['grpo_ours']['warmup_seconds']:.1f} s; reward share of a step: seed "
             f"{r['grpo_seed']['reward_share']:.1%}, ours {r['grpo_ours']['reward_share']:.1%})",
             f"sampling tokens/s       seed {s['seed_tokens_per_s']:8.0f}   ours {s['ours_tokens_per_s']:8.0f}   "
             f"ratio {s['ours_tokens_per_s'] / s['seed_tokens_per_s']:6.2f}x   (ours' warm-up {s['ours_warmup_seconds']:.1f} s)"]
    for batch, o in e["ours"].items():
        lines.append(f"eval seconds, {batch:>3} a batch  seed {e['seed_seconds']:8.2f}   ours "
                     f"{o['seconds']:8.2f}   ratio {e['seed_seconds'] / o['seconds']:6.2f}x   same greedy completions "
                     f"{o['same_as_reference']:.1%}   (warm-up {o['warmup_seconds']:.1f} s)")
    lines.append(f"best eval batch: {best}")
    return "\n".join(lines)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
