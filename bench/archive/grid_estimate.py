"""What the wider grid (--grid) should give on SmolLM2, estimated before any GPU run from the committed catalogs.

    python bench/archive/grid_estimate.py --out bench/results/grid_estimate.smollm2

Per family, the measured rows (examples/smollm2-22/catalog, then examples/catalog-smollm2 re-audited by
bench/results/audit_catalog.smollm2.json for the families the first did not reach) give pass@1, the
guess rate, the ceiling and the GRPO signal at the curriculum levels screened. Each grid point
(sources/grid.py) between two screened levels gets them interpolated at its position (pass@1 and the
signal log-linearly, the guess rate linearly); a point below level 0 gets level 0's numbers (no gain
assumed: the conservative case) or, in the optimistic case, level 0's pass@1 carried down the slope from
level 0 to 1 (at most doubled). The trainee's rule then gives each point a verdict, the walk (walk.py's
stop rule) says which points the catalog screens, and for every point the selection would take as judged,
the proof's own draw (heldout.draw, heldout.judgeable: what proof.selection runs) says whether it is.
Specs of examples/smollm2-22 are excluded, as v3's selection excludes them. Families with no measured
row are counted apart (their screens assumed: 2, a below-level-0 point and level 0).
Writes <out>.txt (the table) and <out>.png (pass@1 along each family's grid, the band shaded).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from proof import selection  # noqa: E402
from proof.settings import Settings  # noqa: E402
from shortlist import output, rule, sources, trainee as trainee_  # noqa: E402
from shortlist.sources import levels as levels_  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "examples/smollm2-22/catalog/shortlist.json"
OLDER, AUDIT = ROOT / "examples/catalog-smollm2/shortlist.json", ROOT / "bench/results/audit_catalog.smollm2.json"
EXCLUDE = ROOT / "examples/smollm2-22/families.txt"
RATE_S = 418 / 83  # wall seconds per screen: 83 screens in 418 s, 8 workers sharing one H200 (smollm2-22)


def measured() -> dict[str, dict[float, dict]]:
    """family -> {level: {pass1, guess, ceiling, signal}}: the 22 catalog, then the older one's audit."""
    found: dict[str, dict[float, dict]] = {}
    for r in json.loads(CATALOG.read_text())["rows"]:
        found.setdefault(r["family"], {})[float(r["level"] or 0)] = {
            "pass1": r["pass1"], "guess": r.get("guess") or 0.0, "ceiling": r.get("ceiling"), "signal": r["signal_correct"]}
    signal = {r["spec"]: r["signal_correct"] for r in json.loads(OLDER.read_text())["rows"]}
    for r in json.loads(AUDIT.read_text())["audited"]:
        if r["family"] not in found:
            found[r["family"]] = {float(r["level"] or 0): {"pass1": r["pass1"], "guess": r["guess"],
                                                           "ceiling": r["ceiling"], "signal": signal[r["spec"]]}}
    return found


def _log(p: float) -> float:
    return math.log(max(p, 1e-3))


def at(levels: dict[float, dict], position: float, optimistic: bool) -> dict | None:
    """A point's numbers interpolated from the screened levels; None above the last one screened."""
    xs = sorted(levels)
    if position in levels:
        return levels[position]
    if position < xs[0]:
        base = dict(levels[xs[0]])
        if optimistic and len(xs) > 1 and levels[xs[1]]["pass1"] > 0 and base["pass1"] > 0:
            slope = _log(base["pass1"]) - _log(levels[xs[1]]["pass1"])  # per level, falling up the curriculum
            base["pass1"] = min(2 * base["pass1"], math.exp(_log(base["pass1"]) + slope * (xs[0] - position)))
        return base
    if position > xs[-1]:
        return None
    lo, hi = max(x for x in xs if x < position), min(x for x in xs if x > position)
    w = (position - lo) / (hi - lo)
    a, b = levels[lo], levels[hi]
    return {"pass1": math.exp((1 - w) * _log(a["pass1"]) + w * _log(b["pass1"])) if a["pass1"] and b["pass1"]
            else (1 - w) * a["pass1"] + w * b["pass1"],
            "guess": (1 - w) * a["guess"] + w * b["guess"],
            "ceiling": None if a["ceiling"] is None or b["ceiling"] is None else min(a["ceiling"], b["ceiling"]),
            "signal": (1 - w) * a["signal"] + w * b["signal"]}


def walk(family: str, levels: dict, t: trainee_.Trainee, optimistic: bool) -> list[dict]:
    """The points the grid walk screens, each with its estimated numbers and verdict (walk.py's stop rule)."""
    grid, out, i = levels_.points(family), [], 0
    while i is not None and i < len(grid):
        position, _ = grid[i]
        n = at(levels, position, optimistic)
        if n is None:
            break  # above what was screened: no estimate (the 22 walk stopped or ran out of budget here)
        spec = levels_.at(family, i, grid=True).spec
        try:
            sources.parse(spec)  # builds one task: a point that fails to build is a failure, and the walk goes on
        except sources.FamilyError:
            i = levels_.following(family, i, grid=True)
            continue
        verdict = rule.verdict(t, n["pass1"], n["pass1"], n["signal"], n["ceiling"], n["guess"])
        out.append({"family": family, "position": position, "spec": spec, **n,
                    "verdict": verdict})
        if verdict == "unscorable":
            break
        if n["pass1"] < t.pass_min:
            i = levels_.level_zero(family, grid=True) if position < 0 else None
        else:
            i = i + 1
    return out


def estimate(optimistic: bool, judge) -> dict:
    """Every family's estimated walk, the screens it implies, and what selection v2 would choose from it."""
    t = trainee_.SMOLLM2
    data, rows, screens, unknown = measured(), [], {}, []
    for family in sources.source.get().names():
        if family not in data:
            unknown.append(family)
            screens[family] = 2 if levels_.points(family)[0][0] < 0 else 1
            continue
        points = walk(family, data[family], t, optimistic)
        screens[family] = len(points)
        rows += [p | {"level": i, "learnability": p["pass1"] * (1 - p["pass1"]), "guess_answer": "(estimated)"}
                 for i, p in enumerate(points)]
    catalog = {"trainee": t.as_dict(), "rows": rows, "shortlist": []}
    exclude = frozenset(f.key for f in sources.parse_list(EXCLUDE.read_text().strip()))
    chosen = selection.select(catalog, exclude=exclude, side_min=0, judged_min=0, judge=judge)
    return {"rows": rows, "screens": screens, "unknown": unknown, "chosen": chosen, "counts": selection.counts(chosen)}


def table(cases: dict) -> str:
    t = trainee_.SMOLLM2
    lines = [f"Grid estimate for SmolLM2-135M (trainee smollm2: band {t.pass_min} <= pass@1 < {t.pass_max}), from the "
             f"committed catalogs' rows; v3's bar: {selection.SIDE_MIN} judged per side, {selection.JUDGED_MIN} judged.", ""]
    for name, c in cases.items():
        chosen = {x["spec"]: x["group"] for x in c["chosen"]}
        lines += [f"== {name} ==", f"{'family':24s} {'grid':>4s} {'screens':>7s} {'band':>4s} {'improves':>8s} "
                  f"{'not':>4s}  specs in the band (estimated pass@1)"]
        for family in sorted({r["family"] for r in c["rows"]}):
            mine = [r for r in c["rows"] if r["family"] == family]
            band = [r for r in mine if t.pass_min <= r["pass1"] < t.pass_max]
            yes = sum(chosen.get(r["spec"]) == "improves" for r in mine)
            no = sum(chosen.get(r["spec"]) in ("boundary", "zero") for r in mine)
            if not (band or yes or no):
                continue
            lines.append(f"{family:24s} {len(levels_.points(family)):4d} {c['screens'][family]:7d} {len(band):4d} "
                         f"{yes:8d} {no:4d}  " + "; ".join(f"{r['position']:+.2f} {r['pass1']:.3f} {r['verdict']}"
                                                           for r in band)[:150])
        k, total = c["counts"], sum(c["screens"].values())
        lines += ["", f"screens the walk takes: {total} over {len(c['screens'])} families ({len(c['unknown'])} with no "
                      f"measured row, counted at 1-2 each); at {RATE_S:.1f} s a screen (83 in 418 s, 8 workers on one "
                      f"H200): {total * RATE_S / 60:.1f} min of wall time",
                  f"selection v2 would choose: {k['judged improves']} judged 'improves', {k['judged not']} judged not "
                  f"({k['boundary']} boundary, {k['zero']} zero), {k['control']} controls: "
                  + ("reaches" if k["judged improves"] >= selection.SIDE_MIN and k["judged not"] >= selection.SIDE_MIN
                     and k["judged improves"] + k["judged not"] >= selection.JUDGED_MIN else "does NOT reach")
                  + " the bar", ""]
    return "\n".join(lines)


def figure(cases: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t, c = trainee_.SMOLLM2, cases["conservative"]
    data = measured()
    families = sorted({r["family"] for r in c["rows"] if t.pass_min <= r["pass1"] < t.pass_max})
    fig, ax = plt.subplots(figsize=(11, 6))
    ax.axhspan(t.pass_min, t.pass_max, color="#e8f4e8", label="the band")
    for i, family in enumerate(families):
        mine = [r for r in c["rows"] if r["family"] == family]
        line, = ax.plot([r["position"] for r in mine], [max(r["pass1"], 1e-3) for r in mine], "o-", ms=3, lw=1,
                        label=family)
        shown = sorted(data[family].items())
        ax.plot([x for x, _ in shown], [max(v["pass1"], 1e-3) for _, v in shown], "s", ms=7, mfc="none",
                color=line.get_color())
    ax.set_yscale("log")
    ax.set_xlabel("position on Reasoning Gym's curriculum (levels; squares: screened, dots: grid points estimated)")
    ax.set_ylabel("pass@1 (SmolLM2, 24 tasks x 8)")
    ax.set_title("The wider grid on SmolLM2: grid points in the band (conservative case)")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="path prefix: writes <out>.txt and <out>.png")
    args = ap.parse_args()
    settings, cache = Settings(trainee=trainee_.SMOLLM2.as_dict()), {}

    def judge(spec, row):  # the proof's own rule; a spec's questions drawn once for both cases
        if row["verdict"] in rule.AUDIT_VERDICTS:
            return selection.judged_by_the_proof(spec, row, settings)
        if spec not in cache:
            cache[spec] = selection.judged_by_the_proof(spec, row, settings)
        return cache[spec]
    cases = {name: estimate(name == "optimistic", judge) for name in ("conservative", "optimistic")}
    text = table(cases)
    output.write_text(Path(args.out + ".txt"), text + "\n")
    figure(cases, Path(args.out + ".png"))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
