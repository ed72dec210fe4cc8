"""Screening: audit the family's scorer, sample the trainee on it as GRPO would, read the reward
spread, give a verdict."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from shortlist import audit as audit_
from shortlist import defaults, sources
from shortlist.scoring import ScoreCounts, Scorer
from shortlist.trainee import Trainee, prediction

if TYPE_CHECKING:  # the screen's columns are read where no model is (a report): torch only where one samples
    from shortlist.generation.sampling import Sampler

PREDICT_SEED = defaults.PREDICT_SEED
TASKS = defaults.SCREEN_TASKS


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

    def as_dict(self) -> dict:
        return asdict(self)


def summarize(family: str, groups: list[list[float]], extracted: float, trainee: Trainee,
              clipped: float = 0.0, repetitive: float = 0.0, audit: audit_.Audit | None = None) -> Screen:
    """The statistics of k scores per task, and the trainee's verdict on them and on the audit."""
    k = len(groups[0])
    flat = [s for g in groups for s in g]
    correct = [[s >= 1.0 for s in g] for g in groups]
    pass1 = sum(map(sum, correct)) / len(flat)
    mean = sum(flat) / len(flat)
    signal_correct = sum(0 < sum(c) < k for c in correct) / len(groups)
    guess = audit.guess if audit else None
    verdict = trainee.rule(pass1, mean, signal_correct, audit.ceiling if audit else None,
                           guess.accuracy if guess else None)
    return Screen(family=family, tasks=len(groups), k=k, pass1=pass1, passk=sum(map(any, correct)) / len(groups),
                  mean=mean, signal_raw=sum(max(g) - min(g) > 1e-9 for g in groups) / len(groups),
                  signal_correct=signal_correct,
                  learnability=sum((sum(c) / k) * (1 - sum(c) / k) for c in correct) / len(groups),
                  extracted=extracted, clipped=clipped, repetitive=repetitive, verdict=verdict,
                  prediction=prediction(verdict), ceiling=audit.ceiling if audit else None,
                  guess=guess.accuracy if guess else None, guess_mean=guess.mean if guess else None,
                  guess_answer=guess.answer if guess else None)


def screen(sampler: Sampler, scorer: Scorer, family, tasks: int = TASKS, first_seed: int = PREDICT_SEED,
           seed: int = 0) -> Screen:
    """One family: the trainee's group of samples on each task, scored, summarized, judged."""
    family = sources.parse(family)
    return screen_tasks(sampler, scorer, family, family.tasks(range(first_seed, first_seed + tasks)), seed)


def screen_tasks(sampler: Sampler, scorer: Scorer, family, rows: list[dict], seed: int = 0) -> Screen:
    """screen() on tasks already built (Family.tasks()): the catalog builds them in other processes."""
    import torch
    family, trainee = sources.parse(family), sampler.trainee
    k, tasks = trainee.group, len(rows)
    torch.manual_seed(seed)  # the same model screens the same way twice
    samples = sampler.sample([r["question"] for r in rows], k=k)
    answers = [trainee.clean(c) for c in samples.flat("texts")]
    before = vars(scorer.counts.get(family.key, ScoreCounts())).copy()
    scores = scorer.score(family, [r["seed"] for r in rows for _ in range(k)], answers)
    result_scoring = {name: value - before.get(name, 0) for name, value in vars(scorer.counts[family.key]).items()}
    groups = [scores[i * k:(i + 1) * k] for i in range(tasks)]
    n = len(answers)
    result = summarize(family.key, groups, sum(a is not None for a in answers) / n, trainee,
                       sum(samples.flat("clipped")) / n, sum(samples.flat("repetitive")) / n,
                       audit_.audit(scorer, trainee, family, rows))
    result.scoring = result_scoring  # the model's answers; the audit's own are not the model's doing
    return result


def screen_all(sampler: Sampler, scorer: Scorer, families, tasks: int = TASKS, first_seed: int = PREDICT_SEED,
               seed: int = 0, log=print) -> list[Screen]:
    """Every family in turn, one progress line each: what `shortlist screen` and notebook 01 both run."""
    screens = []
    for family in sources.parse_list(families):
        screens.append(screen(sampler, scorer, family, tasks, first_seed, seed))
        s = screens[-1]
        ceiling = "–" if s.ceiling is None else f"{s.ceiling:.2f}"
        log(f"{s.family}: pass@1 {s.pass1:.2f}, signal on correctness {s.signal_correct:.2f}, "
            f"extracted {s.extracted:.2f}, ceiling {ceiling}, guess {s.guess:.2f} -> {s.verdict}")
    return screens


# The screen's numbers, each spelled once: (field, label, format). The verdict table, the catalog's
# csv and page, and the report's predictions table all read them from here.
METRICS = (("pass1", "pass@1", "{:.2f}"), ("passk", "pass@k", "{:.2f}"), ("mean", "mean score", "{:.3f}"),
           ("signal_raw", "signal (raw)", "{:.2f}"), ("signal_correct", "signal (correct)", "{:.2f}"),
           ("learnability", "mean p(1−p)", "{:.3f}"), ("extracted", "extracted", "{:.2f}"),
           ("clipped", "clipped", "{:.2f}"), ("repetitive", "repetitive", "{:.2f}"),
           ("ceiling", "ceiling", "{:.2f}"), ("guess", "guess rate", "{:.2f}"))
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
