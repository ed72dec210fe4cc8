"""Speed and memory at the trainee's real size: the seed's configuration against ours, one process
per side, on a Qwen3-0.6B-shaped model with random weights (shortlist/shapes.py), under a T4's memory.

On the GPU machine (nvidia-h200), one command, carrying .whl (../shared/tools/device-wheels
transformers==5.24.0; nothing else: the model is built there from code in seconds):

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD SHORTLIST_COMMIT=<this commit> && python3 -c \
      "import transformers, trl; print(transformers.__version__, trl.__version__)" && \
      python3 bench/realsize.py --out $OUT --memory-gb 15

(timeout_s 600; it ends within --budget-s 560 and leaves realsize.txt, realsize.json, realsize.log
and one JSON per process under $OUT, seven files, whatever happens.)

Here, every code path on the CPU with the tiny model (and the shape builder at a test's size):

    python bench/realsize.py --quick --out /tmp/realsize

The driver builds the model, then runs one process per side, each as a family of the proof runs:
- seed: the seed's configuration (bench/generation.py's: generate() with a dynamic cache for
  evaluation and sampling, 32 sequences a call with num_return_sequences; TRL's own GRPO generation
  with compilation off; a reward that rebuilds the dataset per answer);
- ours, cold: load, evaluate 200 tasks, GRPO, evaluate again, on an empty compile cache (the first
  family on a machine); then sampling and evaluation timed again at steady state;
- ours, warm: the same family again in a new process on the filled cache (a second family, or a
  resumed run).
It measures GRPO seconds per step (the median past the warm-up: the seed's first step, our first
two, which compile and recompile once the prompt width changes; ours pooled over both processes),
sampling tokens per second (24 tasks x 8), the 200-task evaluation, warm-up (the family's wall
time beyond loading and the same work at steady state), one family's wall time at the steps
measured and derived for 100 steps (wall + (100 - steps) x median step: DERIVED, labelled so),
peak memory per phase (max_memory_allocated, reset between phases) under the cap, the compile
cache's hits, and a paper estimate for a T4. Each process writes its JSON after every phase and
every GRPO step, and the driver rewrites the table after each process, so a run killed at any
point leaves what it measured under --out. The budget (--budget-s, 560 s) is split: the seed gets
at most 140 s, the second family 110 s, the first family the rest, and GRPO stops early (after
three steps at least) to leave time for the evaluation after it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

FAMILY = "chain_sum"  # the seed's own, at default difficulty: prompt lengths vary as a real family's do
GIB = 1 << 30
T4 = {"bandwidth_Bps": 320e9, "fp32_flops": 8.1e12, "memory_gib": 15.0}
SIDES = ("seed", "ours-cold", "ours-warm")


# --- what each process measures ----------------------------------------------------------------
class Record:
    """One process's measurements, written (atomically) after every change."""

    def __init__(self, path: Path, **head):
        self.path, self.data = path, {**head, "phases": {}}
        self.write()

    def phase(self, name: str, **values) -> dict:
        self.data["phases"].setdefault(name, {}).update(values)
        self.write()
        return self.data["phases"][name]

    def write(self) -> None:
        from shortlist import output
        output.write_text(self.path, json.dumps(self.data, indent=1, default=str))


def sync() -> None:
    import torch
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def release_memory() -> None:
    import gc

    import torch
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def memory_reset() -> None:
    import torch
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def memory_peak() -> dict:
    import torch
    if not torch.cuda.is_available():
        return {}
    return {"peak_allocated_gib": torch.cuda.max_memory_allocated() / GIB,
            "peak_reserved_gib": torch.cuda.max_memory_reserved() / GIB,
            "allocated_after_gib": torch.cuda.memory_allocated() / GIB}


def timed_phase(record: Record, name: str, fn, **extra):
    """Run fn as one phase: seconds, peak memory, compile-cache counts."""
    from shortlist.generation import compile_cache
    from shortlist.generation import engine
    memory_reset()
    sync()
    started = time.perf_counter()
    out = fn()
    sync()
    record.phase(name, seconds=time.perf_counter() - started, **memory_peak(), compile=compile_cache.counts(),
                 engine=engine.status(), **extra)  # which decoder served: a fallback would make ours slow, not wrong
    return out


def cap_memory(gib: float | None) -> dict:
    import torch
    if not gib or not torch.cuda.is_available():
        return {"memory_cap_gib": None}
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, gib * GIB / total))
    return {"memory_cap_gib": gib, "gpu_total_gib": total / GIB}


def workload(args) -> dict:
    from shortlist import sources as families
    family = families.parse(FAMILY)
    return {"family": family, "max_new": 16 if args.quick else 128,
            "screen": [t["question"] for t in family.tasks(range(500, 500 + (2 if args.quick else 24)))],
            "eval_seeds": range(100_000, 100_000 + (8 if args.quick else 200))}


def ours(args, record: Record) -> None:
    """A family as proof.train.run_family runs it (load, evaluate, GRPO, evaluate), then steady state."""
    from proof import evaluate, settings as settings_, train
    from shortlist.generation import compile_cache
    from shortlist.generation import sampling
    from shortlist import scoring
    w = workload(args)
    compile_cache.use(args.cache)
    checkpoints = str(Path(args.work) / f"checkpoints-{Path(args.json).stem}")  # none written; nothing to resume
    shutil.rmtree(checkpoints, ignore_errors=True)
    s = settings_.make(model=args.model, trainee=f"qwen3(max_new_tokens={w['max_new']})", families=[w["family"].key],
                       steps=args.steps, logging_steps=1, checkpoint_every=0, eval_n=len(w["eval_seeds"]),
                       sample_batch=0, fast=True)
    eval_tasks = w["family"].tasks(w["eval_seeds"])
    started = time.perf_counter()
    loaded = timed_phase(record, "load", lambda: sampling.load(args.model))
    eval_rows = sampling.prompt_ids(loaded.tokenizer, s.profile.for_source(w["family"].source),
                                    [t["question"] for t in eval_tasks])
    length = sampling.cache_length(eval_rows, w["max_new"])

    def evaluation(model):
        sampler = sampling.Sampler(sampling.Loaded(model, loaded.tokenizer, loaded.source), s.profile, 0, True)
        return lambda: evaluate.evaluate(sampler, scorer, w["family"], eval_tasks)

    with scoring.Scorer() as scorer:
        timed_phase(record, "eval_before", evaluation(loaded.model),
                    batch=sampling.auto_batch(loaded.model, len(eval_rows), length), cache_length=length,
                    prompt_tokens_mean=statistics.mean(map(len, eval_rows)))
        sampling.release(loaded.model)
        steps = record.phase("grpo", steps_s=[])["steps_s"]
        with clocked_steps(record, steps, deadline=args.deadline - args.reserve_s):
            trained, _ = timed_phase(record, "grpo", lambda: train.train(
                loaded, s, w["family"], w["family"].tasks(s.seed_ranges()["train"]), scorer, checkpoints,
                train.Bookkeeping(), log=lambda line: print(line, flush=True)))
        loaded.model = trained  # as proof.train.train_family: the base model PEFT wrapped is let go
        sampling.release(trained)
        timed_phase(record, "eval_after", evaluation(trained),
                    batch=sampling.auto_batch(trained, len(eval_rows), length))
        record.data["family_wall_s"] = time.perf_counter() - started
        record.write()
        if args.steady:  # the same evaluation again (nothing left to compile), then screening's sampling
            timed_phase(record, "eval_steady", evaluation(trained),
                        batch=sampling.auto_batch(trained, len(eval_rows), length))
            for name in ("sampling_first", "sampling"):
                tokens = timed_phase(record, name, lambda: len(ours_sample(trained, loaded.tokenizer, s.profile, w)))
                record.phase(name, tokens=tokens)


def ours_sample(model, tokenizer, trainee, w) -> list[int]:
    """Screening's workload (24 tasks x 8), as Sampler.complete draws it; returns every token drawn."""
    from shortlist.generation import sampling
    trainee = trainee.for_source(w["family"].source)
    rows = [ids for ids in sampling.prompt_ids(tokenizer, trainee, w["screen"]) for _ in range(trainee.group)]
    length = sampling.cache_length(rows, w["max_new"])
    config = sampling.generation_config(model, tokenizer, trainee, False, True, length)
    batch = sampling.auto_batch(model, len(rows), length)
    ids = sampling.generate_ids(model, rows, config, batch, tokenizer.pad_token_id,
                                sampling.eos_token_ids(model, tokenizer), same_shape=True)
    return [t for row in ids for t in row]


class clocked_steps:
    """Time every GRPO step (train.train's bookkeeping callback, wrapped), and stop training once the
    deadline has come, after at least three steps (the first, and two for a median)."""

    def __init__(self, record: Record, steps: list, deadline: float):
        self.record, self.steps, self.deadline = record, steps, deadline

    def __enter__(self):
        from proof import train
        self.original, record, steps, deadline = train.bookkeeping_callback, self.record, self.steps, self.deadline

        def progress(*args, **kwargs):
            inner = self.original(*args, **kwargs)

            class Clocked(type(inner)):
                def on_train_begin(self, args, state, control, **kwargs):
                    sync()
                    self.last = time.perf_counter()

                def on_step_end(self, args, state, control, **kwargs):
                    super().on_step_end(args, state, control, **kwargs)
                    sync()
                    now = time.perf_counter()
                    steps.append(now - self.last)
                    self.last = now
                    record.write()
                    if time.time() > deadline and len(steps) >= 3:
                        record.phase("grpo", stopped_early_at=len(steps))
                        control.should_training_stop = True
            return Clocked()
        train.bookkeeping_callback = progress
        return self

    def __exit__(self, *exc):
        from proof import train
        train.bookkeeping_callback = self.original


def seed(args, record: Record) -> None:
    """The seed's configuration (bench/generation.py's), as its grpo_proof.py runs a family."""
    import generation
    from shortlist.generation import sampling
    w = workload(args)
    loaded = timed_phase(record, "load", lambda: sampling.load(args.model))
    questions = [t["question"] for t in w["family"].tasks(w["eval_seeds"])]

    def evaluation():
        ids = generation.seed_sample(loaded, questions, 1, True, w["max_new"])
        texts = loaded.tokenizer.batch_decode(ids, skip_special_tokens=True)
        return generation.seed_reward(w["family"])(None, texts, list(w["eval_seeds"]))

    timed_phase(record, "eval_before", evaluation, batch=32)
    tokens = timed_phase(record, "sampling", lambda: sum(map(len, generation.seed_sample(
        loaded, w["screen"][:4], 8, False, w["max_new"]))))  # one call: 4 prompts x 8, the seed's batch
    record.phase("sampling", tokens=tokens)
    del loaded  # the seed loads a fresh model for each family's training
    release_memory()
    grpo = timed_phase(record, "grpo", lambda: generation.grpo_seconds_per_step(
        args.model, False, 1, args.steps - 1, str(Path(args.work) / "seed-grpo"), FAMILY))
    record.phase("grpo", steps_s=grpo["steps"], mean_reward=grpo["mean_reward"])


def build(args, record: Record) -> None:
    from shortlist.models import shapes
    small = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 16} if args.quick else {}
    path = timed_phase(record, "build", lambda: shapes.ensure(Path(args.model_path), **small))
    record.phase("build", path=str(path), quick_shape=small or None)


def role(args) -> None:
    import torch
    from shortlist import provenance
    record = Record(Path(args.json), role=args.role, model=args.model, pid=os.getpid(), **provenance.stamp(),
                    **cap_memory(args.memory_gb), torch_threads=torch.get_num_threads())
    {"seed": seed, "ours": ours, "build": build}[args.role](args, record)
    record.data["done"] = True
    record.write()


# --- the driver ----------------------------------------------------------------------------------
def run_child(args, name: str, extra: list[str], deadline: float, log) -> dict:
    path = Path(args.out) / f"realsize.{name}.json"
    path.unlink(missing_ok=True)
    command = [sys.executable, __file__, "--json", str(path), "--deadline", str(deadline), "--work", args.work,
               "--model", args.model, "--model-path", args.model_path, *extra, *(["--quick"] if args.quick else [])]
    if args.memory_gb:
        command += ["--memory-gb", str(args.memory_gb)]
    print(f"== {name}: {' '.join(command[1:])}", flush=True)
    log.write(f"\n== {name}\n")
    log.flush()
    child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"),
                             start_new_session=True)
    try:
        child.wait(timeout=max(1.0, deadline + 15 - time.time()))  # the child stops itself; this is the backstop
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    data = json.loads(path.read_text()) if path.exists() else {"phases": {}}
    if child.returncode:
        data["exit"] = child.returncode
        print(f"   {name} exited with {child.returncode}; see realsize.log", flush=True)
    return data


def drive(args) -> None:
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    end = time.time() + args.budget_s
    cache = work / "compile"
    shutil.rmtree(cache, ignore_errors=True)  # ours-cold must start cold
    report = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "commit": commit(), "args": vars(args),
              "sides": {}}
    with open(out / "realsize.log", "a") as log:
        if args.model == args.model_path or args.quick:  # the shape model (quick: at a test's size, unused)
            report["build"] = run_child(args, "build", ["--role", "build"], end, log)
        # the seed's side is predictable; the first family's compilation is not, so it gets what is left
        # and stops GRPO early to leave the second family its time (which also measures steady state)
        plan = [("seed", ["--role", "seed", "--steps", str(args.seed_steps)], min(end - 250, time.time() + 140)),
                ("ours-cold", ["--role", "ours", "--steps", str(args.steps), "--cache", str(cache), "--steady",
                               "--reserve-s", "60"], end - 110),
                ("ours-warm", ["--role", "ours", "--steps", str(args.warm_steps), "--cache", str(cache), "--steady",
                               "--reserve-s", "30"], end)]
        for name, extra, deadline in plan:
            report["sides"][name] = run_child(args, name, extra, deadline, log)
            write_report(out, report)
    print(write_report(out, report))


def commit() -> str:
    if os.environ.get("SHORTLIST_COMMIT"):  # a copied tree's .git may be another commit's (bench/device.sh)
        return os.environ["SHORTLIST_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("SHORTLIST_COMMIT", "unknown (no .git here; set SHORTLIST_COMMIT)")


def write_report(out: Path, report: dict) -> str:
    report["derived"] = derive(report)
    from shortlist import output
    output.write_text(out / "realsize.json", json.dumps(report, indent=1, default=str))
    text = table(report)
    (out / "realsize.txt").write_text(text + "\n")
    return text


# --- what the table says -----------------------------------------------------------------------------
def steady_steps(name: str, side: dict) -> list[float]:
    """GRPO steps past the warm-up: the seed's after its first; ours after the first two (the first
    compiles, the second recompiles once the prompt width changes), where there are more than two."""
    steps = side.get("phases", {}).get("grpo", {}).get("steps_s") or []
    return steps[1:] if name == "seed" or len(steps) < 3 else steps[2:]


def derive(report: dict) -> dict:
    """Figures computed from measured ones; every one is labelled derived in the table. Our steady
    step is the median of both processes' steady steps (the same work on the same machine)."""
    sides, out = report["sides"], {}
    ours_steady = [t for k in ("ours-cold", "ours-warm") if k in sides for t in steady_steps(k, sides[k])]
    eval_steady = next((sides[k]["phases"]["eval_steady"]["seconds"] for k in ("ours-cold", "ours-warm")
                        if "eval_steady" in sides.get(k, {}).get("phases", {})), None)
    for name, side in sides.items():
        p, own = side.get("phases", {}), steady_steps(name, side)
        steps = p.get("grpo", {}).get("steps_s") or []
        pool = own if name == "seed" else ours_steady
        step = statistics.median(pool) if pool else None
        d = {"median_step_s": step, "own_median_step_s": statistics.median(own) if own else None,
             "steps_measured": len(steps)}
        if step and name == "seed" and "seconds" in p.get("grpo", {}):
            # GRPO's phase loads the model and builds the trainer, as the seed does for each family; the
            # evaluation after training is the same work as before: taken as equal, not run
            d["eval_after_s"] = p["eval_before"]["seconds"]
            side = {**side, "family_wall_s": p["grpo"]["seconds"] + 2 * p["eval_before"]["seconds"]}
        if step and "family_wall_s" in side:
            wall = side["family_wall_s"]
            d["family_measured_s"] = wall
            d["family_100_steps_s"] = wall + (100 - len(steps)) * step
            if name == "seed":
                d["warmup_s"] = steps[0] - step
            elif eval_steady is not None:  # everything beyond loading and the same work at steady state
                d["warmup_s"] = wall - p["load"]["seconds"] - len(steps) * step - 2 * eval_steady
        out[name] = d
    return out


def paper_t4(report: dict) -> list[str]:
    """A T4 estimate on paper from the shapes measured: decode reads every weight and the whole static
    cache each step (bandwidth-bound at 320 GB/s), prefill and training are compute-bound at 8.1 TFLOP/s
    fp32 (training ~4 x params x tokens: forward 2, backward to the inputs 2; the LoRA weights' own
    gradients are ~1% more; 6 x params x tokens would be full fine-tuning)."""
    ours = report["sides"].get("ours-cold", {})
    p = ours.get("phases", {})
    if "eval_before" not in p:
        return []
    from shortlist.models import shapes
    c = shapes.CONFIG
    params = 596_049_920
    kv_per_token = 2 * c["num_hidden_layers"] * c["num_key_value_heads"] * c["head_dim"] * 4
    max_new = 16 if report["args"]["quick"] else 128
    length = p["eval_before"].get("cache_length", 256)  # the static cache attention reads in full
    prompt = p["eval_before"].get("prompt_tokens_mean", length - max_new)

    def decode_s(rows: int) -> float:
        return max((params * 4 + rows * length * kv_per_token) / T4["bandwidth_Bps"],
                   2 * params * rows / T4["fp32_flops"])

    gen = max_new * decode_s(32) + 2 * params * 32 * prompt / T4["fp32_flops"]
    train = 4 * params * 32 * (prompt + max_new) / T4["fp32_flops"]
    batch = p["eval_before"].get("batch") or 32
    batches = -(-200 // batch)
    evaluation = batches * max_new * decode_s(batch) + 2 * params * 200 * prompt / T4["fp32_flops"]
    step = gen + train
    seed_step = report.get("derived", {}).get("seed", {}).get("median_step_s")
    seed = (f"; the seed's step, launch-bound here ({seed_step:.1f} s: Python and kernel launches a T4's host "
            f"does not speed up), >= {max(seed_step, step):.1f} s there") if seed_step else ""
    return [f"T4 on paper (assumptions in bench/realsize.py: paper_t4): our GRPO step >= {step:.1f} s "
            f"(generation {gen:.1f} s at {decode_s(32) * 1e3:.1f} ms a decode step for 32 rows, training "
            f"{train:.1f} s at 100% of fp32 peak, ~{2 * train:.1f} s at 50%);",
            f"  our 200-task evaluation >= {evaluation:.1f} s ({batches} batches of {batch}); a 100-step family "
            f">= {100 * step + 2 * evaluation:.0f} s (~{(100 * (gen + 2 * train) + 2 * evaluation) / 60:.0f} min at 50% "
            f"training efficiency), before compilation (CPU-bound: a Kaggle CPU is slower than this machine's){seed}."]


def table(report: dict) -> str:
    sides, derived = report["sides"], report.get("derived", {})
    any_side = next((s for s in [report.get("build", {}), *sides.values()] if s.get("versions")), {})
    v, dev = any_side.get("versions", {}), any_side.get("device", {})
    gpu = ", ".join(dev.get("gpus", []) or []) or "CPU"
    cap = next((s.get("memory_cap_gib") for s in sides.values() if s.get("memory_cap_gib")), None)
    lines = [f"# command: {report['command']}",
             f"# commit {report['commit']}; torch {v.get('torch')}, transformers {v.get('transformers')}, trl "
             f"{v.get('trl')}, peft {v.get('peft')}; {gpu}; memory cap {cap or 'none'} GiB",
             f"# model {report['args']['model']}: "
             f"{'quick: checks the script, measures nothing' if report['args']['quick'] else 'Qwen3-0.6B shape, random weights, fp32'}"
             f"; family {FAMILY}; <= {16 if report['args']['quick'] else 128} new tokens"]
    for name in ("ours-cold", "ours-warm"):
        served = sides.get(name, {}).get("phases", {}).get("eval_after", {}).get("engine")
        if served:
            lines.append(f"# {name}: engine {served.get('engine')}" + (f" ({served['why']})" if served.get("why") else ""))
    build = report.get("build", {}).get("phases", {}).get("build")
    if build:
        lines.append(f"# built in {build['seconds']:.1f} s")

    def get(name, *keys):
        x = sides.get(name, {})
        for k in keys:
            x = x.get(k, {}) if isinstance(x, dict) else {}
        return x if isinstance(x, (int, float)) else None

    def row(label, seed, cold, warm=None, ratio=None, fmt="{:9.2f}"):
        cell = lambda x: (fmt.format(x) if x is not None else f"{'-':>9}")  # noqa: E731
        r = f"   {ratio:6.2f}x" if ratio else ""
        lines.append(f"{label:<40}{cell(seed)}{cell(cold)}{cell(warm)}{r}")

    def ratio(a, b, invert=False):
        return (b / a if invert else a / b) if a and b else None

    lines.append(f"{'':<40}{'seed':>9}{'ours':>9}{'ours 2nd':>9}   seed/ours")
    d = {k: derived.get(k, {}) for k in SIDES}
    row("GRPO s/step, steady (median)", d["seed"].get("median_step_s"), d["ours-cold"].get("median_step_s"), None,
        ratio(d["seed"].get("median_step_s"), d["ours-cold"].get("median_step_s")))
    row("  each process's own median", *[d[k].get("own_median_step_s") for k in SIDES])
    row("GRPO step 1 s", *[(sides.get(k, {}).get("phases", {}).get("grpo", {}).get("steps_s") or [None])[0]
                           for k in SIDES])
    seed_tps = ratio(get("seed", "phases", "sampling", "tokens"), get("seed", "phases", "sampling", "seconds"))
    tps = {k: ratio(get(k, "phases", "sampling", "tokens"), get(k, "phases", "sampling", "seconds"))
           for k in ("ours-cold", "ours-warm")}
    ours_tps = tps["ours-cold"] or tps["ours-warm"]
    row("sampling tokens/s (24 x 8; seed 4 x 8)", seed_tps, tps["ours-cold"], tps["ours-warm"],
        ratio(ours_tps, seed_tps), "{:9.0f}")
    seed_eval = get("seed", "phases", "eval_before", "seconds")
    ours_eval = get("ours-cold", "phases", "eval_steady", "seconds") or get("ours-warm", "phases", "eval_steady",
                                                                             "seconds")
    row("eval 200 tasks s, steady", seed_eval, get("ours-cold", "phases", "eval_steady", "seconds"),
        get("ours-warm", "phases", "eval_steady", "seconds"), ratio(seed_eval, ours_eval))
    row("eval before training s (1st, compiles)", seed_eval, get("ours-cold", "phases", "eval_before", "seconds"),
        get("ours-warm", "phases", "eval_before", "seconds"))
    row("eval after training s", d["seed"].get("eval_after_s"), get("ours-cold", "phases", "eval_after", "seconds"),
        get("ours-warm", "phases", "eval_after", "seconds"))
    row("warm-up s (beyond load + steady work)", d["seed"].get("warmup_s"), d["ours-cold"].get("warmup_s"),
        d["ours-warm"].get("warmup_s"))
    row("load s", *[get(k, "phases", "load", "seconds") for k in SIDES])
    row("family s, measured steps", *[d[k].get("family_measured_s") for k in SIDES])
    row("  steps measured", *[d[k].get("steps_measured") for k in SIDES], fmt="{:9d}")
    row("family s, 100 steps (DERIVED)", *[d[k].get("family_100_steps_s") for k in SIDES],
        ratio(d["seed"].get("family_100_steps_s"), d["ours-cold"].get("family_100_steps_s")))
    if d["ours-warm"].get("family_100_steps_s") and d["seed"].get("family_100_steps_s"):
        lines.append(f"{'  seed / ours 2nd family, 100 steps':<40}{'':27}   "
                     f"{ratio(d['seed'].get('family_100_steps_s'), d['ours-warm'].get('family_100_steps_s')) or 0:6.2f}x")
    for phase in ("load", "eval_before", "grpo", "eval_after", "sampling"):
        row(f"peak GiB allocated: {phase}", *[get(k, "phases", phase, "peak_allocated_gib") for k in SIDES])
    row("peak GiB reserved, any phase", *[max([v.get("peak_reserved_gib", 0) for v in sides.get(k, {}).get(
        "phases", {}).values()] or [0]) or None for k in SIDES])
    lines.append("# (a real T4 leaves ~14 GiB to torch's allocator: 15 GiB less ECC and the CUDA context)")
    row("eval batch (auto) before / after", get("ours-cold", "phases", "eval_before", "batch"),
        get("ours-cold", "phases", "eval_after", "batch"), get("ours-warm", "phases", "eval_before", "batch"),
        fmt="{:9d}")
    for k in ("ours-cold", "ours-warm"):
        c = sides.get(k, {}).get("phases", {}).get("grpo", {}).get("compile")
        if c:
            lines.append(f"# {k} compile cache by the end of GRPO: FX graphs hit {c['fx_graph']['hit']} / miss "
                         f"{c['fx_graph']['miss']}, AOTAutograd hit {c['autograd']['hit']} / miss "
                         f"{c['autograd']['miss']}, graphs compiled {c['graphs']}")
    for k in SIDES:
        if sides.get(k, {}).get("exit"):
            lines.append(f"# {k}: exited with {sides[k]['exit']} (killed or failed: see realsize.log)")
        if sides.get(k, {}).get("phases", {}).get("grpo", {}).get("stopped_early_at"):
            lines.append(f"# {k}: GRPO stopped at step {sides[k]['phases']['grpo']['stopped_early_at']} to meet "
                         f"the time budget")
    lines += paper_t4(report)
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="where realsize.{txt,json,log} go")
    ap.add_argument("--work", default="/tmp/shortlist-realsize", help="the model, caches, checkpoints")
    ap.add_argument("--model", default=None, help="default: the shape model (tiny with --quick)")
    ap.add_argument("--model-path", default=None, help="where the shape model is built")
    ap.add_argument("--memory-gb", type=float, default=None, help="cap this GPU at so many GiB (a T4: 15)")
    ap.add_argument("--steps", type=int, default=None, help="ours-cold GRPO steps (default 25; quick 2)")
    ap.add_argument("--seed-steps", type=int, default=None, help="the seed's GRPO steps (default 3; quick 2)")
    ap.add_argument("--warm-steps", type=int, default=None, help="ours-warm GRPO steps (default 5; quick 3)")
    ap.add_argument("--budget-s", type=float, default=560, help="the whole command's time; processes fit in it")
    ap.add_argument("--quick", action="store_true", help="CPU, tiny model, tiny workloads: checks every path")
    # a process's own arguments, given by the driver
    ap.add_argument("--role", choices=("seed", "ours", "build"), help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=float("inf"), help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    ap.add_argument("--steady", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--reserve-s", type=float, default=30, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.model_path = args.model_path or str(Path(args.work) / ("shape-small" if args.quick else "shape"))
    args.model = args.model or ("tiny" if args.quick else args.model_path)
    defaults = {"steps": (3, 25), "seed_steps": (2, 3), "warm_steps": (3, 5)}
    for name, (quick, full) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    if args.role:
        role(args)
    else:
        drive(args)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
