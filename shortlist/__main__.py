"""python -m shortlist screen: which families can GRPO improve this model on?

    python -m shortlist screen --model tiny --families "chain_sum(max_terms=2, max_digits=1), leg_counting"
    python -m shortlist families      # every Reasoning Gym family that builds with its defaults
"""
from __future__ import annotations

import argparse
import json
import sys

from shortlist import families, sampling, screening, scoring, trainee
from shortlist.families import FamilyError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m shortlist", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sc = sub.add_parser("screen", help="sample a model on families and print a verdict per family")
    sc.add_argument("--model", default=trainee.MODEL, help="a hub name, a local folder, or 'tiny' (offline)")
    sc.add_argument("--families", default=",".join(families.DEFAULT))
    sc.add_argument("--tasks", type=int, default=screening.TASKS, help="tasks per family")
    sc.add_argument("--group", type=int, default=trainee.GROUP, help="samples per task (GRPO's group size)")
    sc.add_argument("--first-seed", type=int, default=screening.PREDICT_SEED)
    sc.add_argument("--max-new-tokens", type=int, default=trainee.MAX_NEW_TOKENS)
    sc.add_argument("--batch", type=int, default=sampling.SAMPLE_BATCH,
                    help="sequences per generate() call; 0: as many as fit in GPU memory")
    sc.add_argument("--json", help="also write the screens to this file")
    sub.add_parser("families", help="list the families that build with their default config")
    args = ap.parse_args(argv)

    if args.command == "families":
        print("\n".join(families.creatable()))
        return 0
    try:  # every bad input is one line, before any model loads
        chosen = families.parse_list(args.families)
        if args.group < 2:
            raise ValueError(f"--group {args.group}: GRPO compares at least 2 samples per task")
        if args.tasks < 1 or args.max_new_tokens < 1 or args.batch < 0:
            raise ValueError("--tasks and --max-new-tokens must be at least 1, --batch at least 0")
    except (FamilyError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    loaded = sampling.load(args.model)
    sampler = sampling.Sampler(loaded, batch_size=args.batch, max_new_tokens=args.max_new_tokens)
    screens = []
    with scoring.Scorer() as scorer:
        for family in chosen:
            screens.append(screening.screen(sampler, scorer, family, args.tasks, args.group, args.first_seed))
            print(f"screened {family.key}: {screens[-1].verdict}", file=sys.stderr, flush=True)
    print(f"{loaded.source['name']}: {args.tasks} tasks x {args.group} samples per family\n")
    print(screening.table(screens))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": loaded.source, "screens": [s.as_dict() for s in screens]}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
