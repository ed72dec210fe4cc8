"""The report's sections: one list of Section(key, caption, table, figure), which 03 shows by key
(`display(*report.section(r, key))`) under its own heading. A new statistic is its computation
(proof/analysis.py) and one entry here; a new figure is its drawing (figures.py) and one entry.

Each caption is the sentence under a section's title, with the numbers of this run: it may name the
trainee's extraction as {extraction}, which caption() puts in as escaped code (text a user typed)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from proof import rules
from proof.evidence import MIN_UNSEEN
from proof.report import figures, html, prose, tables
from proof.report.load import Report
from shortlist import page


@dataclass(frozen=True)
class Section:
    key: str
    caption: Callable[[Report], str] | None = None  # its sentence, with this run's numbers
    table: Callable[[Report], object] | None = None  # what it shows: a table, or a tuple of displays
    figure: Callable[[Report], object] | None = None  # a matplotlib Figure (None: nothing to draw)


def _prediction_tasks(s: dict, reserved: bool) -> str:
    """Which tasks the predictions were screened on: the first unreserved ones, or a range of seeds."""
    first = s["predict_seed"]
    return f"{s['predict_tasks']} tasks" + (f" (the first from seed {first} whose question is not reserved)"
                                            if reserved else f" (seeds {first}..{first + s['predict_tasks'] - 1})")


def _predictions(report: Report) -> str:
    s, t = report.settings, report.trainee
    return (f"From {_prediction_tasks(s, bool(s.get('reserve')))} × {t.group} samples per family, drawn as GRPO draws "
            f"them (temperature {t.temperature}, at most {t.max_new_tokens} new tokens). *Signal* is the share of tasks "
            f"whose samples disagree: on the raw reward (partial credit included) and on correctness; the rule "
            f"reads the latter. *Clipped*: cut at max_new_tokens. *Flip chance*: the share of bootstrap "
            f"screens (tasks, then samples, resampled) with another verdict; at {rules.BORDERLINE} or more "
            f"the verdict is borderline.")


def _outcomes(report: Report) -> str:
    s = report.settings
    n = s["eval_n"]
    return ((f"Greedy answers to the same {n} evaluation tasks before and after {s['steps']} GRPO steps: the "
             f"first {n} from seed {s['eval_seed']} whose question is reserved for evaluation. ") if s.get("reserve")
            else (f"Greedy answers to the same {n} tasks before and after {s['steps']} GRPO steps, as this run "
                  f"recorded them (the next tables keep the tasks the judgement rests on). ")) + \
        (f"The seed's analysis, unchanged: a paired bootstrap ({s['bootstrap_n']:,} resamples) on the mean "
         f"score per task; *improved* when p ≤ {s['alpha']} and the gain is positive.")


def _audit(report: Report) -> str:
    """The audit's caption: the ceiling and guess rate measured before any model is asked."""
    t = report.trainee
    return (f"Before any model is asked: the *ceiling* is the share of the prediction tasks whose gold answer (or, "
            f"where a task has none, an answer its source knows to be valid), written as the trainee is asked to "
            f"write answers and read back by its extraction "
            f"{{extraction}}, scores 1 (below {t.ceiling_min}: *unscorable*; "
            f"no answer to check at all: *unverified ceiling*); the *guess rate* is the best share of full "
            f"scores over policies that do not solve the task (constants, the most frequent or another task's "
            f"gold answer, the first, last, largest or smallest number of the question, how many numbers it "
            f"holds, its last word; a policy that does what the question asks, as number_format's largest number, "
            f"is the task, not a guess); at least pass@1 and {t.pass_min}, the family is *guessable*. These are trained and reported apart. After training, the best policy on the "
            f"same evaluation tasks is what the trained model must beat.")


def _meanings(report: Report) -> str:
    """Which families were reserved by their questions' meaning (heldout.py), where any was: else nothing."""
    keyed = sorted({e.reservation["meaning"] for e in report.evidence.values()
                    if e.reservation and e.reservation.get("meaning", "question") != "question"})
    if not keyed:
        return ""
    return (f"A question is keyed by its meaning where its family has one ({', '.join(keyed)}): twins such as "
            f"\"3 * 7\" and \"7 * 3\", or one board under two templates, are one question, reserved together and "
            f"counted once; elsewhere by its text, case and whitespace aside. ")


def _heldout(report: Report) -> str:
    s = report.settings
    return (("Each result rests on its reserved evaluation questions: a keyed hash set them aside before "
             "anything was drawn, sized from a census of the family's questions (the estimate is Chao1's). "
             if s.get("reserve") else "Each result rests on its unseen evaluation questions. ") + _meanings(report) +
            f"Families with fewer than {s.get('min_unseen', MIN_UNSEEN)} distinct ones are not judged. The last "
            f"columns count each distinct question once (the mean of its tasks), resampled the same way.")


def _learning(report: Report) -> str:
    return (f"The same bootstrap on accuracy (score ≥ 1), on the same tasks as the best policy. *Real "
            f"learning*: accuracy rose (p ≤ {report.settings['alpha']}) and is above the best policy's; that is the "
            f"outcome the rule is judged on. *Partial credit only*: the score rose, accuracy did not. "
            f"*Matched by a policy*: a policy that does not solve the task answers as many right.")


def _format(report: Report) -> str:
    return (f"The share of answers the trainee's extraction {{extraction}} could find, their length, and the share of "
            f"completions cut at {report.trainee.max_new_tokens} tokens or dominated by one repeated token.")


def _equivalence(report: Report) -> str:
    return (f"A \"no change\" prediction that held is *equivalent* only when an equivalence test (TOST, "
            f"margin ±{report.settings['equivalence_margin']}) puts the gain within the margin; otherwise "
            f"*inconclusive*. The last columns give the smallest gain the tasks could have detected (80% power). "
            f"Where every counted task's score moved by the same amount (the SD of the differences is 0, as when "
            f"no score changed), the bootstrap has no spread: the test can show nothing and the tasks no power, "
            f"so equivalence *cannot be judged*.")


def _examples(report: Report) -> str:
    return (f"The first {prose.EXAMPLES} evaluation tasks whose score changed (else the first {prose.EXAMPLES}), "
            f"answered greedily before and after training.")


def _curves(report: Report) -> str:
    return (f"Per logged step ({report.settings['logging_steps']}): the mean reward, the share of groups whose "
            f"{report.trainee.group} rewards were all equal (no gradient), and the share of completions cut at "
            f"max_new_tokens.")


def _power(report: Report) -> str:
    return ("Before any training, from the commitment alone: the judged specs each comparator predicts "
            "differently from the rule (the only specs that can tell them apart), and the exact p were every "
            "one of them to go the rule's way, raw and Holm-adjusted. A comparison with no such spec cannot "
            "come out either way. " + ("This run did not record it: it is computed now from its commitment."
                                       if "power" not in report.body.get("analysis", {}) else ""))


def _forest(report: Report) -> str:
    """What the gains figure shows, or why it is not drawn: a dot at 0 with no interval is not a precise zero."""
    done = report.done()
    same = sum(figures.unchanged(r) for r in done)
    if not done:
        return "No family has finished: there is no gain to draw."
    if same == len(done):
        return (f"No evaluation task's score changed in {'the finished family' if same == 1 else 'any finished family'}"
                f": every gain is 0 with no interval around it, which shows no spread, so there is nothing to draw.")
    return ("Each finished family's gain in mean score after GRPO, with its 95% bootstrap interval; a filled circle was "
            "predicted to improve, a hollow square not." + (
                f" Labelled *no score changed*: {page.count(same, 'family', 'families')} whose every evaluation task "
                f"scored as before, a dot at 0 with no interval (no spread, not a precise zero)." if same else ""))


def _runs(report: Report) -> str:
    spent = report.checking
    families = [v for v in spent.values() if isinstance(v, dict)]
    return ("Wall time of each family's parts, and the decode engine each used. The last columns are this report's "
            "own checks of each result: its answers scored again in the sandbox, and drawn again from the model"
            + (f" ({sum(sum(v.values()) for v in families):.0f} s in all; gathering the evidence "
               f"{spent.get('evidence', 0):.0f} s)." if families else "."))


def _sides(report: Report) -> str:
    return ("The rule is tested on both sides: of the judged specs it calls \"improves\", how many really "
            "learned (precision); of those it calls \"too hard\", how many learned anyway (its miss rate).")


def _against(report: Report) -> str:
    return ("Each rule predicts *improves* or *no change* from the same committed screens of the judged specs; "
            "a hit is a prediction that matches real learning (and, in *hits on score*, the seed's *improved*). "
            "Where a rule and Shortlist's disagree, the exact McNemar test compares the specs only one of them "
            "got right, Holm-adjusted across the comparisons; *best possible* is what the commitment, before "
            "training, said each comparison could reach.")


def _ranked(report: Report) -> bool:
    return len(report.done()) >= figures.MIN_FAMILIES_FOR_RANKS


def _correlations(report: Report) -> str:
    """Below MIN_FAMILIES_FOR_RANKS finished families, why nothing follows instead."""
    n = len(report.done())
    if not _ranked(report):
        return (f"Only {n} {'family' if n == 1 else 'families'} finished: ranks need "
                f"{figures.MIN_FAMILIES_FOR_RANKS} at least, so no correlation or scatter is shown.")
    return "Spearman's ρ between each screening signal and the measured gain, across families."


def _rules(report: Report) -> tuple:
    """The comparison, what it can show in words, then the rule's confusion and its accuracy."""
    return (tables.rules_table(report), prose.shown(prose.rules_text(report)), tables.confusion_table(report),
            prose.shown(prose.confusion_text(report)))


def _scatter(report: Report):
    return figures.scatter(report.done(), report.body["predictions"], report.across.correlations) \
        if _ranked(report) else None


def _notebooks(report: Report):
    from IPython.display import HTML
    return HTML(html.notebook_links(report))


SECTIONS = {s.key: s for s in (  # in 03's order: under the headline, the gains, then their statistics
    Section("forest", _forest, figure=lambda r: figures.forest(r.done())),
    Section("statistics", table=prose.statistics_shown),
    Section("predictions", _predictions, lambda r: tables.predictions_table(r.body)),
    Section("audit", _audit, tables.audit_table),
    Section("outcomes", _outcomes, tables.outcomes_table),
    Section("heldout", _heldout, tables.heldout_table),
    Section("learning", _learning, tables.learning_table),
    Section("format", _format, tables.format_table),
    Section("examples", _examples, tables.examples_table),
    Section("equivalence", _equivalence, tables.equivalence_table),
    Section("curves", _curves, figure=lambda r: figures.curves(r.done())),
    Section("runs", _runs, tables.runs_table),
    Section("sides", _sides, tables.sides_table),
    Section("rules", _against, _rules),
    Section("correlations", _correlations, tables.correlations_table, _scatter),
    Section("scoring", table=tables.scoring_table),
    Section("plan", table=tables.plan_table),
    Section("power", _power, tables.power_table),
    Section("provenance", table=tables.provenance_table),
    Section("notebooks", table=_notebooks),
)}


def caption(report: Report, key: str):
    """A section's caption as HTML: the trainee's extraction goes in as escaped code, never through Markdown."""
    return prose.shown(SECTIONS[key].caption(report), extraction=prose.extractions(report))


def section(report: Report, key: str) -> list:
    """What 03 displays under a section's heading: its caption, its table (or displays), its figure."""
    s = SECTIONS[key]
    shown = [caption(report, key)] if s.caption else []
    if s.table is not None:
        table = s.table(report)
        shown += list(table) if isinstance(table, tuple) else [table]
    if s.figure is not None:
        shown.append(figures.show(s.figure(report)))
    return [item for item in shown if item is not None]
