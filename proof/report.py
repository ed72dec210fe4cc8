"""The report: what the notebooks display, and the HTML that nbconvert renders from 03.

Every table and figure is built from the output folder alone (predictions.json and the family
results, read back as validated records), so the report can be rebuilt, or re-scored, without a
model or a GPU. Every caption is built from the committed settings; whatever could make the numbers
wrong (a smoke run, a fallen-back engine, degenerate completions, a corrupt result) is said above
the headline.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from proof import analysis, commit, figures, files, records
from proof.records import Corrupt, FamilyResult, Failure
from shortlist import page, sources
from shortlist.trainee import Trainee

DEGENERATE_SHARE = 0.5  # a family whose completions are mostly cut off or repetitive is named above the headline
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

    @property
    def settings(self) -> dict:
        return self.body["settings"]

    def prediction(self, key: str) -> dict:
        return commit.prediction_for(self.body, key)

    def done(self) -> list[FamilyResult]:
        return [self.results[k] for k in self.body["families"] if isinstance(self.results.get(k), FamilyResult)]


def load(out) -> Report:
    """Predictions (hash checked) and every result that was made against them, validated."""
    body, sha = commit.committed(out)
    results = {}
    for key in body["families"]:
        result = records.read(files.result(out, sources.parse(key).slug), sha)
        if result is not None:
            results[key] = result
    done = [results[k] for k in body["families"] if isinstance(results.get(k), FamilyResult)]
    analyses = {r.family: analysis.family(r, body["settings"]) for r in done}
    across = analysis.across(body["predictions"], done, [analyses[r.family] for r in done], body["trainee"])
    return Report(Path(out), body, sha, results, analyses, across, Trainee.from_dict(body["trainee"]))


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
        parts.append("It was made with the offline **tiny** test model (0.2 M parameters), so its numbers exercise "
                     "the pipeline and say nothing about any real model.")
    if small:
        parts.append("Its settings are far below the protocol's: " + ", ".join(small) + ".")
    return ("**This is a smoke run, not a finding.** " + " ".join(parts)) if parts else None


def warnings(report: Report) -> list[str]:
    """Everything that could make the numbers wrong, one line each, for above the headline."""
    out = []
    engines = [("predictions (01)", report.body.get("engine", {}))] + [
        (f"{r.family} ({phase})", e) for r in report.done() for phase, e in r.engine.items()]
    for where, e in engines:
        if e.get("checks") and any(c["identical_rows"] != c["rows"] for c in e["checks"]):
            out.append(f"The fast decode engine disagreed with generate() in {where} and stepped aside: {e.get('why')}.")
        elif e.get("engine") == "generate" and e.get("why") and "transformers" in e["why"]:
            out.append(f"The fast decode engine was not used in {where}: {e['why']}.")
    for p in report.body["predictions"]:
        for what, share in (("cut at max_new_tokens", p.get("clipped", 0)),
                            ("dominated by one repeated token", p.get("repetitive", 0))):
            if share > DEGENERATE_SHARE:
                out.append(f"{p['family']}: {share:.0%} of the screening samples were {what}.")
    for r in report.done():
        for part, e in (("before", r.before), ("after", r.after)):
            for what, share in (("cut at max_new_tokens", e.clipped_share),
                                ("dominated by one repeated token", e.repetitive_share)):
                if share > DEGENERATE_SHARE:
                    out.append(f"{r.family}: {share:.0%} of the greedy answers {part} training were {what}.")
    for key, result in report.results.items():
        if isinstance(result, Corrupt):
            out.append(f"{key}: its result file is corrupt ({result.reason}); it is left out of every table.")
    return out


def headline(report: Report) -> str:
    """How many predictions held, and how many of the gains were real learning, in plain words."""
    done = report.done()
    held = sum(r.held for r in done)
    raised = [r for r in done if r.improved]
    real = sum(report.analyses[r.family]["learning"] == "accuracy" for r in raised)
    if raised:
        gains = (f"and of the {len(raised)} significant gains GRPO made, {real} were real learning (more correct "
                 f"answers) and {len(raised) - real} were partial credit only")
    else:
        gains = "and GRPO made no significant gain on any of them"
    text = f"**The rule held on {held} of {len(done)} families**, {gains}."
    kept = [report.analyses[r.family]["judgement"] for r in done if r.prediction["prediction"] == "no change" and r.held]
    if kept:
        text += (f" Among the \"no change\" predictions that held: {sum('equivalent' in j for j in kept)} shown to be "
                 f"no change within ±{report.settings['equivalence_margin']}, "
                 f"{sum('inconclusive' in j for j in kept)} inconclusive.")
    counts = {}
    for key in report.body["families"]:
        word = status(report, key).split(":")[0]
        if word != "done":
            counts[word] = counts.get(word, 0) + 1
    extra = ", ".join(f"{n} {word}" for word, n in counts.items())
    return text + (f" ({extra}.)" if extra else "")


def top(report: Report):
    """What goes above everything, as HTML: the banner and the warnings in boxes, then the headline."""
    import html
    import re

    from IPython.display import HTML

    def markup(text: str) -> str:
        return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html.escape(text, quote=False))
    box = ('<div class="shortlist-{kind}" style="background:{bg};border-left:6px solid {edge};padding:0.6rem 1rem;'
           'margin:0.6rem 0">{text}</div>')
    parts = [box.format(kind="banner", bg="#fff3cd", edge="#e0a800", text=markup(b)) for b in [banner(report)] if b]
    parts += [box.format(kind="warning", bg="#f8d7da", edge="#b02a37", text="⚠ " + markup(w)) for w in warnings(report)]
    return HTML("".join(parts) + f'<p class="shortlist-headline">{markup(headline(report))}</p>')


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
        "outcomes": f"Greedy answers to the same {n} held-out tasks (seeds {s['eval_seed']}..{s['eval_seed'] + n - 1}) "
                    f"before and after {s['steps']} GRPO steps. The seed's analysis, unchanged: a paired bootstrap "
                    f"({s['bootstrap_n']:,} resamples) on the mean score per task; *improved* when p ≤ {s['alpha']} and "
                    f"the gain is positive; *held* when that matches the prediction.",
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
        "rules": "Each rule predicts *improves* or *no change* from the same screens; a hit is a prediction that "
                 "matches the seed's *improved* (and, in the last column, a significant gain in accuracy).",
        "correlations": "Spearman's ρ between each screening signal and the measured gain, across families.",
    }[section]


# --- tables -------------------------------------------------------------------------------------
def _table(rows: list[dict], formats: dict):
    """A table for the notebook and the HTML report. Its text is escaped: completions and prompts are
    model output and user input, and "<answer>" must show, not vanish into (or act as) markup."""
    frame = pd.DataFrame(rows)
    return (frame.style.format(na_rep="–", escape="html")
            .format({k: v for k, v in formats.items() if k in frame}, na_rep="–", escape="html").hide(axis="index"))


def predictions_table(body: dict):
    """The committed screens (01 shows it from predictions.json, 03 from the report)."""
    k = body["trainee"]["group"]
    rows = [{"family": p["family"], "pass@1": p["pass1"], f"pass@{k}": p["passk"], "mean score": p["mean"],
             "signal (raw)": p["signal_raw"], "signal (correct)": p["signal_correct"], "mean p(1−p)": p["learnability"],
             "extracted": p["extracted"], "clipped": p.get("clipped"), "verdict": p["verdict"],
             "prediction": p["prediction"]} for p in body["predictions"]]
    return _table(rows, {c: "{:.2f}" for c in ("pass@1", f"pass@{k}", "signal (raw)", "signal (correct)", "extracted",
                                               "clipped")} | {"mean score": "{:.3f}", "mean p(1−p)": "{:.3f}"})


def _p(resamples: int, adjusted_for: int = 1):
    """A bootstrap p-value's format: 0 means no resample crossed, so it shows as below the resolution,
    never as a p of exactly 0. The resolution is 1/resamples, times the number of tests where Holm's
    adjustment multiplied it; the bound is rounded up, so that it stays a bound."""
    bound = adjusted_for / resamples
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


def _ci(g: dict) -> str:
    return f"{g['gain']:+.3f} [{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}]"


def outcome_row(report: Report, key: str) -> dict:
    """The seed's analysis of one family, unchanged, with Holm's adjustment beside its p."""
    row = {"family": key, "prediction": report.prediction(key)["prediction"]}
    result = report.results.get(key)
    if not isinstance(result, FamilyResult):
        return row | {"status": status(report, key)}
    b, a = result.before, result.after
    return row | {"held-out tasks": b.n, "accuracy": _arrow(b.accuracy, a.accuracy),
                  "mean score": _arrow(b.mean_score, a.mean_score), "gain [95% CI]": _ci(result.gain),
                  "p": result.gain["p"], "p (Holm)": report.across["holm"]["score"][report.done().index(result)],
                  "improved": "yes" if result.improved else "no", "held": "yes" if result.held else "no",
                  "status": "done"}


def outcomes_table(report: Report):
    n = report.settings["bootstrap_n"]
    return _table([outcome_row(report, k) for k in report.body["families"]],
                  {"p": _p(n), "p (Holm)": _p(n, len(report.done()))})


def learning_table(report: Report):
    """Was a gain real learning? The same bootstrap on accuracy, and the judgement that follows."""
    rows = []
    for i, r in enumerate(report.done()):
        a = report.analyses[r.family]
        rows.append({"family": r.family, "prediction": r.prediction["prediction"], "held-out tasks": r.before.n,
                     "gain in score": _ci(r.gain), "gain in accuracy [95% CI]": _ci(a["accuracy_gain"]),
                     "p": a["accuracy_gain"]["p"], "p (Holm)": report.across["holm"]["accuracy"][i],
                     "learning": a["learning"], "judged": a["judgement"]})
    n = report.settings["bootstrap_n"]
    return _table(rows, {"p": _p(n), "p (Holm)": _p(n, len(report.done()))})


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
        rows.append({"family": r.family, "prediction": r.prediction["prediction"], "held-out tasks": r.before.n,
                     "gain [95% CI]": _ci(r.gain), f"TOST p (±{margin})": a["equivalence"]["p"],
                     "equivalent": "yes" if a["equivalence"]["equivalent"] else "no",
                     "SD of differences": a["difference_sd"], "detectable gain (80% power)": a["mde"],
                     "judged": a["judgement"]})
    return _table(rows, {f"TOST p (±{margin})": _p(report.settings["bootstrap_n"]), "SD of differences": "{:.3f}",
                         "detectable gain (80% power)": "{:.3f}"})


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
    """Shortlist's rule against simpler ones, on the same families."""
    rows = [{"rule": r["rule"], "predicted improves": r["predicted improves"], "hits": f"{r['hits']} of {r['of']}",
             "hit rate [95% CI]": f"{r['hit rate']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]"
             if r["hit rate"] is not None else None, "hits on accuracy": f"{r['hits on accuracy']} of {r['of']}"}
            for r in report.across["rules"]]
    return _table(rows, {})


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
            f"over {sum(v for k, v in c.items() if ',' in k)} families.")


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


def scoring_table(report: Report):
    """How the reward itself behaved: the scorer's oddities per family, screening and training together."""
    columns = ("answers", "unextracted", "timeouts", "crashes", "exceptions", "non_finite", "clamped", "refused")
    rows = []
    for key in report.body["families"]:
        counts = dict.fromkeys(columns, 0)
        result = report.results.get(key)
        for part in (report.prediction(key).get("scoring", {}),
                     result.scoring if isinstance(result, FamilyResult) else {}):
            for c in columns:
                counts[c] += part.get(c, 0)
        rows.append({"family": key, **{c.replace("_", "-"): counts[c] for c in columns}})
    return _table(rows, {})


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
    checks = "; ".join(f"{c['identical_rows']}/{c['rows']} rows identical over {c['tokens']} tokens "
                       f"({c['seconds']:.1f} s)" for c in e.get("checks", []))
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
    return "<ul>" + "".join(f'<li><a href="{href}">{name}</a> — {what}</li>' for name, href, what in items) + "</ul>"


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
