"""Profile one static decode step: the compiled forward alone, the token pick alone, and the kernels.

    python bench/archive/decode_profile.py --model /root/smollm2
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for generation.py
from generation import FAMILY, bench_trainee  # noqa: E402
from shortlist import sources  # noqa: E402
from shortlist.generation import sampling


def per_call_ms(fn, n=50) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    args = ap.parse_args()
    loaded = sampling.load(args.model)
    model = loaded.model
    questions = [t["question"] for t in sources.parse(FAMILY).tasks(range(500, 504))]
    rows = [r for r in sampling.prompt_ids(loaded.tokenizer, bench_trainee(128), questions) for _ in range(8)]
    ids, mask = sampling.left_pad(rows, loaded.tokenizer.pad_token_id)
    ids, mask = ids.cuda(), mask.cuda()
    width, length = ids.shape[1], sampling.cache_length(rows, 128)
    config = sampling.generation_config(model, loaded.tokenizer, bench_trainee(128), False, True, length)
    used, _ = model._prepare_generation_config(config)
    from transformers import StaticCache
    cache = StaticCache(config=model.config, max_cache_len=length)
    attention = torch.ones(32, length, dtype=mask.dtype, device="cuda")
    attention[:, :width] = mask
    positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=attention, position_ids=positions, cache=cache,
                       cache_position=torch.arange(width, device="cuda"), use_cache=True, logits_to_keep=1).logits
        token = logits[:, -1].argmax(-1)
        position = positions[:, -1:] + 1
        cpos = torch.tensor([width], device="cuda")
        forward = model.get_compiled_call(used.compile_config)
        eager = lambda: model(input_ids=token[:, None], attention_mask=attention, position_ids=position,  # noqa: E731
                              cache=cache, cache_position=cpos, use_cache=True).logits
        compiled = lambda: forward(input_ids=token[:, None], attention_mask=attention, position_ids=position,  # noqa
                                   cache=cache, cache_position=cpos, use_cache=True).logits
        probs_in = logits[:, -1].float()
        pick = lambda: torch.multinomial(torch.softmax(probs_in, -1), 1)  # noqa: E731
        t = time.perf_counter()
        compiled()
        torch.cuda.synchronize()
        print(f"first compiled call {time.perf_counter() - t:.1f} s", flush=True)
        print(f"eager forward     {per_call_ms(eager):7.3f} ms", flush=True)
        print(f"compiled forward  {per_call_ms(compiled):7.3f} ms", flush=True)
        print(f"pick (softmax+multinomial) {per_call_ms(pick):7.3f} ms", flush=True)
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                compiled()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=15, max_name_column_width=60))
        print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=12, max_name_column_width=60))


if __name__ == "__main__":
    main()
