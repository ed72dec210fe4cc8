"""The records the proof writes and reads back: an evaluation, a family's result, a failure.

Each is a frozen dataclass with a schema number, validated when it is built (so when it is
written) and when it is read. What can be recomputed from a record's own data is, and must agree:
an evaluation's accuracy with its scores, a result's gain with its two evaluations, "held" with
the prediction and "improved". A file that fails is read as Corrupt, with the reason, and the
report shows it as such: nothing half-written or hand-edited is analysed as if it were sound.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from shortlist.errors import one_line

SCHEMA = 5
# a report reads older results too: schema 2 has no baselines, schema 3 no policies that read the question
# (evidence.py measures them), schema 4 no adapter or seal beside it (proof/verify.py); a result's schema is
# its commitment's, and a rerun trains a family whose result is older than this version again
READABLE = (2, 3, 4, 5)


class RecordError(ValueError):
    """A record that does not hold together; the message is one line."""


def _need(ok: bool, why: str) -> None:
    if not ok:
        raise RecordError(why)


@dataclass(frozen=True)
class Evaluation:
    """Greedy answers to held-out tasks, with everything needed to re-score them without a model."""
    seeds: tuple
    completions: tuple
    answers: tuple  # what the trainee's extraction took out of each completion; None: nothing
    scores: tuple
    clipped: tuple  # cut at max_new_tokens
    repetitive: tuple  # dominated by one repeated token

    def __post_init__(self):
        for f in fields(self):
            object.__setattr__(self, f.name, tuple(getattr(self, f.name)))
        n = len(self.seeds)
        _need(n > 0, "an evaluation of no tasks")
        _need(all(len(getattr(self, f.name)) == n for f in fields(self)), "evaluation lists of different lengths")
        _need(all(isinstance(s, int) and not isinstance(s, bool) for s in self.seeds), "seeds must be integers")
        _need(all(isinstance(c, str) for c in self.completions), "completions must be text")
        _need(all(a is None or isinstance(a, str) for a in self.answers), "answers must be text or null")
        _need(all(isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) and 0 <= s <= 1
                  for s in self.scores), "scores must be numbers in [0, 1]")
        _need(all(isinstance(b, bool) for b in self.clipped + self.repetitive), "clipped/repetitive must be booleans")

    @property
    def n(self) -> int:
        return len(self.scores)

    @property
    def accuracy(self) -> float:
        return sum(s >= 1.0 for s in self.scores) / self.n

    @property
    def mean_score(self) -> float:
        return sum(self.scores) / self.n

    @property
    def extracted(self) -> float:
        return sum(a is not None for a in self.answers) / self.n

    @property
    def answer_chars(self) -> float | None:
        got = [len(a) for a in self.answers if a is not None]
        return sum(got) / len(got) if got else None

    @property
    def completion_chars(self) -> float:
        return sum(map(len, self.completions)) / self.n

    @property
    def clipped_share(self) -> float:
        return sum(self.clipped) / self.n

    @property
    def repetitive_share(self) -> float:
        return sum(self.repetitive) / self.n

    SUMMARY = ("accuracy", "mean_score", "extracted", "answer_chars", "completion_chars", "clipped_share",
               "repetitive_share")

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.SUMMARY} | {f.name: list(getattr(self, f.name))
                                                                     for f in fields(self)}

    @classmethod
    def from_dict(cls, record: dict) -> "Evaluation":
        _need(isinstance(record, dict), "an evaluation must be an object")
        evaluation = cls(**_fields(cls, record))
        for name in cls.SUMMARY:  # stored for readers of the file; must be what the lists say
            stored, derived = record.get(name), getattr(evaluation, name)
            _need(stored == derived or (isinstance(stored, float) and derived is not None
                                        and abs(stored - derived) < 1e-9), f"{name} disagrees with the scores")
        return evaluation


def _fields(cls, record: dict, skip: tuple = ()) -> dict:
    names = {f.name for f in fields(cls)} - set(skip)
    missing = sorted(names - set(record))
    _need(not missing, f"missing {', '.join(missing)}")
    return {name: record[name] for name in names}


@dataclass(frozen=True)
class FamilyResult:
    """One family's proof: the prediction, the evaluations before and after GRPO, the seed's analysis."""
    family: str
    slug: str
    predictions_sha256: str
    trainee: dict  # the committed trainee, field by field
    settings: dict  # the committed protocol
    prediction: dict  # the family's committed screen
    before: Evaluation
    after: Evaluation
    gain: dict  # the seed's paired bootstrap on the mean score
    improved: bool
    held: bool
    reward_curve: tuple
    model: dict  # what was loaded
    engine: dict  # which decode engine served each phase, and why
    scoring: dict  # what the scorer did with every answer of this family's run
    timings: dict
    started_at: str
    written_at: str
    versions: dict
    device: dict
    baselines: dict = field(default_factory=dict)  # audit.constants() on the evaluation tasks, after training
    status: str = "done"
    schema: int = SCHEMA

    def __post_init__(self):
        object.__setattr__(self, "reward_curve", tuple(self.reward_curve))
        _need(self.status == "done" and self.schema in READABLE, f"not a schema-{SCHEMA} result")
        _need(self.before.seeds == self.after.seeds, "before and after evaluated different tasks")
        _need(set(self.gain) >= {"gain", "ci95", "p"}, "gain lacks gain, ci95 or p")
        d = [a - b for a, b in zip(self.after.scores, self.before.scores)]
        _need(abs(self.gain["gain"] - sum(d) / len(d)) < 1e-9, "the gain disagrees with the evaluations")
        alpha = self.settings.get("alpha", 0.05)
        _need(self.improved == (self.gain["p"] <= alpha and self.gain["gain"] > 0), "improved disagrees with the gain")
        _need(self.held == (self.improved == (self.prediction.get("prediction") == "improves")),
              "held disagrees with the prediction")
        _need(isinstance(self.timings.get("train_s"), (int, float)), "timings lack train_s")

    def as_dict(self) -> dict:
        out = asdict(self)
        out["before"], out["after"] = self.before.as_dict(), self.after.as_dict()
        out["reward_curve"] = list(self.reward_curve)
        return out

    @classmethod
    def from_dict(cls, record: dict) -> "FamilyResult":
        values = _fields(cls, record, skip=("status", "schema") + (("baselines",) if record.get("schema") == 2 else ()))
        values |= {"before": Evaluation.from_dict(record["before"]), "after": Evaluation.from_dict(record["after"]),
                   "status": record.get("status"), "schema": record.get("schema")}
        return cls(**values)


@dataclass(frozen=True)
class NotebookFailure:
    """A family whose notebook failed: why, and where its executed notebook keeps the traceback."""
    family: str
    slug: str
    reason: str
    notebook: str
    predictions_sha256: str
    written_at: str
    versions: dict
    device: dict
    status: str = "failed"
    schema: int = SCHEMA

    def __post_init__(self):
        _need(self.status == "failed" and self.schema in READABLE, f"not a schema-{SCHEMA} failure")
        _need(bool(self.reason), "a failure without a reason")

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, record: dict) -> "NotebookFailure":
        return cls(**_fields(cls, record, skip=("status", "schema")),
                   status=record.get("status"), schema=record.get("schema"))


@dataclass(frozen=True)
class Corrupt:
    """A result file that could not be read as a result; never written, only found."""
    path: str
    reason: str
    status: str = "corrupt"


def encoded(record: FamilyResult | NotebookFailure) -> bytes:
    """The bytes write() writes: what is written reads back as itself."""
    type(record).from_dict(json.loads(json.dumps(record.as_dict())))
    return (json.dumps(record.as_dict(), indent=1, allow_nan=False) + "\n").encode()


def write(path: Path, record: FamilyResult | NotebookFailure) -> None:
    from proof import files
    files.write_bytes(path, encoded(record))


def read(path: Path, sha: str | None = None) -> FamilyResult | NotebookFailure | Corrupt | None:
    """The record in path; None if there is none or it was made against other predictions."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        _need(isinstance(record, dict), "not a JSON object")
    except (OSError, ValueError) as e:
        return Corrupt(str(path), f"unreadable: {one_line(e)}")
    if sha is not None and record.get("predictions_sha256") != sha:
        return None
    kind = {"done": FamilyResult, "failed": NotebookFailure}.get(record.get("status"))
    if kind is None:
        return Corrupt(str(path), f"unknown status {record.get('status')!r}")
    if record.get("schema") not in READABLE:
        return Corrupt(str(path), f"schema {record.get('schema')!r}, this version reads {SCHEMA}: rerun the family")
    try:
        return kind.from_dict(record)
    except (RecordError, TypeError, KeyError, AttributeError) as e:
        return Corrupt(str(path), one_line(e))
