"""The rule and the rules it is tested against, and what the test can show, declared before training.

Every comparator is a function of a family's committed screen: it says "improves" or not. The proof
judges the rule on the judged specs (fixed at commit: not an audit verdict, enough reserved
questions) and compares it with each comparator on the same specs with an exact McNemar test, Holm-
adjusted across comparators. Before any training, power() records what each comparison could show
at most: how many judged specs the two rules disagree on (the only specs that can tell them apart),
and the exact p if every one of them went the rule's way. A comparison with no disagreement cannot
come out either way, and the commitment says so before anyone looks.

The second rule ("any correct sample") was written after examples/smollm2-22, where two "too hard"
specs with a pass@1 of 0.005 and 0.010 improved: after the audit it calls every spec with a correct
screening sample "improves" (unless already solved). It is committed with the predictions it is
tested on, so only specs chosen after it was written can test it.

Design v2 (docs/design-v2.md, written before v3's catalog) pre-registers two PRIMARY comparisons:
"always improves" (does screening beat training everything?) and "pass@1 > 0" (do the band and the
signal add anything to "some sample was correct"?). Holm adjusts across the primary ones alone, so a
side of about ten specs can reach p <= 0.05; the others are exploratory, Holm-adjusted among
themselves and reported apart. A commitment records which were primary (power()["primary"]); one made
before design v2 records none, and all its comparisons stay one Holm family, as committed.
"""
from __future__ import annotations

import numpy as np

from proof import stats
from shortlist.screening import BORDERLINE
from shortlist.rule import AUDIT_VERDICTS as AUDIT

RULE = "Shortlist's rule"
SECOND = "any correct sample (the second rule)"
PRIMARY = ("always improves", "pass@1 > 0")  # pre-registered (design v2): Holm across these two alone


def second_rule(trainee: dict, p: dict) -> bool:
    """The second rule: the audit first, then "improves" wherever a screening sample was correct."""
    return p["verdict"] not in AUDIT and p["mean"] < trainee["pass_max"] and p["pass1"] > 0


def comparators(trainee: dict, screens: list[dict]) -> dict:
    """name -> (screen -> predicts improvement), the rule first. screens: those compared (the median
    of their learnability is one comparator's cut)."""
    band = (trainee["pass_min"], trainee["pass_max"])
    median = float(np.median([p["learnability"] for p in screens])) if screens else None  # none of no spec
    signal = trainee["grpo_signal_min"]
    return {
        RULE: lambda p: p["prediction"] == "improves",
        SECOND: lambda p: second_rule(trainee, p),
        "always improves": lambda p: True,
        "never improves": lambda p: False,
        "pass@1 > 0": lambda p: p["pass1"] > 0,
        f"pass@1 in [{band[0]}, {band[1]})": lambda p: band[0] <= p["pass1"] < band[1],
        "mean p(1−p) above its median" + (f" ({median:.3f})" if median is not None else ""):
            lambda p: median is not None and p["learnability"] > median,
        f"signal (raw) ≥ {signal}": lambda p: p["signal_raw"] >= signal,
        f"signal (correctness) ≥ {signal}": lambda p: p["signal_correct"] >= signal,
    }


def side(trainee: dict, p: dict) -> str:
    """Which side of the rule a committed screen tests: "improves", "boundary" (too hard at 0 < pass@1 <
    pass_min), "too hard" (at pass@1 0), "other" (already solved, no signal) or "control" (the audit)."""
    if p["verdict"] in AUDIT:
        return "control"
    if p["prediction"] == "improves":
        return "improves"
    if p["verdict"] == "too hard":
        return "boundary" if 0 < p["pass1"] < trainee["pass_min"] else "too hard"
    return "other"


def holm_by_family(names: list[str], ps: list[float], primary: tuple) -> list[float]:
    """Holm's adjustment within each family of comparisons: the primary ones together, the rest together
    (with no primary recorded, one family: how a commitment before design v2 was analysed)."""
    adjusted = [0.0] * len(ps)
    for group in ([i for i, n in enumerate(names) if n in primary], [i for i, n in enumerate(names) if n not in primary]):
        for i, q in zip(group, stats.holm([ps[i] for i in group])):
            adjusted[i] = q
    return adjusted


def power(trainee: dict, screens: list[dict], not_judged: dict, primary: tuple = PRIMARY) -> dict:
    """What each comparison can show at most, from the commitment alone: the judged specs per side, and
    per comparator the specs it disagrees with the rule on (split by the rule's side) and the exact p
    (raw and Holm within its family: primary or exploratory) were every disagreement to go the rule's way."""
    judged = [p for p in screens if not not_judged.get(p["family"])]
    rules = comparators(trainee, judged)
    ours = [rules[RULE](p) for p in judged]
    rows = {}
    for name, predicts in list(rules.items())[1:]:
        theirs = [predicts(p) for p in judged]
        on_improves = sum(o != t for o, t in zip(ours, theirs) if o)
        on_no_change = sum(o != t for o, t in zip(ours, theirs) if not o)
        d = on_improves + on_no_change
        rows[name] = {"disagree": d, "where the rule says improves": on_improves,
                      "where it says no change": on_no_change, "best_p": stats.mcnemar(d, 0)["p"]}
    unknown = set(primary) - set(rules)
    if unknown:
        raise ValueError(f"primary comparisons {sorted(unknown)} are not comparators of rules.comparators()")
    for (name, row), adjusted in zip(rows.items(), holm_by_family(list(rows), [r["best_p"] for r in rows.values()],
                                                                  primary)):
        row["best_p_holm"] = adjusted
        row["primary"] = name in primary
    sides: dict[str, int] = {}
    for p in judged:
        sides[side(trainee, p)] = sides.get(side(trainee, p), 0) + 1
    return {"judged": len(judged), "sides": sides, "comparisons": rows, "primary": list(primary),
            "borderline": sum(bool(p.get("flip") is not None and p["flip"] >= BORDERLINE) for p in judged)}
