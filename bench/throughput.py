"""Families per hour on one GPU: the same families, the same commitment, at several jobs per GPU.

    python bench/throughput.py --model /root/smollm2 --trainee smollm2 --families "$(cat FAMILIES)" \
        --modes 1,2,4,8,8mps --out /root/throughput --json bench/results/throughput.h200.json [--catalog 12]

Each mode is `proof run --per-gpu N [--mps]` into a folder of its own (MODE = N, or N followed by
"mps"). The first mode's commitment is copied into every other mode's folder before it starts, so all
train from the very same predictions (the runner refuses a folder whose commitment differs). A mode
that did not finish resumes when the command is given again (GPU sessions are short): finished
families are kept, and the JSON is rewritten with every mode measured so far.

Per mode: families per hour (finished families over the span from the first family's start to the
last one's end), the median GRPO step, the most GPU memory used and the mean utilisation (nvidia-smi
every 2 s), and results_equal: every family's before and after scores, task by task, equal to those
of the first mode (MPS and sharing change where kernels run, never what GRPO samples or trains on; a
difference is reported with the families it touches, and whether the evaluation before training
differs too). Where the scores after training are not equal, `equivalence` says whether they are the
same result statistically: per family, two one-sided tests that the paired difference lies within
+-0.05 (the proof's equivalence_margin), every family equivalent, over >= 8 families. Measured on an
H100 (bench/results/step_split.shared.h100.txt), the same 8 families on a cold and on a warm compile
cache gave equal evaluations before training and 3 of 8 different ones after (not yet told apart: kernels a warm process compiled for other shapes first, or run-to-run
order under sharing; bench/device.sh modes measures a mode twice on one cache). --warm
starts every later mode on a copy of the first mode's compile cache (what a long run's later waves
find); modes may carry a -tag to measure one twice (8mps,8mps-again), and --mode-set gives one mode a speed setting
of its own (8mps,8mps-b16 --mode-set 8mps-b16:batch_per_device=16: the same commitment at another micro-batch).
Each mode keeps its families' evaluations (per_family: means, scores and their SHA-256), so --against
FILE[:MODE] compares a run with an earlier committed one (the same commitment at another commit). --catalog N also times
`shortlist screen --all --grid --per-gpu N` (catalog_wall_s: the catalog's own wall_s, and how many
families it screened, failed and did not reach), into --catalog-out (a folder of its own: a proof's catalog,
then, is this measurement too) under --catalog-budget minutes; --modes "" times the catalog alone.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from proof import files, settings  # noqa: E402
from shortlist import output, provenance  # noqa: E402

COMMITMENT = ("predictions.json", "predictions.sha256", "trainee.json")
EQUIVALENCE_MIN = 8  # families: fewer cannot show modes equivalent (issue 39)
# the proof's own margin of "no change" (its TOST), fixed before any mode was compared: two modes whose mean
# scores after training differ by less than this are the same result
EQUIVALENCE_MARGIN = settings.make().equivalence_margin


def mode_flags(mode: str) -> list[str]:
    """N, Nmps, or either with a -tag (a mode measured again: its own folder, e.g. 8mps-again)."""
    kind = mode.split("-", 1)[0]
    per_gpu = kind.removesuffix("mps")
    if not per_gpu.isdigit() or mode.endswith("-"):
        raise SystemExit(f"--modes: {mode!r} is not N or Nmps (with an optional -tag)")
    return ["--per-gpu", per_gpu] + (["--mps"] if kind.endswith("mps") else [])


def mode_settings(given: list[str], modes: list[str]) -> dict[str, list[str]]:
    """--mode-set MODE:NAME=VALUE, by mode (each must name one of --modes)."""
    own: dict[str, list[str]] = {}
    for item in given:
        mode, _, setting = item.partition(":")
        if mode not in modes or "=" not in setting:
            raise SystemExit(f"--mode-set: {item!r} is not MODE:NAME=VALUE for one of --modes ({', '.join(modes)})")
        own.setdefault(mode, []).append(setting)
    return own


class Gpu:
    """nvidia-smi's memory used (GiB) and utilisation (%) every 2 s while a command runs."""

    def __init__(self):
        self.samples, self._stop = [], threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self):
        while not self._stop.wait(2.0):
            try:
                text = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,utilization.gpu",
                                       "--format=csv,noheader,nounits"], capture_output=True, text=True,
                                      timeout=10).stdout
                used, util = (float(x) for x in text.splitlines()[0].split(","))
                self.samples.append((used / 1024, util))
            except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
                pass

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)

    def summary(self) -> dict:
        if not self.samples:
            return {"gpu_mem_max_gib": None, "gpu_util_mean": None}
        return {"gpu_mem_max_gib": round(max(m for m, _ in self.samples), 2),
                "gpu_util_mean": round(statistics.mean(u for _, u in self.samples), 1)}


def results(folder: Path) -> dict[str, dict]:
    return {p.stem: output.read_json(p) for p in sorted((folder / "families").glob("*.json"))
            if output.read_json(p).get("status") == "done"}


def phases(done) -> dict:
    """Where a family's seconds went, the median over the mode's families: the evaluations, the first step
    (compilation), a later step split into generation, scoring and the rest (proof/steptime.py), and the
    process's compile cache hits and misses (Inductor's FX graphs: a warm start is hits)."""
    def median(values):
        values = [v for v in values if isinstance(v, (int, float))]
        return round(statistics.median(values), 3) if values else None
    t = [r["timings"] for r in done]
    split = [x.get("step_parts", {}).get("median") or {} for x in t]
    first = [x.get("step_parts", {}).get("first") or {} for x in t]
    return {"eval_before_s": median(x.get("eval_before_s") for x in t),
            "first_step_s": median(x.get("first_step_s") for x in t),
            "train_s": median(x.get("train_s") for x in t), "eval_after_s": median(x.get("eval_after_s") for x in t),
            "first_step": {k: median(f.get(k) for f in first) for k in ("generation_s", "scoring_s", "rest_s")},
            "step": {k: median(x.get(k) for x in split) for k in ("step_s", "generation_s", "scoring_s", "rest_s")},
            "compiled": {k: median(x.get("compile", {}).get("fx_graph", {}).get(k) for x in t)
                         for k in ("hit", "miss")}}


SCORED = ("before_sha256", "after_sha256")
MEANS = ("before_mean", "after_mean")


def fingerprint(scores: list) -> str:
    """A task-by-task score list as one SHA-256: equal scores, equal hashes, whether written 1 or 1.0."""
    return hashlib.sha256(json.dumps([float(x) for x in scores]).encode()).hexdigest()


def per_family(done: dict[str, dict]) -> dict[str, dict]:
    """Each family's evaluations before and after training (the mean to 4 decimals, the task-by-task scores and
    their fingerprint) and its own phases: what a later run is compared with (--against) when this run's folders
    are gone."""
    out = {}
    for stem, r in done.items():
        t = r.get("timings", {})
        out[r.get("family", stem)] = {
            **{f"{when}_mean": round(float(np.mean(r[when]["scores"])), 4) if r[when]["scores"] else None
               for when in ("before", "after")},
            **{f"{when}_sha256": fingerprint(r[when]["scores"]) for when in ("before", "after")},
            **{f"{when}_scores": [float(x) for x in r[when]["scores"]] for when in ("before", "after")},
            **{k: t.get(k) for k in ("eval_before_s", "first_step_s", "median_step_s", "train_s", "eval_after_s")},
            "compile": t.get("compile"),
            "engine": {k: (v or {}).get("engine") for k, v in (r.get("engine") or {}).items()}}
    return out


def earlier(given: str | None, modes: list[str]) -> tuple[Path, dict[str, dict]] | None:
    """--against FILE[:MODE]: an earlier run's JSON (a committed bench/results file) and, per mode of this run, the
    per-family record it is compared with: MODE's, or where none is named the mode of the same name. Read before
    anything runs: a file or mode that is not there is one line, not a run measured against nothing."""
    if not given:
        return None
    path, _, named = given.partition(":")
    try:
        found = output.read_json(Path(path)).get("modes", {})
    except (OSError, ValueError, AttributeError) as e:
        raise SystemExit(f"--against: cannot read {path} ({e})") from None
    picked = {m: named or m for m in modes}
    missing = sorted({m for m in picked.values() if not found.get(m, {}).get("per_family")})
    if missing:
        raise SystemExit(f"--against: {path} has no per-family results for mode {', '.join(missing)} "
                         f"(it has: {', '.join(m for m, r in found.items() if r.get('per_family')) or 'none'})")
    return Path(path), {m: dict(found[picked[m]]["per_family"], _mode=picked[m]) for m in modes}


def against(mine: dict[str, dict], theirs: dict[str, dict], path: Path) -> dict:
    """This mode's families against an earlier run's, family by family: task by task where both kept the scores'
    fingerprints, else by the 4-decimal means (an older file), and how many each way, since equal means are not
    equal scores. Equal only where the same families finished on both sides and none differs. Where some differ
    and both kept the scores, whether the results after training are equivalent (equivalence(): float order, a
    micro-batch of another size)."""
    ref = {k: v for k, v in theirs.items() if k != "_mode"}
    common = sorted(set(mine) & set(ref))
    scored = {k for k in common if all(x in mine[k] and x in ref[k] for x in SCORED)}
    differ = [k for k in common if any(mine[k].get(x) != ref[k].get(x) for x in (SCORED if k in scored else MEANS))]
    missing, new = sorted(set(ref) - set(mine)), sorted(set(mine) - set(ref))
    out = {"file": path.name, "mode": theirs["_mode"], "compared": len(common), "by_scores": len(scored),
           "by_means": len(common) - len(scored), "equal": bool(common) and not (differ or missing or new),
           "differing": differ, "missing": missing, "new": new}
    kept = [k for k in common if "after_scores" in mine[k] and "after_scores" in ref[k]]
    if differ and kept:
        out["equivalence"] = equivalence({k: {"after": {"scores": mine[k]["after_scores"]}} for k in kept},
                                         {k: {"after": {"scores": ref[k]["after_scores"]}} for k in kept})
    return out


def measure(folder: Path, base: dict[str, dict] | None, wall_s: float | None = None) -> dict:
    """A mode's families: their rate over their own span (first start to last end) and, given the proof run's
    wall time, over the whole run (01's predictions and 03's report included: what a user waits for)."""
    done = results(folder)
    if not done:
        return {"families": 0}
    starts = [datetime.fromisoformat(r["started_at"]).timestamp() for r in done.values()]
    ends = [datetime.fromisoformat(r["written_at"]).timestamp() for r in done.values()]
    span = max(ends) - min(starts)
    out = {"families": len(done), "span_s": round(span, 1),
           "families_per_hour": round(len(done) * 3600 / span, 1) if span > 0 else None,
           "run_families_per_hour": round(len(done) * 3600 / wall_s, 1) if wall_s else None,
           "median_step_s": round(statistics.median(r["timings"]["median_step_s"] for r in done.values()), 3),
           "phases_median_s": phases(done.values()), "per_family": per_family(done)}
    if base is not None:
        common = sorted(set(done) & set(base))
        differ = [k for k in common if (done[k]["before"]["scores"], done[k]["after"]["scores"]) !=
                  (base[k]["before"]["scores"], base[k]["after"]["scores"])]
        out |= {"compared": len(common), "results_equal": not differ and bool(common), "differing": differ,
                "before_equal": bool(common) and all(done[k]["before"]["scores"] == base[k]["before"]["scores"]
                                                     for k in common),
                "equivalence": equivalence({k: done[k] for k in common}, base)}
    return out


def equivalence(done: dict[str, dict], base: dict[str, dict]) -> dict:
    """Where scores after training are not equal task by task (float order: kernels compiled for other
    shapes, another cache's state), whether they are the same result: per family, two one-sided tests on
    the paired difference over the same tasks (proof.stats.tost, the proof's own bootstrap) that it lies
    within +-EQUIVALENCE_MARGIN of a task's score; the modes are equivalent where every family is, over
    >= EQUIVALENCE_MIN families. A family whose tasks differ in number is not comparable, and not equivalent."""
    from proof import stats
    families = {}
    for k, r in sorted(done.items()):
        ref, got = base[k]["after"]["scores"], r["after"]["scores"]
        if not ref or len(ref) != len(got):
            families[k] = {"comparable": False, "tasks": [len(ref), len(got)], "equivalent": False}
            continue
        diff, test = stats.paired_gain(ref, got), stats.tost(ref, got, EQUIVALENCE_MARGIN)
        families[k] = {"comparable": True, "reference_mean": round(float(np.mean(ref)), 4),
                       "mean": round(float(np.mean(got)), 4), "difference": round(diff["gain"], 4),
                       "difference_ci95": [round(x, 4) for x in diff["ci95"]], "tost_p": round(test["p"], 4),
                       "equivalent": test["equivalent"]}
    every = bool(families) and all(f["equivalent"] for f in families.values())
    return {"margin": EQUIVALENCE_MARGIN, "families": len(families), "all_families": every,
            "equivalent": len(families) >= EQUIVALENCE_MIN and every, "per_family": families}


def run(cmd: list[str], log: Path) -> tuple[int, float, dict]:
    started = time.time()
    with Gpu() as gpu, open(log, "a") as sink:
        rc = subprocess.run(cmd, stdout=sink, stderr=subprocess.STDOUT).returncode
    return rc, round(time.time() - started, 1), gpu.summary()


def time_catalog(a, report: dict) -> None:
    """The whole catalog screened at --catalog jobs per GPU, its wall time and counts into report."""
    folder = a.catalog_out or a.out / f"catalog-{a.catalog}"
    cmd = [sys.executable, "-m", "shortlist", "screen", "--all", f"--{a.catalog_walk}", "--model", a.model,
           "--trainee", a.trainee, "--out", str(folder), "--per-gpu", str(a.catalog),
           *(["--budget-min", str(a.catalog_budget)] if a.catalog_budget else [])]
    rc, wall, gpu = run(cmd, a.out / "catalog.log")
    found = output.read_json(folder / "shortlist.json") if (folder / "shortlist.json").exists() else {}
    rows = found.get("rows", [])
    report |= {"catalog_wall_s": found.get("wall_s"), "catalog": {
        "rc": rc, "command_wall_s": wall, "walk": a.catalog_walk, "per_gpu": a.catalog, "budget_min": a.catalog_budget,
        "rows": len(rows), "families_screened": len({r["family"] for r in rows}),
        "failures": len(found.get("failures", [])), "unreached": len(found.get("unreached", [])), **gpu}}
    output.write_json(a.json, report)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--trainee", default="smollm2")
    ap.add_argument("--families", default="", help="the families, as proof run takes them (needed with --modes)")
    ap.add_argument("--modes", default="1,2,4,8,8mps", help="jobs per GPU, N or Nmps, the first the reference")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--catalog", type=int, help="also time the catalog at this --per-gpu")
    ap.add_argument("--catalog-walk", choices=("grid", "levels"), default="grid", help="--grid or --levels")
    ap.add_argument("--catalog-out", type=Path, help="the catalog's folder (default: <out>/catalog-N)")
    ap.add_argument("--catalog-budget", type=float, help="the catalog's --budget-min")
    ap.add_argument("--warm", action="store_true",
                    help="every mode after the first starts on a copy of the compile cache the first one filled")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a protocol setting for every mode, as proof run takes it (a short check: steps=4)")
    ap.add_argument("--mode-set", action="append", default=[], metavar="MODE:NAME=VALUE",
                    help="a speed setting for one mode (8mps-b16:batch_per_device=16): the modes share one "
                         "commitment, so a protocol setting is refused by the run")
    ap.add_argument("--against", metavar="FILE[:MODE]",
                    help="an earlier run's JSON: each mode's families compared with its MODE's (default: the mode of "
                         "the same name), task by task where it kept fingerprints (a run's results at another commit)")
    a = ap.parse_args()
    modes = [m for m in a.modes.split(",") if m]
    for mode in modes:
        mode_flags(mode)
    own = mode_settings(a.mode_set, modes)
    prior = earlier(a.against, modes)
    if modes and not a.families:
        raise SystemExit("--families: needed to train at --modes (or --modes '' to time the catalog alone)")
    a.out.mkdir(parents=True, exist_ok=True)  # the catalog's log goes here even when no mode trains
    report = output.read_json(a.json) if a.json.exists() else {}
    # SHORTLIST_COMMIT first: a copied tree's .git may be another commit's (the GPU machine's copy said 1f60db2
    # for 7df013e's tree), as bench/realsize.py reads it
    commit = os.environ.get("SHORTLIST_COMMIT") or subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown"
    report |= {"command": " ".join(sys.argv), "commit": commit, "versions": provenance.versions(),
               "device": provenance.device(), "modes": report.get("modes", {})}
    first = a.out / modes[0] if modes else None
    for mode in modes:
        folder = a.out / mode
        folder.mkdir(parents=True, exist_ok=True)
        if mode != modes[0] and (first / COMMITMENT[0]).exists():
            for name in COMMITMENT:
                if (first / name).exists() and not (folder / name).exists():
                    shutil.copy2(first / name, folder / name)
        cache = files.compile_cache(folder)
        if a.warm and mode != modes[0] and files.compile_cache(first).is_dir() and not cache.exists():
            shutil.copytree(files.compile_cache(first), cache)  # the first mode's graphs: what later waves find
        cmd = [sys.executable, "-m", "proof", "run", "--model", a.model, "--trainee", a.trainee, "--families",
               a.families, "--out", str(folder), *mode_flags(mode),
               *(x for kv in a.set + own.get(mode, []) for x in ("--set", kv))]
        rc, wall, gpu = run(cmd, a.out / f"{mode}.log")
        base = results(first) if mode != modes[0] else None
        report["modes"][mode] = {"rc": rc, "wall_s": wall, "settings": a.set + own.get(mode, []), **gpu,
                                 **measure(folder, base, wall)}
        if prior:  # a mode that finished nothing is compared too: nothing equals what the earlier run finished
            report["modes"][mode]["against"] = against(report["modes"][mode].get("per_family", {}), prior[1][mode],
                                                       prior[0])
        if rc != 0:
            print(f"{mode}: proof run exited {rc}; see {a.out / (mode + '.log')}", file=sys.stderr)
        output.write_json(a.json, report)
        print(mode, json.dumps({k: v for k, v in report["modes"][mode].items() if k != "per_family"}), flush=True)
    if a.catalog:
        time_catalog(a, report)
    report["families_per_hour"] = {m: r.get("families_per_hour") for m, r in report["modes"].items()}
    report["results_equal"] = {m: r.get("results_equal", (r.get("families", 0) > 0) if m == (modes[0] if modes else None) else None)
                               for m, r in report["modes"].items()}
    report.pop("equal_to_earlier", None)  # a reused --json's, from another --against
    if prior:
        report["equal_to_earlier"] = {m: report["modes"][m]["against"]["equal"] for m in modes}
    output.write_json(a.json, report)
    print(json.dumps({k: report[k] for k in ("families_per_hour", "results_equal", "equal_to_earlier") if k in report}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
