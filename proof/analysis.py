"""What the seed's analysis cannot tell apart, told apart.

The seed's primary analysis (a paired bootstrap on the mean score; improved, held) stays exactly
as it is, and is applied to evaluation questions the model never saw (heldout.py; an older run's
evaluation is restricted to its unseen tasks here). Next to it: the same bootstrap on correctness,
so that a gain made of partial credit alone is labelled as such; the same bootstrap over distinct
questions, each counted once; collapse, so that a gain a constant answer matches is never called
learning; the format of the answers; an equivalence test, so that a "no change" prediction is never
"held" merely because nothing was significant; Holm-adjusted p-values; the rule against simpler
rules, with an exact paired test where they disagree, on the families the proof can judge; and how
each screening signal ranks the gains. plan() is written into predictions.json before training,
and everything here reads its parameters from there.
"""
from __future__ import annotations

import numpy as np

from proof import stats

SIGNALS = {"pass1": "pass@1", "passk": "pass@k", "mean": "mean score", "signal_raw": "signal (raw reward)",
           "signal_correct": "signal (correctness)", "learnability": "mean p(1−p)"}


def alternatives(trainee: dict, screens: list[dict]) -> dict:
    """Simpler rules than Shortlist's, each a function of a family's screen -> predicts improvement.
    screens: those the rules are compared on (the median of their learnability is one rule's cut)."""
    band = (trainee["pass_min"], trainee["pass_max"])
    median = float(np.median([p["learnability"] for p in screens])) if screens else 0.0
    return {
        "Shortlist's rule": lambda p: p["prediction"] == "improves",
        "always improves": lambda p: True,
        "pass@1 > 0": lambda p: p["pass1"] > 0,
        f"pass@1 in [{band[0]}, {band[1]})": lambda p: band[0] <= p["pass1"] < band[1],
        f"mean p(1−p) above its median ({median:.3f})": lambda p: p["learnability"] > median,
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
        "alternatives": "hit rate of always 'improves', pass@1 > 0, pass@1 in the rule's band, mean p(1-p) above "
                        "its median, the GRPO signal alone (raw and on correctness), against the seed's 'improved', "
                        "each with a Wilson 95% interval and an exact McNemar test against the rule where they "
                        "disagree; confusion matrix of the rule; all on the judged families only (not unscorable, "
                        "guessable, short of unseen questions, or collapsed)",
        "unseen": f"evaluation tasks are the first eval_n seeds whose question is in neither the training nor the "
                  f"prediction tasks; families with fewer than {settings.min_unseen} distinct unseen questions are "
                  f"not judged; the same bootstrap resampling distinct questions (each counted once) beside it",
        "collapse": "a significant gain whose after-training mean score (or accuracy) a constant answer matches "
                    "or beats on the same tasks (the model's own most common answer, or the best content-free "
                    "answer) is labelled collapsed, and is not counted among the rule's held predictions",
        "correlations": "Spearman rho of pass@1, pass@k, mean score, both signals and mean p(1-p) with the gain "
                        "in mean score and in accuracy",
    }


def family(result, settings: dict, evidence=None) -> dict:
    """The analysis of one finished family (a records.FamilyResult), with the committed alpha, margin
    and bootstrap size, on its unseen evaluation tasks (evidence.Evidence; None: all of them)."""
    alpha, n = settings["alpha"], settings["bootstrap_n"]
    before, after = result.before, result.after
    unseen = list(evidence.unseen) if evidence is not None else [True] * before.n
    keep = [i for i, u in enumerate(unseen) if u]
    b, a = [before.scores[i] for i in keep], [after.scores[i] for i in keep]
    every = len(keep) == before.n
    gain = result.gain if every else stats.paired_gain(b, a, n) if keep else None
    improved = result.improved if every else bool(gain) and stats.improved(gain, alpha)
    correct = [[float(s >= 1.0) for s in part] for part in (b, a)]
    accuracy = stats.paired_gain(*correct, n) if keep else None
    accuracy_improved = bool(accuracy) and stats.improved(accuracy, alpha)
    groups = [evidence.groups[i] for i in keep] if evidence is not None else list(range(len(keep)))
    by_question = stats.paired_gain(*_per_question(groups, b, a), n) if keep else None
    baselines = evidence.baselines if evidence is not None and evidence.baselines else result.baselines
    constant = best_constant(baselines)
    collapsed = improved and constant is not None and _matched(constant, result.after, accuracy_improved)
    learning = ("collapsed" if collapsed else "accuracy" if accuracy_improved else "partial credit only") \
        if improved else "none"
    equivalence = stats.tost(b, a, settings["equivalence_margin"], alpha, n) if keep else None
    predicted = result.prediction["prediction"] == "improves"
    if predicted:
        judgement = "held" if improved else "did not hold"
    elif improved:
        judgement = "did not hold"
    else:
        judgement = "held (equivalent)" if equivalence and equivalence["equivalent"] else "held (inconclusive)"
    if learning in ("partial credit only", "collapsed"):
        judgement += f" ({learning})"
    not_judged = list(evidence.not_judged) if evidence is not None else []
    sd = float(np.std(np.subtract(a, b), ddof=1)) if len(keep) > 1 else 0.0
    return {"gain": gain, "improved": improved, "held": improved == predicted, "accuracy_gain": accuracy,
            "accuracy_improved": accuracy_improved, "by_question": by_question, "learning": learning,
            "equivalence": equivalence, "judgement": judgement, "difference_sd": sd,
            "mde": stats.minimum_detectable_effect(sd, max(1, len(keep)), alpha),
            "unseen": len(keep), "distinct": len(set(groups)), "evaluated": before.n, "not_judged": not_judged,
            "judged": not not_judged and not collapsed and bool(keep), "constant": constant,
            "distinct_answers": baselines.get("distinct_answers")}


def _per_question(groups: list[int], before: list[float], after: list[float]) -> tuple[list, list]:
    """Each distinct question once: the mean score of its tasks before and after."""
    by: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        by.setdefault(g, []).append(i)
    order = sorted(by)
    return ([float(np.mean([before[i] for i in by[g]])) for g in order],
            [float(np.mean([after[i] for i in by[g]])) for g in order])


def best_constant(baselines: dict) -> dict | None:
    """Of the model's own most common answer and the best content-free one, the one that scores more."""
    found = [c for c in (baselines.get("mode"), baselines.get("content_free")) if c]
    return max(found, key=lambda c: (c["mean"], c["accuracy"])) if found else None


def _matched(constant: dict, after, accuracy_improved: bool) -> bool:
    """Does a constant answer score at least what the trained model does on the evaluation tasks: its
    mean score, and, where accuracy rose, its accuracy?"""
    eps = 1e-12
    return constant["mean"] >= after.mean_score - eps or (accuracy_improved and constant["accuracy"] >= after.accuracy - eps)


def across(predictions: list[dict], results: list, analyses: list[dict], trainee: dict) -> dict:
    """What needs every finished family at once: Holm, the rule against alternatives (on the judged
    families), correlations. results are records.FamilyResult, analyses what family() made of each,
    in the same order."""
    by_family = {p["family"]: p for p in predictions}
    screens = [by_family[r.family] for r in results]
    holm = {"score": stats.holm([a["gain"]["p"] if a["gain"] else 1.0 for a in analyses]),
            "recorded": stats.holm([r.gain["p"] for r in results]),  # the seed's, on every evaluation task
            "accuracy": stats.holm([a["accuracy_gain"]["p"] if a["accuracy_gain"] else 1.0 for a in analyses])}
    judged = [i for i, a in enumerate(analyses) if a["judged"]]
    j_screens = [screens[i] for i in judged]
    outcomes = [analyses[i]["improved"] for i in judged]
    real = [analyses[i]["accuracy_improved"] for i in judged]
    rules, said_by = [], {}
    for name, predicts in alternatives(trainee, j_screens).items():
        said = [predicts(s) for s in j_screens]
        said_by[name] = said
        hits = sum(x == y for x, y in zip(said, outcomes))
        rules.append({"rule": name, "predicted improves": sum(said), "hits": hits, "of": len(judged),
                      "hit rate": hits / len(judged) if judged else None, "ci95": stats.wilson(hits, len(judged)),
                      "hits on accuracy": sum(x == y for x, y in zip(said, real))})
    ours = [x == y for x, y in zip(said_by["Shortlist's rule"], outcomes)]
    for row in rules[1:]:
        theirs = [x == y for x, y in zip(said_by[row["rule"]], outcomes)]
        row["disagree"] = sum(x != y for x, y in zip(said_by["Shortlist's rule"], said_by[row["rule"]]))
        row["mcnemar"] = stats.mcnemar(sum(o and not t for o, t in zip(ours, theirs)),
                                       sum(t and not o for o, t in zip(ours, theirs)))
    said = said_by["Shortlist's rule"]
    cells = {(p, o): sum(1 for a, b in zip(said, outcomes) if (a, b) == (p, o)) for p in (True, False) for o in (True, False)}
    right = cells[True, True] + cells[False, False]
    confusion = {"improves, improved": cells[True, True], "improves, not improved": cells[True, False],
                 "no change, improved": cells[False, True], "no change, not improved": cells[False, False],
                 "accuracy": right / len(judged) if judged else None, "ci95": stats.wilson(right, len(judged))}
    correlations = []
    for key, label in SIGNALS.items():
        x = [s[key] for s in screens]
        correlations.append({"signal": label, "key": key,
                             "score gain": stats.spearman(x, [r.gain["gain"] for r in results]),
                             "accuracy gain": stats.spearman(x, [a["accuracy_gain"]["gain"] if a["accuracy_gain"]
                                                                 else 0.0 for a in analyses])})
    verdicts = {p["verdict"] for p in predictions}
    return {"holm": holm, "rules": rules, "confusion": confusion, "correlations": correlations,
            "judged": [results[i].family for i in judged],
            "never": [v for v in ("improves", "too hard", "already solved", "no signal") if v not in verdicts]}
