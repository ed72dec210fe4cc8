"""python -m proof: commit Shortlist's verdicts, train every family with GRPO + LoRA, test the verdicts.

examples:
    python -m proof run --preset smoke                       # offline tiny model, a few minutes on a CPU
    python -m proof run --out results/qwen3                  # the seed's protocol on Qwen3-0.6B
    python -m proof run --preset smoke --set steps=4 --set lr=1e-3 --families "chain_sum, leg_counting"
    python -m proof run --out results/qwen3 --per-gpu 4      # four families at once on each GPU
    python -m proof run --out results/qwen3 --executor ray --address auto   # on a Ray cluster (docs/ray.md)
    python -m proof report --out examples/smollm2            # the report again, from the folder alone
    python -m proof verify --out results/smoke               # every family checked again, answers drawn again
    python -m proof run --source openenv --env-url http://127.0.0.1:8000 --families env   # an OpenEnv server

from a shortlist to a proof:
    python -m shortlist screen --all --levels --out results/catalog     # the catalog: every family's levels
    python -m proof run --out results/mine --families "<spec>, <spec>"  # the spec column of shortlist.csv
  The proof screens those families again (01_predict), commits the verdicts with their SHA-256, trains
  each family (02_train_family) and reports whether each verdict held (03_report). A rerun resumes.
"""

from __future__ import annotations

import argparse
import sys
import textwrap

# only what the parser needs: --help imports no environment, no torch (the rest once the input is parsed)
from proof import settings as settings_
from shortlist import cli, executors, sources, trainee
from shortlist.errors import OneLine
from shortlist.sources import flags
from shortlist.sources import source as source_

RUN = """The whole proof, resumable, ending in <out>/report.html: 01_predict once (the verdicts committed with their
SHA-256 before any training), 02_train_family per family (GRPO + LoRA, then the held-out evaluation), 03_report.
The settings are proof/settings.py's; a preset sets some of them, --set any of them, the flags below the rest."""
REPORT = """Rebuild <out>/report.html from an output folder alone: its predictions.json, families/*.json and the settings
and trainee it committed. No GPU, no training (the model loads only to draw a run's answers again from its adapters:
python -m proof verify); not while a run is writing the same folder. Exit status 1 where a family is corrupt."""


VERIFY = """Check every finished family of an output folder as a rerun and the report do (proof/verify.py): its numbers
recomputed, its answers scored again, its files against their seal, and its greedy answers drawn again from the
committed model and the family's final adapter. Nothing is moved aside. With --reproduce FAMILY, that family is
trained again from the commitment (a scratch folder under --out, removed after) and every recorded number compared.
Exit status 1 where a check fails (or a number differs), 0 otherwise."""


def _settings_help() -> str:
    """Every setting: its default (the full preset's), what it is and the values it takes, from the
    Settings fields themselves (the ranges are those validate() reads)."""
    rows = [textwrap.fill(f"{head}: {text}", width=110, initial_indent="  ", subsequent_indent="      ",
                          break_long_words=False, break_on_hyphens=False) for head, text in settings_.described()]
    return "settings (--set NAME=VALUE; the defaults are the full preset's):\n" + "\n".join(rows)


def _parser() -> argparse.ArgumentParser:
    first, rest = __doc__.split("\n", 1)
    ap = argparse.ArgumentParser(prog="python -m proof", description=first,
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=rest)
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="predict, train every family, report", formatter_class=argparse.RawDescriptionHelpFormatter,
                         description=RUN, epilog=_settings_help() + "\n\n" + rest)
    run.add_argument("--preset", choices=sorted(settings_.PRESETS),
                     help=f"full (default): the seed's protocol on the trainee's model (Qwen3-0.6B), into {settings_.DEFAULTS['out']}; "
                          "smoke: the whole pipeline on the offline tiny model in minutes on a CPU, into "
                          f"{settings_.PRESETS['smoke']['out']} (its numbers mean nothing)")
    run.add_argument("--model", help="a hub name, a local folder, or 'tiny' (default: the trainee's own)")
    run.add_argument("--trainee", help=f"a profile ({', '.join(trainee.PROFILES)}), 'profile(field=value, ...)', or a .json file "
                                       f"(default: the preset's, {settings_.DEFAULTS['trainee']} for full)")
    run.add_argument("--families", help="comma-separated family specs (default: the preset's; full: "
                                        f"{', '.join(settings_.DEFAULTS['families'])})")
    run.add_argument("--out", help=f"the output folder (default: the preset's: {settings_.DEFAULTS['out']} for full, "
                                   f"{settings_.PRESETS['smoke']['out']} for smoke)")
    run.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="override a setting (repeatable); every setting is listed below, with its default and "
                          "the values it takes")
    flags.add_arguments(run)  # --source (names in --families, or the preset's, without a prefix are its) and its options
    executors.add_arguments(run)
    again = sub.add_parser("report", help="rebuild <out>/report.html from an output folder: no training, no GPU",
                           description=REPORT, formatter_class=argparse.RawDescriptionHelpFormatter)
    again.add_argument("--out", required=True, help="a run's output folder (its predictions.json and results)")
    check = sub.add_parser("verify", help="check every finished family again: its answers drawn again from its adapter",
                           description=VERIFY, formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("--out", required=True, help="a run's output folder (its predictions.json and results)")
    check.add_argument("--sample", type=int, default=None, metavar="N",
                       help="answers drawn again per evaluation (0: all; default: all on the tiny model, else "
                            "a random 16)")
    check.add_argument("--reproduce", metavar="FAMILY",
                       help="train this family again from the commitment and compare every recorded number")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Exit status: 0 done, 2 input refused (one line, nothing written), 1 a failure during the work (a family,
    a notebook), 130/143 stopped by a signal."""
    args = _parser().parse_args(argv)
    if args.command == "report":
        return _report(args.out)
    if args.command == "verify":
        return _verify(args)
    try:  # the run's sources (a local server served while the run runs) and where its jobs run
        with cli.opened(args) as (chosen, where):
            return _run(args, chosen, where)
    except OneLine as e:  # a source, an option of it, a local server that did not come up, a placement
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code


def _run(args, chosen, where) -> int:
    try:  # every bad input is one line, before any model loads
        overrides = dict(settings_.parse_override(item) for item in args.set)
        overrides |= {k: v for k, v in (("families", args.families), ("out", args.out), ("model", args.model),
                                         ("trainee", args.trainee)) if v is not None}
        overrides |= _sourced(args, chosen)
        settings = settings_.make(args.preset, **overrides)
    except OneLine as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    from proof import runner
    try:
        with executors.stop_on_signals():  # Ctrl-C, SIGTERM: every job stopped, the folder as a rerun resumes it
            outcome = runner.run(settings, where=where)
    except executors.Stopped as e:
        print(f"stopped by {e}: nothing finished is lost; the same command resumes the run in {settings.out}",
              file=sys.stderr)
        return e.code
    except (OneLine, RuntimeError) as e:  # a refusal (a model, a cluster, a committed difference) or a failure
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code if isinstance(e, OneLine) else 1
    if outcome.failed:  # the others ran and the report was built; the exit status still says it
        print(f"error: {len(outcome.failed)} of {len(settings.families)} families did not finish: "
              + "; ".join(f"{k} ({why})" for k, why in outcome.failed.items()), file=sys.stderr)
        return 1
    return 0


def _sourced(args, chosen: source_.Choice) -> dict:
    """The run's sources (every notebook's kernel gets them with the settings), and the families (given,
    or the preset's) as the chosen source's."""
    if chosen.name == source_.DEFAULT:
        return {"source": chosen}
    given = args.families or settings_.PRESETS.get(args.preset or "full", {}).get("families",
                                                                                 settings_.DEFAULTS["families"])
    return {"source": chosen, "families": [f.key for f in sources.parse_list(given, chosen.name)]}


def _verify(args) -> int:
    """One line per family: verified (and which checks could not run), or why not; 1 where one fails."""
    from proof import reproduce, verify
    if args.sample is not None and args.sample < 0:
        print(f"error: --sample {args.sample}: give a number of answers, or 0 for all of them", file=sys.stderr)
        return 2
    try:
        with executors.stop_on_signals():
            if args.reproduce:
                found = reproduce.reproduce(args.out, args.reproduce)
                print("\n".join(f"{args.reproduce}: {line}" for line in found) if found else
                      f"{args.reproduce}: reproduced, every recorded number the same")
                return 1 if found else 0
            checked = verify.folder(args.out, args.sample)
            edits = verify.record(args.out)
    except executors.Stopped as e:
        return e.code
    except (OneLine, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code if isinstance(e, OneLine) else 1
    for key, verdict in checked.items():
        if isinstance(verdict, str):
            print(f"{key}: {verdict}")
        else:
            print(f"{key}: " + ("verified" if verdict.ok else f"FAILED {verdict.line(args.out)}")
                  + "".join(f"; could not run: {c}" for c in verdict.unchecked))
    for line in edits:
        print(f"record: FAILED {line}")
    return 1 if edits or any(isinstance(v, str) and v.startswith("corrupt") or not isinstance(v, str) and not v.ok
                             for v in checked.values()) else 0


def _report(out: str) -> int:
    """Exit status 1 where a family is corrupt or the run's record was edited: the report is written and says
    why, and so does this."""
    from proof import runner
    try:
        with executors.stop_on_signals():
            print(f"report: {runner.report_again(out)}")
            bad, edits = runner.corrupt(out), runner.edited(out)
    except executors.Stopped as e:
        print(f"stopped by {e}: the report was not written; the same command builds it", file=sys.stderr)
        return e.code
    except (OneLine, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code if isinstance(e, OneLine) else 1
    if bad:
        print(f"error: {len(bad)} {'family is' if len(bad) == 1 else 'families are'} corrupt (the report says so): "
              + "; ".join(f"{k} ({why})" for k, why in bad.items()), file=sys.stderr)
    for line in edits:
        print(f"error: the run's record was edited (the report says so): {line}", file=sys.stderr)
    return 1 if bad or edits else 0


if __name__ == "__main__":
    executors.exit(main())
