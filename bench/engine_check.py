"""What the fast engine does under the transformers this process has: the gate, the self-check, its cost.

    python bench/engine_check.py --model /root/smollm2 --trainee smollm2          # on the GPU machine
    python bench/engine_check.py --model tiny --trainee "qwen3(max_new_tokens=16)"  # a CPU run of it

Three runs of the same greedy batch, each in a fresh engine state: generate() (the reference); the
fast engine as shipped (outside the verified transformers it steps aside); and the fast engine with
its version gate opened, so that only the self-check stands between a broken decode loop and the
numbers. Each says which engine served, why, what the self-check cost, and whether the completions
equal the reference's.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torch  # noqa: E402
import transformers  # noqa: E402

from shortlist.generation import engine  # noqa: E402
from shortlist import sources
from shortlist.generation import sampling
from shortlist import trainee

FAMILY = "products(max_digits=1)"


def greedy(loaded, who, questions, fast: bool) -> tuple[list[str], float]:
    sampler = sampling.Sampler(loaded, who, batch_size=len(questions), fast=fast)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    started = time.perf_counter()
    texts = [g[0] for g in sampler.complete(questions, greedy=True)]
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return texts, time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--trainee", default="smollm2")
    ap.add_argument("--tasks", type=int, default=32)
    ap.add_argument("--out", help="write the findings here as JSON")
    args = ap.parse_args()
    who = trainee.resolve(args.trainee).replace(model=args.model).for_source(sources.parse(FAMILY).source)
    loaded = sampling.load(args.model)
    questions = [t["question"] for t in sources.parse(FAMILY).tasks(range(100_000, 100_000 + args.tasks))]
    runs = {}
    engine.reset()
    reference, seconds = greedy(loaded, who, questions, fast=False)
    runs["generate()"] = {"seconds": seconds, "status": engine.status()}
    for name, verified in (("fast, as shipped", engine.VERIFIED),
                           ("fast, version gate opened", engine.VERIFIED + (transformers.__version__,))):
        engine.reset()
        engine.VERIFIED = verified
        texts, seconds = greedy(loaded, who, questions, fast=True)
        runs[name] = {"seconds": seconds, "status": engine.status(),
                      "equal_to_reference": sum(a == b for a, b in zip(texts, reference)), "of": len(texts),
                      "first": texts[0][:80]}
    print(f"transformers {transformers.__version__}, {args.model}, {len(questions)} greedy tasks of {FAMILY}")
    for name, run in runs.items():
        status = run["status"]
        checks = "; ".join(f"{c['identical_rows']}/{c['rows']} rows identical over {c['tokens']} tokens in "
                           f"{c['seconds']:.2f} s" for c in status["checks"]) or "none"
        same = f", {run['equal_to_reference']}/{run['of']} completions equal to generate()'s" if "of" in run else ""
        print(f"{name:28s} {run['seconds']:7.2f} s  engine {status['engine']}{same}; self-check: {checks}; "
              f"why: {status['why']}")
    if args.out:
        Path(args.out).write_text(json.dumps({"transformers": transformers.__version__, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
