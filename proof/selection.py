"""Which family x level pairs the proof trains, chosen from a catalog by a rule written before training.

A proof of the rule needs families on both sides of each threshold, not only the ones it predicts
will improve. From a catalog (shortlist.json: `python -m shortlist screen --all --levels`), in order:
  1. improves: every family x level predicted "improves": each family's best level first (the catalog's
     rank), then its other "improves" levels (a test of the rule's "improves" side needs ten or more);
  2. boundary: every "too hard" spec with 0 < pass@1 < pass_min: the edge the rule must get right;
  3. first too hard: each improving family's first "too hard" level, the step up the rule says is too far;
  4. zero: a sample of ZERO "too hard" specs with pass@1 = 0 (all of them are readable: an unreadable
     one is "unscorable", which the rule says first);
  5. controls: a sample of CONTROLS specs of each audit verdict ("guessable", "unscorable", "unverified
     ceiling"), trained and reported apart (the proof does not judge them).
Specs given in `exclude` (a proof's families already trained, which tested the rule once) are never chosen.
Samples are drawn with random.Random(SEED) from the specs sorted by name, so the list is a function of
the catalog alone; nothing here reads a proof's outcome. The list interleaves the groups (1, 2, 3, 4, 5,
1, 2, ...), so that the families a run trains first already span both sides. At least MINIMUM specs.

    python -m proof.selection results/catalog/shortlist.json              # the list, for --families
    python -m proof.selection results/catalog/shortlist.json --json sel.json   # and why each is there
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from shortlist import output, sources
from shortlist.errors import OneLine
from shortlist.rule import AUDIT_VERDICTS
from shortlist.trainee import Trainee

ZERO = 3  # "too hard" specs at pass@1 = 0, sampled
CONTROLS = 2  # "guessable" and "unscorable" specs, sampled, of each
SEED = 0
MINIMUM = 16
GROUPS = ("improves", "boundary", "first too hard", "zero", "control")


class SelectionError(OneLine, ValueError):
    """A catalog the rule cannot choose from; the message is one line."""


def select(catalog: dict, zero: int = ZERO, controls: int = CONTROLS, minimum: int = MINIMUM,
           exclude: frozenset = frozenset()) -> list[dict]:
    """[{"spec", "group", "why"}] in training order, from a catalog's shortlist.json."""
    trainee = Trainee.from_dict(catalog["trainee"])
    exclude = {sources.parse(e).key for e in exclude}
    out = (lambda spec: sources.parse(spec).key in exclude) if exclude else (lambda spec: False)  # noqa: E731
    rows = [r for r in catalog["rows"] if not out(r["spec"])]
    rng = random.Random(SEED)
    chosen: dict[str, list[dict]] = {g: [] for g in GROUPS}
    best = {s["best"] for s in catalog["shortlist"]}
    for s in catalog["shortlist"]:
        if not out(s["best"]):
            chosen["improves"].append({"spec": s["best"], "why": f"improves (rank {s['rank']}, mean p(1-p) "
                                                                  f"{s['learnability']:.3f}, its best level)"})
    for r in sorted(rows, key=lambda r: r["spec"]):
        if r["verdict"] == "improves" and r["spec"] not in best:
            chosen["improves"].append({"spec": r["spec"], "why": f"improves at another level ({r['level']}, pass@1 "
                                                                 f"{r['pass1']:.3f})"})
    for r in sorted(rows, key=lambda r: r["spec"]):
        if r["verdict"] == "too hard" and 0 < r["pass1"] < trainee.pass_min:
            chosen["boundary"].append({"spec": r["spec"], "why": f"too hard at pass@1 {r['pass1']:.3f} < "
                                                                 f"{trainee.pass_min}: the boundary"})
    improving = {s["family"] for s in catalog["shortlist"]}
    for name in sorted(improving):
        above = sorted((r for r in rows if r["family"] == name and r["verdict"] == "too hard"),
                       key=lambda r: r["level"] if r["level"] is not None else -1)
        if above:
            chosen["first too hard"].append({"spec": above[0]["spec"], "why": f"{name}'s first too hard level "
                                                                              f"({above[0]['level']})"})
    taken = {c["spec"] for group in chosen.values() for c in group}
    zeros = sorted(r["spec"] for r in rows if r["verdict"] == "too hard" and r["pass1"] == 0 and r["spec"] not in taken)
    chosen["zero"] = [{"spec": s, "why": "too hard at pass@1 0 (sampled)"} for s in _sample(rng, zeros, zero)]
    for verdict in AUDIT_VERDICTS:
        specs = sorted(r["spec"] for r in rows if r["verdict"] == verdict and r["spec"] not in taken)
        chosen["control"] += [{"spec": s, "why": f"{verdict} (a control, sampled): trained, reported apart"}
                              for s in _sample(rng, specs, controls)]
    ordered, seen = [], set()
    for i in range(max(len(g) for g in chosen.values())):  # interleaved: both sides early
        for group in GROUPS:
            if i < len(chosen[group]) and chosen[group][i]["spec"] not in seen:
                seen.add(chosen[group][i]["spec"])
                ordered.append(chosen[group][i] | {"group": group})
    if len(ordered) < minimum:
        raise SelectionError(f"the catalog gives {len(ordered)} specs by the rule, fewer than {minimum}: screen more "
                             f"families or levels (screen --all --levels)")
    return ordered


def _sample(rng: random.Random, items: list, k: int) -> list:
    return rng.sample(items, k) if len(items) > k else list(items)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m proof.selection", description=__doc__.splitlines()[0])
    ap.add_argument("catalog", help="a catalog's shortlist.json")
    ap.add_argument("--json", help="also write the list, each spec's group and why, to this file")
    ap.add_argument("--exclude", help="a file of family specs (one line, comma-separated, as --families takes them) "
                                      "never to choose: a proof's families already trained")
    args = ap.parse_args(argv)
    try:
        body = json.loads(Path(args.catalog).read_text())
        exclude = frozenset(f.key for f in sources.parse_list(Path(args.exclude).read_text().strip())) \
            if args.exclude else frozenset()
        chosen = select(body, exclude=exclude)
    except (OSError, ValueError, KeyError, sources.FamilyError) as e:
        print(f"error: {args.catalog}: {e}", file=sys.stderr)
        return 2
    if args.json:
        output.write_json(Path(args.json), {"rule": __doc__, "catalog": args.catalog, "zero": ZERO, "controls": CONTROLS,
                                            "seed": SEED, "excluded": sorted(exclude), "selected": chosen})
    print(", ".join(c["spec"] for c in chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
