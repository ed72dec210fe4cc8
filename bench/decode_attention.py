"""The fast engine's decode step with transformers' "sdpa" against decode_attention.py, on one GPU.

    python bench/decode_attention.py --model /root/smollm2 --trainee smollm2 --json $OUT/a.json   # GPU machine
    python bench/decode_attention.py --model qwen3-shape --trainee qwen3 --json /tmp/a.json      # Qwen3-0.6B's shape
    python bench/decode_attention.py --model tiny --trainee qwen3 --rows 4 --tokens 8 --json /tmp/a.json  # CPU

For each side: GRPO's generation as the engine runs it (ROWS rows: 4 prompts x 8, sampled at the trainee's
temperature, up to TOKENS new tokens, the static cache, the decode step compiled), timed REPEATS times after
one warm call; per decode step in ms. Then both sides decode the same batch greedily and the token ids are
compared (equal rows, and where they first differ) -- the engine's self-check ran inside each side's first call
too, against generate() on "sdpa", and its record is kept. --profile: where a side's call spends the GPU's time.
Also: how often one sampled call made the host wait for the GPU (syncs_per_call, on a GPU: every synchronizing
operation torch.cuda.set_sync_debug_mode sees, .item(), bool(), .tolist() and copies to the host among them;
reads_back_per_call: the .item() and bool() reads alone, aten::_local_scalar_dense, which the CPU counts too), and
whether multinomial.draw equals torch.multinomial token for token on this device.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from shortlist import provenance, sources  # noqa: E402
from shortlist.generation import decode_attention, engine, multinomial, sampling  # noqa: E402
from shortlist.trainee import resolve  # noqa: E402

FAMILY = "chain_sum(max_terms=2, max_digits=1)"


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def side(name: str, loaded, rows, trainee, repeats: int, profile: bool = False) -> dict:
    """Time GRPO's sampling call with decode attention on (ours) or off (sdpa); then decode greedily."""
    real, kernels = decode_attention.engaged, None
    if name == "sdpa":
        decode_attention.engaged = lambda model: contextlib.nullcontext()
    try:
        pad = loaded.tokenizer.pad_token_id
        eos = sampling.eos_token_ids(loaded.model, loaded.tokenizer)
        length = sampling.cache_length(rows, trainee.max_new_tokens)
        sampled = sampling.generation_config(loaded.model, loaded.tokenizer, trainee, greedy=False, fast=True,
                                             max_cache_len=length)
        engine.reset()
        started = time.perf_counter()
        sampling.generate_ids(loaded.model, rows, sampled, len(rows), pad, eos)
        sync()
        first = time.perf_counter() - started
        times, steps = [], []
        for i in range(repeats):
            torch.manual_seed(i)
            started = time.perf_counter()
            out = sampling.generate_ids(loaded.model, rows, sampled, len(rows), pad, eos)
            sync()
            times.append(time.perf_counter() - started)
            steps.append(max(map(len, out)))
        if profile and torch.cuda.is_available():
            from torch.profiler import ProfilerActivity
            with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                sampling.generate_ids(loaded.model, rows, sampled, len(rows), pad, eos)
                sync()
            kernels = prof.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=70)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as counted:
            sampling.generate_ids(loaded.model, rows, sampled, len(rows), pad, eos)
            sync()
        reads_back = sum(e.name == "aten::_local_scalar_dense" for e in counted.events())
        waits = syncs(lambda: sampling.generate_ids(loaded.model, rows, sampled, len(rows), pad, eos))
        greedy = sampling.generation_config(loaded.model, loaded.tokenizer, trainee, greedy=True, fast=True,
                                            max_cache_len=length)
        tokens = sampling.generate_ids(loaded.model, rows, greedy, len(rows), pad, eos)
        status = engine.status()
    finally:
        decode_attention.engaged = real
    call = statistics.median(times)
    return {"first_call_s": round(first, 3), "call_s": [round(t, 4) for t in times], "median_call_s": round(call, 4),
            "decode_steps": steps, "ms_per_decode_step": round(1e3 * call / statistics.median(steps), 3),
            "reads_back_per_call": reads_back, "syncs_per_call": waits, "engine": status["engine"], "why": status["why"],
            "checks": [{k: c[k] for k in ("rows", "identical_rows", "tied_rows", "differing_rows", "max_drift",
                                          "passed", "seconds")} for c in status["checks"]],
            "greedy": tokens, **({"kernels": kernels} if kernels else {})}


def syncs(call) -> int | None:
    """How often call() made the host wait for the GPU: the synchronizing operations torch.cuda.set_sync_debug_mode
    warns of (a read of a number, .tolist(), a copy to the host). None on a CPU, where nothing waits."""
    if not torch.cuda.is_available():
        return None
    import warnings
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    return sum("synchroniz" in str(w.message) for w in caught)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="a model folder, tiny, or qwen3-shape (built under --work)")
    ap.add_argument("--trainee", default="qwen3")
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--work", default="/tmp/decode-attention")
    ap.add_argument("--json", required=True)
    ap.add_argument("--profile", action="store_true", help="on a GPU: one more call under torch.profiler, its "
                    "kernels by CUDA time per side (the table in the JSON and printed)")
    args = ap.parse_args()
    model = args.model
    if model == "qwen3-shape":
        from shortlist.models import shapes
        model = str(shapes.ensure(Path(args.work) / "shape"))
    trainee = resolve(f"{args.trainee}(max_new_tokens={args.tokens})").for_source("reasoning_gym")
    loaded = sampling.load(model)
    prompts = args.rows // 8 or 1
    questions = [t["question"] for t in sources.parse(FAMILY).tasks(range(500, 500 + prompts))]
    rows = [r for r in sampling.prompt_ids(loaded.tokenizer, trainee, questions) for _ in range(8)][:args.rows]
    result = {"command": " ".join(sys.argv), "commit": os.environ.get("SHORTLIST_COMMIT", "unknown"),
              **provenance.stamp(), "model": args.model, "rows": len(rows),
              "max_new_tokens": args.tokens, "config": {k: getattr(loaded.model.config, k, None) for k in (
                  "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size")},
              "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
              "draw_equals_multinomial": multinomial.matches_torch("cuda" if torch.cuda.is_available() else "cpu"),
              "sides": {}}
    for name in ("sdpa", "decode_attention"):
        result["sides"][name] = side(name, loaded, rows, trainee, args.repeats, args.profile)
        print(name, {k: v for k, v in result["sides"][name].items() if k not in ("greedy", "kernels")}, flush=True)
        print(result["sides"][name].get("kernels", ""), flush=True)
    a, b = (result["sides"][n].pop("greedy") for n in ("sdpa", "decode_attention"))
    result["greedy_rows_equal"] = sum(x == y for x, y in zip(a, b))
    result["greedy_first_difference"] = [next((i for i, (s, t) in enumerate(zip(x, y)) if s != t), None)
                                         for x, y in zip(a, b) if x != y]
    s, d = (result["sides"][n]["ms_per_decode_step"] for n in ("sdpa", "decode_attention"))
    result["speedup"] = round(s / d, 3)
    print(f"decode step: sdpa {s} ms, decode_attention {d} ms ({result['speedup']}x); greedy rows equal "
          f"{result['greedy_rows_equal']} of {len(a)}", flush=True)
    Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
