"""The report's data: an output folder read back, recomputed where it can be, and analysed.

Every table and figure is built from the output folder alone (predictions.json and the family results,
read back as validated records), so the report can be rebuilt, or re-scored, without a model or a GPU.
A result whose recomputable parts disagree with its own scores or with the committed predictions is
Corrupt, with the reason, and left out of every table.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from proof import analysis, commit, evidence, files, records, rules, stats
from proof.records import Corrupt, FamilyResult, Failure
from shortlist import sources
from shortlist.trainee import Trainee


@dataclass
class Report:
    out: Path
    body: dict  # predictions.json
    sha: str
    results: dict  # family key -> FamilyResult | Failure | Corrupt; families not run are absent
    analyses: dict  # family key -> analysis.FamilyAnalysis of its finished result
    across: analysis.Across  # of the finished families
    trainee: Trainee  # the committed trainee, read once
    evidence: dict = field(default_factory=dict)  # family key -> evidence.Evidence

    @property
    def settings(self) -> dict:
        return self.body["settings"]

    def prediction(self, key: str) -> dict:
        return commit.prediction_for(self.body, key)

    def done(self) -> list[FamilyResult]:
        return [self.results[k] for k in self.body["families"] if isinstance(self.results.get(k), FamilyResult)]


def load(out, scorer=None) -> Report:
    """Predictions (hash checked) and every result that was made against them, validated and checked
    against the committed predictions; what a run did not record (an older run) is measured with a
    Scorer (one is started here if none is given)."""
    body, sha = commit.committed(out, commit.READABLE)
    results = {}
    for key in body["families"]:
        result = records.read(files.result(out, sources.parse(key).slug), sha)
        if isinstance(result, FamilyResult):
            result = recomputed(result, body, files.result(out, result.slug))
        if result is not None:
            results[key] = result
    done = [results[k] for k in body["families"] if isinstance(results.get(k), FamilyResult)]
    if needs_scorer(body, done) and scorer is None:
        from shortlist.scoring import Scorer
        with Scorer(deadline_s=body["settings"]["score_deadline_s"]) as own:
            found = evidence.gather(body, results, own)
    else:
        found = evidence.gather(body, results, scorer)
    analyses = {r.family: analysis.family(r, body["settings"], found[r.family], body["trainee"]) for r in done}
    across = analysis.across(body["predictions"], done, [analyses[r.family] for r in done], body["trainee"],
                             {"power": power(body, found)})
    return Report(Path(out), body, sha, results, analyses, across, Trainee.from_dict(body["trainee"]), found)


def power(body: dict, found: dict) -> dict:
    """What each comparison could show at most: as committed, or, for a run committed before it was recorded,
    computed now from its commitment alone (its screens and the specs it judges), which no outcome enters."""
    committed = body.get("analysis", {}).get("power")
    if committed:
        return committed
    return rules.power(body["trainee"], body["predictions"], {k: list(e.not_judged) for k, e in found.items()}) | {
        "computed": "now, from the commitment"}


def needs_scorer(body: dict, done: list) -> bool:
    """Whether evidence.gather() must measure something (a run older than this version)."""
    return body.get("schema", 0) < commit.SCHEMA or any("policy" not in r.baselines for r in done)


def recomputed(result: FamilyResult, body: dict, path) -> FamilyResult | Corrupt:
    """The result, if everything in it that can be recomputed from its per-task scores and the committed
    predictions agrees: its gain, interval and p (the seed's bootstrap again), improved, held, and its
    prediction, settings and trainee as committed. A record that disagrees was edited or made elsewhere."""
    s = body["settings"]
    again = stats.paired_gain(result.before.scores, result.after.scores, s["bootstrap_n"])
    why = []
    if again != result.gain:
        why.append(f"its gain/ci95/p ({result.gain}) disagree with its scores ({again})")
    if result.improved != stats.improved(again, s["alpha"]):
        why.append("improved disagrees with its scores")
    committed_prediction = commit.prediction_for(body, result.family)
    if result.prediction != committed_prediction:
        why.append("its prediction is not the committed one")
    if result.held != (stats.improved(again, s["alpha"]) == (committed_prediction["prediction"] == "improves")):
        why.append("held disagrees with the committed prediction")
    if result.settings != s or result.trainee != body["trainee"]:
        why.append("its settings or trainee are not the committed ones")
    return Corrupt(str(path), "; ".join(why)) if why else result


def status(report: Report, key: str) -> str:
    result = report.results.get(key)
    if result is None:
        return "not run"
    if isinstance(result, FamilyResult):
        return "done"
    return f"failed: {result.reason}" if isinstance(result, Failure) else f"corrupt result: {result.reason}"
