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

This file is the driver and the command line; what each process measures is bench/realsize_measure.py,
what the table derives and says is bench/realsize_table.py.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from realsize_measure import role  # noqa: E402  (bench/ is a folder of scripts, on the path just above)
from realsize_table import derive, table  # noqa: E402


# --- the driver ----------------------------------------------------------------------------------
def run_child(args, name: str, extra: list[str], deadline: float, log) -> dict:
    path = Path(args.out) / f"realsize.{name}.json"
    path.unlink(missing_ok=True)
    command = [sys.executable, __file__, "--json", str(path), "--deadline", str(deadline), "--work", args.work,
               "--model", args.model, "--model-path", args.model_path, *extra, *(["--quick"] if args.quick else [])]
    if args.memory_gb:
        command += ["--memory-gb", str(args.memory_gb)]
    if args.batch_per_device:
        command += ["--batch-per-device", str(args.batch_per_device)]
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
    ap.add_argument("--batch-per-device", type=int, default=None,
                    help="ours: completions per forward/backward (default: the proof's setting)")
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
