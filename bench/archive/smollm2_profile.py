"""How SmolLM2-135M-Instruct should be asked: candidate prompts and extractions, measured.

    python bench/archive/smollm2_profile.py --model /root/smollm2 --write /root/smollm2.json   # on the GPU machine
    python bench/archive/smollm2_profile.py --model tiny --quick                               # a CPU run of it

Each candidate is screened as GRPO samples (24 tasks x 8, the profile's sampling) on three easy
numeric families, and evaluated greedily on 200 held-out easy products (the task the seed's own code
measured at 0.735 on this model). The candidate with the highest mean pass@1 is the profile: it
is the one whose answers the model actually gives in a form the extraction reads. --write saves it
as a trainee file (profile "smollm2") for `proof run --trainee`.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
from shortlist import sources  # noqa: E402
from shortlist.generation import sampling
from shortlist import screening
from shortlist import scoring
from shortlist import trainee

EASY = ("products(max_digits=1)", "chain_sum(max_terms=2, max_digits=1)",
        "basic_arithmetic(max_terms=2, max_digits=1, operators=['+', '-'], allow_parentheses=False, "
        "allow_negation=False)")
ANSWER_LINE = "Solve the problem. End your reply with a line of the form 'Answer: <answer>'."
DIRECT = trainee.QWEN3.for_source("reasoning_gym").system_prompt  # Reasoning Gym's own "direct" prompt
CANDIDATES = {  # name -> (system prompt, extraction)
    "answer line, last number": (ANSWER_LINE, "last_number"),
    "answer line, answer line": (ANSWER_LINE, "answer_line"),
    "short answer line, last number": ("Give the final answer on the last line as 'Answer: <answer>'.", "last_number"),
    "no system prompt, last number": ("", "last_number"),
    "reasoning-gym direct, tags": (DIRECT, "answer_tags"),
    "reasoning-gym direct, last number": (DIRECT, "last_number"),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--quick", action="store_true", help="few tasks and tokens: a CPU run of the script")
    ap.add_argument("--write", help="save the chosen profile here (a trainee .json file)")
    ap.add_argument("--out", help="save every candidate's numbers here (JSON)")
    args = ap.parse_args()
    tasks, eval_n, new = (4, 8, 16) if args.quick else (24, 200, 128)
    loaded = sampling.load(args.model)
    products = sources.parse(EASY[0]).tasks(range(100_000, 100_000 + eval_n))
    rows = []
    with scoring.Scorer() as scorer:
        for name, (prompt, extraction) in CANDIDATES.items():
            started = time.perf_counter()
            who = trainee.SMOLLM2.replace(model=args.model, system_prompt=prompt, extraction=extraction,
                                          max_new_tokens=new)
            sampler = sampling.Sampler(loaded, who, fast=False)  # one engine for all: no compile per prompt length
            screens = screening.screen_all(sampler, scorer, EASY, tasks, log=lambda *_: None)
            texts = [g[0] for g in sampler.complete([t["question"] for t in products], greedy=True)]
            scores = scorer.score(EASY[0], [t["seed"] for t in products], [who.clean(t) for t in texts])
            rows.append({"candidate": name, "system_prompt": prompt, "extraction": extraction,
                         "pass1": [s.pass1 for s in screens], "extracted": [s.extracted for s in screens],
                         "learnability": [s.learnability for s in screens],
                         "verdicts": [s.verdict for s in screens],
                         "greedy_products_accuracy": sum(s >= 1 for s in scores) / len(scores),
                         "seconds": time.perf_counter() - started})
            r = rows[-1]
            print(f"{name:34s} pass@1 {' '.join(f'{p:.2f}' for p in r['pass1'])}  extracted "
                  f"{' '.join(f'{e:.2f}' for e in r['extracted'])}  verdicts {r['verdicts']}  greedy products "
                  f"{r['greedy_products_accuracy']:.3f}  ({r['seconds']:.0f} s)", flush=True)
    best = max(rows, key=lambda r: (sum(r["pass1"]), sum(r["extracted"])))
    print(f"chosen: {best['candidate']}")
    if args.write:
        Path(args.write).write_text(json.dumps({"extends": "smollm2", "system_prompt": best["system_prompt"],
                                                "extraction": best["extraction"]}, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps({"model": args.model, "chosen": best["candidate"], "candidates": rows},
                                             indent=1))


if __name__ == "__main__":
    main()
