"""Where a fast GRPO step's time goes: decode step alone (why CUDA graphs do or do not replay), and
generation vs the rest of the step.

    TORCH_LOGS=perf_hints,recompiles,graph_breaks python bench/archive/decode_probe.py --model /root/smollm2
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for generation.py
from generation import FAMILY, bench_trainee, grpo_seconds_per_step, sync  # noqa: E402
from proof import trl_internals  # noqa: E402
from shortlist.generation import engine  # noqa: E402
from shortlist import sources
from shortlist.generation import sampling


def decode_ms_per_step(loaded, rows, new_tokens: int) -> float:
    config = sampling.generation_config(loaded.model, loaded.tokenizer, bench_trainee(new_tokens), False, True,
                                        sampling.cache_length(rows, new_tokens))
    config.update(eos_token_id=[-1])  # never stops: every row decodes new_tokens steps
    ids, mask = sampling.left_pad(rows, loaded.tokenizer.pad_token_id)
    ids, mask = ids.to(loaded.model.device), mask.to(loaded.model.device)
    for _ in range(2):
        engine.decode_static(loaded.model, ids, mask, config, [10**9])
    times = []
    for _ in range(3):
        sync()
        t = time.perf_counter()
        engine.decode_static(loaded.model, ids, mask, config, [10**9])
        sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times) / new_tokens * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    args = ap.parse_args()
    loaded = sampling.load(args.model)
    questions = [t["question"] for t in sources.parse(FAMILY).tasks(range(500, 504))]
    rows = [r for r in sampling.prompt_ids(loaded.tokenizer, bench_trainee(128), questions) for _ in range(8)]
    print(f"decode, 32 rows, compiled forward: {decode_ms_per_step(loaded, rows, 128):.2f} ms/step", flush=True)
    generation: list[float] = []
    original = trl_internals.fast_trainer  # what proof/train.py builds its GRPO trainer with

    def timing_trainer(*args, **kwargs):
        trainer = original(*args, **kwargs)
        inner = trainer._generate_single_turn

        def timed(*a, **k):
            sync()
            t = time.perf_counter()
            out = inner(*a, **k)
            sync()
            generation.append(time.perf_counter() - t)
            return out
        trainer._generate_single_turn = timed
        return trainer
    trl_internals.fast_trainer = timing_trainer
    r = grpo_seconds_per_step(args.model, True, 2, 3, "/tmp/probe-grpo")
    print(f"fast GRPO step {r['seconds_per_step']:.3f} s; generation per step "
          f"{statistics.median(generation[2:]):.3f} s; steps {[round(x, 2) for x in r['steps']]}", flush=True)


if __name__ == "__main__":
    main()
