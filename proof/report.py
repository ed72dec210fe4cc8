"""The report: what the notebooks display, and the HTML that nbconvert renders from 03.

Every table and figure is built from the output folder alone (predictions.json and the family
results, read back as validated records), so the report can be rebuilt, or re-scored, without a
model or a GPU. Every caption is built from the committed settings; whatever could make the numbers
wrong (a smoke run, a fallen-back engine, degenerate completions, a corrupt result) is said above
the headline.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from proof import analysis, commit, evidence, figures, files, records, stats
from proof.records import Corrupt, FamilyResult, Failure
from shortlist import page, screening, sources
from shortlist.trainee import Trainee

DEGENERATE_SHARE = 0.5  # a family whose completions are mostly cut off or repetitive is named above the headline
TIMEOUT_SHARE = 0.01  # a family whose answers passed the scoring deadline more often than this is named too
EXAMPLES = 3  # answers shown per family, before and after


@dataclass
class Report:
    out: Path
    body: dict  # predictions.json
    sha: str
    results: dict  # family key -> FamilyResult | Failure | Corrupt; families not run are absent
    analyses: dict  # family key -> analysis.family() of its finished result
    across: dict  # analysis.across() of the finished families
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
    needs_scorer = "heldout" not in body or any(not r.baselines for r in done)
    if needs_scorer and scorer is None:
        from shortlist.scoring import Scorer
        with Scorer(deadline_s=body["settings"]["score_deadline_s"]) as own:
            found = evidence.gather(body, results, own)
    else:
        found = evidence.gather(body, results, scorer)
    analyses = {r.family: analysis.family(r, body["settings"], found[r.family]) for r in done}
    across = analysis.across(body["predictions"], done, [analyses[r.family] for r in done], body["trainee"])
    return Report(Path(out), body, sha, results, analyses, across, Trainee.from_dict(body["trainee"]), found)


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


# --- text ---------------------------------------------------------------------------------------
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
    """A run made before held-out meant unseen says that what it did not record was measured now."""
    what = sorted({m for e in report.evidence.values() for m in e.measured})
    if not what:
        return None
    return (f"**This run was made before held-out meant unseen and before the scorer audit.** Measured now, "
            f"from its committed tasks and saved answers ({', '.join(what)}): it is judged on its unseen "
            f"evaluation tasks only, by the rules this version commits before training.")


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
        if a["learning"] == "collapsed":
            c = a["constant"]
            by_family.setdefault(r.family, []).append(
                f"its gain is collapse, not learning: {a['distinct_answers']:.0%} of its answers after "
                f"training are distinct, and the constant answer {c['answer']} scores {c['mean']:.3f} "
                f"(accuracy {c['accuracy']:.3f}) against the trained model's {r.after.mean_score:.3f} "
                f"({r.after.accuracy:.3f}); it is not counted among the rule's held predictions")
    for key in report.body["families"]:
        counts = _scoring_counts(report, key)
        if counts["answers"] and counts["timeouts"] / counts["answers"] > TIMEOUT_SHARE:
            by_family.setdefault(key, []).append(
                f"{counts['timeouts']} of {counts['answers']} answers ({counts['timeouts'] / counts['answers']:.1%}) "
                f"passed the scoring deadline of {report.settings['score_deadline_s']} s and scored 0")
    out += [f"{key}: " + "; ".join(parts) + "." for key, parts in by_family.items()]
    for key, result in report.results.items():
        if isinstance(result, Corrupt):
            out.append(f"{key}: its result file is corrupt ({result.reason}); it is left out of every table.")
    return out


def family_line(report: Report, key: str) -> str:
    """One sentence: the verdict, the outcome on unseen questions, and what the outcome was."""
    p, e = report.prediction(key), report.evidence.get(key)
    said = f"**{key}**: predicted \"{p['prediction']}\" ({p['verdict']})"
    result = report.results.get(key)
    if not isinstance(result, FamilyResult):
        return f"{said}; {status(report, key)}."
    a = report.analyses[key]
    if not a["unseen"]:
        return f"{said}; every evaluation task repeats a seen question: nothing to judge on."
    acc = a["accuracy_gain"]
    outcome = (f"accuracy {_accuracy(result, e, 'before'):.3f} → {_accuracy(result, e, 'after'):.3f} "
               f"({acc['gain']:+.3f}), mean score gain {a['gain']['gain']:+.3f} (p {_p_text(a['gain']['p'], report)}) "
               f"on {a['unseen']} unseen questions ({a['distinct']} distinct)")
    label = {"accuracy": "real learning", "partial credit only": "partial credit only", "collapsed": "collapsed",
             "none": "no significant gain"}[a["learning"]]
    if a["not_judged"]:
        verdict = "not judged: " + "; ".join(a["not_judged"])
    elif a["learning"] == "collapsed":
        verdict = "not judged: collapsed"
    else:
        verdict = "held" if a["held"] else "did not hold"
    return f"{said}; {outcome}; {label}; {verdict}."


def _accuracy(result: FamilyResult, e, part: str) -> float:
    scores = getattr(result, part).scores
    keep = [s for s, u in zip(scores, e.unseen if e else [True] * len(scores)) if u]
    return sum(s >= 1.0 for s in keep) / len(keep) if keep else 0.0


def _p_text(p: float, report: Report) -> str:
    return _p(report.settings["bootstrap_n"])(p).replace("&lt;", "<")


def headline(report: Report) -> str:
    """The rule's accuracy on the families the proof can judge, against the simpler rules, and what the
    evidence can and cannot show; the families it cannot judge, named."""
    done, a = report.done(), report.analyses
    judged = report.across["judged"]
    held = sum(a[k]["held"] for k in judged)
    c = report.across["confusion"]
    if judged:
        text = (f"**The rule held on {held} of {page.count(len(judged), 'judged family', 'judged families')}** (accuracy {c['accuracy']:.2f}, "
                f"Wilson 95% CI {c['ci95'][0]:.2f}–{c['ci95'][1]:.2f}).")
    else:
        text = f"**The rule held on 0 of 0 judged families**: no family could be judged."
    raised = [r for r in done if a[r.family]["improved"]]
    real = sum(a[r.family]["learning"] == "accuracy" for r in raised)
    collapsed = sum(a[r.family]["learning"] == "collapsed" for r in raised)
    if raised:
        text += (f" Of the {page.count(len(raised), 'significant gain')} GRPO made: {real} real learning (more "
                 f"correct answers than before and than any constant answer), {len(raised) - real - collapsed} "
                 f"partial credit only, {collapsed} collapse.")
    else:
        text += " GRPO made no significant gain on any family."
    kept = [a[k]["judgement"] for k in judged if report.prediction(k)["prediction"] == "no change" and a[k]["held"]]
    if kept:
        text += (f" Among the \"no change\" predictions that held: {sum('equivalent' in j for j in kept)} shown to be "
                 f"no change within ±{report.settings['equivalence_margin']}, "
                 f"{sum('inconclusive' in j for j in kept)} inconclusive.")
    for row in report.across["rules"][1:]:
        if row["disagree"] == 0:
            text += f" The rule and '{row['rule']}' disagree on 0 families: this run cannot tell them apart."
    never = report.across["never"]
    if never:
        text += (f" No family was predicted {' or '.join(repr(v) for v in never)}, so this run cannot test "
                 f"{'that threshold' if len(never) == 1 else 'those thresholds'}.")
    apart = [r.family for r in done if r.family not in judged]
    if apart:
        text += f" Trained but not judged ({len(apart)}): " + ", ".join(f"{k} ({_why_not(a[k])})" for k in apart) + "."
    counts = {}
    for key in report.body["families"]:
        word = status(report, key).split(":")[0]
        if word != "done":
            counts[word] = counts.get(word, 0) + 1
    extra = ", ".join(f"{n} {word}" for word, n in counts.items())
    return text + (f" ({extra}.)" if extra else "")


def _why_not(a: dict) -> str:
    if a["not_judged"]:
        return "; ".join(w.split(" (")[0] if w.startswith(("unscorable", "guessable")) else "too few unseen questions"
                         for w in a["not_judged"])
    return "collapsed" if a["learning"] == "collapsed" else "no unseen questions"


def top(report: Report):
    """What goes above everything, as HTML: the banner and the warnings in boxes, the headline, then
    one line per family."""
    from IPython.display import HTML
    parts = [page.box("banner", b) for b in [banner(report), measured_here(report)] if b]
    parts += [page.box("warning", w) for w in warnings(report)]
    lines = "".join(f"<li>{page.markup(family_line(report, k))}</li>" for k in report.body["families"])
    return HTML("".join(parts) + f'<p class="shortlist-headline">{page.markup(headline(report))}</p>'
                f'<ul class="shortlist-families">{lines}</ul>')


def caption(report: Report, section: str) -> str:
    """The sentence under a section's title, with the numbers of this run."""
    s, t = report.settings, report.trainee
    n = s["eval_n"]
    return {
        "predictions": f"From {s['predict_tasks']} tasks × {t.group} samples per family (seeds {s['predict_seed']}.."
                       f"{s['predict_seed'] + s['predict_tasks'] - 1}), drawn as GRPO draws them (temperature "
                       f"{t.temperature}, at most {t.max_new_tokens} new tokens). *Signal* is the share of tasks whose "
                       f"samples disagree: on the raw reward (partial credit included) and on correctness; the rule "
                       f"reads the latter. *Clipped*: cut at max_new_tokens.",
        "outcomes": (f"Greedy answers to the same {n} held-out tasks before and after {s['steps']} GRPO steps: the "
                     f"first {n} seeds from {s['eval_seed']} whose question was in neither the training nor the "
                     f"prediction tasks. " if "heldout" in report.body else
                     f"Greedy answers to the same {n} tasks before and after {s['steps']} GRPO steps, as this run "
                     f"recorded them: seeds {s['eval_seed']}..{s['eval_seed'] + n - 1}, held out by number only, so "
                     f"many repeat training questions (the next table keeps the unseen ones, which the judgement "
                     f"rests on). ") +
                    f"The seed's analysis, unchanged: a paired bootstrap ({s['bootstrap_n']:,} resamples) on the mean "
                    f"score per task; *improved* when p ≤ {s['alpha']} and the gain is positive; *held* when that "
                    f"matches the prediction.",
        "audit": f"Before any model is asked: the *ceiling* is the share of the {s['predict_tasks']} prediction tasks "
                 f"whose gold answer, written as the trainee is asked to write answers and read back by its "
                 f"extraction ({t.extraction}), scores 1 (below {t.ceiling_min}: *unscorable*); the *guess rate* is "
                 f"the best share of full scores over answers that say nothing of the question (empty, 0, 1, 2, -1, "
                 f"True, False, yes, no, the most frequent gold answer, another task's answer); at {t.guess_min} or "
                 f"more and at least pass@1 the family is *guessable*. Neither is judged by the rule: they are trained "
                 f"and reported apart. After training, the best constant answer on the evaluation tasks is what a "
                 f"gain must beat to count as learning.",
        "heldout": f"Each result rests on its unseen evaluation questions; families with fewer than "
                   f"{s.get('min_unseen', 40)} distinct ones are not judged. The last columns count each distinct "
                   f"question once (the mean of its tasks), resampled with the same bootstrap.",
        "learning": f"The same bootstrap on accuracy (score ≥ 1). **partial credit only** means the score rose while "
                    f"the share of correct answers did not. *judged* also applies the equivalence test below to "
                    f"\"no change\" predictions.",
        "format": f"The share of answers the trainee's extraction ({t.extraction}) could find, their length, and the "
                  f"share of completions cut at {t.max_new_tokens} tokens or dominated by one repeated token.",
        "equivalence": f"A \"no change\" prediction holds *equivalent* only when an equivalence test (TOST, margin "
                       f"±{s['equivalence_margin']}) puts the gain within the margin; otherwise it is *inconclusive*. "
                       f"The last columns give the smallest gain {n} tasks could have detected (80% power).",
        "examples": f"The first {EXAMPLES} held-out tasks whose score changed (else the first {EXAMPLES}), answered "
                    f"greedily before and after training.",
        "runs": "Wall time of each family's parts, and the decode engine each used.",
        "curves": f"Per logged step ({s['logging_steps']}): the mean reward, the share of groups whose {t.group} "
                  f"rewards were all equal (no gradient), and the share of completions cut at max_new_tokens.",
        "rules": "Each rule predicts *improves* or *no change* from the same screens of the judged families; a hit "
                 "is a prediction that matches the seed's *improved* on unseen questions (and, in *hits on accuracy*, "
                 "a significant gain in accuracy). Where a rule and Shortlist's disagree, the exact McNemar test "
                 "compares the families only one of them got right.",
        "correlations": "Spearman's ρ between each screening signal and the measured gain, across families.",
    }[section]


# --- tables -------------------------------------------------------------------------------------
def _table(rows: list[dict], formats: dict):
    """A table for the notebook and the HTML report. Its text is escaped: completions and prompts are
    model output and user input, and "<answer>" must show, not vanish into (or act as) markup."""
    frame = pd.DataFrame(rows)
    return (frame.style.format(na_rep="–", escape="html")
            .format({k: v for k, v in formats.items() if k in frame}, na_rep="–", escape="html").hide(axis="index"))


SHOWN = ("pass1", "passk", "mean", "signal_raw", "signal_correct", "learnability", "extracted", "clipped", "ceiling",
         "guess")  # the screen's columns the predictions table shows (screening.METRICS spells them)


def predictions_table(body: dict):
    """The committed screens (01 shows it from predictions.json, 03 from the report)."""
    k = body["trainee"]["group"]
    not_judged = body.get("not_judged", {})
    rows = [{"family": p["family"], **screening.labelled(p | {f: p.get(f) for f in SHOWN}, SHOWN),
             "verdict": p["verdict"], "prediction": p["prediction"],
             "judged": "no: " + "; ".join(not_judged[p["family"]]) if not_judged.get(p["family"]) else
             "yes" if p["family"] in not_judged else "–"} for p in body["predictions"]]
    return _table(rows, screening.formats(k, SHOWN))


def _p(resamples: int, adjusted_for: int = 1):
    """A bootstrap p-value's format: 0 means no resample crossed, so it shows as below the resolution,
    never as a p of exactly 0. The resolution is 1/resamples, times the number of tests where Holm's
    adjustment multiplied it; the bound is rounded up, so that it stays a bound."""
    bound = max(adjusted_for, 1) / resamples  # no test yet (nothing finished): the unadjusted resolution
    exponent = math.floor(math.log10(bound))
    mantissa = math.ceil(round(bound / 10 ** exponent, 9))
    if mantissa == 10:
        mantissa, exponent = 1, exponent + 1

    def fmt(x) -> str:
        if x is None or x != x:
            return "–"
        return f"&lt; {mantissa}e{exponent}" if x == 0 else f"{x:.4f}"
    return fmt  # escaped here: Styler escapes the strings it formats, not what a callable returns


def _arrow(before, after, fmt="{:.3f}") -> str:
    return f"{fmt.format(before)} → {fmt.format(after)}"


def _ci(g: dict | None) -> str:
    return "–" if g is None else f"{g['gain']:+.3f} [{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}]"


COUNT = "{:.0f}"  # counts stay integers where a missing row makes pandas hold a column as floats


def outcome_row(report: Report, key: str) -> dict:
    """The seed's analysis of one family, unchanged, with Holm's adjustment beside its p."""
    row = {"family": key, "prediction": report.prediction(key)["prediction"]}
    result = report.results.get(key)
    if not isinstance(result, FamilyResult):
        return row | {"status": status(report, key)}
    b, a = result.before, result.after
    return row | {"held-out tasks": b.n, "accuracy": _arrow(b.accuracy, a.accuracy),
                  "mean score": _arrow(b.mean_score, a.mean_score), "gain [95% CI]": _ci(result.gain),
                  "p": result.gain["p"], "p (Holm)": report.across["holm"]["recorded"][report.done().index(result)],
                  "improved": "yes" if result.improved else "no", "held": "yes" if result.held else "no",
                  "status": "done"}


def outcomes_table(report: Report):
    n = report.settings["bootstrap_n"]
    return _table([outcome_row(report, k) for k in report.body["families"]],
                  {"p": _p(n), "p (Holm)": _p(n, len(report.done())), "held-out tasks": COUNT})


def audit_table(report: Report):
    """What the reward pays before any model is asked: the ceiling and the guess rate of each family,
    beside the model's own pass@1, and what a constant answer earns on the evaluation tasks."""
    rows = []
    for key in report.body["families"]:
        p, e = report.prediction(key), report.evidence[key]
        result = report.results.get(key)
        cf = e.baselines.get("content_free") if e.baselines else None
        rows.append({"family": key, "verdict": p["verdict"], "ceiling": e.ceiling, "guess rate": e.guess["accuracy"],
                     "by": e.guess["answer"], "pass@1": p["pass1"],
                     "best constant on evaluation": cf["accuracy"] if cf else None, "which": cf["answer"] if cf else None,
                     "accuracy after": result.after.accuracy if isinstance(result, FamilyResult) else None,
                     "judged": "no: " + "; ".join(e.not_judged) if e.not_judged else "yes",
                     "measured": "now" if "audit" in e.measured else "before predicting"})
    return _table(rows, {c: "{:.2f}" for c in ("ceiling", "guess rate", "pass@1", "best constant on evaluation")}
                  | {"accuracy after": "{:.3f}"})


def heldout_table(report: Report):
    """What each result rests on: how many evaluation questions were unseen and distinct, and the gain
    counted once per distinct question."""
    rows = []
    for r in report.done():
        a, e = report.analyses[r.family], report.evidence[r.family]
        rows.append({"family": r.family, "evaluation tasks": r.before.n, "unseen": a["unseen"],
                     "distinct unseen questions": a["distinct"], "seeds skipped as seen": e.skipped,
                     "gain in score, unseen [95% CI]": _ci(a["gain"]),
                     "gain per distinct question [95% CI]": _ci(a["by_question"]),
                     "p per question": a["by_question"]["p"] if a["by_question"] else None})
    n = report.settings["bootstrap_n"]
    return _table(rows, {"evaluation tasks": COUNT, "unseen": COUNT, "distinct unseen questions": COUNT,
                         "seeds skipped as seen": COUNT, "p per question": _p(n)})


def learning_table(report: Report):
    """Was a gain real learning? The same bootstrap on accuracy, and the judgement that follows."""
    rows = []
    for i, r in enumerate(report.done()):
        a = report.analyses[r.family]
        c = a["constant"]
        rows.append({"family": r.family, "prediction": r.prediction["prediction"], "unseen tasks": a["unseen"],
                     "gain in score": _ci(a["gain"]), "gain in accuracy [95% CI]": _ci(a["accuracy_gain"]),
                     "p": a["accuracy_gain"]["p"] if a["accuracy_gain"] else None,
                     "p (Holm)": report.across["holm"]["accuracy"][i],
                     "accuracy after": r.after.accuracy, "best constant answer": c["answer"] if c else None,
                     "its accuracy": c["accuracy"] if c else None,
                     "distinct answers after": a["distinct_answers"],
                     "learning": a["learning"], "judged": a["judgement"]})
    n = report.settings["bootstrap_n"]
    return _table(rows, {"p": _p(n), "p (Holm)": _p(n, len(report.done())), "unseen tasks": COUNT,
                         "accuracy after": "{:.3f}", "its accuracy": "{:.3f}", "distinct answers after": "{:.2f}"})


def format_table(report: Report):
    """What the answers looked like before and after: extractable, how long, cut off, repetitive."""
    rows = [{"family": r.family, "extracted": _arrow(r.before.extracted, r.after.extracted, "{:.2f}"),
             "answer length (chars)": _arrow(r.before.answer_chars or 0, r.after.answer_chars or 0, "{:.1f}"),
             "completion length (chars)": _arrow(r.before.completion_chars, r.after.completion_chars, "{:.1f}"),
             "clipped": _arrow(r.before.clipped_share, r.after.clipped_share, "{:.2f}"),
             "repetitive": _arrow(r.before.repetitive_share, r.after.repetitive_share, "{:.2f}")}
            for r in report.done()]
    return _table(rows, {})


def equivalence_table(report: Report):
    """"No change" judged by an equivalence test, and what eval_n could have detected."""
    margin = report.settings["equivalence_margin"]
    rows = []
    for r in report.done():
        a = report.analyses[r.family]
        eq = a["equivalence"] or {"p": None, "equivalent": False}
        rows.append({"family": r.family, "prediction": r.prediction["prediction"], "unseen tasks": a["unseen"],
                     "gain [95% CI]": _ci(a["gain"]), f"TOST p (±{margin})": eq["p"],
                     "equivalent": "yes" if eq["equivalent"] else "no",
                     "SD of differences": a["difference_sd"], "detectable gain (80% power)": a["mde"],
                     "judged": a["judgement"]})
    return _table(rows, {f"TOST p (±{margin})": _p(report.settings["bootstrap_n"]), "SD of differences": "{:.3f}",
                         "detectable gain (80% power)": "{:.3f}", "unseen tasks": COUNT})


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
        for i in (changed + [i for i in range(b.n) if i not in changed])[:EXAMPLES]:
            rows.append({"family": r.family, "seed": b.seeds[i], "before": _clip(b.completions[i]),
                         "score before": b.scores[i], "after": _clip(a.completions[i]), "score after": a.scores[i]})
    return _table(rows, {"score before": "{:.2f}", "score after": "{:.2f}"})


def _minutes(seconds) -> float | None:
    return seconds / 60 if isinstance(seconds, (int, float)) else None


def runs_table(report: Report):
    """Time per family, and which decode engine served it."""
    rows = []
    for r in report.done():
        t = r.timings
        rows.append({"family": r.family, "evaluation before (min)": _minutes(t.get("eval_before_s")),
                     "training (min)": _minutes(t.get("train_s")), "evaluation after (min)": _minutes(t.get("eval_after_s")),
                     "s per step": t.get("seconds_per_step"), "median step (s)": t.get("median_step_s"),
                     "first step (s)": t.get("first_step_s"),
                     "resumed at step": t.get("resumed_at_step"),
                     "engine": ", ".join(sorted({e.get("engine", "?") for e in r.engine.values()}))})
    return _table(rows, {c: "{:.1f}" for c in ("evaluation before (min)", "training (min)", "evaluation after (min)",
                                               "first step (s)")} | {"s per step": "{:.2f}", "median step (s)": "{:.2f}",
                                                                     "resumed at step": "{:.0f}"})


def rules_table(report: Report):
    """Shortlist's rule against simpler ones, on the same (judged) families, with the exact paired test."""
    rows = []
    for r in report.across["rules"]:
        m = r.get("mcnemar")
        rows.append({"rule": r["rule"], "predicted improves": r["predicted improves"], "hits": f"{r['hits']} of {r['of']}",
                     "hit rate [95% CI]": f"{r['hit rate']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]"
                     if r["hit rate"] is not None else None, "hits on accuracy": f"{r['hits on accuracy']} of {r['of']}",
                     "disagrees with the rule on": r.get("disagree"),
                     "only the rule right / only this one": f"{m['only_first']} / {m['only_second']}" if m else None,
                     "McNemar p (exact)": m["p"] if m else None})
    return _table(rows, {"McNemar p (exact)": "{:.3f}", "disagrees with the rule on": COUNT})


def rules_text(report: Report) -> str:
    """What the comparison can and cannot show, in words."""
    judged = report.across["judged"]
    lines = [f"The comparison rests on {len(judged)} judged "
             f"{'family' if len(judged) == 1 else 'families'} (unscorable, guessable, collapsed families and those "
             f"short of unseen questions are left out)."]
    for r in report.across["rules"][1:]:
        m = r["mcnemar"]
        if not r["disagree"]:
            lines.append(f"The rule and '{r['rule']}' disagree on 0 families: this run cannot tell them apart.")
        elif m["discordant"] == 0:
            lines.append(f"The rule and '{r['rule']}' disagree on {page.count(r['disagree'], 'family', 'families')} but are right on the "
                         f"same ones: no evidence either way.")
        else:
            better = "the rule" if m["only_first"] > m["only_second"] else f"'{r['rule']}'" \
                if m["only_second"] > m["only_first"] else "neither"
            lines.append(f"Against '{r['rule']}': {page.count(m['only_first'], 'family', 'families')} only the rule got right, "
                         f"{m['only_second']} only it did; {better} does better here, exact McNemar p {m['p']:.3f}"
                         + (" (not significant)" if m["p"] > report.settings["alpha"] else "") + ".")
    if report.across["never"]:
        lines.append(f"No family was predicted {' or '.join(repr(v) for v in report.across['never'])}: those "
                     f"verdicts were not tested.")
    return " ".join(lines)


def confusion_table(report: Report):
    c = report.across["confusion"]
    rows = [{"predicted": "improves", "improved": c["improves, improved"], "not improved": c["improves, not improved"]},
            {"predicted": "no change", "improved": c["no change, improved"],
             "not improved": c["no change, not improved"]}]
    return _table(rows, {})


def confusion_text(report: Report) -> str:
    c = report.across["confusion"]
    if c["accuracy"] is None:
        return "No family finished, so the rule has no accuracy yet."
    return (f"The rule's accuracy: {c['accuracy']:.2f} (Wilson 95% CI {c['ci95'][0]:.2f}–{c['ci95'][1]:.2f}) "
            f"over {page.count(sum(v for k, v in c.items() if ',' in k), 'family', 'families')}.")


def correlations_table(report: Report):
    """Spearman's rho per signal; None below MIN_FAMILIES_FOR_RANKS finished families (say why instead)."""
    if len(report.done()) < figures.MIN_FAMILIES_FOR_RANKS:
        return None

    def cell(s):
        return f"{s['rho']:+.2f} (p {s['p']:.3f})" if s["rho"] is not None else f"– (n = {s['n']})"
    rows = [{"screening signal": c["signal"], "ρ with score gain": cell(c["score gain"]),
             "ρ with accuracy gain": cell(c["accuracy gain"])} for c in report.across["correlations"]]
    return _table(rows, {})


def correlations_section(report: Report) -> list:
    """The caption, the table and the scatter; below MIN_FAMILIES_FOR_RANKS finished families, a sentence."""
    from IPython.display import Markdown
    n = len(report.done())
    if n < figures.MIN_FAMILIES_FOR_RANKS:
        return [Markdown(f"Only {n} {'family' if n == 1 else 'families'} finished: ranks need "
                         f"{figures.MIN_FAMILIES_FOR_RANKS} at least, so no correlation or scatter is shown.")]
    return [Markdown(caption(report, "correlations")), correlations_table(report), figures.show(scatter_figure(report))]


SCORING = ("answers", "unextracted", "timeouts", "crashes", "exceptions", "non_finite", "clamped", "refused")


def _scoring_counts(report: Report, key: str) -> dict:
    """What the scorer did with a family's answers, screening and training together."""
    counts = dict.fromkeys(SCORING, 0)
    result = report.results.get(key)
    for part in (report.prediction(key).get("scoring", {}), result.scoring if isinstance(result, FamilyResult) else {}):
        for c in SCORING:
            counts[c] += part.get(c, 0)
    return counts


def scoring_table(report: Report):
    """How the reward itself behaved: the scorer's oddities per family, screening and training together."""
    return _table([{"family": key, **{c.replace("_", "-"): v for c, v in _scoring_counts(report, key).items()}}
                   for key in report.body["families"]], {})


def plan_table(report: Report):
    """The analysis as declared in predictions.json before training."""
    return _table([{"": k, "declared": v} for k, v in report.body["analysis"].items()], {})


def family_summary(result: FamilyResult):
    """The one-family table 02_train_family shows."""
    return _table([{"family": result.family, "prediction": result.prediction["prediction"],
                    "held-out tasks": result.before.n, "accuracy": _arrow(result.before.accuracy, result.after.accuracy),
                    "mean score": _arrow(result.before.mean_score, result.after.mean_score),
                    "gain": result.gain["gain"], "p": result.gain["p"], "improved": result.improved,
                    "held": result.held, "minutes training": result.timings["train_s"] / 60}],
                  {"gain": "{:+.3f}", "p": _p(result.settings["bootstrap_n"]), "minutes training": "{:.1f}"})


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


def provenance_table(report: Report):
    b = report.body
    starts = sorted(r.started_at for r in report.done())
    gpus = sorted({g for d in [b.get("device", {})] + [r.device for r in report.done()] for g in d.get("gpus", [])})
    t = b["trainee"]
    rows = [("model", b["model"]["name"]), ("model path", b["model"]["path"]),
            ("model revision", b["model"]["revision"] or "–"), ("predictions SHA-256", report.sha),
            ("predictions written", b["written_at"]), ("training first started", starts[0] if starts else "–"),
            ("trainee", ", ".join(f"{k} = {v!r}" for k, v in t.items())),
            ("rule", report.trainee.rule_text()),
            ("settings", ", ".join(f"{k} = {v}" for k, v in b["settings"].items())),
            ("seed ranges", ", ".join(f"{k} {a}..{z - 1}" for k, (a, z) in b["seed_ranges"].items())),
            ("task fingerprints", "SHA-256 of each family's tasks per seed range, in predictions.json; every family "
                                  "was checked against them before its model loaded"),
            ("decode engine, predictions", _engine_text(b.get("engine", {}))),
            ("GPU", ", ".join(gpus) or "none (CPU)"),
            ("versions", ", ".join(f"{k} {v}" for k, v in b["versions"].items() if v)),
            ("scorer sandbox", ", ".join(f"{k}: {v}" for k, v in b["scoring"].get("confinement", {}).items()))]
    return _table([{"": k, "value": v} for k, v in rows], {})


def notebook_links(report: Report) -> str:
    """HTML links, relative to report.html, to each executed notebook."""
    items = [("01_predict", "notebooks/01_predict.ipynb", "predictions")]
    for key in report.body["families"]:
        items.append((key, f"notebooks/02_train_family.{sources.parse(key).slug}.ipynb", status(report, key)))
    items.append(("03_report", "notebooks/03_report.ipynb", "this report"))
    from html import escape  # a family key, a slug and a corrupt record's reason are text, never markup
    return "<ul>" + "".join(f'<li><a href="{escape(href)}">{escape(name)}</a> — {escape(what)}</li>'
                            for name, href, what in items) + "</ul>"


# --- figures ------------------------------------------------------------------------------------
def curves_figure(report: Report):
    return figures.curves(report.done())


def forest_figure(report: Report):
    return figures.forest(report.done())


def scatter_figure(report: Report):
    return figures.scatter(report.done(), report.body["predictions"], report.across["correlations"])


# --- HTML ---------------------------------------------------------------------------------------
def render(executed: Path, dest: Path) -> Path:
    """report.html from the executed 03 notebook: no code, no stderr, nothing fetched from the network."""
    import nbformat
    nb = nbformat.read(executed, as_version=4)
    nb.cells = [c for c in nb.cells if "kaggle" not in c.metadata.get("tags", [])]  # for the notebook's reader only
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
    files.write_text(dest, page.render(nb, "Shortlist: the proof"))
    return dest
