"""What the seed's analysis cannot tell apart, told apart, as typed records the report reads.

The seed's primary analysis (a paired bootstrap on the mean score; improved) stays as it is, on the
evaluation tasks the result rests on (reserved questions; an older run's unseen ones: evidence.py).
The rule, though, is judged on *real learning*: accuracy rose significantly (the same bootstrap on
score >= 1) and the trained model answers more tasks right than the best policy that does not solve
them (audit.py) does on the same tasks. A gain in partial credit only, or one a policy matches
(a collapse onto one answer, a copied number), is no real learning: it fails an "improves"
prediction and holds a "no change" one. Which specs are judged is fixed at commit (never changed by
an outcome); the rule is compared with simpler rules on them (rules.py), per side: its precision on
"improves", its miss rate on "too hard". Beside: distinct questions each counted once, an
equivalence test for "no change", Holm across families, borderline verdicts, correlations. plan()
and rules.power() are written into predictions.json before training.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from proof import rules, stats
from shortlist.screening import BORDERLINE

SIGNALS = {"pass1": "pass@1", "passk": "pass@k", "mean": "mean score", "signal_raw": "signal (raw reward)",
           "signal_correct": "signal (correctness)", "learnability": "mean p(1−p)"}
LEARNING = ("real learning", "matched by a policy", "partial credit only", "none")


@dataclass(frozen=True)
class FamilyAnalysis:
    """One finished family, on the tasks its result rests on (`counted`)."""
    family: str
    prediction: str  # "improves" or "no change", as committed
    side: str  # rules.side(): improves, boundary, too hard, other, control
    borderline: bool | None  # its screen's flip chance >= BORDERLINE (None: not measured)
    evaluated: int  # evaluation tasks
    counted: int  # of them, those the result rests on (all reserved ones; an older run's unseen ones)
    distinct: int  # distinct questions among them
    accuracy: tuple  # (before, after) on the counted tasks
    gain: dict | None  # the seed's bootstrap on the mean score, on the counted tasks
    improved: bool  # the seed's: p <= alpha and gain > 0
    accuracy_gain: dict | None
    accuracy_improved: bool
    by_question: dict | None  # the same bootstrap, each distinct question once
    policy: dict | None  # the best policy on the same tasks: answer, accuracy, mean
    real: bool  # the rule's outcome: accuracy improved, and above the best policy's
    learning: str  # one of LEARNING
    equivalence: dict | None  # TOST within ±margin
    judgement: str  # held / did not hold, and how
    held: bool  # real == (prediction == "improves")
    judged: bool  # committed as judged, and some task to judge on
    not_judged: tuple  # why not, as committed
    difference_sd: float
    mde: float  # the smallest gain the counted tasks could detect (80% power)
    distinct_answers: float | None  # share of distinct answers after training


def plan(settings) -> dict:
    """The analysis, declared with the predictions before any training."""
    a, m, n = settings.alpha, settings.equivalence_margin, settings.bootstrap_n
    planning_sd = 0.5  # the largest SD of a per-task difference of 0/1 scores that stays near zero on average
    return {
        "primary": f"the seed's: paired bootstrap of after - before mean score per task, {n} resamples, rng "
                   f"seed 0, 95% percentile CI, p = share of resampled means <= 0; improved = p <= {a} and gain > 0",
        "outcome": f"the rule is judged on real learning: the same bootstrap on accuracy (score >= 1) with p <= {a} "
                   f"and a positive gain, and an accuracy after training above the best policy's (audit.py: "
                   f"constants, the most frequent or another task's gold, numbers or the last word copied from the "
                   f"question, the model's own most common answer) on the same tasks; held = real learning == "
                   f"(prediction == 'improves'); a gain a policy matches, or in partial credit only, is no real learning",
        "judged": "fixed at commit (not_judged): a spec is judged unless an audit verdict (unscorable, unverified "
                  "ceiling, guessable) or too few reserved questions; no outcome removes one",
        "sides": "precision on 'improves' (share of judged 'improves' specs with real learning) and miss rate on "
                 "'too hard' (share of judged 'too hard' specs with real learning; the boundary, 0 < pass@1 < "
                 "pass_min, apart), each with a Wilson 95% interval",
        "comparisons": "the rule against each rule of rules.comparators() on the judged specs: hits, Wilson 95% "
                       "interval, exact McNemar test on the specs only one got right, Holm across comparisons; "
                       "'power' gives, before training, the disagreements each comparison rests on and its best p",
        "borderline": f"a screen verdict whose flip chance (bootstrap over tasks and samples) is >= {BORDERLINE} is "
                      f"borderline; the rule's accuracy is given with and without them",
        "equivalence": f"TOST on the same bootstrap, margin ±{m} in mean score, at {a}: a 'no change' prediction "
                       f"is 'held (equivalent)' when the gain is shown to lie within the margin, 'held "
                       f"(inconclusive)' when it neither learned nor was shown equivalent",
        "minimum_detectable_effect": f"{stats.minimum_detectable_effect(planning_sd, settings.eval_n, a):.3f} in "
                                     f"mean score at eval_n = {settings.eval_n}, one-sided {a}, 80% power, "
                                     f"per-task difference SD {planning_sd} (reported per family from the observed SD)",
        "multiplicity": "Holm-adjusted p-values across families, next to the raw ones",
        "held_out": (f"evaluation questions reserved by a keyed hash before anything is drawn (heldout.py), the share "
                     f"sized from a census of {settings.census_n} tasks; families with fewer than "
                     f"{settings.min_unseen} distinct reserved questions are not judged" if settings.reserve else
                     f"evaluation tasks are the first eval_n seeds whose question is in neither the training nor the "
                     f"prediction tasks; families with fewer than {settings.min_unseen} distinct unseen questions are "
                     f"not judged") + "; the same bootstrap resampling distinct questions (each counted once) beside it",
        "correlations": "Spearman rho of pass@1, pass@k, mean score, both signals and mean p(1-p) with the gain "
                        "in mean score and in accuracy",
    }


def family(result, settings: dict, evidence, trainee: dict) -> FamilyAnalysis:
    """The analysis of one finished family (a records.FamilyResult), with the committed alpha, margin
    and bootstrap size, on the tasks its evidence counts (evidence.Evidence)."""
    alpha, n = settings["alpha"], settings["bootstrap_n"]
    keep = [i for i, u in enumerate(evidence.unseen) if u]
    b, a = [result.before.scores[i] for i in keep], [result.after.scores[i] for i in keep]
    every = len(keep) == result.before.n
    gain = result.gain if every else stats.paired_gain(b, a, n) if keep else None
    improved = result.improved if every else bool(gain) and stats.improved(gain, alpha)
    correct = [[float(s >= 1.0) for s in part] for part in (b, a)]
    accuracy_gain = stats.paired_gain(*correct, n) if keep else None
    accuracy_improved = bool(accuracy_gain) and stats.improved(accuracy_gain, alpha)
    accuracy = (float(np.mean(correct[0])), float(np.mean(correct[1]))) if keep else (0.0, 0.0)
    groups = [evidence.groups[i] for i in keep]
    policy = best_policy(evidence.baselines)
    beats = policy is None or accuracy[1] > policy["accuracy"] + 1e-12
    real = accuracy_improved and beats
    learning = "real learning" if real else "matched by a policy" if accuracy_improved \
        else "partial credit only" if improved else "none"
    sd = float(np.std(np.subtract(a, b), ddof=1)) if len(keep) > 1 else 0.0
    equivalence = _equivalence(b, a, sd, settings) if keep else None
    screen = result.prediction
    predicted = screen["prediction"] == "improves"
    if predicted or real:
        judgement = "held" if real == predicted else "did not hold"
    else:
        judgement = EQUIVALENCE[equivalence["equivalent"] if equivalence else False]
    if learning in ("partial credit only", "matched by a policy"):
        judgement += f" ({learning})"
    flip = screen.get("flip")
    return FamilyAnalysis(
        family=result.family, prediction=screen["prediction"], side=rules.side(trainee, screen),
        borderline=None if flip is None else flip >= BORDERLINE, evaluated=result.before.n, counted=len(keep),
        distinct=len(set(groups)), accuracy=accuracy, gain=gain, improved=improved, accuracy_gain=accuracy_gain,
        accuracy_improved=accuracy_improved, by_question=stats.paired_gain(*_per_question(groups, b, a), n) if keep
        else None, policy=policy, real=real, learning=learning, equivalence=equivalence, judgement=judgement,
        held=real == predicted, judged=not evidence.not_judged and bool(keep), not_judged=tuple(evidence.not_judged),
        difference_sd=sd, mde=stats.minimum_detectable_effect(sd, max(1, len(keep)), alpha),
        distinct_answers=evidence.baselines.get("distinct_answers"))


EQUIVALENCE = {True: "held (equivalent)", False: "held (inconclusive)", None: "held (equivalence cannot be judged)"}
NO_SPREAD = ("every counted task's score moved by the same amount (SD of the differences 0): the bootstrap has "
             "no spread, so the test says nothing of the tasks it did not see")


def _equivalence(before: list, after: list, sd: float, settings: dict) -> dict:
    """TOST within ±margin; where the per-task differences have no spread (SD 0, as when no score changed, or
    a single task) its p is 0 or 1 whatever the margin, and 0 detectable gain is no power: not testable
    (equivalent None, and why): it cannot be judged, never "equivalent"."""
    test = stats.tost(before, after, settings["equivalence_margin"], settings["alpha"], settings["bootstrap_n"])
    return test | {"equivalent": None, "why": NO_SPREAD} if sd == 0 else test


def _per_question(groups: list[int], before: list[float], after: list[float]) -> tuple[list, list]:
    """Each distinct question once: the mean score of its tasks before and after."""
    by: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        by.setdefault(g, []).append(i)
    order = sorted(by)
    return ([float(np.mean([before[i] for i in by[g]])) for g in order],
            [float(np.mean([after[i] for i in by[g]])) for g in order])


def best_policy(baselines: dict) -> dict | None:
    """Of the model's own most common answer and the best policy, the one that answers more tasks right."""
    found = [c for c in (baselines.get("mode"), baselines.get("policy")) if c]
    return max(found, key=lambda c: (c["accuracy"], c["mean"])) if found else None


@dataclass(frozen=True)
class Rate:
    """A share of specs, with its Wilson 95% interval."""
    k: int
    n: int

    @property
    def rate(self) -> float | None:
        return self.k / self.n if self.n else None

    @property
    def ci95(self) -> tuple:
        return stats.wilson(self.k, self.n)


@dataclass(frozen=True)
class Comparison:
    """Shortlist's rule against one comparator on the judged specs."""
    rule: str
    says_improves: int  # judged specs it predicts improve
    hits: Rate  # its predictions that match real learning (a failed spec is a miss for every rule)
    hits_on_score: int  # ... that match the seed's 'improved' instead
    disagree: int  # judged specs where it and the rule predict differently
    mcnemar: dict | None  # specs only the rule got right, only this one, exact p (None: the rule itself)
    p_holm: float | None  # Holm within its family of comparisons (primary or exploratory)
    best_p: float | None  # what the commitment said the comparison could show at best (None: not recorded)
    primary: bool = False  # pre-registered as primary (rules.PRIMARY, as the commitment recorded it)


@dataclass(frozen=True)
class Across:
    """What needs every finished family at once."""
    judged: tuple  # family keys judged (committed) and finished, then those whose training failed
    held: Rate  # the rule on them (a failed spec counts, as not held)
    confusion: dict  # (predicted improves, really learned) -> count; (predicted, None): training failed
    sides: dict  # side -> Rate of real learning (precision on improves; miss rate on too hard and boundary);
    #              a failed spec counts against the rule: no learning on "improves", a miss elsewhere
    comparisons: tuple  # Comparison, the rule's own first
    borderline: dict  # "all", "without borderline" -> Rate; "unmeasured": specs without a flip chance
    holm: dict  # "score", "recorded", "accuracy": Holm-adjusted p per finished family, in their order
    correlations: tuple
    never: tuple  # verdicts no committed spec was given
    failed: tuple = ()  # judged specs whose training failed (or whose result failed verification)


def across(predictions: list[dict], results: list, analyses: list[FamilyAnalysis], trainee: dict,
           plan_: dict | None = None, failed: tuple = ()) -> Across:
    """results are records.FamilyResult, analyses what family() made of each, in the same order; plan_
    the committed analysis (its "power", where recorded); failed the keys of judged specs whose training
    failed: they stay in the count (design v2), as failed, right for no rule."""
    by_family = {p["family"]: p for p in predictions}
    screens = [by_family[r.family] for r in results]
    holm = {"score": stats.holm([a.gain["p"] if a.gain else 1.0 for a in analyses]),
            "recorded": stats.holm([r.gain["p"] for r in results]),  # the seed's, on every evaluation task
            "accuracy": stats.holm([a.accuracy_gain["p"] if a.accuracy_gain else 1.0 for a in analyses])}
    judged = [i for i, a in enumerate(analyses) if a.judged]
    j_screens = [screens[i] for i in judged] + [by_family[k] for k in failed]
    real = [analyses[i].real for i in judged] + [None] * len(failed)  # None: no outcome, right for no rule
    on_score = [analyses[i].improved for i in judged] + [None] * len(failed)
    said = {name: [f(s) for s in j_screens] for name, f in rules.comparators(trainee, j_screens).items()}
    ours = [x == y for x, y in zip(said[rules.RULE], real)]
    power = (plan_ or {}).get("power", {})
    rows = []
    for name, predicted in said.items():
        right = [x == y for x, y in zip(predicted, real)]
        m = None if name == rules.RULE else stats.mcnemar(sum(o and not t for o, t in zip(ours, right)),
                                                          sum(t and not o for o, t in zip(ours, right)))
        rows.append([name, sum(predicted), Rate(sum(right), len(real)), sum(x == y for x, y in zip(predicted, on_score)),
                     sum(x != y for x, y in zip(said[rules.RULE], predicted)), m,
                     power.get("comparisons", {}).get(name, {}).get("best_p")])
    primary = tuple(power.get("primary", ()))
    adjusted = iter(rules.holm_by_family([row[0] for row in rows[1:]], [row[5]["p"] for row in rows[1:]], primary))
    comparisons = tuple(Comparison(name, says, hits, score, d, m, None if m is None else next(adjusted), best,
                                   name in primary) for name, says, hits, score, d, m, best in rows)
    cells = {(p, o): sum(1 for a, b in zip(said[rules.RULE], real) if (a, b) == (p, o))
             for p in (True, False) for o in (True, False, None)}
    sides: dict[str, list] = {}
    for s_, r_ in zip(j_screens, real):  # a failed spec counts against the rule on its side
        side = rules.side(trainee, s_)
        sides.setdefault(side, []).append(r_ if r_ is not None else side != "improves")
    borderline = [analyses[i].borderline for i in judged] + \
        [None if by_family[k].get("flip") is None else by_family[k]["flip"] >= BORDERLINE for k in failed]
    steady = [o for o, b in zip(ours, borderline) if b is False]
    correlations = tuple({"signal": label, "key": key,
                          "score gain": stats.spearman([s[key] for s in screens], [r.gain["gain"] for r in results]),
                          "accuracy gain": stats.spearman([s[key] for s in screens],
                                                          [a.accuracy_gain["gain"] if a.accuracy_gain else 0.0
                                                           for a in analyses])}
                         for key, label in SIGNALS.items())
    verdicts = {p["verdict"] for p in predictions}
    return Across(
        judged=tuple(results[i].family for i in judged) + tuple(failed), held=Rate(sum(ours), len(ours)),
        confusion=cells, sides={name: Rate(sum(v), len(v)) for name, v in sides.items()}, comparisons=comparisons,
        borderline={"all": Rate(sum(ours), len(ours)), "without borderline": Rate(sum(steady), len(steady)),
                    "borderline": sum(b is True for b in borderline), "unmeasured": sum(b is None for b in borderline)},
        holm=holm, correlations=correlations,
        never=tuple(v for v in ("improves", "too hard", "already solved", "no signal") if v not in verdicts),
        failed=tuple(failed))
