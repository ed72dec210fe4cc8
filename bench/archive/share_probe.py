"""How several processes share one GPU: greedy decoding of a SmolLM2-135M-shaped model (random weights, built
offline from its config), batch 32 x 128 new tokens with a static cache (generate() compiles it), in N
processes at once; each reports its decode steps per second over the same timed window.

    python3 bench/archive/share_probe.py --jobs 8 [--seconds 30]      # run under MPS by starting its daemon first

Decode is ~95% of a GRPO step at this size, so the aggregate rate N processes reach, against one alone, is
what `--per-gpu N` can gain at most; with and without MPS it says whether time-slicing the GPU or the CPU
is what caps it.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

SMOLLM2 = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
               num_key_value_heads=3, vocab_size=49152, max_position_embeddings=2048, tie_word_embeddings=True)
SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=512, max_position_embeddings=512, tie_word_embeddings=True)


def worker(args) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**(SMALL if args.small else SMOLLM2))).to(device).eval()
    ids = torch.randint(3, model.config.vocab_size, (args.batch, 64), device=device)
    config = GenerationConfig(max_new_tokens=args.tokens, min_new_tokens=args.tokens, do_sample=False,
                              cache_implementation="static", pad_token_id=0, eos_token_id=None)

    def once():
        with torch.no_grad():
            model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
        if device == "cuda":
            torch.cuda.synchronize()
    started = time.time()
    for _ in range(2):  # compilation, then a warm call
        once()
    warm = time.time() - started
    Path(args.barrier, f"ready.{os.getpid()}").touch()
    while len(list(Path(args.barrier).glob("ready.*"))) < args.jobs:  # all timed over the same window
        time.sleep(0.05)
    calls, t0 = 0, time.time()
    while time.time() - t0 < args.seconds:
        once()
        calls += 1
    spent = time.time() - t0
    print(json.dumps({"pid": os.getpid(), "warm_s": round(warm, 1), "calls": calls, "seconds": round(spent, 2),
                      "steps_per_s": round(calls * args.tokens / spent, 1)}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--small", action="store_true", help="a tiny shape, for trying the probe on a CPU")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--barrier", default="")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    barrier = Path(f"/tmp/share-probe-{os.getpid()}")
    barrier.mkdir()
    argv = [sys.executable, __file__, "--worker", "--barrier", str(barrier), *sys.argv[1:]]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(args.jobs)]
    rows = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    shutil.rmtree(barrier, ignore_errors=True)
    total = sum(r["steps_per_s"] for r in rows)
    print(json.dumps({"jobs": args.jobs, "mps": bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY")),
                      "aggregate_steps_per_s": round(total, 1), "per_job": rows}))


if __name__ == "__main__":
    main()
