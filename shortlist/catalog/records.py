"""What a catalog run holds: its plan, each family's walk, the rows screened, what failed or was not
reached, and the catalog they make. Frozen records, validated when they are made (so when a file
is read back), and written as JSON by store.py."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field, fields

from shortlist import defaults, output, scoring, sources
from shortlist.errors import OneLine
from shortlist.screening import METRICS, Screen
from shortlist.sources import levels as levels_
from shortlist.rule import VERDICTS, prediction
from shortlist.trainee import Trainee

OUT = "results/catalog"


class CatalogError(OneLine, ValueError):
    """A catalog run or record that cannot be; the message is one line."""


@dataclass(frozen=True)
class Row:
    """One family x level screened: a line of shortlist.csv, and what `proof run --families` takes (spec)."""
    family: str
    level: int | None  # the level; None: the family has one level only
    levels: int
    spec: str
    screen: Screen  # its family is the spec
    tasks_sha256: str  # sources.fingerprint() of the tasks screened: parse(spec).tasks(seeds) gives them
    seconds: float  # sampling and scoring
    # where the spec sits on the source's curriculum, in its levels (1.5: a grid point halfway from level 1
    # to 2; -1: below level 0); None: one level only, or a row written before the grid
    position: float | None = None

    def __post_init__(self):
        levels_.Level(self.family, self.level, self.levels, self.spec, self.position)
        s = self.screen
        if s.verdict not in VERDICTS:
            raise CatalogError(f"row {self.spec}: verdict {s.verdict!r} is not one of {', '.join(VERDICTS)}")
        for name, _, _ in METRICS:
            bound = 0.25 if name == "learnability" else 1  # p(1-p) is at most 1/4
            if name in ("ceiling", "guess") and getattr(s, name) is None:  # not audited (an older row)
                continue
            if not 0 <= getattr(s, name) <= bound:
                raise CatalogError(f"row {self.spec}: {name}={getattr(s, name)} is not in [0, {bound}]")
        if s.tasks < 1 or s.k < 2 or self.seconds < 0:
            raise CatalogError(f"row {self.spec}: tasks, k or seconds out of range")
        if not re.fullmatch(r"[0-9a-f]{64}", self.tasks_sha256):
            raise CatalogError(f"row {self.spec}: tasks_sha256 is not a SHA-256")

    def as_dict(self) -> dict:
        """Flat, as shortlist.json and .csv hold a row: the level, then the screen's fields."""
        screen = {k: v for k, v in self.screen.as_dict().items() if k != "family"}
        return {"family": self.family, "level": self.level, "levels": self.levels, "position": self.position,
                "spec": self.spec, **screen, "tasks_sha256": self.tasks_sha256, "seconds": self.seconds}

    @classmethod
    def from_dict(cls, d: dict) -> "Row":
        names = {f.name for f in fields(Screen)} - {"family", "prediction"}
        screen = Screen(family=d["spec"], prediction=d.get("prediction", prediction(d["verdict"])),
                        **{k: d[k] for k in names if k in d})
        return cls(d["family"], d["level"], d["levels"], d["spec"], screen, d["tasks_sha256"], d["seconds"],
                   d.get("position"))


@dataclass(frozen=True)
class LevelFailure:
    """A family x level that could not be built or screened, and why, in one line."""
    family: str
    level: int | None
    spec: str | None  # None where the level could not even be written as a spec
    stage: str  # "build" (config, tasks) or "screen" (sampling, scoring)
    reason: str

    def __post_init__(self):
        if self.stage not in ("build", "screen") or not self.reason or "\n" in self.reason:
            raise CatalogError(f"failure of {self.family}: stage {self.stage!r} and a one-line reason are needed")


@dataclass(frozen=True)
class Unreached:
    """A family whose walk the run did not finish: the budget ran out, or its worker died."""
    family: str
    level: int | None  # where the walk would have gone on
    why: str


@dataclass(frozen=True)
class Walk:
    """One family's walk so far, as <out>/families/<name>.json holds it."""
    family: str
    identity: dict
    rows: tuple = ()
    failures: tuple = ()
    next: int | None = None  # the level the walk goes on from
    done: bool = False

    def as_dict(self) -> dict:
        return {"family": self.family, "identity": self.identity, "rows": [r.as_dict() for r in self.rows],
                "failures": [dataclasses.asdict(f) for f in self.failures], "next": self.next, "done": self.done}

    @classmethod
    def from_dict(cls, d: dict) -> "Walk":
        return cls(d["family"], d["identity"], tuple(Row.from_dict(r) for r in d["rows"]),
                   tuple(LevelFailure(**f) for f in d["failures"]), d["next"], d["done"])


@dataclass(frozen=True)
class Plan:
    """One catalog run, checked before any model loads; a worker gets it (its share of families) as JSON."""
    trainee: Trainee  # the model in it; a worker's JSON holds Trainee.as_dict(), read back once here
    families: tuple  # the source's names
    walk: bool = False  # --levels: up the levels until below the band (walk.py's after())
    grid: bool = False  # --grid: the walk's levels are the wider grid's points (sources/grid.py)
    tasks: int = defaults.SCREEN_TASKS
    first_seed: int = defaults.PREDICT_SEED
    seed: int = 0  # torch's, before each family's samples
    batch: int = defaults.SAMPLE_BATCH
    budget_min: float | None = None
    out: str = OUT
    score_deadline_s: float = defaults.SCORE_DEADLINE_S
    builders: int | None = None  # task-building processes per worker; 0: in the worker itself; None: from the CPUs
    model_identity: dict = field(default_factory=dict)  # filled in by run(), before any worker starts
    deadline: float | None = None  # clock() after which no screen starts; filled in by run()
    run: str = ""  # which run: the workers' records name it; filled in by run()
    label: str = "cpu"  # which worker: "gpu <n>", or "cpu"
    # whose families (--source), with the source's options (a server's URL): configured in each process
    # that makes the plan, a worker included, so that nothing else need carry them
    source: sources.source.Choice = sources.source.Choice()

    def __post_init__(self):
        object.__setattr__(self, "families", tuple(self.families))
        object.__setattr__(self, "source", sources.source.Choice.of(self.source).configure())
        if isinstance(self.trainee, dict):
            object.__setattr__(self, "trainee", Trainee.from_dict(self.trainee))
        if not self.families:
            raise CatalogError("no families to screen")
        for name in self.families:
            sources.check_name(name, self.source.name)
        if len(set(self.families)) < len(self.families):
            raise CatalogError("a family is listed twice")
        if (bad := output.path_error(self.out, "--out")) is not None:
            raise CatalogError(bad)
        if (bad := defaults.screen_bounds(self.tasks, self.first_seed, self.batch)) is not None:
            raise CatalogError(bad)
        if not 0 <= self.seed <= defaults.SEED_MAX:
            raise CatalogError(f"seed={self.seed}: give 0..{defaults.SEED_MAX}")
        if self.budget_min is not None and not self.budget_min > 0:
            raise CatalogError(f"--budget-min {self.budget_min}: give a positive number of minutes")
        if defaults.deadline_refusal(self.score_deadline_s):
            raise CatalogError(defaults.deadline_refusal(self.score_deadline_s))
        if self.builders is not None and self.builders < 0:
            raise CatalogError(f"builders={self.builders}: give 0 (build in the worker) or more processes")

    def identity(self) -> dict:
        """What a kept row must have been screened under: the same model, trainee, tasks and seeds."""
        from shortlist.sources import source
        served = {"reasoning_gym": source.get().VERSION} if self.source.name == source.DEFAULT else {
            "source": source.identity(self.source.name)}  # a server's URL, environment and version too
        asked = self.trainee.for_source(self.source.name)  # as it asks and reads the source: a change of its shows
        # the model's answers are scored again past a deadline (screening.screen_tasks): a row scored without
        # (a walk written before f9ada33) could hold a loaded machine's timeouts as zeros, so it is screened again
        return {"model": self.model_identity, "trainee": asked.as_dict(), "tasks": self.tasks,
                "first_seed": self.first_seed, "seed": self.seed, "score_retries": scoring.RETRIES, **served}

    def as_dict(self) -> dict:
        return dataclasses.asdict(self) | {"families": list(self.families), "trainee": self.trainee.as_dict(),
                                           "source": self.source.as_dict()}

    def replace(self, **changes) -> "Plan":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Catalog:
    """What a run found: shortlist.json holds it, shortlist.csv and .html show it."""
    rows: tuple
    failures: tuple
    unreached: tuple
    about: dict  # model, trainee, settings, versions, workers' devices, wall time

    def shortlist(self) -> list[dict]:
        """Families with a level where GRPO can learn, best mean p(1-p) first, and those levels."""
        best: dict[str, list[Row]] = {}
        for row in self.rows:
            if row.screen.verdict == "improves":
                best.setdefault(row.family, []).append(row)

        def top(rows: list[Row]) -> float:
            return max(r.screen.learnability for r in rows)
        ranked = sorted(best.items(), key=lambda kv: (-top(kv[1]), kv[0]))
        return [{"rank": i + 1, "family": name, "levels": [r.level for r in rows], "specs": [r.spec for r in rows],
                 "best": max(rows, key=lambda r: r.screen.learnability).spec, "learnability": top(rows)}
                for i, (name, rows) in enumerate(ranked)]

    def ordered(self) -> list[tuple[int | None, Row]]:
        """Every row with its family's rank: shortlisted families first, in rank order, then the rest."""
        rank = {s["family"]: s["rank"] for s in self.shortlist()}
        rows = sorted(self.rows, key=lambda r: (rank.get(r.family, len(rank) + 1), r.family, r.level or 0))
        return [(rank[r.family] if r.screen.verdict == "improves" else None, r) for r in rows]

    def as_dict(self) -> dict:
        return {**self.about, "shortlist": self.shortlist(), "rows": [r.as_dict() for _, r in self.ordered()],
                "failures": [dataclasses.asdict(f) for f in self.failures],
                "unreached": [dataclasses.asdict(u) for u in self.unreached]}
