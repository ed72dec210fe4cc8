"""What sandboxed scoring costs: one GRPO step's 32 answers, in-process vs shortlist's Scorer.

    python bench/scoring_overhead.py            # prints a table; commit it under bench/results/
    python bench/scoring_overhead.py --repeats 8 --hostile   # fewer repeats; then all-hostile batches
    python bench/scoring_overhead.py --leaks-only            # only what an answer leaves behind
    python bench/scoring_overhead.py --battery 4,16 --specs "products(max_digits=1), chain_sum"  # a report's
                                                             # check of the policies, at 4 and 16 answers at once

In-process is reasoning-gym's own call with each task built once (the best the seed could do);
ours is the one scoring path of screening, evaluation and the GRPO reward (a fresh confined
process per answer). Answers are the tasks' own right answers and plausible wrong ones. GRPO
generates for seconds between two reward calls, and the zygote forks the next step's processes
meanwhile: each timed step follows a pause of GAP_S. "back to back" times steps with no pause,
where every fork and teardown lands inside the step. An answer given again to the same task within
one call is scored once (Scorer.score), as in a GRPO group whose completions agree: the step here gives
each task 2 distinct answers 4 times each, the hostile batches 32 distinct answers to 32 tasks.

--battery: what a report's check (proof/verify.py) and each family's record (audit.constants) spend on
the policies (audit.best: 17 of them on 200 evaluation tasks), per family, at each number of answer
processes at once; a report checks with the CPUs it may use, up to verify.ALONE_MOST
(verify.scorer_for(alone=True)), a job with WORKERS.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import secrets
import statistics
import time

import reasoning_gym

from shortlist import sources
from shortlist.scoring import Scorer

STEP = 32  # answers a GRPO step scores: 4 prompts x 8 completions
REPEATS = 20
GAP_S = 1.0  # well under a GRPO step's generation (1.4 s on an H200 for SmolLM2-135M, bench/results/README.md)
# A batch of 32 answers that all misbehave (must stay bounded), through a scorer that evals them: hangs (each
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
    parser.add_argument("--hostile", action="store_true", help="then time a batch of answers that all misbehave")
    parser.add_argument("--leaks-only", action="store_true", help="only measure what an answer leaves behind")
    parser.add_argument("--battery", help="comma-separated numbers of answers at once: time audit.best instead")
    parser.add_argument("--specs", default="products(max_digits=1), chain_sum(max_terms=5), coin_flip(max_trials=9)",
                        help="--battery's family specs, comma-separated")
    parser.add_argument("--tasks", type=int, default=200, help="--battery's tasks per family")
    args = parser.parse_args()
    if args.battery:
        battery([int(w) for w in args.battery.split(",")], [f.key for f in sources.parse_list(args.specs)], args.tasks)
        return
    if args.leaks_only:
        with Scorer() as scorer:
            leaks(scorer)
        return
    print(f"# scoring overhead, {platform.processor() or platform.machine()}, {platform.python_version()}, "
          f"{STEP} answers per step, median of {args.repeats}, load average {os.getloadavg()[0]:.1f} at start")
    with Scorer() as scorer:
        print(f"# workers {scorer.settings()['workers']}, sandbox {scorer.confinement}")
        print(f"{'family':22} {'in-process ms/step':>19} {'ours ms/step':>13} {'ours ms/answer':>15} "
              f"{'overhead µs/answer':>19} {'back to back ms/step':>21}")
        for name in sources.DEFAULT:
            family = sources.parse(name)
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
            leaks(scorer)


def battery(workers: list[int], specs: list[str], n: int) -> None:
    """audit.best on n evaluation-like tasks of each spec (SmolLM2's trainee reads the answers), per spec, at
    each number of answer processes at once; the zygote's tasks built first, untimed, as a report's first
    rescoring builds them."""
    from shortlist import audit, process
    from shortlist.trainee import PROFILES
    print(f"# the policy battery (audit.best), {n} tasks a family, {os.cpu_count()} CPUs "
          f"({process.cpus()} this process may use), load average {os.getloadavg()[0]:.1f} at start")
    rows = {}
    for w in workers:
        with Scorer(workers=w) as scorer:
            for spec in specs:
                family = sources.parse(spec)
                tasks = family.tasks(range(100000, 100000 + n))
                scorer.score(family, [t["seed"] for t in tasks], ["0"] * n)  # builds the zygote's tasks
                before = scorer.counts[family.key].answers
                started = time.perf_counter()
                audit.best(scorer, PROFILES["smollm2"], family, tasks)
                rows.setdefault(spec, {})[w] = (time.perf_counter() - started,
                                                scorer.counts[family.key].answers - before)
    print(f"{'family':48} " + " ".join(f"{f'{w} at once, s':>14}" for w in workers) + "   answers")
    for spec, by in rows.items():
        print(f"{spec:48} " + " ".join(f"{by[w][0]:14.2f}" for w in workers) + f"   {by[workers[0]][1]}")
    print(json.dumps({"battery": {spec: {w: round(t, 3) for w, (t, _) in by.items()} for spec, by in rows.items()}}))


def hostile(scorer) -> None:
    """What misbehaving answers cost a step: 32 honest answers against 32 that all misbehave, in
    binary_matrix (its scorer evals the answer), at the default deadline; each batch after a warm
    one, as GRPO's steps come."""
    family = sources.parse("binary_matrix")
    seeds = list(range(1, STEP + 1))  # 32 tasks: an answer repeated for one task would be scored once
    batches = {"honest": [t["answer"] for t in family.tasks(seeds)],
               "all hostile": [HOSTILE[i % len(HOSTILE)] for i in range(STEP)],
               "all hanging": ["9**9**9"] * STEP}  # each cut at the deadline: 32 x 1 s over 2 at once
    print(f"\n# all-hostile batches: {STEP} answers, binary_matrix, deadline {scorer.deadline_s} s, "
          f"{scorer.workers} answers at once, load average {os.getloadavg()[0]:.1f}")
    for name, answers in batches.items():
        scorer.score(family, seeds, answers)
        time.sleep(GAP_S)  # the next step's processes are forked meanwhile
        before = vars(scorer.counts[family.key]).copy()
        started = time.perf_counter()
        scores = scorer.score(family, seeds, answers)
        spent = time.perf_counter() - started
        after = vars(scorer.counts[family.key])
        odd = {k: after[k] - before[k] for k in ("timeouts", "crashes", "exceptions") if after[k] != before[k]}
        print(f"{name:12} {spent:6.2f} s  mean score {sum(scores) / STEP:.2f}  {odd}")



# Leaks: answers that switch the audit hook off and report through their own reply (all an
# answer can do), as a score: 1.0 if a 512 MiB SysV segment was made, MiB written / 1024 in 0.9 s
_REPORT = """import ctypes, json, os, sys, time
m = sys.modules["shortlist.scoring.answer"]
m._REFUSED_EVENTS.clear(); m._REFUSED_PREFIXES = ("#",); m._inside = lambda *a: True
def report(x):
    for fd in range(3, 64):
        try: os.write(fd, json.dumps({"score": float(x), "refused": False}).encode())
        except OSError: pass
    os._exit(0)
"""
_SHM = """libc = ctypes.CDLL(None)
libc.shmat.restype = ctypes.c_void_p
shm = libc.shmget(KEY, 512 << 20, 0o1000 | 0o666)
if shm >= 0:
    ctypes.memset(libc.shmat(shm, None, 0), 1, 64 << 20)
report(shm >= 0)"""
_FILL = """end, written, n = time.monotonic() + 0.9, 0, 0
try:
    while time.monotonic() < end:
        with open(f"f{n}", "wb") as f:
            for _ in range(32):
                f.write(b"x" * (1 << 20)); written += 1
        n += 1
except OSError:
    pass
report(written / 1024)"""


def leaks(scorer) -> None:
    """What outlives an answer: the SysV shared memory it made (read from this process's IPC
    namespace once it is gone), and what it wrote to its scratch within its deadline."""
    key = secrets.randbelow(1 << 30) + 1
    answers = [f"exec({(_REPORT + body.replace('KEY', str(key)))!r}, {{}})" for body in (_SHM, _FILL)]
    made, written = scorer.score("binary_matrix", [1, 1], answers)
    with open("/proc/sysvipc/shm") as f:
        left = sum(int(line.split()[3]) for line in f.readlines()[1:] if int(line.split()[0]) == key)
    if left:  # this run's own segment: not left behind on the machine
        libc = ctypes.CDLL(None)
        libc.shmctl(libc.shmget(key, 0, 0), 0, None)
    print(f"\n# leaks, deadline {scorer.deadline_s} s: " + json.dumps(
        {"shm_segment_made": made == 1.0, "shm_left_after_the_answer_mib": left >> 20,
         "scratch_written_within_the_deadline_mib": round(written * 1024),
         "scratch": scorer.confinement.get("scratch"), "ipc_namespace": scorer.confinement.get("ipc_namespace")}))


if __name__ == "__main__":
    main()
