"""python -m shortlist: which families, at which level, can GRPO improve this model on?

examples:
    python -m shortlist screen --model tiny --families "chain_sum(max_terms=2, max_digits=1), leg_counting"
    python -m shortlist screen --trainee smollm2 --model /models/smollm2
    python -m shortlist screen --all --levels --out results/catalog --budget-min 60   # the catalog (catalog/)
    python -m shortlist screen --all --grid --out results/catalog --budget-min 14     # up the wider grid
    python -m shortlist screen --all --out results/catalog --per-gpu 4    # four workers on each GPU
    python -m shortlist screen --all --out results/catalog --executor ray --address auto   # on a Ray cluster
    python -m shortlist families      # every family, a line on each, and the ones that do not build
    python -m shortlist screen --source openenv --env-url http://127.0.0.1:8000 --families env   # an OpenEnv server
    python -m shortlist screen --source openenv --env-local myenv.py:app --families env   # one started here

from a shortlist to a proof: a row's "spec" (the spec column of <out>/shortlist.csv, or shortlist.json) is a
family spec the proof takes unchanged,
    python -m proof run --out results/mine --families "<spec>, <spec>"
  which commits the verdicts first, then trains each family and tests them (python -m proof --help).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# only what the parser needs: --help imports no environment, no torch (the rest once the input is parsed)
from shortlist import cli, defaults, executors, sources, trainee
from shortlist.sources import flags
from shortlist.errors import OneLine

SCREEN = """Sample the trainee on each family exactly as GRPO will (--tasks tasks x the trainee's group) and print a
verdict per family: improves, too hard, already solved, no signal, or an audit verdict (the reward cannot tell).
With --all, --levels or --grid, the catalog: every family (or those named), ranked into <out>/shortlist.{json,csv,html}."""


def _parser() -> argparse.ArgumentParser:
    first, rest = __doc__.split("\n", 1)
    ap = argparse.ArgumentParser(prog="python -m shortlist", description=first,
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=rest)
    sub = ap.add_subparsers(dest="command", required=True)
    sc = sub.add_parser("screen", help="sample a model on families and print a verdict per family", description=SCREEN,
                        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=rest)
    sc.add_argument("--trainee", default=defaults.TRAINEE, help=f"a profile ({', '.join(trainee.PROFILES)}), 'profile(field=value, ...)', "
                                                       "or a .json file (default: %(default)s)")
    sc.add_argument("--model", help="a hub name, a local folder, or 'tiny' (offline); default: the trainee's own")
    sc.add_argument("--families", help=f"default: {', '.join(sources.DEFAULT)}; with --levels, names only")
    sc.add_argument("--tasks", type=int, default=defaults.SCREEN_TASKS, help="tasks per family (default: %(default)s)")
    sc.add_argument("--first-seed", type=int, default=defaults.PREDICT_SEED,
                    help="the first task seed; tasks are seeds first..first+tasks-1 (default: %(default)s)")
    sc.add_argument("--batch", type=int, default=defaults.SAMPLE_BATCH,
                    help="sequences per generate() call; 0: as many as fit in GPU memory (default: %(default)s)")
    sc.add_argument("--json", help="also write the screens to this file")
    sc.add_argument("--all", action="store_true", help="the catalog: every Reasoning Gym family, at its curriculum's "
                                                       "easiest level, ranked into <out>/shortlist.{json,csv,html}")
    sc.add_argument("--levels", action="store_true",
                    help="walk each family's curriculum up from its easiest level until two levels in a row are "
                         "below the band")
    sc.add_argument("--grid", action="store_true",
                    help="walk each family up its wider grid (from below the curriculum's level 0, with steps between "
                         "levels) until two in a row are below the band")
    sc.add_argument("--out", help="the catalog's output folder (default results/catalog); a rerun keeps what it holds")
    sc.add_argument("--budget-min", type=float, help="start no screen after this many minutes; the rest is listed")
    executors.add_arguments(sc)
    fa = sub.add_parser("families", help="list every family with a line on what it asks, the count, and the ones "
                                         "that do not build (with why)")
    for p in (sc, fa):
        flags.add_arguments(p)  # --source and every source's own options (--env-url, --env-local)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Exit status: 0 done, 2 input refused (one line), 1 a failure during the work."""
    args = _parser().parse_args(argv)
    try:  # the run's sources (a local server served while the command runs) and where its jobs run
        with cli.opened(args) as (chosen, where):
            return _families(args) if args.command == "families" else _screen(args, chosen, where)
    except OneLine as e:  # a source, an option of it, a local server that did not come up, a placement
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code


def _screen(args, choice, where) -> int:
    from shortlist import output, trainee
    from shortlist.models import config as models

    started = time.perf_counter()
    catalog_run = args.all or args.levels or args.grid
    try:  # every bad input is one line, before any model loads
        who = trainee.resolve(args.trainee)
        who = who.replace(model=args.model) if args.model else who
        if catalog_run:
            plan = _catalog_plan(args, who, choice)
        else:
            if args.out or args.budget_min is not None or where != executors.Placement():
                raise ValueError("--out, --budget-min and where jobs run (--executor, --per-gpu...) go with --all, "
                                 "--levels or --grid (the catalog)")
            chosen = sources.parse_list(args.families or _default_families(args.source), args.source)
        if (bad := defaults.screen_bounds(args.tasks, args.first_seed, args.batch)) is not None:
            raise ValueError(bad)
        if args.json:
            _writable(Path(args.json))
        models.check_fits(models.model_config(who.model), who)
    except (OneLine, ValueError) as e:  # a family, trainee, model, folder, catalog, level or placement; Ctrl-C
        print(f"error: {e}", file=sys.stderr)  # while another process builds the model (output.WaitStopped: 130)
        return e.exit_code if isinstance(e, OneLine) else 2
    if catalog_run:
        return _catalog(plan, where, started)

    from shortlist import scoring, screening  # torch and the scorers: only once the input is sound
    from shortlist.generation import sampling
    loaded = sampling.load(who.model)
    sampler = sampling.Sampler(loaded, who, batch_size=args.batch)
    with scoring.Scorer() as scorer:
        try:
            screens = screening.screen_all(sampler, scorer, chosen, args.tasks, args.first_seed,
                                           log=lambda line: print(line, file=sys.stderr, flush=True))
        except OneLine as e:  # a source's server gone mid-screen: nothing was written, the same command reruns it
            print(f"error: {e}", file=sys.stderr)
            return 1
        scored_by = scorer.settings()
    print(f"{loaded.source['name']} as {who.profile}: {args.tasks} tasks x {who.group} samples per family\n")
    print(screening.table(screens))
    if args.json:  # what produced it, as every record of a run says: model, trainee, settings, versions, device, engine
        from shortlist import provenance
        from shortlist.generation import engine
        output.write_json(Path(args.json), {
            "model": loaded.source, "trainee": who.as_dict(),
            "settings": {"tasks": args.tasks, "first_seed": args.first_seed, "batch": args.batch},
            **provenance.stamp(), "engine": engine.status(), "scoring": scored_by,
            "sources": {name: sources.source.identity(name) for name in sorted({f.source for f in chosen})},
            "source": choice.as_dict(),  # the run's choice: --source and its options
            "screens": [s.as_dict() for s in screens]})
    return 0


def _catalog_plan(args, who, choice):
    from shortlist.catalog import run as catalog
    if args.all and args.families:
        raise ValueError("--all screens every family; give --families with --levels or --grid alone")
    if args.json:
        raise ValueError("--json is for a screen of named families; the catalog writes <out>/shortlist.json")
    names = None if args.all else args.families or _default_families(args.source)
    p = catalog.plan(who, names, source=choice, walk=args.levels or args.grid, grid=args.grid, tasks=args.tasks, first_seed=args.first_seed, batch=args.batch,
                     budget_min=args.budget_min, out=args.out or catalog.OUT)
    return p  # the folder is made by catalog.run, once the model is known good


def _catalog(p, where, started: float) -> int:
    from shortlist.catalog import run as catalog
    try:
        with executors.stop_on_signals():  # Ctrl-C, SIGTERM: workers and task builders stopped, the walks as written
            found = catalog.run(p, log=lambda line: print(line, file=sys.stderr, flush=True), where=where)
    except executors.Stopped as e:
        print(f"stopped by {e}: every walk is kept as written; the same command goes on in {p.out}", file=sys.stderr)
        return e.code
    except OneLine as e:  # a cluster that cannot take the jobs, a folder in use, a model gone: 2; a full disk: 1
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    print(catalog.summary(found, p))
    print(f"wall time: {time.perf_counter() - started:.1f} s")
    return 0


def _families(args) -> int:
    """A line per family that builds, as each is read (a source's first import takes a while), then the
    count and the ones that do not build, with why; a source that says what it offers (a server: its
    families, or its one environment) says that instead."""
    from shortlist.sources import levels
    try:
        offered = sources.source.get(args.source)
        if hasattr(offered, "offers"):
            print(offered.offers())
            return 0
        names = offered.names()
        width = max(map(len, names), default=0)
        found = levels.listing(args.source, log=lambda f: f.fails is None and print(
            f"{f.family:<{width}}  {f.about}".rstrip(), flush=True))
    except OneLine as e:  # a server that cannot be reached
        print(f"error: {e}", file=sys.stderr)
        return 1
    failing = [f for f in found if f.fails is not None]
    print(f"\n{len(found) - len(failing)} of {len(found)} {args.source} families build and can be screened"
          + (f"; {len(failing)} cannot:" if failing else "."))
    for f in failing:
        print(f"{f.family:<{width}}  {f.fails}")
    return 0


def _default_families(source: str) -> list[str]:
    if source != sources.source.DEFAULT:
        raise ValueError(f"--source {source}: name its families with --families (python -m shortlist families "
                         f"--source {source} lists them)")
    return list(sources.DEFAULT)


def _writable(path: Path) -> None:
    """Refuse a --json path that cannot be written before the screen runs, not after."""
    from shortlist import output
    from shortlist.output import OutputError
    if path.is_dir():
        raise OutputError(f"--json {path}: is a folder")
    if not path.parent.is_dir():
        raise OutputError(f"--json {path}: folder {path.parent} does not exist")
    output.check_writable(path.parent)


if __name__ == "__main__":
    executors.exit(main())
