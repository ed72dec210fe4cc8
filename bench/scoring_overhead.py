"""What sandboxed scoring costs: one GRPO step's 32 answers, in-process vs shortlist's Scorer.

    python bench/scoring_overhead.py            # prints a table; commit it under bench/results/
    python bench/scoring_overhead.py --repeats 8 --hostile   # fewer repeats; then issue 19.10's batches

In-process is reasoning-gym's own call with each task built once (the best the seed could do);
ours is the one scoring path of screening, evaluation and the GRPO reward (a fresh confined
process per answer). Answers are the tasks' own right answers and plausible wrong ones. GRPO
generates for seconds between two reward calls, and the zygote forks the next step's processes
meanwhile: each timed step follows a pause of GAP_S. "back to back" times steps with no pause,
where every fork and teardown lands inside the step.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import reasoning_gym

from shortlist import sources as families
from shortlist.scoring import Scorer

STEP = 32  # answers a GRPO step scores: 4 prompts x 8 completions
REPEATS = 20
GAP_S = 1.0  # well under a GRPO step's generation (1.4 s on an H200 for SmolLM2-135M, README)
# issue 19.10: a batch of 32 answers that all misbehave, through a scorer that evals them: hangs (each
# cut at the deadline), a memory bomb, an exit, a fork bomb, deep nesting, a disk filler
HOSTILE = ["9**9**9", "10**10**10", "[x for x in iter(int, 1)]", "' ' * 10**11", "__import__('os')._exit(3)",
           "(lambda f: [f(f) for _ in range(99)])(lambda f: __import__('os').fork())", "(" * 5000 + ")" * 5000,
           "exec(\"f = open('fill', 'wb')\\nwhile True: f.write(b'x' * 2**20)\")"]


def answers_for(family) -> tuple[list[int], list[str]]:
    tasks = family.tasks(range(4))
    seeds = [t["seed"] for t in tasks for _ in range(STEP // 4)]
    answers = [str(t["answer"]) if i % 2 else "12" for t in tasks for i in range(STEP // 4)]
    return seeds, answers


def in_process(family, seeds, answers) -> float:
    datasets = {s: reasoning_gym.create_dataset(family.name, seed=s, size=1, **family.config) for s in set(seeds)}
    started = time.perf_counter()
    for seed, answer in zip(seeds, answers):
        try:
            datasets[seed].score_answer(answer=answer, entry=datasets[seed][0])
        except Exception:
            pass
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--hostile", action="store_true", help="then time issue 19.10's all-hostile batch")
    args = parser.parse_args()
    print(f"# scoring overhead, {platform.processor() or platform.machine()}, {platform.python_version()}, "
          f"{STEP} answers per step, median of {args.repeats}, load average {os.getloadavg()[0]:.1f} at start")
    with Scorer() as scorer:
        print(f"# workers {scorer.settings()['workers']}, sandbox {scorer.confinement}")
        print(f"{'family':22} {'in-process ms/step':>19} {'ours ms/step':>13} {'ours ms/answer':>15} "
              f"{'overhead µs/answer':>19} {'back to back ms/step':>21}")
        for name in families.DEFAULT:
            family = families.parse(name)
            seeds, answers = answers_for(family)
            scorer.score(family, seeds, answers)  # builds the tasks, warms the zygote
            scorer.score(family, seeds, answers)  # a family scored again: its processes are forked ahead
            ours, base, back = [], [], []
            for _ in range(args.repeats):
                time.sleep(GAP_S)
                started = time.perf_counter()
                scorer.score(family, seeds, answers)
                ours.append(time.perf_counter() - started)
                base.append(in_process(family, seeds, answers))
            for _ in range(5):
                started = time.perf_counter()
                scorer.score(family, seeds, answers)
                back.append(time.perf_counter() - started)
            o, b = statistics.median(ours), statistics.median(base)
            print(f"{name:22} {b * 1e3:19.2f} {o * 1e3:13.2f} {o * 1e3 / STEP:15.3f} {(o - b) * 1e6 / STEP:19.1f} "
                  f"{statistics.median(back) * 1e3:21.1f}")
        if args.hostile:
            hostile(scorer)


def hostile(scorer) -> None:
    """Issue 19.10: 32 honest answers against 32 that all misbehave, in binary_matrix (its scorer evals
    the answer), at the default deadline; each batch after a warm one, as GRPO's steps come."""
    family = families.parse("binary_matrix")
    right = family.task(1)["answer"]
    batches = {"honest": [right] * STEP, "all hostile": [HOSTILE[i % len(HOSTILE)] for i in range(STEP)],
               "all hanging": ["9**9**9"] * STEP}  # each cut at the deadline: 32 x 1 s over 2 at once
    print(f"\n# issue 19.10: {STEP} answers, binary_matrix, deadline {scorer.deadline_s} s, "
          f"{scorer.workers} answers at once, load average {os.getloadavg()[0]:.1f}")
    for name, answers in batches.items():
        scorer.score(family, [1] * STEP, answers)
        time.sleep(GAP_S)  # the next step's processes are forked meanwhile
        before = vars(scorer.counts[family.key]).copy()
        started = time.perf_counter()
        scores = scorer.score(family, [1] * STEP, answers)
        spent = time.perf_counter() - started
        after = vars(scorer.counts[family.key])
        odd = {k: after[k] - before[k] for k in ("timeouts", "crashes", "exceptions") if after[k] != before[k]}
        print(f"{name:12} {spent:6.2f} s  mean score {sum(scores) / STEP:.2f}  {odd}")


if __name__ == "__main__":
    main()
