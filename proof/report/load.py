"""The report's data: an output folder read back, recomputed where it can be, and analysed.

Every table and figure is built from the output folder alone (predictions.json and the family results,
read back as validated records), so the report can be rebuilt, or re-scored, without a GPU (the model loads
only to draw a run of this version's answers again from its adapters: proof/regenerate.py).
A result that fails verification (proof/verify.py: its statistics, its answers scored again and drawn again,
its tasks, its seal, its commitment) is Corrupt, with the file and the reasons, and left out of every table.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from proof import analysis, commit, evidence, files, records, rules, verify
from proof.records import Corrupt, FamilyResult, NotebookFailure
from shortlist import sources
from shortlist.trainee import Trainee


@dataclass
class Report:
    out: Path
    body: dict  # predictions.json
    sha: str
    results: dict  # family key -> FamilyResult | NotebookFailure | Corrupt; families not run are absent
    analyses: dict  # family key -> analysis.FamilyAnalysis of its finished result
    across: analysis.Across  # of the finished families
    trainee: Trainee  # the committed trainee, read once
    evidence: dict = field(default_factory=dict)  # family key -> evidence.Evidence
    unchecked: dict = field(default_factory=dict)  # family key -> the checks of proof/verify.py that could not run
    edited: list = field(default_factory=list)  # what proof/seal.py finds edited in 01's and the 02s' executed notebooks
    checking: dict = field(default_factory=dict)  # seconds this load spent: checking each family again, and gathering the evidence

    @property
    def settings(self) -> dict:
        return self.body["settings"]

    def prediction(self, key: str) -> dict:
        return commit.prediction_for(self.body, key)

    def done(self) -> list[FamilyResult]:
        return [self.results[k] for k in self.body["families"] if isinstance(self.results.get(k), FamilyResult)]


def load(out, scorer=None) -> Report:
    """Predictions (hash checked) and every result that was made against them, validated and verified again
    (proof/verify.py: recomputed, re-scored, checked against the commitment); what a run did not record (an
    older run) is measured. One Scorer serves it all: the one given, or one started here when first needed; and
    one Regenerator (the committed model, loaded once when first needed)."""
    from proof import regenerate
    body, sha = commit.committed(out, commit.READABLE)
    results, unchecked, checking = {}, {}, {}
    with verify.scorer_for(body, scorer, alone=True) as scoring, regenerate.Regenerator() as model:
        for key in body["families"]:
            result = records.read(files.result(out, sources.parse(key).slug), sha)
            if isinstance(result, FamilyResult):
                verdict = verify.family(out, body, sha, result, scoring, model)
                result = result if verdict.ok else Corrupt(verdict.path, verdict.line(out))
                unchecked[key], checking[key] = verdict.unchecked, verdict.seconds
            if result is not None:
                results[key] = result
        done = [results[k] for k in body["families"] if isinstance(results.get(k), FamilyResult)]
        started = time.perf_counter()
        found = evidence.gather(body, results, scoring)
        checking["evidence"] = time.perf_counter() - started
    analyses = {r.family: analysis.family(r, body["settings"], found[r.family], body["trainee"]) for r in done}
    across = analysis.across(body["predictions"], done, [analyses[r.family] for r in done], body["trainee"],
                             {"power": power(body, found)}, failed_judged(body, results))
    return Report(Path(out), body, sha, results, analyses, across, Trainee.from_dict(body["trainee"]), found,
                  unchecked, verify.record(out, report=False), checking)


def failed_judged(body: dict, results: dict) -> tuple:
    """The specs the commitment judged whose training failed or whose result failed verification: they count,
    as failed (design v2). A commitment that did not record which specs it judges (schema 2) names none."""
    judged = body.get("not_judged", {})
    return tuple(k for k in body["families"] if isinstance(results.get(k), (NotebookFailure, Corrupt))
                 and k in judged and not judged[k])


def power(body: dict, found: dict) -> dict:
    """What each comparison could show at most: as committed, or, for a run committed before it was recorded,
    computed now from its commitment alone (its screens and the specs it judges), which no outcome enters."""
    committed = body.get("analysis", {}).get("power")
    if committed:
        return committed
    return rules.power(body["trainee"], body["predictions"], {k: list(e.not_judged) for k, e in found.items()}) | {
        "computed": "now, from the commitment"}


def status(report: Report, key: str) -> str:
    result = report.results.get(key)
    if result is None:
        return "not run"
    if isinstance(result, FamilyResult):
        return "done"
    return f"failed: {result.reason}" if isinstance(result, NotebookFailure) else f"corrupt result: {result.reason}"


MARK = "shortlist"  # where the top of the executed 03 records what it found, for the command that built it


def marks(report: Report) -> dict:
    """What this report found, as metadata of what it shows first (prose.top): every corrupt family, with why.
    The executed notebook keeps it, so `python -m proof report` can say so in its exit status (runner.corrupt)."""
    return {MARK: {"corrupt": {k: r.reason for k, r in report.results.items() if isinstance(r, Corrupt)},
                   "edited": list(report.edited)}}


def edited(report: Report) -> str | None:
    """The run's executed notebooks that are not what their seals say (an edit made without running them)."""
    if not report.edited:
        return None
    return ("**The run's record was edited after it was made**, so what its notebooks show cannot be trusted: "
            + "; ".join(report.edited) + ".")


def unchecked(report: Report) -> str | None:
    """Which checks of proof/verify.py could not run, and why: once for what every family shares (a run
    committed before they existed), then per family."""
    lists = [tuple(v) for k, v in report.unchecked.items() if v]
    if not lists:
        return None
    shared = [c for c in lists[0] if all(c in v for v in lists)] if len(lists) == len(report.unchecked) else []
    own = {k: [c for c in v if c not in shared] for k, v in report.unchecked.items()}
    parts = shared + [f"{k}: {c}" for k, v in own.items() for c in v]
    return "**Checks that could not run** on these results: " + "; ".join(parts) + "."
