"""What compiling costs, cold and with the persistent cache filled, measured where a CPU can: the
LoRA training pass compiled whole or by region, and the static-cache decode step.

    python bench/archive/compile_probe.py --only train_regional train_full --out bench/results   # ~35 min here
    python bench/archive/compile_probe.py --only train_regional train_full --layers 8 --calls 12 --runs cold
    python bench/archive/compile_probe.py --only decode decode_dynamic                             # ~25 min here

Each measurement is a fresh process, as each family of the proof is: "cold" starts on an empty
cache folder, "warm" on the folder the cold process filled (shortlist.compile_cache). The model is
Qwen3-0.6B's depth (28 layers) at a toy width: compile time grows with the number of operations
in the graph, not with their size, so depth is what matters here. On a CPU, Inductor writes C++
instead of Triton; GPU figures come from bench/realsize.py. Results and what follows from them:
bench/results/compile_probe.cpu.txt.
- train: PEFT LoRA (r 16, all linear layers) forward and backward (use_cache off, as TRL's) at
  4 x 100 tokens, then 4 x 120 (GRPO's widths change from step to step: Dynamo recompiles once
  with a dynamic width), then other widths. full: torch.compile of the whole model, as Trainer's
  torch_compile does; regional: accelerate's compile_regions (each decoder layer compiled once and
  reused), as proof.train's FastGRPOTrainer has Trainer do; _dynamic: dynamic shapes from the start.
- decode: engine.decode_static with the forward compiled as generate() compiles it, 8 rows, then
  4, 8 and 6 (evaluation's batch, GRPO's, ...); _dynamic: dynamic shapes from the start.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # bench/archive/ -> the repository
WIDTHS = (100, 120, 110, 130, 105, 115, 125)  # GRPO's micro-batches: the width changes from step to step
ROWS = (8, 4, 8, 6)  # sampling's batches: evaluation's, GRPO's, ...
VARIANTS = {"train_full": ("train", False, None), "train_full_dynamic": ("train", False, True),
            "train_regional": ("train", True, None), "train_regional_dynamic": ("train", True, True),
            "decode": ("decode", False, None), "decode_dynamic": ("decode", False, True)}
SHAPE = {"hidden_size": 64, "intermediate_size": 192, "num_hidden_layers": 28, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 2048, "max_position_embeddings": 1024}


def model():
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM
    torch.manual_seed(0)
    return Qwen3ForCausalLM(Qwen3Config(**SHAPE, tie_word_embeddings=True, eos_token_id=1, pad_token_id=0)).eval()


def train(regional: bool, dynamic: bool | None, calls: int) -> list[float]:
    import torch
    from peft import LoraConfig, get_peft_model
    peft = get_peft_model(model(), LoraConfig(r=16, lora_alpha=32, target_modules="all-linear",
                                              task_type="CAUSAL_LM"))
    peft.train()
    if regional:
        from accelerate.utils import compile_regions
        compiled = compile_regions(peft, dynamic=dynamic)
    else:
        compiled = torch.compile(peft, dynamic=dynamic)
    times = []
    for i in range(calls):  # the first two widths, then the others in turn
        width = WIDTHS[i] if i < 2 else WIDTHS[2 + (i - 2) % (len(WIDTHS) - 2)]
        ids = torch.randint(2, SHAPE["vocab_size"], (4, width), generator=torch.Generator().manual_seed(width))
        started = time.perf_counter()
        logits = compiled(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits  # as TRL
        torch.log_softmax(logits.float(), -1).mean().backward()
        times.append(time.perf_counter() - started)
    return times


def decode(dynamic: bool | None) -> list[float]:
    import torch
    from transformers import CompileConfig, GenerationConfig

    from shortlist.generation import engine
    m = model()
    compile_config = CompileConfig(dynamic=dynamic)
    compile_config._compile_all_devices = True  # generate() compiles on a GPU only; here on the CPU too
    config = GenerationConfig(max_new_tokens=8, do_sample=False, pad_token_id=0, eos_token_id=[1],
                              cache_implementation="static", disable_compile=False, max_cache_len=64,
                              compile_config=compile_config)
    times = []
    for rows in ROWS:
        ids = torch.randint(2, SHAPE["vocab_size"], (rows, 20), generator=torch.Generator().manual_seed(rows))
        started = time.perf_counter()
        engine.decode_static(m, ids, torch.ones_like(ids), config, [1])
        times.append(time.perf_counter() - started)
    return times


def child(what: str, folder: str, layers: str, calls: str) -> None:
    sys.path.insert(0, str(ROOT))
    SHAPE["num_hidden_layers"] = int(layers)
    from shortlist.generation import compile_cache
    compile_cache.use(folder)
    started = time.perf_counter()
    kind, regional, dynamic = VARIANTS[what]
    times = decode(dynamic) if kind == "decode" else train(regional, dynamic, int(calls))
    print(json.dumps({"calls_s": times, "total_s": time.perf_counter() - started, **compile_cache.counts()}))


def measure(what: str, layers: int, calls: int, runs: list[str]) -> dict:
    out = {}
    with tempfile.TemporaryDirectory() as folder:
        for run in runs:
            done = subprocess.run([sys.executable, __file__, "--child", what, folder, str(layers), str(calls)],
                                  capture_output=True, text=True,
                                  env=dict(os.environ, PYTHONPATH=str(ROOT)))
            if done.returncode:
                out[run] = {"error": done.stderr.strip().splitlines()[-1:]}
            else:
                out[run] = json.loads(done.stdout.strip().splitlines()[-1])
            print(what, run, out[run], flush=True)
    return out


def table(results: dict, variants: list[str], layers: int) -> list[str]:
    command = results.get("command", "python bench/archive/compile_probe.py")
    lines = [f"# {command}: {results['device']['cpus']} CPUs, torch {results['versions']['torch']}, "
             f"Qwen3 of {layers} layers at width {SHAPE['hidden_size']}, "
             f"{results['written_at']}",
             f"{'what':<24}{'run':<6}{'calls, s':<60}{'graphs':>7}{'fx hit/miss':>13}{'aot hit/miss':>14}"]
    for what in variants:
        for run, r in results[what].items():
            if "error" in r:
                lines.append(f"{what:<24}{run:<6} error: {r['error']}")
                continue
            calls = " ".join(f"{t:7.2f}" for t in r["calls_s"])
            lines.append(f"{what:<24}{run:<6}{calls:<60}{r['graphs']:7d}{r['fx_graph']['hit']:>7}/{r['fx_graph']['miss']:<5}"
                         f"{r['autograd']['hit']:>8}/{r['autograd']['miss']:<5}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--only", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--calls", type=int, default=5, help="training calls: two widths, then others cycled")
    ap.add_argument("--runs", nargs="*", default=["cold", "warm"], choices=["cold", "warm"])
    ap.add_argument("--name", default="compile_probe.cpu", help="the results' file name, less .txt/.json")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(*args.child)
    sys.path.insert(0, str(ROOT))
    from shortlist import provenance
    Path(args.out).mkdir(parents=True, exist_ok=True)
    results = {"command": " ".join(["python", *sys.argv]), "shape": SHAPE | {"num_hidden_layers": args.layers},
               "widths": WIDTHS, "rows": ROWS, **provenance.stamp()}
    for what in args.only:
        results[what] = measure(what, args.layers, args.calls, args.runs)
        (Path(args.out) / f"{args.name}.json").write_text(json.dumps(results, indent=1))
    lines = table(results, args.only, args.layers)
    print("\n".join(lines))
    (Path(args.out) / f"{args.name}.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
