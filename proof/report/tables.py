"""The report's tables, one function each (figures are figures.py's), every cell escaped (completions and prompts are
model output and user input: "<answer>" must show, not vanish into, or act as, markup). A row's numbers
rest on one task set: the counted evaluation tasks, where a table says so."""
from __future__ import annotations

import re

import pandas as pd

from proof import rules
from proof.report import figures
from proof.records import FamilyResult
from proof.report import cautions, prose
from proof.report.load import Report, status
from proof.report.numbers import ACCURACY, COUNT, SECONDS, SHARE, arrow, ci, p_format, plain, tidy
from shortlist import rule, screening


def _table(rows: list[dict], formats: dict, text: tuple[str, ...] = ()):
    """A table for the notebook and the HTML report, its text escaped. A family spec breaks only after its
    commas, never inside a name; a cell of numbers is marked `num`, which the report's
    style keeps on one line (shortlist/templates/report.html.j2); a column named in `text` (a model's answers) is
    marked `text`, which may break anywhere. A column no format is named for is written
    by numbers.plain(), never with a float's every digit."""
    frame = pd.DataFrame(rows)
    formats = {"family": spec_cell} | formats
    classes = frame.map(lambda v: "num" if _numeric(v) else "") if len(frame) else frame
    for column in (c for c in text if c in frame and len(frame)):  # a model's answers: text, never a number
        classes[column] = "text"
    return (frame.style.format(plain, na_rep="–", escape="html")
            .format({k: v for k, v in formats.items() if k in frame}, na_rep="–", escape="html")
            .set_td_classes(classes).hide(axis="index"))


_NUMERIC = re.compile(r"[\d\s+\-−–.,:/\[\]()<>≤≥→%]*\d[\d\s+\-−–.,:/\[\]()<>≤≥→%]*")


def _numeric(value) -> bool:
    """A number, or text made only of numbers and their signs: '0.280 → 0.409', '+0.129 [+0.043, +0.215]',
    '1 of 2' (a count of a count, which must not break into "1 of" and "2")."""
    if isinstance(value, bool):
        return False
    return isinstance(value, (int, float)) or (isinstance(value, str) and
                                               bool(_NUMERIC.fullmatch(value.replace(" of ", " / "))))


def spec_cell(value) -> str:
    """A family spec as HTML that breaks only after its commas: each part up to a comma kept whole (a `w` span,
    which the report's style keeps on one line, spaces inside a value included), the space after a comma
    kept as typed, a <wbr> where none was (nothing is added to the text a reader copies). Styler escapes a
    value before a callable formats it, and leaves what it returns as is."""
    if value is None or value != value:
        return "–"
    parts = re.split(r"(?<=,)", str(value))
    out = f'<span class="w">{parts[0]}</span>'
    for part in parts[1:]:
        rest = part.lstrip()
        out += (part[:len(part) - len(rest)] or "<wbr>") + f'<span class="w">{rest}</span>'
    return out


SHOWN = ("pass1", "passk", "mean", "signal_raw", "signal_correct", "learnability", "extracted", "clipped", "ceiling",
         "guess", "flip")  # the screen's columns the predictions table shows (screening.METRICS spells them)


def predictions_table(body: dict):
    """The committed screens (01 shows it from predictions.json, 03 from the report)."""
    k = body["trainee"]["group"]
    not_judged = body.get("not_judged", {})
    rows = [{"family": p["family"], **screening.labelled(p | {f: p.get(f) for f in SHOWN}, SHOWN),
             "verdict": p["verdict"], "prediction": p["prediction"], "side": rules.side(body["trainee"], p),
             "judged": "no: " + tidy("; ".join(not_judged[p["family"]])) if not_judged.get(p["family"]) else
             "yes" if p["family"] in not_judged else "–"} for p in body["predictions"]]
    return _table(rows, screening.formats(k, SHOWN))


def power_table(report: Report):
    """What each comparison could show at most: as committed before training, or (a run committed before it
    was recorded) computed now from the commitment alone."""
    from proof.report.load import power as power_
    power = power_(report.body, report.evidence)
    return _table([{"comparator": name, "primary": "yes" if row.get("primary") else "no",
                    "judged specs it disagrees on": row["disagree"],
                    "where the rule says improves": row["where the rule says improves"],
                    "where it says no change": row["where it says no change"], "best p": row["best_p"],
                    "best p (Holm)": row["best_p_holm"]} for name, row in power["comparisons"].items()],
                  {"best p": p_format(), "best p (Holm)": p_format(), "judged specs it disagrees on": COUNT})


def outcome_row(report: Report, key: str) -> dict:
    """The seed's analysis of one family, unchanged (every evaluation task), with Holm's adjustment beside its p."""
    row = {"family": key, "prediction": report.prediction(key)["prediction"]}
    result = report.results.get(key)
    if not isinstance(result, FamilyResult):
        return row | {"status": status(report, key)}
    b, a = result.before, result.after
    return row | {"evaluation tasks": b.n, "accuracy": arrow(b.accuracy, a.accuracy),
                  "mean score": arrow(b.mean_score, a.mean_score), "gain [95% CI]": ci(result.gain),
                  "p": result.gain["p"], "p (Holm)": report.across.holm["recorded"][report.done().index(result)],
                  "improved": "yes" if result.improved else "no", "status": "done"}


def outcomes_table(report: Report):
    n = report.settings["bootstrap_n"]
    return _table([outcome_row(report, k) for k in report.body["families"]],
                  {"p": p_format(n), "p (Holm)": p_format(n, len(report.done())), "evaluation tasks": COUNT})


def audit_table(report: Report):
    """What the reward pays before any model is asked, beside the model's own pass@1, and what the best
    policy earns on the counted evaluation tasks."""
    rows = []
    for key in report.body["families"]:
        p, e = report.prediction(key), report.evidence[key]
        a = report.analyses.get(key)
        policy = a.policy if a else None
        rows.append({"family": key, "verdict": p["verdict"],
                     "verdict by this version": e.verdict_now if e.verdict_now != p["verdict"] else "same",
                     "ceiling": e.ceiling, "guess rate": e.guess["accuracy"], "by": e.guess["answer"],
                     "pass@1": p["pass1"], "best policy on evaluation": policy["accuracy"] if policy else None,
                     "which": policy["answer"] if policy else None, "accuracy after": a.accuracy[1] if a else None,
                     "judged": "no: " + tidy("; ".join(e.not_judged)) if e.not_judged else "yes",
                     "measured": "now" if "audit" in e.measured else "before predicting"})
    return _table(rows, {c: SHARE for c in ("ceiling", "guess rate", "pass@1")}
                  | {"best policy on evaluation": ACCURACY, "accuracy after": ACCURACY})


def heldout_table(report: Report):
    """What each result rests on: its counted evaluation tasks, their distinct questions, the reservation,
    and the gain counted once per distinct question."""
    rows = []
    for r in report.done():
        a, e = report.analyses[r.family], report.evidence[r.family]
        res = e.reservation or {}
        rows.append({"family": r.family, "evaluation tasks": a.evaluated, "counted": a.counted,
                     "distinct questions": a.distinct, "seeds passed over": e.skipped,
                     "questions in the family (estimate)": res.get("estimate"), "reserved share": res.get("share"),
                     "gain in score [95% CI]": ci(a.gain), "gain per distinct question [95% CI]": ci(a.by_question),
                     "p per question": a.by_question["p"] if a.by_question else None})
    n = report.settings["bootstrap_n"]
    return _table(rows, {"evaluation tasks": COUNT, "counted": COUNT, "distinct questions": COUNT,
                         "seeds passed over": COUNT, "questions in the family (estimate)": COUNT,
                         "reserved share": SHARE, "p per question": p_format(n)})


def learning_table(report: Report):
    """Was a gain real learning? Accuracy and the best policy on the same counted tasks, and the judgement."""
    rows = []
    for i, r in enumerate(report.done()):
        a = report.analyses[r.family]
        rows.append({"family": r.family, "prediction": a.prediction, "counted tasks": a.counted,
                     "accuracy": arrow(*a.accuracy), "gain in accuracy [95% CI]": ci(a.accuracy_gain),
                     "p": a.accuracy_gain["p"] if a.accuracy_gain else None,
                     "p (Holm)": report.across.holm["accuracy"][i],
                     "best policy": a.policy["answer"] if a.policy else None,
                     "its accuracy": a.policy["accuracy"] if a.policy else None,
                     "distinct answers after": a.distinct_answers, "learning": a.learning,
                     "judgement": a.judgement if a.judged else "not judged"})
    n = report.settings["bootstrap_n"]
    return _table(rows, {"p": p_format(n), "p (Holm)": p_format(n, len(report.done())), "counted tasks": COUNT,
                         "its accuracy": ACCURACY, "distinct answers after": SHARE})


def sides_table(report: Report):
    """The rule on each side: real learning among the judged specs of each (one column for every side: what
    it means, precision or a miss, the side's label says)."""
    rows = []
    for name, label, _ in prose.SIDES:
        r = report.across.sides.get(name)
        rows.append({"side": label, "judged specs": r.n if r else 0, "really learned": r.k if r and r.n else None,
                     "share [Wilson 95% CI]": f"{r.rate:.2f} [{r.ci95[0]:.2f}, {r.ci95[1]:.2f}]" if r and r.n else None})
    return _table(rows, {"judged specs": COUNT, "really learned": COUNT})


def format_table(report: Report):
    """What the answers looked like before and after: extractable, how long, cut off, repetitive."""
    rows = [{"family": r.family, "extracted": arrow(r.before.extracted, r.after.extracted, SHARE),
             "answer length (chars)": arrow(r.before.answer_chars or 0, r.after.answer_chars or 0, "{:.1f}"),
             "completion length (chars)": arrow(r.before.completion_chars, r.after.completion_chars, "{:.1f}"),
             "clipped": arrow(r.before.clipped_share, r.after.clipped_share, SHARE),
             "repetitive": arrow(r.before.repetitive_share, r.after.repetitive_share, SHARE)}
            for r in report.done()]
    return _table(rows, {})


def equivalence_table(report: Report):
    """"No change" judged by an equivalence test, and what the counted tasks could have detected."""
    margin = report.settings["equivalence_margin"]
    rows = []
    for r in report.done():
        a = report.analyses[r.family]
        eq = a.equivalence or {"p": None, "equivalent": False}
        spread = eq["equivalent"] is not None  # SD 0: no p, no power to speak of (analysis._equivalence)
        rows.append({"family": r.family, "prediction": a.prediction, "counted tasks": a.counted,
                     "gain [95% CI]": ci(a.gain), f"TOST p (±{margin})": eq["p"] if spread else None,
                     "equivalent": {True: "yes", False: "no", None: "cannot be judged: SD 0"}[eq["equivalent"]],
                     "SD of differences": a.difference_sd, "detectable gain (80% power)": a.mde if spread else None,
                     "judgement": a.judgement if a.judged else "not judged"})
    return _table(rows, {f"TOST p (±{margin})": p_format(report.settings["bootstrap_n"]),
                         "SD of differences": ACCURACY, "detectable gain (80% power)": ACCURACY,
                         "counted tasks": COUNT})


def _clip(text: str | None, width: int = 90) -> str:
    if text is None:
        return "–"
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def examples_table(report: Report):
    """A few answers per family, before and after training."""
    rows = []
    for r in report.done():
        b, a = r.before, r.after
        changed = [i for i in range(b.n) if b.scores[i] != a.scores[i]]
        for i in (changed + [i for i in range(b.n) if i not in changed])[:prose.EXAMPLES]:
            rows.append({"family": r.family, "seed": b.seeds[i], "before": _clip(b.completions[i]),
                         "score before": b.scores[i], "after": _clip(a.completions[i]), "score after": a.scores[i]})
    return _table(rows, {"score before": SHARE, "score after": SHARE}, text=("before", "after"))


CHECKING = (("rescored", "scored again"), ("regenerated", "drawn again"))  # proof/verify.py's costly checks


def runs_table(report: Report):
    """Time per family, in seconds, and which decode engine served it."""
    rows = []
    for r in report.done():
        t = r.timings
        rows.append({"family": r.family, "evaluation before (s)": t.get("eval_before_s"), "training (s)": t.get("train_s"),
                     "evaluation after (s)": t.get("eval_after_s"), "s per step": t.get("seconds_per_step"),
                     "median step (s)": t.get("median_step_s"), "first step (s)": t.get("first_step_s"),
                     "resumed at step": t.get("resumed_at_step"),
                     "engine": ", ".join(sorted({e.get("engine", "?") for e in r.engine.values()})),
                     **{f"report: {what} (s)": report.checking.get(r.family, {}).get(key) for key, what in CHECKING}})
    return _table(rows, {c: SECONDS for c in ("evaluation before (s)", "training (s)", "evaluation after (s)",
                                              "first step (s)", *(f"report: {what} (s)" for _, what in CHECKING))}
                  | {"s per step": "{:.2f}", "median step (s)": "{:.2f}", "resumed at step": COUNT})


def rules_table(report: Report):
    """Shortlist's rule against simpler ones, on the same judged specs, with the exact paired test."""
    if not report.across.held.n:
        return prose.shown("No judged spec has finished: there is nothing to compare yet.")
    rows = []
    for c in report.across.comparisons:
        m = c.mcnemar
        rows.append({"rule": c.rule, "primary": None if m is None else "yes" if c.primary else "no",
                     "predicts improves": c.says_improves, "hits": f"{c.hits.k} of {c.hits.n}",
                     "hit rate [95% CI]": f"{c.hits.rate:.2f} [{c.hits.ci95[0]:.2f}, {c.hits.ci95[1]:.2f}]"
                     if c.hits.n else None, "hits on score": f"{c.hits_on_score} of {c.hits.n}",
                     "disagrees with the rule on": None if m is None else c.disagree,
                     "only the rule right / only this one": f"{m['only_first']} / {m['only_second']}" if m else None,
                     "McNemar p (exact)": m["p"] if m else None, "Holm": c.p_holm, "best possible": c.best_p})
    return _table(rows, {"McNemar p (exact)": p_format(), "Holm": p_format(), "best possible": p_format(),
                         "disagrees with the rule on": COUNT, "predicts improves": COUNT})


def confusion_table(report: Report):
    c = report.across.confusion
    rows = [{"predicted": "improves", "real learning": c[True, True], "no real learning": c[True, False],
             "training failed": c[True, None]},
            {"predicted": "no change", "real learning": c[False, True], "no real learning": c[False, False],
             "training failed": c[False, None]}]
    return _table(rows, {})


def correlations_table(report: Report):
    """Spearman's rho per signal; None below MIN_FAMILIES_FOR_RANKS finished families (say why instead)."""
    if len(report.done()) < figures.MIN_FAMILIES_FOR_RANKS:
        return None

    def cell(s):
        return f"{s['rho']:+.2f} (p {s['p']:.3f})" if s["rho"] is not None else f"– (n = {s['n']})"
    rows = [{"screening signal": c["signal"], "ρ with score gain": cell(c["score gain"]),
             "ρ with accuracy gain": cell(c["accuracy gain"])} for c in report.across.correlations]
    return _table(rows, {})


def scoring_table(report: Report):
    """How the reward itself behaved: the scorer's oddities per family, screening and training together."""
    return _table([{"family": key, **{c.replace("_", "-"): v for c, v in cautions.scoring_counts(report, key).items()}}
                   for key in report.body["families"]], {})


def plan_table(report: Report):
    """The analysis as declared in predictions.json before training (the power, in its own table)."""
    return _table([{"": k, "declared": v} for k, v in report.body["analysis"].items() if k != "power"], {})


def family_summary(result: FamilyResult):
    """The one-family table 02_train_family shows."""
    return _table([{"family": result.family, "prediction": result.prediction["prediction"],
                    "evaluation tasks": result.before.n, "accuracy": arrow(result.before.accuracy, result.after.accuracy),
                    "mean score": arrow(result.before.mean_score, result.after.mean_score),
                    "gain": result.gain["gain"], "p": result.gain["p"], "improved": result.improved,
                    "training (s)": result.timings["train_s"]}],
                  {"gain": "{:+.3f}", "p": p_format(result.settings["bootstrap_n"]), "training (s)": SECONDS})


def _engine_text(e: dict) -> str:
    def one(c: dict) -> str:
        text = f"{c['identical_rows']}/{c['rows']} rows identical over {c['tokens']} tokens"
        if c.get("tied_rows"):
            gaps = [t["gap"] for t in c.get("ties", []) if t.get("gap") is not None]
            text += f", {c['tied_rows']} at fp32 near-ties" + (f" (largest gap {max(gaps):.2g})" if gaps else "")
        if c.get("differing_rows"):
            text += f", {c['differing_rows']} differing"
        if c.get("max_drift") is not None:
            text += f", drift {c['max_drift']:.1e} of the logit scale (tie margin {c.get('tie_margin_relative', 0):.1e})"
        return text + f" ({c['seconds']:.1f} s)"
    checks = "; ".join(one(c) for c in e.get("checks", []))
    return f"{e.get('engine', '?')}" + (f" ({e['why']})" if e.get("why") else "") + (f"; self-check {checks}" if checks else "")


def micro_batches(done) -> str:
    """The batch_per_device each finished family trained at, as its result records it (a speed setting, not
    committed: an older commitment's settings may name another), with how many families trained at each."""
    counts: dict[str, int] = {}
    for r in done:
        used = r.timings.get("batch_per_device")
        key = " and ".join(map(str, used)) if isinstance(used, list) and used else "not recorded"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k} ({n} famil{'y' if n == 1 else 'ies'})" for k, n in sorted(counts.items())) or "–"


def provenance_table(report: Report):
    b = report.body
    starts = sorted(r.started_at for r in report.done())
    gpus = sorted({g for d in [b.get("device", {})] + [r.device for r in report.done()] for g in d.get("gpus", [])})
    t = b["trainee"]
    rows = [("model", b["model"]["name"]), ("model path", b["model"]["path"]),
            ("model revision", b["model"]["revision"] or "–"), ("predictions SHA-256", report.sha),
            ("predictions written", b["written_at"]), ("training first started", starts[0] if starts else "–"),
            ("trainee", ", ".join(f"{k} = {v!r}" for k, v in t.items())),
            ("rule", rule.text(report.trainee)),
            ("settings", ", ".join(f"{k} = {v}" for k, v in b["settings"].items())),
            ("micro-batch (speed only)", micro_batches(report.done())),
            ("seed ranges", ", ".join(f"{k} {a}..{z - 1}" for k, (a, z) in b["seed_ranges"].items())),
            ("task fingerprints", "SHA-256 of each family's tasks per draw, in predictions.json; every family "
                                  "was checked against them before its model loaded"),
            ("decode engine, predictions", _engine_text(b.get("engine", {}))),
            ("GPU", ", ".join(gpus) or "none (CPU)"),
            ("versions", ", ".join(f"{k} {v}" for k, v in b["versions"].items() if v)),
            ("scorer sandbox", ", ".join(f"{k}: {v}" for k, v in b["scoring"].get("confinement", {}).items()))]
    return _table([{"": k, "value": v} for k, v in rows], {})
