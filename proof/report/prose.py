"""The report's words: the headline, its terms and statistics, one line per family (the captions are sections.py's;
the banner and warnings above them are cautions.py's).

Each says only what its data shows: "not judged" is never "did not hold", a run with no finished
family says so, every sentence appears once, and numbers are written as numbers.py writes them.
Whatever could make the numbers wrong (a smoke run, a fallen-back engine, degenerate completions, a
corrupt result) is said above the headline. The headline is one plain sentence; its statistics are
statistics()'s, which 03 shows in a section of their own.
"""
from __future__ import annotations

from proof import rules
from proof.evidence import MIN_UNSEEN
from proof.records import FamilyResult
from proof.report.cautions import banner, measured_here, warnings
from proof.report.load import Report, edited, marks, status, unchecked
from proof.report.numbers import interval, p_text, rate, tidy
from shortlist import page

SIDES = (("improves", 'precision on "improves"', "really learned"),
         ("boundary", 'miss rate on "too hard" at 0 < pass@1 < pass_min', "learned anyway"),
         ("too hard", 'miss rate on "too hard" at pass@1 0', "learned anyway"),
         ("other", 'on "already solved" and "no signal"', "learned"))


def family_line(report: Report, key: str) -> str:
    """One sentence: the verdict, the outcome on the tasks the result rests on, and whether it held."""
    p = report.prediction(key)
    said = f"**{key}**: predicted \"{p['prediction']}\" ({p['verdict']})"
    if not isinstance(report.results.get(key), FamilyResult):
        return f"{said}; {status(report, key)}."
    a = report.analyses[key]
    if not a.counted:
        return f"{said}; every evaluation task repeats a seen question: nothing to judge on."
    acc = a.accuracy_gain
    policy = f", best policy {a.policy['answer']} {a.policy['accuracy']:.3f}" if a.policy else ""
    outcome = (f"accuracy {a.accuracy[0]:.3f} → {a.accuracy[1]:.3f} ({acc['gain']:+.3f}, p "
               f"{p_text(acc['p'], report.settings['bootstrap_n'])}) on {a.counted} {_counted(report)} tasks "
               f"({a.distinct} distinct){policy}")
    verdict = ("not judged: " + tidy("; ".join(a.not_judged))) if a.not_judged else "held" if a.held else "did not hold"
    learning = "no significant gain" if a.learning == "none" else a.learning
    return f"{said}; {outcome}; {learning}; {verdict}."


def _counted(report: Report) -> str:
    return "reserved" if report.settings.get("reserve") else "unseen"


def headline(report: Report) -> str:
    """The answer in one plain sentence: how often the rule held, and whether it did better than predicting
    "improves" everywhere. Every number behind it is statistics()'s, in a section of its own."""
    done, across = report.done(), report.across
    if not done:
        return "**No environment has finished training yet**, so there is nothing to judge."
    n = len(across.judged)
    if not n:
        which = ("The one finished environment could not be judged**: the commitment set it" if len(done) == 1 else
                 f"None of the {len(done)} finished environments could be judged**: the commitment set them")
        return f"**{which} apart before training, so this run does not test the rule."
    return (f"**The rule held on {across.held.k} of {page.count(n, 'judged environment')}**"
            + _against_always(report) + ".")


def _against_always(report: Report) -> str:
    """The comparison a reader asks first, in words: the rule against predicting "improves" everywhere."""
    c = next((c for c in report.across.comparisons if c.rule == "always improves"), None)
    if c is None:
        return ""
    if not c.disagree:
        return ("; it said \"improves\" on every one, as always predicting \"improves\" would, so the two cannot be "
                "told apart")
    if c.p_holm > report.settings["alpha"] or c.mcnemar["only_first"] == c.mcnemar["only_second"]:
        return "; it could not be told apart from always predicting \"improves\""
    if c.mcnemar["only_first"] > c.mcnemar["only_second"]:
        return "; it did better than always predicting \"improves\""
    return "; always predicting \"improves\" did better"


def terms(report: Report) -> str:
    """The words the headline and the family lines use, defined where they are first read (under the headline):
    judged and held always, each audit verdict only where a family has it."""
    t = report.trainee
    text = (f"*Judged*: an environment (a family spec) the commitment set out to test before any training: not set "
            f"apart by the scorer audit, and with at least {report.settings.get('min_unseen', MIN_UNSEEN)} distinct "
            f"evaluation questions. *Held*: the prediction matched the outcome: *real learning* (more correct "
            f"answers after training than before, and more than the *best policy*, the best-scoring answer that "
            f"does not solve the task) where \"improves\" was predicted, no real learning where it was not.")
    verdicts = {p["verdict"] for p in report.body["predictions"]}
    if "guessable" in verdicts:
        text += (f" *Guessable*: such a policy (a constant, a number copied from the question, …) scores fully on "
                 f"at least as many screening tasks as the model's own samples (pass@1) and on at least pass_min "
                 f"({t.pass_min}, the pass@1 below which the rule says \"too hard\") of them.")
    if "unscorable" in verdicts:
        text += (f" *Unscorable*: the gold answer, written as the trainee writes answers, scores on fewer than "
                 f"{t.ceiling_min} of the tasks (its *ceiling*).")
    if "unverified ceiling" in verdicts:
        text += " *Unverified ceiling*: no task has an answer to check, so nothing shows a completion can score."
    return text + " Guessable, unscorable and unverified environments are trained and reported, not judged." \
        if verdicts & set(rules.AUDIT) else text


def statistics(report: Report) -> str:
    """The numbers behind the headline, each once, as one text (statistics_parts(), joined)."""
    return " ".join(statistics_parts(report))


def statistics_parts(report: Report) -> list[str]:
    """The numbers behind the headline, each once, a part per question: the rule with its Wilson interval; per
    side; against every comparator with its exact test, Holm's adjustment and the best p the commitment
    allowed; then what the gains were, what never occurred, what is not judged (and what has not finished)."""
    done, across = report.done(), report.across
    if not done:
        return ["No family has finished training yet: there is no outcome to judge." + _statuses(report)]
    n = len(across.judged)
    if not n:
        parts = [f"None of the {page.count(len(done), 'finished family', 'finished families')} is judged "
                 f"(the commitment set them apart: {_apart(report)})."]
        return _rest(report, parts + [_gains(report), _never(report)])
    text = (f"The rule held on {across.held.k} of {page.count(n, 'judged spec')} ({interval(across.held)}; a Wilson "
            f"interval holds the rates these counts are consistent with).")
    if across.failed:
        text += (f" {page.count(len(across.failed), 'judged spec')} failed to train: counted as not held, "
                 f"against the rule on its side ({', '.join(across.failed)}).")
    b = across.borderline
    if b["borderline"]:
        text += (f" {page.count(b['borderline'], 'judged verdict was', 'judged verdicts were')} borderline (flip "
                 f"chance ≥ {rules.BORDERLINE}); without them the rule held on {rate(b['without borderline'])}.")
    elif b["unmeasured"] == n:
        text += " The screens of this run carry no flip chance: borderline verdicts cannot be named."
    sides = f"By the side each spec tests (pass_min, {report.trainee.pass_min}, is the pass@1 below which the rule " \
            f"says \"too hard\"):"
    for name, label, verb in SIDES:
        r = across.sides.get(name)
        if r:
            sides += f" {label[0].upper() + label[1:]}: {r.k} of {r.n} {verb} ({interval(r)})."
    missing = [label.split(" on ")[-1] for name, label, _ in SIDES[:2] if name not in across.sides]
    if missing:
        sides += f" No judged spec on the side{'s' if len(missing) > 1 else ''} of {' and '.join(missing)}."
    return _rest(report, [text, sides, _comparisons(report), _gains(report), _never(report), _apart_text(report)])


def _rest(report: Report, parts: list[str]) -> list[str]:
    """The parts that say something, trimmed, the families not finished said after the last."""
    parts = [p.strip() for p in parts if p.strip()]
    parts[-1] += _statuses(report)
    return parts


def _comparisons(report: Report) -> str:
    comps = report.across.comparisons[1:]
    either = [c for c in comps if c.disagree]
    text = ""
    if either:
        parts = [f"'{c.rule}', where {_alone(c.mcnemar)} (exact McNemar p {p_text(c.mcnemar['p'])}, Holm "
                 f"{p_text(c.p_holm)}" + (f", best possible {p_text(c.best_p)}" if c.best_p is not None else "") + ")"
                 for c in either]
        primary = sum(c.primary for c in comps)
        family = (f"within the {primary} pre-registered primary comparisons and, apart, the {len(comps) - primary} "
                  f"exploratory ones" if primary else f"across the {len(comps)} comparisons")
        text += (f" Against simpler rules (the exact McNemar test counts the specs only one of the two got right; "
                 f"Holm's adjustment corrects a p for the other tests made beside it, here {family}; best possible: "
                 f"the smallest p the commitment said, before training, the comparison could reach): "
                 + "; ".join(parts) + ".")
    same = [f"'{c.rule}'" for c in comps if not c.disagree]
    if same:
        text += (f" It predicts as {', '.join(same)} on every judged spec: "
                 f"{'that comparison' if len(same) == 1 else 'those comparisons'} cannot come out either way.")
    return text


def _alone(m: dict) -> str:
    """Where the rule and another disagree: who alone was right, counted in specs."""
    return f"the rule alone was right on {page.count(m['only_first'], 'spec')} and it alone on {m['only_second']}"


def _gains(report: Report) -> str:
    a = report.analyses
    raised = [r for r in report.done() if a[r.family].improved or a[r.family].accuracy_improved]
    if not raised:
        return " GRPO made no significant gain on any family."
    count = {label: sum(a[r.family].learning == label for r in raised) for label in
             ("real learning", "partial credit only", "matched by a policy")}
    return (f" Of the {page.count(len(raised), 'significant gain')} GRPO made: {count['real learning']} real learning "
            f"(more correct answers than before and than any policy that does not solve the task), "
            f"{count['partial credit only']} partial credit only, {count['matched by a policy']} matched by a policy.")


def _never(report: Report) -> str:
    never = report.across.never
    if not never:
        return ""
    return (f" No spec was predicted {' or '.join(repr(v) for v in never)}, so this run cannot test "
            f"{'that threshold' if len(never) == 1 else 'those thresholds'}.")


def _apart(report: Report) -> str:
    return ", ".join(f"{r.family} ({why_not(report.analyses[r.family])})" for r in report.done()
                     if r.family not in report.across.judged)


def _apart_text(report: Report) -> str:
    apart = [r for r in report.done() if r.family not in report.across.judged]
    return f" Trained, not judged (as committed; {len(apart)}): {_apart(report)}." if apart else ""


def why_not(a) -> str:
    if a.not_judged:
        return "; ".join(w.split(" (")[0] if w.split(" (")[0] in rules.AUDIT else "too few evaluation questions"
                         for w in a.not_judged)
    return "no evaluation task to judge on"


def _statuses(report: Report) -> str:
    counts: dict[str, int] = {}
    for key in report.body["families"]:
        word = status(report, key).split(":")[0]
        if word != "done":
            counts[word] = counts.get(word, 0) + 1
    extra = ", ".join(f"{n} {word}" for word, n in counts.items())
    return f" ({extra}.)" if extra else ""


def top(report: Report):
    """What goes above everything, as HTML: the banner and the warnings in boxes, the headline, the words it
    uses, then one line per family."""
    from IPython.display import HTML
    parts = [page.box("banner", b) for b in [banner(report), measured_here(report), unchecked(report)] if b]
    parts += [page.box("warning", w) for w in [edited(report), *warnings(report)] if w]
    lines = "".join(f"<li>{page.markup(family_line(report, k))}</li>" for k in report.body["families"])
    return HTML("".join(parts) + f'<p class="shortlist-headline">{page.markup(headline(report))}</p>'
                f'<p class="shortlist-terms">{page.prose(terms(report))}</p>'
                f'<ul class="shortlist-families">{lines}</ul>', metadata=marks(report))


def statistics_shown(report: Report):
    """statistics_parts() as an HTML list, a part per item: escaped, bold kept, no italics (a family spec may
    hold a '*')."""
    from IPython.display import HTML
    items = "".join(f"<li>{page.markup(part)}</li>" for part in statistics_parts(report))
    return HTML(f'<ul class="shortlist-statistics">{items}</ul>')


def rules_text(report: Report) -> str:
    """What the comparison can and cannot show, in words: once per comparator that can disagree, and the
    comparators that predict as the rule everywhere in one sentence."""
    judged = report.across.judged
    lines = [f"The comparison rests on {page.count(len(judged), 'judged spec')} (the commitment set apart the audit's "
             f"verdicts and the specs short of evaluation questions; no outcome changes that)."]
    comps = report.across.comparisons[1:]
    same = [c for c in comps if not c.disagree]
    if same:
        lines.append(f"{_names(same)} {'predicts' if len(same) == 1 else 'predict'} as the rule on every judged spec: "
                     f"no test{_best(same)}.")
    for c in comps:
        if not c.disagree:
            continue
        m = c.mcnemar
        if m["discordant"] == 0:
            lines.append(f"'{c.rule}' disagrees with the rule on {page.count(c.disagree, 'spec')}, and both are right "
                         f"(or both wrong) on each: no evidence either way{_best([c])}.")
        else:
            better = "the rule" if m["only_first"] > m["only_second"] else f"'{c.rule}'" \
                if m["only_second"] > m["only_first"] else "neither"
            lines.append(f"Against '{c.rule}', {_alone(m)}; {better} does better here (exact McNemar p "
                         f"{p_text(m['p'])}, Holm {p_text(c.p_holm)}"
                         + (", not significant" if c.p_holm > report.settings["alpha"] else "") + f"){_best([c])}.")
    return " ".join(lines)


def _names(comps) -> str:
    names = [f"'{c.rule}'" for c in comps]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _best(comps) -> str:
    """The best p the commitment allowed these comparisons, said once for all of them."""
    best = sorted({p_text(c.best_p) for c in comps if c.best_p is not None})
    if not best:
        return ""
    return f"; the commitment said {'it' if len(comps) == 1 else 'they'} could reach p {' or '.join(best)} at best"


def confusion_text(report: Report) -> str:
    held = report.across.held
    if not held.n:
        return "No judged spec has finished, so the rule has no accuracy yet."
    return f"The rule's accuracy: {rate(held)}, over {page.count(held.n, 'judged spec')}."


def extractions(report: Report) -> str:
    """The extractions the families were read with, as screening recorded them: the trainee's own, or each
    family's source's where the trainee left it to the source."""
    used = dict.fromkeys(p.get("extraction") or report.trainee.extraction or "its source's"
                         for p in report.body["predictions"])
    return ", ".join(used)


def shown(text: str, **code: str):
    """A sentence of the report displayed as HTML (page.prose): Markdown would pass data's HTML through live."""
    from IPython.display import HTML
    return HTML(f"<p>{page.prose(text, **code)}</p>")


EXAMPLES = 3  # answers shown per family, before and after
