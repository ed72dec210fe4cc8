"""Issue 39's lever, measured before it is built: GRPO's generation for F families in one batch, each family's rows
through its own LoRA adapter (shortlist/generation/grouped_lora.py), against each family alone on its merged copy.

    python bench/grouped_generation.py --model /root/smollm2 --trainee smollm2 --families "$(cat F)" --json out.json
    python bench/grouped_generation.py --model tiny --trainee "qwen3(max_new_tokens=16)" --repeats 1   # a CPU run

What a GRPO step generates: for each family, prompts_per_step (4) training questions, each asked `group` (8) times,
sampled at the trainee's temperature on the fast engine (static cache, CUDA graphs, its self-check first). Timed:
- alone: one family's 32 rows on a merged copy of the model, as each family's process does today (per family, the
  median over --repeats calls after the first); F of them one after another is what one process would spend;
- grouped: the F families' rows in one batch of F x 32 through the grouped model (the median over --repeats).
The adapters are random (rank lora_r, scale lora_alpha / lora_r): speed does not depend on their values. Under MPS
today 8 families' processes each spend 2.72 s generating per step on an H100 (throughput.8mps100.h100.txt): that
is the figure grouped generation has to beat. Also timed: writing one family's adapter into the grouped model
(what each step would add), the first call of each (compilation and the engine's self-check), and the most memory.
--processes N also runs what today's runs do, on the same GPU: N processes (under MPS where the caller started its
daemon: bench/device.sh MPS=1), each one family's 32 rows alone, their timed calls started together (each waits
for all to have compiled): `concurrent` is the median over the processes of their median call.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torch  # noqa: E402
import transformers  # noqa: E402

from proof import settings as settings_  # noqa: E402
from shortlist import provenance, sources, spec, trainee  # noqa: E402
from shortlist.generation import engine, grouped_lora, sampling  # noqa: E402
from shortlist.models import hf_internals  # noqa: E402

SPREAD = 0.01  # the random adapters' scale (every run of the benchmark uses the same adapters, family by family)
WAIT_S = 900  # how long a member waits for the others to have compiled before it times alone


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(call) -> tuple[float, object]:
    sync()
    started = time.perf_counter()
    out = call()
    sync()
    return time.perf_counter() - started, out


def step_rows(loaded, who, family, group: int, prompts: int) -> list[list[int]]:
    """A GRPO step's prompts for one family: `prompts` training questions, each `group` times in a row (TRL's order)."""
    questions = [t["question"] for t in family.tasks(range(prompts))]
    return [ids for ids in sampling.prompt_ids(loaded.tokenizer, who, questions) for _ in range(group)]


def measure(model, rows: list[list[int]], loaded, who, repeats: int, first: bool = True) -> dict:
    """The first call (where it is the model's first: compilation and the engine's self-check), then `repeats`
    timed calls, one batch of all the rows each."""
    pad, eos = loaded.tokenizer.pad_token_id, sampling.eos_token_ids(loaded.model, loaded.tokenizer)
    config = sampling.generation_config(model, loaded.tokenizer, who, fast=True,
                                        max_cache_len=sampling.cache_length(rows, who.max_new_tokens))
    torch.manual_seed(0)
    first_s, out = timed(lambda: sampling.generate_ids(model, rows, config, len(rows), pad, eos, same_shape=True)) \
        if first else (None, [])
    seconds, lengths = [], []
    for _ in range(repeats):
        s, out = timed(lambda: sampling.generate_ids(model, rows, config, len(rows), pad, eos, same_shape=True))
        seconds.append(s)
        lengths.append(max(map(len, out)))
    return {"first_s": first_s and round(first_s, 3),
            "median_s": round(statistics.median(seconds), 4) if seconds else None,
            "seconds": [round(s, 4) for s in seconds], "rows": len(rows), "longest_completion": lengths,
            "mean_completion": round(statistics.mean(map(len, out)), 1)}


def concurrent_processes(args) -> dict:
    """--processes N: N processes generating at once, family i % F each, their repeats started together."""
    sync = Path(args.json or "grouped.json").with_suffix(".sync")
    sync.mkdir(parents=True, exist_ok=True)
    for old in sync.iterdir():
        old.unlink()
    base = [sys.executable, __file__, "--model", args.model, "--trainee", args.trainee, "--families", args.families,
            "--repeats", str(args.repeats), "--sync", str(sync), "--of", str(args.processes)]
    jobs = [subprocess.Popen(base + ["--member", str(i)]) for i in range(args.processes)]
    deadline = time.time() + WAIT_S + 600
    codes = []
    for job in jobs:  # a member that hangs is stopped: the command ends, and says so
        try:
            codes.append(job.wait(timeout=max(1.0, deadline - time.time())))
        except subprocess.TimeoutExpired:
            job.kill()
            codes.append(job.wait())
    found = [json.loads((sync / f"alone.{i}.json").read_text()) for i in range(args.processes) if codes[i] == 0]
    shutil.rmtree(sync)
    return {"processes": args.processes, "failed": sum(c != 0 for c in codes), "mps": "CUDA_MPS_PIPE_DIRECTORY" in os.environ,
            "median_s": round(statistics.median(f["median_s"] for f in found), 4) if found else None,
            "slowest_median_s": max((f["median_s"] for f in found), default=None), "members": found}


def member(args, model, loaded, who, families, rows) -> None:
    """One of --processes: family (member % F) alone on the merged copy, compiled first, its timed calls once every
    member is ready."""
    i = args.member
    sync = Path(args.sync)
    found = measure(model, rows[i % len(rows)], loaded, who, 0)  # the first call: compilation, the self-check
    (sync / f"ready.{i}").touch()
    together = wait_for(sync, "ready", args.of)  # a member that never comes is waited for WAIT_S at most
    found |= {k: v for k, v in measure(model, rows[i % len(rows)], loaded, who, args.repeats, first=False).items()
              if k != "first_s"}
    found |= {"family": families[i % len(families)].key, "engine": engine.status()["engine"],
              "started_together": together}
    (sync / f"alone.{i}.json").write_text(json.dumps(found))
    (sync / f"done.{i}").touch()
    while not wait_for(sync, "done", args.of, 0):  # the GPU stays as shared as it was until the slowest is done
        measure(model, rows[i % len(rows)], loaded, who, 1, first=False)


def wait_for(sync: Path, what: str, members: int, seconds: float = None) -> bool:
    """Whether every member has touched its `what` file, waiting up to seconds (WAIT_S) for them."""
    deadline = time.time() + (WAIT_S if seconds is None else seconds)
    while len(list(sync.glob(f"{what}.*"))) < members:
        if time.time() >= deadline:
            return False
        time.sleep(0.05)
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--trainee", default="smollm2")
    ap.add_argument("--families", default="chain_sum(max_terms=2, max_digits=1), products(max_digits=1)",
                    help="the families of one grouped batch, comma-separated specs")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", help="write the findings here")
    ap.add_argument("--processes", type=int, default=0, help="also N processes at once, each one family alone")
    ap.add_argument("--member", type=int, help=argparse.SUPPRESS)  # one of --processes
    ap.add_argument("--sync", help=argparse.SUPPRESS)
    ap.add_argument("--of", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    s = settings_.make()
    families = [sources.parse(f) for f in spec.split(args.families)]
    who = trainee.resolve(args.trainee).replace(model=args.model).for_source(families[0].source)
    loaded = sampling.load(args.model)
    names = grouped_lora.linear_names(loaded.model)
    rank, scale = s.lora_r, s.lora_alpha / s.lora_r
    adapters = [grouped_lora.random_adapter(loaded.model, names, rank, seed=f, spread=SPREAD) for f in range(len(families))]
    rows = [step_rows(loaded, who, f, who.group, s.prompts_per_step) for f in families]
    # every family alone, here and in each member process, on one merged copy (family 0's adapter): speed does not
    # depend on the weights' values, and the alone runs and the members are then the same model
    merged = grouped_lora.merge(hf_internals.plain_copy(loaded.model), adapters[0], scale)
    if args.member is not None:
        return member(args, merged, loaded, who, families, rows)
    engine.reset()
    alone = {f.key: measure(merged, r, loaded, who, args.repeats) for f, r in zip(families, rows)}
    alone_status = engine.status()
    del merged
    grouped = grouped_lora.group(hf_internals.plain_copy(loaded.model), names, len(families), len(rows[0]), rank,
                                 scale)
    write_s = [timed(lambda: grouped_lora.load(grouped, f, a))[0] for f, a in enumerate(adapters)]
    engine.reset()
    together = measure(grouped, [r for family in rows for r in family], loaded, who, args.repeats)
    serial = sum(a["median_s"] for a in alone.values())
    del grouped
    concurrent = concurrent_processes(args) if args.processes else None
    found = {
        "measured": provenance.now(), "command": " ".join(sys.argv),
        "commit": os.environ.get("SHORTLIST_COMMIT", "unknown"), "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "model": args.model, "trainee": who.profile, "families": [f.key for f in families], "lora_rank": rank,
        "rows_per_family": len(rows[0]), "max_new_tokens": who.max_new_tokens,
        "alone": alone, "alone_engine": alone_status, "grouped": together, "grouped_engine": engine.status(),
        "adapter_write_s": round(statistics.median(write_s), 4),
        "alone_serial_s": round(serial, 4), "speedup_over_serial": round(serial / together["median_s"], 2),
        "concurrent": concurrent,
        "gpu_memory_max_gib": round(torch.cuda.max_memory_reserved() / 2 ** 30, 2) if torch.cuda.is_available() else None,
    }
    print(json.dumps({k: found[k] for k in ("device", "families", "alone_serial_s", "adapter_write_s",
                                            "speedup_over_serial")}, indent=1))
    if concurrent:
        print("concurrent:", {k: v for k, v in concurrent.items() if k != "members"})
    print("grouped:", together, "engine:", found["grouped_engine"]["engine"], found["grouped_engine"]["why"])
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=1) + "\n")


if __name__ == "__main__":
    try:
        main()
    except BaseException:  # a member that failed is ready too: the others must not wait for one that never comes
        member_of = sys.argv[sys.argv.index("--sync") + 1] if "--sync" in sys.argv else None
        if member_of and "--member" in sys.argv:
            (Path(member_of) / f"ready.{sys.argv[sys.argv.index('--member') + 1]}").touch()
        raise
