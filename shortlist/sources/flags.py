"""The command lines' --source and every source's own options, built from the registry alone.

A source module's OPTIONS (option -> help) become flags of both CLIs (env_url: --env-url); given
with another --source, a flag is refused in one line. choice() turns the flags into the run's
source.Choice; Choice.serving() then starts what the source must run and configures this process.
"""
from __future__ import annotations

import argparse

from shortlist.sources import source


def _every_option() -> dict[str, tuple[str, list[str]]]:
    """option -> (its help, the sources that take it), over every registered source."""
    found: dict[str, tuple[str, list[str]]] = {}
    for name in source.SOURCES:
        for option, text in source.options(name).items():
            found.setdefault(option, (text, []))[1].append(name)
    return found


def add_arguments(p: argparse.ArgumentParser) -> None:
    """--source and every registered source's options; an option that cannot be a flag (one the command
    has already, a source's OPTIONS that cannot be read) is argparse's one-line error."""
    p.add_argument("--source", default=source.DEFAULT,
                   help=f"whose families: {', '.join(source.SOURCES)} (default: {source.DEFAULT}); "
                        "a family spelled source.name names its own")
    try:
        every = _every_option()
    except source.ChoiceError as e:
        p.error(str(e))
    for option, (text, takers) in every.items():
        try:
            p.add_argument("--" + option.replace("_", "-"), dest=option, help=text.replace("%", "%%"))
        except argparse.ArgumentError:
            p.error(f"source {takers[0]!r}: its option {option!r} is already a flag of this command: rename it")


def choice(args: argparse.Namespace) -> source.Choice:
    """The run's sources from the flags: --source, the options given (each the chosen source's: one
    line otherwise), and the modules this process registered."""
    if args.source not in source.SOURCES:
        raise source.ChoiceError(f"--source {args.source}: unknown; sources: {', '.join(source.SOURCES)}")
    given = {}
    for option, (_, takers) in _every_option().items():
        if getattr(args, option, None) is None:
            continue
        if args.source not in takers:
            raise source.ChoiceError(f"--{option.replace('_', '-')} goes with --source {' or --source '.join(takers)}")
        given[option] = getattr(args, option)
    return source.Choice(args.source, given, source.current().modules)
