"""How a run asks for its jobs to be placed: the flags, checked when built (one line), and the executor.

What an executor takes and checks is its own (protocol.Executor: FLAGS, check(), placed(), remote);
this module only asks the registry below, and names no executor."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from shortlist.executors.errors import PlacementError
from shortlist.executors.local import Local
from shortlist.executors.protocol import Executor
from shortlist.executors.ray_cluster import RayExecutor

# every executor --executor names: a new one is its module and one entry here
EXECUTORS: dict[str, type[Executor]] = {kind.name: kind for kind in (Local, RayExecutor)}
DEFAULT = Local.name


def _flags() -> dict[str, tuple[dict, list[str]]]:
    """option -> (its argparse keywords, the executors that take it), over every registered executor."""
    found: dict[str, tuple[dict, list[str]]] = {}
    for name, kind in EXECUTORS.items():
        for option, keywords in kind.FLAGS.items():
            found.setdefault(option, (keywords, []))[1].append(name)
    return found


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


@dataclass(frozen=True)
class Placement:
    """--executor, --per-gpu and the executor's own flags (options), checked when built (one line)."""
    executor: str = DEFAULT
    per_gpu: int | str = 1  # or "auto" (as many as each GPU's free memory holds, where the executor takes it)
    options: tuple = ()  # ((option, value), ...) of the executor's own flags that were given; a dict is taken

    def __post_init__(self):
        if self.executor not in EXECUTORS:
            raise PlacementError(f"--executor {self.executor}: give " + " or ".join(
                f"{name} ({kind.about})" for name, kind in EXECUTORS.items()))
        try:
            pairs = self.options.items() if isinstance(self.options, dict) else self.options
            given = tuple(sorted((str(k), v) for k, v in pairs if v is not None and v is not False))  # False: off
        except (TypeError, ValueError):
            raise PlacementError(f"options={str(self.options)[:80]}: give the executor's flags as a dict") from None
        object.__setattr__(self, "options", given)
        every = _flags()
        for option, _ in given:
            if option not in every:
                raise PlacementError(f"{_flag(option)}: no executor takes it; executors: {', '.join(EXECUTORS)}")
            keywords, takers = every[option]
            if self.executor not in takers:
                elsewhere = keywords.get("elsewhere")
                raise PlacementError(f"{_flag(option)} goes with --executor {' or '.join(takers)}"
                                     + (f"; {elsewhere}" if elsewhere else ""))
        if self.per_gpu != "auto" and not (isinstance(self.per_gpu, int) and not isinstance(self.per_gpu, bool)
                                           and 1 <= self.per_gpu <= 64):
            raise PlacementError(f"--per-gpu {self.per_gpu}: give a whole number of jobs per GPU, 1 to 64, or auto")
        self.kind.check(self)

    @property
    def kind(self) -> type[Executor]:
        return EXECUTORS[self.executor]

    def option(self, name: str, default=None):
        """One of the executor's own options, as given, or default."""
        return dict(self.options).get(name, default)

    @property
    def remote(self) -> bool:
        """Whether its jobs will run on other machines (their GPUs, not this one's): known before it starts."""
        return self.kind.remote

    def start(self, log=print, peaks: Callable[[], Iterable] = tuple) -> Executor:
        """The executor, ready (a cluster joined and checked, auto decided; peaks: those measured so far)."""
        return self.kind.placed(self, log, peaks)


def add_arguments(parser) -> None:
    """The flags of every command that runs jobs (proof run, screen --all/--levels): --executor, --per-gpu,
    and every registered executor's own."""
    g = parser.add_argument_group("where jobs run")
    g.add_argument("--executor", default=DEFAULT, choices=tuple(EXECUTORS),
                   help="; ".join(f"{name}: {kind.about}" for name, kind in EXECUTORS.items()) + " (default: %(default)s)")
    g.add_argument("--per-gpu", default="1", metavar="N|auto",
                   help="jobs sharing each GPU, each capped at 1/N of its memory; auto: as many as the free memory "
                        "holds at the per-job peak (--job-gib, or the largest recorded in --out), at most 8 a GPU and "
                        "one a CPU core, side by side under MPS where it runs (default: %(default)s)")
    for option, (keywords, _) in _flags().items():
        g.add_argument(_flag(option), dest=option, **{k: v for k, v in keywords.items() if k != "elsewhere"})


def from_args(args) -> Placement:
    text = str(args.per_gpu).strip()
    # ASCII digits only: str.isdigit() holds for '²', which int() refuses, and int() reads '٣' as 3
    per_gpu = text if text == "auto" else int(text) if text.isascii() and text.isdigit() else text
    return Placement(args.executor, per_gpu, {option: getattr(args, option) for option in _flags()})
