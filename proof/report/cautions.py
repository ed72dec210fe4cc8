"""What could make a report's numbers wrong, said above its headline: the banner of a run that is no finding,
the note on a run committed under an earlier design, and the warnings (a fallen-back engine, reduced precision,
degenerate completions, a gain a policy matches, answers past the scoring deadline, a corrupt result).
"""
from __future__ import annotations

from proof.records import Corrupt, FamilyResult
from proof.report.load import Report
from shortlist import page
from shortlist.models import precision

DEGENERATE_SHARE = 0.5  # a family whose completions are mostly cut off or repetitive is named above the headline
TIMEOUT_SHARE = 0.01  # a family whose answers passed the scoring deadline more often than this is named too


def banner(report: Report) -> str | None:
    """A run whose numbers must not be read as a finding says so first."""
    from proof.settings import DEFAULTS
    s = report.settings
    small = [f"{name.replace('_', ' ')} {s[name]} (the protocol's {DEFAULTS[name]})"
             for name in ("steps", "eval_n", "predict_tasks") if s[name] < DEFAULTS[name] / 2]
    parts = []
    if report.trainee.model == "tiny":
        parts.append(page.TINY)
    if small:
        parts.append("Its settings are far below the protocol's: " + ", ".join(small) + ".")
    return (f"{page.SMOKE} " + " ".join(parts)) if parts else None


def measured_here(report: Report) -> str | None:
    """A run committed before this version says that what it did not record was measured now."""
    what = sorted({m for e in report.evidence.values() for m in e.measured})
    if not what:
        return None
    design = {2: "held its evaluation tasks out by seed only", 3: "chose its evaluation questions among those its "
              "training draw missed"}.get(report.body.get("schema"), "was committed before this version")
    return (f"**This run was committed under an earlier design**: it {design}. It is re-analysed as it was "
            f"committed, with what this version measures beside it, from its committed tasks and saved answers: "
            f"{', '.join(what)}.")


def warnings(report: Report) -> list[str]:
    """Everything that could make the numbers wrong, for above the headline: one line per family (all
    of its degenerate shares together), then the run-wide ones."""
    out = []
    engines = [("predictions (01)", report.body.get("engine", {}))] + [
        (f"{r.family} ({phase})", e) for r in report.done() for phase, e in r.engine.items()]
    for where, e in engines:
        if e.get("checks") and any(not c.get("passed", c["identical_rows"] == c["rows"]) for c in e["checks"]):
            out.append(f"The fast decode engine disagreed with generate() in {where} and stepped aside: {e.get('why')}.")
        elif e.get("engine") == "generate" and e.get("why") and "transformers" in e["why"]:
            out.append(f"The fast decode engine was not used in {where}: {e['why']}.")
        reduced = precision.reduced(e["fp32_precision"]) if isinstance(e.get("fp32_precision"), dict) else []
        if reduced:
            out.append(f"fp32 matmuls ran at reduced precision in {where} ({', '.join(reduced)}): not the fp32 the "
                       f"trainee is run in.")
    unrecorded = [r.family for r in report.done() if r.device.get("cuda") and isinstance(r.engine.get("train"), dict)
                  and r.engine["train"].get("trainer") == "fast" and "fp32_precision" not in r.engine["train"]]
    if unrecorded:
        out.append(f"{len(unrecorded)} of {len(report.done())} families were trained on a GPU, compiled, by code that "
                   f"did not record its matmul precision: such runs trained, and evaluated after training, in TF32 "
                   f"on an Ampere-or-newer GPU and evaluated before training in fp32 (docs/speed.md, 'fp32 is fp32').")
    by_family: dict[str, list[str]] = {}
    for p in report.body["predictions"]:
        for what, share in (("cut at max_new_tokens", p.get("clipped", 0)),
                            ("dominated by one repeated token", p.get("repetitive", 0))):
            if share > DEGENERATE_SHARE:
                by_family.setdefault(p["family"], []).append(f"{share:.0%} of the screening samples were {what}")
    for r in report.done():
        for part, e in (("before", r.before), ("after", r.after)):
            for what, share in (("cut at max_new_tokens", e.clipped_share),
                                ("dominated by one repeated token", e.repetitive_share)):
                if share > DEGENERATE_SHARE:
                    by_family.setdefault(r.family, []).append(f"{share:.0%} of the greedy answers {part} training "
                                                              f"were {what}")
        a = report.analyses[r.family]
        if a.learning == "matched by a policy":
            c = a.policy
            by_family.setdefault(r.family, []).append(
                f"its gain is matched by a policy that does not solve the task: {c['answer']} answers "
                f"{c['accuracy']:.3f} of the same tasks right against the trained model's {a.accuracy[1]:.3f}"
                + (f" ({a.distinct_answers:.0%} of its answers distinct)" if a.distinct_answers is not None else "")
                + "; that is no real learning")
    for key in report.body["families"]:
        counts = scoring_counts(report, key)
        if counts["answers"] and counts["timeouts"] / counts["answers"] > TIMEOUT_SHARE:
            by_family.setdefault(key, []).append(
                f"{counts['timeouts']} of {counts['answers']} answers ({counts['timeouts'] / counts['answers']:.1%}) "
                f"passed the scoring deadline of {report.settings['score_deadline_s']} s and scored 0")
        retried = [f"{part.get('retried', 0)} {where}" for where, part in _scoring_parts(report, key)
                   if part.get("retried", 0)]
        if retried:
            by_family.setdefault(key, []).append(f"{' and '.join(retried)} answers passed the scoring deadline and "
                                                 f"were scored again (a loaded machine)")
    out += [f"{key}: " + "; ".join(parts) + "." for key, parts in by_family.items()]
    for key, result in report.results.items():
        if isinstance(result, Corrupt):
            out.append(f"{key}: its result file is corrupt ({result.reason}); it is left out of every table.")
    return out


SCORING = ("answers", "unextracted", "timeouts", "crashes", "exceptions", "non_finite", "clamped", "refused")


def _scoring_parts(report: Report, key: str) -> tuple:
    """A family's two scoring records: its screen's (predictions.json) and its run's (the result: training's
    rewards and the evaluations, of which only the evaluations are scored again, hence the name; a family without
    a result has an empty one)."""
    result = report.results.get(key)
    return (("screening", report.prediction(key).get("scoring", {})),
            ("evaluation", result.scoring if isinstance(result, FamilyResult) else {}))


def scoring_counts(report: Report, key: str) -> dict:
    """What the scorer did with a family's answers, screening and training together."""
    counts = dict.fromkeys(SCORING, 0)
    for _, part in _scoring_parts(report, key):
        for c in SCORING:
            counts[c] += part.get(c, 0)
    return counts
