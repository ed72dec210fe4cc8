"""Which family specs the proof trains, chosen from a catalog by a rule written before training (v2).

A test of the rule needs specs it will judge on both sides: at least SIDE_MIN predicted "improves" and
SIDE_MIN predicted not to ("too hard", "no signal", "already solved"), JUDGED_MIN in all. A spec is
chosen as judged only where the proof will judge it, by the proof's own rule (commit.not_judged): its
catalog verdict is no audit verdict, and its reserved evaluation questions, drawn here on the CPU
exactly as the commitment will draw them (heldout.draw, under the default Settings and the catalog's
trainee), are enough (heldout.judgeable: min_unseen). From a catalog's shortlist.json
(`python -m shortlist screen --all --grid`), in order:
  1. improves: every judgeable spec predicted "improves", best mean p(1-p) first;
  2. boundary: every judgeable "too hard" spec with 0 < pass@1 < pass_min (the edge the rule must get right),
     then "no signal" and "already solved" specs, nearest the band first;
  3. zero: judgeable "too hard" specs at pass@1 = 0, sampled, as many as the not-improves side needs to
     reach SIDE_MIN and the judged specs JUDGED_MIN (at least ZERO);
  4. controls: CONTROLS specs of each audit verdict, sampled: trained and reported apart (never judged).
Specs given in `exclude` (a proof's families already trained, which tested the rule once) are never
chosen. Samples are drawn with random.Random(SEED) from the specs sorted by name, so the list is a
function of the catalog alone; nothing here reads a proof's outcome. The list interleaves the groups
(1, 2, 3, 4, 1, 2, ...), so that the families a run trains first already span both sides. Where the
catalog cannot give SIDE_MIN judged specs on each side and JUDGED_MIN in all, the selection refuses in
one line with its counts; a smaller bar is only ever asked for by name (--side-min, --judged-min).

    python -m proof.selection results/catalog/shortlist.json              # the list, for --families
    python -m proof.selection results/catalog/shortlist.json --json sel.json --exclude trained.txt
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

from shortlist import output, sources
from shortlist.errors import OneLine, one_line
from shortlist.rule import AUDIT_VERDICTS
from shortlist.trainee import Trainee

SIDE_MIN = 10  # judged specs on each side of the rule
JUDGED_MIN = 40  # judged specs in all
ZERO = 3  # "too hard" specs at pass@1 = 0, at least, sampled
CONTROLS = 2  # specs of each audit verdict, sampled
SEED = 0
GROUPS = ("improves", "boundary", "zero", "control")


class SelectionError(OneLine, ValueError):
    """A catalog the rule cannot choose from; the message is one line."""


def judged_by_the_proof(spec: str, verdict: dict, settings) -> list[str]:
    """Why the proof would not judge this spec (empty: it would), by its own rule: the audit verdict,
    then the reserved evaluation questions drawn as the commitment draws them."""
    from proof import commit, heldout
    why = commit.not_judged(verdict, None)
    if why:
        return why  # an audit verdict: no draw needed, it is a control whatever its questions
    try:
        held, _ = heldout.draw(spec, settings)
    except Exception as e:  # noqa: BLE001  a spec whose tasks cannot be drawn cannot be judged
        return [f"its tasks cannot be drawn ({one_line(e)})"]
    few = heldout.judgeable(held, settings.min_unseen)
    return [few] if few else []


def _judged(spec: str, row: dict, trainee: dict) -> list[str]:
    """judged_by_the_proof in a process of its own (the default Settings, made there)."""
    from proof.settings import Settings
    return judged_by_the_proof(spec, row, Settings(trainee=trainee))


def ahead(rows: list[dict], trainee: dict, jobs: int) -> dict:
    """spec -> why the proof would not judge it, for every row, drawn in `jobs` processes at once (each draw
    is CPU work: a census, the training, prediction and evaluation tasks)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
        found = pool.map(_judged, [r["spec"] for r in rows], rows, [trainee] * len(rows))
        return dict(zip((r["spec"] for r in rows), found))


def default_judge(trainee: Trainee, rows: list[dict], jobs: int):
    """judged_by_the_proof under the default Settings for trainee; with jobs > 1 every candidate row is drawn
    ahead in that many processes (the same answers as one at a time, sooner: the list does not change)."""
    if jobs > 1:
        drawn = ahead([r for r in rows if r["verdict"] in ("improves", "too hard", "no signal", "already solved")],
                      trainee.as_dict(), jobs)
        return lambda spec, row: drawn[spec]
    from proof.settings import Settings
    settings = Settings(trainee=trainee.as_dict())
    return lambda spec, row: judged_by_the_proof(spec, row, settings)


def select(catalog: dict, exclude: frozenset = frozenset(), side_min: int = SIDE_MIN, judged_min: int = JUDGED_MIN,
           zero: int = ZERO, controls: int = CONTROLS, judge=None, refused: dict | None = None,
           jobs: int = 1) -> list[dict]:
    """[{"spec", "group", "why"}] in training order, from a catalog's shortlist.json. `judge(spec, row)`
    says why the proof would not judge a spec (default: judged_by_the_proof under the default Settings,
    every candidate drawn ahead in `jobs` processes where jobs > 1); `refused`, where given, gets each
    candidate it turned down: spec -> why."""
    trainee = Trainee.from_dict(catalog["trainee"])
    excluded = {sources.parse(e).key for e in exclude}
    out = (lambda spec: sources.parse(spec).key in excluded) if excluded else (lambda spec: False)  # noqa: E731
    rows = sorted({r["spec"]: r for r in catalog["rows"] if not out(r["spec"])}.values(), key=lambda r: r["spec"])
    judge = judge or default_judge(trainee, rows, jobs)
    improves = sorted((r for r in rows if r["verdict"] == "improves"), key=lambda r: (-r["learnability"], r["spec"]))
    near = sorted((r for r in rows if r["verdict"] == "too hard" and 0 < r["pass1"] < trainee.pass_min),
                  key=lambda r: (-r["pass1"], r["spec"]))
    near += sorted((r for r in rows if r["verdict"] in ("no signal", "already solved")),
                   key=lambda r: (abs(r["pass1"] - trainee.pass_min), r["spec"]))
    zeros = [r for r in rows if r["verdict"] == "too hard" and r["pass1"] == 0]
    refused = {} if refused is None else refused

    def judged(candidates: list, why) -> list[dict]:
        out = []
        for r in candidates:
            reasons = judge(r["spec"], r)
            if reasons:
                refused[r["spec"]] = reasons
            else:
                out.append({"spec": r["spec"], "why": why(r)})
        return out
    chosen = {"improves": judged(improves, lambda r: f"improves (pass@1 {r['pass1']:.3f}, mean p(1-p) "
                                                     f"{r['learnability']:.3f})"),
              "boundary": judged(near, lambda r: f"{r['verdict']} at pass@1 {r['pass1']:.3f}: the boundary")}
    rng = random.Random(SEED)
    need = max(zero, side_min - len(chosen["boundary"]), judged_min - len(chosen["improves"]) - len(chosen["boundary"]))
    chosen["zero"] = []
    for r in rng.sample(zeros, len(zeros)):  # a seeded order, drawn until enough are judgeable
        if len(chosen["zero"]) >= need:
            break
        chosen["zero"] += judged([r], lambda r: "too hard at pass@1 0 (sampled)")
    chosen["control"] = []
    for verdict in AUDIT_VERDICTS:
        specs = [r["spec"] for r in rows if r["verdict"] == verdict]
        chosen["control"] += [{"spec": s, "why": f"{verdict} (a control, sampled): trained, reported apart"}
                              for s in (rng.sample(specs, controls) if len(specs) > controls else specs)]
    yes, no = len(chosen["improves"]), len(chosen["boundary"]) + len(chosen["zero"])
    if yes < side_min or no < side_min or yes + no < judged_min:
        unjudged = len([s for s, why in refused.items() if why])
        raise SelectionError(f"the catalog gives {yes} judged 'improves' and {no} judged not (of {len(improves)} "
                             f"'improves', {len(near)} boundary and {len(zeros)} zero rows; {unjudged} not judgeable), "
                             f"below {side_min} per side and {judged_min} judged: screen more (screen --all --grid)")
    ordered = []
    for i in range(max(len(g) for g in chosen.values())):  # interleaved: both sides early
        ordered += [chosen[g][i] | {"group": g} for g in GROUPS if i < len(chosen[g])]
    return ordered


def counts(chosen: list[dict]) -> dict:
    """How many specs of each group, and per side: what selection.json and the one line say."""
    groups = {g: sum(c["group"] == g for c in chosen) for g in GROUPS}
    return groups | {"judged improves": groups["improves"], "judged not": groups["boundary"] + groups["zero"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m proof.selection", description=__doc__.splitlines()[0])
    ap.add_argument("catalog", help="a catalog's shortlist.json")
    ap.add_argument("--json", help="also write the list, each spec's group and why, to this file")
    ap.add_argument("--exclude", help="a file of family specs (one line, comma-separated, as --families takes them) "
                                      "never to choose: a proof's families already trained")
    ap.add_argument("--side-min", type=int, default=SIDE_MIN, help="judged specs on each side (default: %(default)s)")
    ap.add_argument("--judged-min", type=int, default=JUDGED_MIN, help="judged specs in all (default: %(default)s)")
    ap.add_argument("--jobs", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)),
                    help="processes drawing the candidates' questions at once (default: %(default)s)")
    args = ap.parse_args(argv)
    try:
        body = json.loads(Path(args.catalog).read_text())
        exclude = frozenset(f.key for f in sources.parse_list(Path(args.exclude).read_text().strip())) \
            if args.exclude else frozenset()
        refused: dict[str, list] = {}
        chosen = select(body, exclude=exclude, side_min=args.side_min, judged_min=args.judged_min, refused=refused,
                        jobs=args.jobs)
    except (OSError, ValueError, KeyError, sources.FamilyError) as e:
        print(f"error: {args.catalog}: {e}", file=sys.stderr)
        return 2
    if args.json:
        output.write_json(Path(args.json), {"rule": __doc__, "catalog": args.catalog, "side_min": args.side_min,
                                            "judged_min": args.judged_min, "zero": ZERO, "controls": CONTROLS,
                                            "seed": SEED, "excluded": sorted(exclude), "counts": counts(chosen),
                                            "selected": chosen, "not_judgeable": refused})
    print(", ".join(c["spec"] for c in chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
