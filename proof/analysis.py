"""What the seed's analysis cannot tell apart, told apart.

The seed's primary analysis (a paired bootstrap on the mean score; improved, held) stays exactly
as it is. Next to it: the same bootstrap on correctness, so that a gain made of partial credit
alone is labelled as such; the format of the answers; an equivalence test, so that a "no change"
prediction is never "held" merely because nothing was significant; Holm-adjusted p-values; the
rule against simpler rules; and how each screening signal ranks the gains. plan() is written into
predictions.json before training, and everything here reads its parameters from there.
"""
from __future__ import annotations

import numpy as np

from proof import stats

SIGNALS = {"pass1": "pass@1", "passk": "pass@k", "mean": "mean score", "signal_raw": "signal (raw reward)",
           "signal_correct": "signal (correctness)", "learnability": "mean p(1−p)"}


def alternatives(trainee: dict) -> dict:
    """Simpler rules than Shortlist's, each a function of a family's screen -> predicts improvement."""
    band = (trainee["pass_min"], trainee["pass_max"])
    return {
        "Shortlist's rule": lambda p: p["prediction"] == "improves",
        "always improves": lambda p: True,
        f"pass@1 in [{band[0]}, {band[1]})": lambda p: band[0] <= p["pass1"] < band[1],
        f"signal (raw) ≥ {trainee['grpo_signal_min']}": lambda p: p["signal_raw"] >= trainee["grpo_signal_min"],
        f"signal (correctness) ≥ {trainee['grpo_signal_min']}":
            lambda p: p["signal_correct"] >= trainee["grpo_signal_min"],
    }


def plan(settings) -> dict:
    """The analysis, declared with the predictions before any training."""
    a, m, n = settings.alpha, settings.equivalence_margin, settings.bootstrap_n
    planning_sd = 0.5  # the largest SD of a per-task difference of 0/1 scores that stays near zero on average
    return {
        "primary": f"the seed's: paired bootstrap of after - before mean score per task, {n} resamples, rng "
                   f"seed 0, 95% percentile CI, p = share of resampled means <= 0; improved = p <= {a} and "
                   f"gain > 0; held = improved == (prediction == 'improves')",
        "correctness": f"the same bootstrap on accuracy (score >= 1); 'partial credit only' when the score "
                       f"improved and accuracy did not",
        "format": "share of answers the trainee's extraction finds, and their mean length in characters, before and "
                  "after; share of completions cut at max_new_tokens and dominated by one repeated token",
        "equivalence": f"TOST on the same bootstrap, margin ±{m} in mean score, at {a}: a 'no change' prediction "
                       f"is 'held (equivalent)' when the gain is shown to lie within the margin, 'held "
                       f"(inconclusive)' when it neither improved nor was shown equivalent",
        "minimum_detectable_effect": f"{stats.minimum_detectable_effect(planning_sd, settings.eval_n, a):.3f} in "
                                     f"mean score at eval_n = {settings.eval_n}, one-sided {a}, 80% power, "
                                     f"per-task difference SD {planning_sd} (reported per family from the observed SD)",
        "multiplicity": "Holm-adjusted p-values across families, next to the raw ones",
        "alternatives": "hit rate of always 'improves', pass@1 in the rule's band, the GRPO signal alone (raw "
                        "and on correctness), against the seed's 'improved'; confusion matrix of the rule with "
                        "its accuracy and a Wilson 95% interval",
        "correlations": "Spearman rho of pass@1, pass@k, mean score, both signals and mean p(1-p) with the gain "
                        "in mean score and in accuracy",
    }


def family(result, settings: dict) -> dict:
    """The analysis of one finished family (a records.FamilyResult), with the committed alpha, margin
    and bootstrap size."""
    alpha, n = settings["alpha"], settings["bootstrap_n"]
    before, after = result.before, result.after
    correct = [[float(s >= 1.0) for s in e.scores] for e in (before, after)]
    accuracy = stats.paired_gain(*correct, n)
    accuracy_improved = stats.improved(accuracy, alpha)
    learning = "accuracy" if accuracy_improved else "partial credit only" if result.improved else "none"
    equivalence = stats.tost(before.scores, after.scores, settings["equivalence_margin"], alpha, n)
    if result.prediction["prediction"] == "improves":
        judgement = "held" if result.improved else "did not hold"
    elif result.improved:
        judgement = "did not hold"
    else:
        judgement = "held (equivalent)" if equivalence["equivalent"] else "held (inconclusive)"
    if learning == "partial credit only":
        judgement += " (partial credit only)"
    sd = float(np.std(np.subtract(after.scores, before.scores), ddof=1)) if before.n > 1 else 0.0
    return {"accuracy_gain": accuracy, "accuracy_improved": accuracy_improved, "learning": learning,
            "equivalence": equivalence, "judgement": judgement, "difference_sd": sd,
            "mde": stats.minimum_detectable_effect(sd, before.n, alpha)}


def across(predictions: list[dict], results: list, analyses: list[dict], trainee: dict) -> dict:
    """What needs every finished family at once: Holm, the rule against alternatives, correlations.
    results are records.FamilyResult, analyses what family() made of each, in the same order."""
    by_family = {p["family"]: p for p in predictions}
    screens = [by_family[r.family] for r in results]
    outcomes = [r.improved for r in results]
    real = [a["accuracy_improved"] for a in analyses]
    holm = {"score": stats.holm([r.gain["p"] for r in results]),
            "accuracy": stats.holm([a["accuracy_gain"]["p"] for a in analyses])}
    rules = []
    for name, predicts in alternatives(trainee).items():
        said = [predicts(s) for s in screens]
        hits = sum(a == b for a, b in zip(said, outcomes))
        rules.append({"rule": name, "predicted improves": sum(said), "hits": hits, "of": len(results),
                      "hit rate": hits / len(results) if results else None, "ci95": stats.wilson(hits, len(results)),
                      "hits on accuracy": sum(a == b for a, b in zip(said, real))})
    said = [s["prediction"] == "improves" for s in screens]
    cells = {(p, o): sum(1 for a, b in zip(said, outcomes) if (a, b) == (p, o)) for p in (True, False) for o in (True, False)}
    right = cells[True, True] + cells[False, False]
    confusion = {"improves, improved": cells[True, True], "improves, not improved": cells[True, False],
                 "no change, improved": cells[False, True], "no change, not improved": cells[False, False],
                 "accuracy": right / len(results) if results else None, "ci95": stats.wilson(right, len(results))}
    correlations = []
    for key, label in SIGNALS.items():
        x = [s[key] for s in screens]
        correlations.append({"signal": label, "key": key,
                             "score gain": stats.spearman(x, [r.gain["gain"] for r in results]),
                             "accuracy gain": stats.spearman(x, [a["accuracy_gain"]["gain"] for a in analyses])})
    return {"holm": holm, "rules": rules, "confusion": confusion, "correlations": correlations}
