"""What bench/realsize.py's table says: figures derived from the processes' measurements (each
labelled derived), the table of seed against ours, and a T4 estimate on paper.
"""
from __future__ import annotations

import statistics

from realsize_measure import FAMILY

T4 = {"bandwidth_Bps": 320e9, "fp32_flops": 8.1e12, "memory_gib": 15.0}
SIDES = ("seed", "ours-cold", "ours-warm")


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
    return [f"T4 on paper (assumptions in bench/realsize_table.py: paper_t4): our GRPO step >= {step:.1f} s "
            f"(generation {gen:.1f} s at {decode_s(32) * 1e3:.1f} ms a decode step for 32 rows, training "
            f"{train:.1f} s at 100% of fp32 peak, ~{2 * train:.1f} s at 50%);",
            f"  our 200-task evaluation >= {evaluation:.1f} s ({batches} batches of {batch}); a 100-step family "
            f">= {100 * step + 2 * evaluation:.0f} s (~{(100 * (gen + 2 * train) + 2 * evaluation) / 60:.0f} min at 50% "
            f"training efficiency), before compilation (CPU-bound: a Kaggle CPU is slower than this machine's){seed}."]



def table(report: dict) -> str:
    return "\n".join(header(report) + timings(report) + memory(report) + notes(report) + paper_t4(report))


def header(report: dict) -> list[str]:
    """The command, versions, device and model, and which engine each of our processes decoded with."""
    sides = report["sides"]
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
    batch = next((sides[k]["batch_per_device"] for k in ("ours-cold", "ours-warm") if sides.get(k, {}).get("batch_per_device")), None)
    if batch:
        lines.append(f"# ours: {batch} completions per forward/backward (batch_per_device)")
    for name in ("ours-cold", "ours-warm"):
        served = sides.get(name, {}).get("phases", {}).get("eval_after", {}).get("engine")
        if served:
            lines.append(f"# {name}: engine {served.get('engine')}" + (f" ({served['why']})" if served.get("why") else ""))
    build = report.get("build", {}).get("phases", {}).get("build")
    if build:
        lines.append(f"# built in {build['seconds']:.1f} s")
    return lines


def get(sides: dict, name: str, *keys):
    """A measured number at sides[name][keys...], or None."""
    x = sides.get(name, {})
    for k in keys:
        x = x.get(k, {}) if isinstance(x, dict) else {}
    return x if isinstance(x, (int, float)) else None


def row(label, seed, cold, warm=None, ratio=None, fmt="{:9.2f}") -> str:
    """One line of the table: a column a side, and seed/ours where it is given."""
    cell = lambda x: (fmt.format(x) if x is not None else f"{'-':>9}")  # noqa: E731
    r = f"   {ratio:6.2f}x" if ratio else ""
    return f"{label:<40}{cell(seed)}{cell(cold)}{cell(warm)}{r}"


def ratio(a, b):
    return a / b if a and b else None


def timings(report: dict) -> list[str]:
    """Seconds and tokens per second, seed against ours (steady, first, per phase, per family)."""
    sides = report["sides"]
    d = {k: report.get("derived", {}).get(k, {}) for k in SIDES}
    get_ = lambda name, *keys: get(sides, name, *keys)  # noqa: E731
    lines = [f"{'':<40}{'seed':>9}{'ours':>9}{'ours 2nd':>9}   seed/ours",
             row("GRPO s/step, steady (median)", d["seed"].get("median_step_s"), d["ours-cold"].get("median_step_s"),
                 None, ratio(d["seed"].get("median_step_s"), d["ours-cold"].get("median_step_s"))),
             row("  each process's own median", *[d[k].get("own_median_step_s") for k in SIDES]),
             *[row(f"  median step's {part}", None, *[get_(k, "phases", "grpo", "step_parts", "median", f"{part}_s")
                                                        for k in ("ours-cold", "ours-warm")])
               for part in ("generation", "scoring", "rest")],
             row("GRPO step 1 s", *[(sides.get(k, {}).get("phases", {}).get("grpo", {}).get("steps_s") or [None])[0]
                                    for k in SIDES])]
    seed_tps = ratio(get_("seed", "phases", "sampling", "tokens"), get_("seed", "phases", "sampling", "seconds"))
    tps = {k: ratio(get_(k, "phases", "sampling", "tokens"), get_(k, "phases", "sampling", "seconds"))
           for k in ("ours-cold", "ours-warm")}
    lines.append(row("sampling tokens/s (24 x 8; seed 4 x 8)", seed_tps, tps["ours-cold"], tps["ours-warm"],
                     ratio(tps["ours-cold"] or tps["ours-warm"], seed_tps), "{:9.0f}"))
    seed_eval = get_("seed", "phases", "eval_before", "seconds")
    steady = [get_(k, "phases", "eval_steady", "seconds") for k in ("ours-cold", "ours-warm")]
    lines += [row("eval 200 tasks s, steady", seed_eval, *steady, ratio(seed_eval, steady[0] or steady[1])),
              row("eval before training s (1st, compiles)", seed_eval,
                  *[get_(k, "phases", "eval_before", "seconds") for k in ("ours-cold", "ours-warm")]),
              row("eval after training s", d["seed"].get("eval_after_s"),
                  *[get_(k, "phases", "eval_after", "seconds") for k in ("ours-cold", "ours-warm")]),
              row("warm-up s (beyond load + steady work)", *[d[k].get("warmup_s") for k in SIDES]),
              row("load s", *[get_(k, "phases", "load", "seconds") for k in SIDES]),
              row("family s, measured steps", *[d[k].get("family_measured_s") for k in SIDES]),
              row("  steps measured", *[d[k].get("steps_measured") for k in SIDES], fmt="{:9d}"),
              row("family s, 100 steps (DERIVED)", *[d[k].get("family_100_steps_s") for k in SIDES],
                  ratio(d["seed"].get("family_100_steps_s"), d["ours-cold"].get("family_100_steps_s")))]
    if d["ours-warm"].get("family_100_steps_s") and d["seed"].get("family_100_steps_s"):
        lines.append(f"{'  seed / ours 2nd family, 100 steps':<40}{'':27}   "
                     f"{ratio(d['seed'].get('family_100_steps_s'), d['ours-warm'].get('family_100_steps_s')) or 0:6.2f}x")
    return lines


def memory(report: dict) -> list[str]:
    """Peak memory per phase under the cap, and the evaluation batch it allowed."""
    sides = report["sides"]
    lines = [row(f"peak GiB allocated: {phase}", *[get(sides, k, "phases", phase, "peak_allocated_gib") for k in SIDES])
             for phase in ("load", "eval_before", "grpo", "eval_after", "sampling")]
    lines.append(row("peak GiB reserved, any phase", *[max([v.get("peak_reserved_gib", 0) for v in sides.get(k, {}).get(
        "phases", {}).values()] or [0]) or None for k in SIDES]))
    lines.append("# (a real T4 leaves ~14 GiB to torch's allocator: 15 GiB less ECC and the CUDA context)")
    lines.append(row("eval batch (auto) before / after", get(sides, "ours-cold", "phases", "eval_before", "batch"),
                     get(sides, "ours-cold", "phases", "eval_after", "batch"),
                     get(sides, "ours-warm", "phases", "eval_before", "batch"), fmt="{:9d}"))
    return lines


def notes(report: dict) -> list[str]:
    """The compile cache's hits, and any process that exited early or stopped GRPO to meet the budget."""
    sides, lines = report["sides"], []
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
    return lines


def phases(paths: list[str]) -> str:
    """Peak memory and seconds per phase of each process's JSON side by side (bench/device.sh memory)."""
    import json
    from pathlib import Path
    sides = {Path(p).stem.split(".", 1)[-1]: json.loads(Path(p).read_text()) for p in paths if Path(p).exists()}
    names = [n for side in sides.values() for n in side.get("phases", {})]
    lines = [f"{'phase':14}" + "".join(f"{s + ' alloc':>18}{s + ' reserved':>20}{'s':>8}" for s in sides)]
    for name in dict.fromkeys(names):
        cells = ""
        for side in sides.values():
            ph = side.get("phases", {}).get(name, {})
            cells += "".join(f"{ph[k]:{w}.2f}" if isinstance(ph.get(k), (int, float)) else f"{'-':>{w}}"
                             for k, w in (("peak_allocated_gib", 18), ("peak_reserved_gib", 20), ("seconds", 8)))
        lines.append(f"{name:14}{cells}")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys
    if sys.argv[1:2] == ["--phases"]:
        print(phases(sys.argv[2:]))
