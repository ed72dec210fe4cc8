"""Screening: audit the family's scorer, sample the trainee on it as GRPO would, read the reward
spread, give a verdict, and say how likely a fresh screen would give another one.

A verdict read from 24 tasks x 8 samples can sit on a threshold (pass@1 0.057 against 0.05): flip
is the share of bootstrap screens (tasks resampled, then each task's samples, with the audit's
per-task hits resampled with their tasks) whose verdict differs. At BORDERLINE or above a verdict is
borderline: the proof reports the rule's accuracy with and without such specs."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from shortlist import audit as audit_
from shortlist import defaults, rule, sources
from shortlist.scoring import RETRIES, ScoreCounts, Scorer
from shortlist.rule import prediction
from shortlist.trainee import Trainee

if TYPE_CHECKING:  # the screen's columns are read where no model is (a report): torch only where one samples
    from shortlist.generation.sampling import Sampler

PREDICT_SEED = defaults.PREDICT_SEED
TASKS = defaults.SCREEN_TASKS
FLIP_RESAMPLES = 1000  # bootstrap screens behind flip; rng seed 0, so a screen's flip is a function of its scores
BORDERLINE = 0.2  # a verdict a fresh screen would change at least 1 time in 5 is borderline (fixed 2026-12-02)


@dataclass
class Screen:
    family: str
    tasks: int
    k: int
    pass1: float  # share of all samples that are correct (score >= 1)
    passk: float  # share of tasks with at least one correct sample
    mean: float  # mean raw score
    signal_raw: float  # share of tasks whose k raw rewards are not all equal: GRPO gets a gradient
    signal_correct: float  # share of tasks that mix correct and incorrect samples
    learnability: float  # mean over tasks of p(1 - p), p = the task's share of correct samples
    extracted: float  # share of samples from which the trainee's extraction found an answer
    clipped: float  # share of samples cut at max_new_tokens
    repetitive: float  # share of samples dominated by one repeated token
    verdict: str
    prediction: str
    scoring: dict = field(default_factory=dict)  # what the scorer did with the answers (ScoreCounts)
    # the scorer audit (audit.py); None where it was not made (a record older than it)
    ceiling: float | None = None  # share of tasks whose gold answer, written as the trainee writes it, scores 1
    guess: float | None = None  # the best content-free answer's share of full scores
    guess_mean: float | None = None  # its mean score
    guess_answer: str | None = None  # which answer that was
    golds: int | None = None  # tasks with a gold or known-valid answer (0: the ceiling could not be checked)
    flip: float | None = None  # chance that a fresh screen gives another verdict (bootstrap); None: not measured
    # how the family was asked and read: the trainee's, or its source's where the trainee left them to it
    # (Trainee.for_source); None in a record older than per-source conventions
    system_prompt: str | None = None
    extraction: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def summarize(family: str, groups: list[list[float]], extracted: float, trainee: Trainee,
              clipped: float = 0.0, repetitive: float = 0.0, audit: audit_.Audit | None = None) -> Screen:
    """The statistics of k scores per task, the trainee's verdict on them and on the audit, and the
    chance that a fresh screen would give another verdict."""
    k = len(groups[0])
    flat = [s for g in groups for s in g]
    correct = [[s >= 1.0 for s in g] for g in groups]
    pass1 = sum(map(sum, correct)) / len(flat)
    mean = sum(flat) / len(flat)
    signal_correct = sum(0 < sum(c) < k for c in correct) / len(groups)
    guess = audit.guess if audit else None
    verdict = _verdict(trainee, pass1, mean, signal_correct, audit)
    return Screen(family=family, tasks=len(groups), k=k, pass1=pass1, passk=sum(map(any, correct)) / len(groups),
                  mean=mean, signal_raw=sum(max(g) - min(g) > 1e-9 for g in groups) / len(groups),
                  signal_correct=signal_correct,
                  learnability=sum((sum(c) / k) * (1 - sum(c) / k) for c in correct) / len(groups),
                  extracted=extracted, clipped=clipped, repetitive=repetitive, verdict=verdict,
                  prediction=prediction(verdict), ceiling=audit.ceiling if audit else None,
                  guess=guess.accuracy if guess else None, guess_mean=guess.mean if guess else None,
                  guess_answer=guess.answer if guess else None, golds=audit.golds if audit else None,
                  flip=flip(groups, trainee, verdict, audit))


def _verdict(trainee: Trainee, pass1: float, mean: float, signal: float, audit: audit_.Audit | None) -> str:
    if audit is None:
        return rule.verdict(trainee, pass1, mean, signal)
    return rule.verdict(trainee, pass1, mean, signal, audit.ceiling, audit.guess.accuracy, audit.verified)


def flip(groups: list[list[float]], trainee: Trainee, verdict: str, audit: audit_.Audit | None = None,
         resamples: int = FLIP_RESAMPLES) -> float:
    """The share of bootstrap screens whose verdict is not `verdict`: tasks drawn with replacement,
    then each drawn task's k samples with replacement; the audit's per-task hits (ceiling, best
    policy) follow their tasks, where it recorded them."""
    import numpy as np
    scores = np.asarray(groups, dtype=float)
    n, k = scores.shape
    rng = np.random.default_rng(0)
    tasks = rng.integers(n, size=(resamples, n))
    drawn = scores[tasks[..., None], rng.integers(k, size=(resamples, n, k))]
    correct = drawn >= 1.0
    pass1, mean = correct.mean((1, 2)), drawn.mean((1, 2))
    right = correct.sum(2)
    signal = ((right > 0) & (right < k)).mean(1)
    guess = ceiling = None
    if audit is not None and len(audit.guess.hits) == n:
        guess = np.asarray(audit.guess.hits, dtype=float)[tasks].mean(1)
    if audit is not None and audit.ceiling_hits and len(audit.ceiling_hits) == n:
        ceiling = np.asarray(audit.ceiling_hits, dtype=float)[tasks].mean(1)
    other = 0
    for b in range(resamples):
        if audit is None:
            again = rule.verdict(trainee, pass1[b], mean[b], signal[b])
        else:
            again = rule.verdict(trainee, pass1[b], mean[b], signal[b], audit.ceiling if ceiling is None else ceiling[b],
                                 audit.guess.accuracy if guess is None else guess[b], audit.verified)
        other += again != verdict
    return other / resamples


def screen(sampler: Sampler, scorer: Scorer, family, tasks: int = TASKS, first_seed: int = PREDICT_SEED,
           seed: int = 0) -> Screen:
    """One family: the trainee's group of samples on each task, scored, summarized, judged."""
    family = sources.parse(family)
    return screen_tasks(sampler, scorer, family, family.tasks(range(first_seed, first_seed + tasks)), seed)


def screen_tasks(sampler: Sampler, scorer: Scorer, family, rows: list[dict], seed: int = 0) -> Screen:
    """screen() on tasks already built (Family.tasks()): the catalog builds them in other processes. The
    trainee asks, reads and audits the family as it does its source's (Trainee.for_source)."""
    import torch
    family = sources.parse(family)
    trainee = sampler.trainee.for_source(family.source)
    k, tasks = trainee.group, len(rows)
    torch.manual_seed(seed)  # the same model screens the same way twice
    samples = sampler.sample([r["question"] for r in rows], k=k, trainee=trainee)
    answers = [trainee.clean(c) for c in samples.flat("texts")]
    before = vars(scorer.counts.get(family.key, ScoreCounts())).copy()
    # retries: the screen's numbers are the committed verdict's, so a loaded machine's timeouts must not move them
    # (GRPO's own rewards are the ones that keep 0: training, not a number read back)
    scores = scorer.score(family, [r["seed"] for r in rows for _ in range(k)], answers, retries=RETRIES)
    result_scoring = {name: value - before.get(name, 0) for name, value in vars(scorer.counts[family.key]).items()}
    groups = [scores[i * k:(i + 1) * k] for i in range(tasks)]
    n = len(answers)
    result = summarize(family.key, groups, sum(a is not None for a in answers) / n, trainee,
                       sum(samples.flat("clipped")) / n, sum(samples.flat("repetitive")) / n,
                       audit_.audit(scorer, trainee, family, rows))
    result.scoring = result_scoring  # the model's answers; the audit's own are not the model's doing
    result.system_prompt, result.extraction = trainee.system_prompt, trainee.extraction
    return result


def screen_all(sampler: Sampler, scorer: Scorer, families, tasks: int = TASKS, first_seed: int = PREDICT_SEED,
               seed: int = 0, log=print, rows: dict | None = None) -> list[Screen]:
    """Every family in turn, one progress line each: what `shortlist screen` and notebook 01 both run.
    rows: family key -> its tasks, built already (the proof's prediction tasks skip reserved questions);
    else seeds first_seed .. first_seed + tasks - 1."""
    screens, chosen = [], sources.parse_list(families)
    for i, family in enumerate(chosen, 1):
        n = len(rows[family.key]) if rows is not None else tasks
        log(f"{family.key}: screening ({i} of {len(chosen)}): {n} tasks x {sampler.trainee.group} samples")
        if rows is not None:
            screens.append(screen_tasks(sampler, scorer, family, rows[family.key], seed))
        else:
            screens.append(screen(sampler, scorer, family, tasks, first_seed, seed))
        log(progress(screens[-1]))
    return screens


def progress(s: Screen) -> str:
    ceiling = "–" if s.ceiling is None else f"{s.ceiling:.2f}"
    flip_ = "" if s.flip is None else f", flip chance {s.flip:.2f}"
    return (f"{s.family}: pass@1 {s.pass1:.2f}, signal on correctness {s.signal_correct:.2f}, "
            f"extracted {s.extracted:.2f}, ceiling {ceiling}, guess {s.guess:.2f}{flip_} -> {s.verdict}"
            + clamped(s.scoring))


def clamped(scoring: dict) -> str:
    """What a screen's line adds where rewards fell outside the reward range (the scorer clamps and counts
    them: a source's rewards are read in [0, 1], or scaled into it from a range its server declares)."""
    n = scoring.get("clamped", 0)
    return (f" ({n} of {scoring.get('answers', n)} rewards outside the reward range, clamped into [0, 1]: declare "
            "the range the environment gives, README: Your own environments)") if n else ""


# The screen's numbers, each spelled once: (field, label, format). The verdict table, the catalog's
# csv and page, and the report's predictions table all read them from here.
METRICS = (("pass1", "pass@1", "{:.2f}"), ("passk", "pass@k", "{:.2f}"), ("mean", "mean score", "{:.3f}"),
           ("signal_raw", "signal (raw)", "{:.2f}"), ("signal_correct", "signal (correct)", "{:.2f}"),
           ("learnability", "mean p(1−p)", "{:.3f}"), ("extracted", "extracted", "{:.2f}"),
           ("clipped", "clipped", "{:.2f}"), ("repetitive", "repetitive", "{:.2f}"),
           ("ceiling", "ceiling", "{:.2f}"), ("guess", "guess rate", "{:.2f}"), ("flip", "flip chance", "{:.2f}"))
TABLE = ("pass1", "passk", "mean", "signal_raw", "signal_correct", "extracted", "clipped", "ceiling", "guess")


def columns(k: int, only=None) -> list[tuple[str, str, str]]:
    """(field, label, format) of the metrics (those named in only, in its order), pass@k spelled with k."""
    by_field = {f: (f, label.replace("pass@k", f"pass@{k}"), fmt) for f, label, fmt in METRICS}
    return [by_field[f] for f in (only or by_field)]


def labelled(screen: dict, only=None) -> dict:
    """A screen (Screen.as_dict(), or a row of one read back) as {label: value}, in METRICS' order."""
    return {label: screen[f] for f, label, _ in columns(screen["k"], only)}


def formats(k: int, only=None) -> dict:
    """{label: format} for the same columns."""
    return {label: fmt for _, label, fmt in columns(k, only)}


def table(screens: list[Screen]) -> str:
    """A plain-text verdict table."""
    cols = [("family", "family", "{}")] + columns(screens[0].k if screens else 8, TABLE) + [("verdict", "verdict", "{}")]
    def cell(value, fmt):
        return "–" if value is None else fmt.format(value)
    cells = [[label for _, label, _ in cols]] + [[cell(getattr(s, f), fmt) for f, _, fmt in cols] for s in screens]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines[:1] + ["  ".join("-" * w for w in widths)] + lines[1:])
