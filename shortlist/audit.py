"""The scorer audit: can the trainee's extraction read a correct answer, and what does an answer that
does not solve the task earn?

A verdict is only as good as the reward it reads. Two ways it can be wrong before any model is asked:
- the *ceiling*: the gold answer, written the way the trainee is asked to write answers (its
  `<answer>` tags, its "Answer:" line) and read back by the trainee's extraction, may not score 1.
  With the last number as the extraction, no completion can ever score on a family whose answers are
  words; "too hard" is then forced by the extraction, whatever the model knows. A family whose tasks
  carry no gold answer (its scorer checks a solution) is read through an answer its source knows to be
  valid (Reasoning Gym's metadata "example_answer" and kin: the task's "valid"); with neither, the
  ceiling is unknown and the verdict says so ("unverified ceiling"), never "too hard" by default;
- the *guess rate*: a policy that does not solve the task may score well. The policies are cheap
  ones: content-free constants, the most frequent gold answer of other tasks, another task's answer,
  and policies that read the question without solving it (its first, last, largest or smallest
  number, how many numbers it holds, its last word). A scorer that pays any answer, a family whose
  answer is "0" most of the time, or one whose answer is usually a number of the question, rewards a
  model for gaming, not learning.
audit() measures both on the tasks being screened; the trainee's rule turns them into the verdicts
"unscorable", "unverified ceiling" and "guessable", which come before its other thresholds
(trainee.py says why). The same policies, scored on the evaluation tasks after training, are what a
trained model must beat for its gain to count as learning (proof/analysis.py). One list, POLICIES
and the gold-based ones in policies(), serves both.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from shortlist import scoring, sources
from shortlist.sources import source as source_

CONSTANTS = ("", "0", "1", "2", "-1", "True", "False", "yes", "no")  # answers that say nothing of the question
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_PUNCTUATION = ".,;:!?\"'()[]{}*`"


def _numbers(question: str) -> list[str]:
    return _NUMBER.findall(question)


def _pick(question: str, how) -> str:
    found = _numbers(question)
    return how(found) if found else ""


def _last_word(question: str) -> str:
    for word in reversed(question.split()):
        word = word.strip(_PUNCTUATION)
        if word:
            return word
    return ""


# Policies that read the question without solving it: what a model that learned to copy would print
QUESTION_POLICIES = {
    "the first number in the question": lambda q: _pick(q, lambda n: n[0]),
    "the last number in the question": lambda q: _pick(q, lambda n: n[-1]),
    "the largest number in the question": lambda q: _pick(q, lambda n: max(n, key=float)),
    "the smallest number in the question": lambda q: _pick(q, lambda n: min(n, key=float)),
    "the count of numbers in the question": lambda q: str(len(_numbers(q))),
    "the question's last word": _last_word,
}


# Policies that do what a family's question asks, on the tasks that ask it: the task itself, not a guess
# (number_format asks for the largest or the smallest of the numbers listed). Named from the family's
# task, never from an outcome; such a policy is left out of that family's guesses and baselines.
TASK_POLICIES = {
    "number_format": ("the largest number in the question", "the smallest number in the question"),
}


@dataclass(frozen=True)
class Best:
    """The best policy on a set of tasks, by share of full scores (then mean score)."""
    answer: str  # which policy, in words: '"0"', 'the last number in the question', "another task's gold answer"
    accuracy: float  # share of the tasks it scores 1 on
    mean: float  # its mean score
    hits: tuple = field(default=(), compare=False, repr=False)  # per task: it scored 1 (for resampling)

    def as_dict(self) -> dict:
        return {"answer": self.answer, "accuracy": self.accuracy, "mean": self.mean}


@dataclass(frozen=True)
class Audit:
    ceiling: float | None  # share of the checkable tasks whose known answer, written as the trainee writes it, scores 1
    golds: int  # tasks with a gold answer or, where they carry none, an answer known to be valid
    guess: Best  # the best policy on these tasks
    ceiling_from: str | None = None  # "gold answers", "known-valid answers", or None (no way to check)
    ceiling_hits: tuple = field(default=(), compare=False, repr=False)  # per checkable task: it scored 1

    @property
    def verified(self) -> bool:
        """Whether any answer could be shown to score: without one the ceiling is unknown."""
        return self.golds > 0

    def as_dict(self) -> dict:
        return {"ceiling": self.ceiling, "golds": self.golds, "ceiling_from": self.ceiling_from,
                "guess": self.guess.as_dict()}


def known(task: dict) -> str | None:
    """The answer a task is checked against: its gold, else one its source knows to be valid."""
    for key in ("answer", "valid"):
        if task.get(key) is not None:
            return str(task[key])
    return None


def policies(tasks: list[dict], frequent: str | None = None) -> dict[str, list[str]]:
    """Answers that do not solve each task, one per task, by what they are: the constants; the
    policies that read the question; the most frequent gold answer (`frequent`, known from other
    tasks; else, for each task, the most frequent gold answer of the *other* tasks: a task's own answer
    would make any family look guessable on a handful of tasks); and each task answered with the next
    task's gold answer."""
    golds = [None if t.get("answer") is None else str(t["answer"]) for t in tasks]
    out = {f'"{c}"': [c] * len(tasks) for c in CONSTANTS}
    for name, policy in QUESTION_POLICIES.items():
        out[name] = [policy(t["question"]) for t in tasks]
    if frequent is not None:
        if f'"{frequent}"' not in out:
            out[f'the most frequent gold answer "{frequent}"'] = [frequent] * len(tasks)
    elif sum(g is not None for g in golds) > 1:
        out["the most frequent gold answer of the other tasks"] = [_mode(golds[:i] + golds[i + 1:]) or ""
                                                                   for i in range(len(golds))]
    if sum(g is not None for g in golds) > 1:
        out["another task's gold answer"] = [golds[(i + 1) % len(golds)] or "" for i in range(len(golds))]
    return out


def _mode(golds: list) -> str | None:
    known_ = [g for g in golds if g is not None]
    return Counter(known_).most_common(1)[0][0] if known_ else None


def most_frequent_gold(tasks: list[dict]) -> str | None:
    return _mode([None if t.get("answer") is None else str(t["answer"]) for t in tasks])


def best(scorer, trainee, family, tasks: list[dict], frequent: str | None = None) -> Best:
    """The best policy on these tasks, each answer written and read back as the trainee's own answer
    would be (what a model that learned to print it would earn)."""
    parsed = sources.parse(family)
    trainee = trainee.for_source(parsed.source)  # as it reads this family
    task = TASK_POLICIES.get(parsed.name, ()) if parsed.source == source_.DEFAULT else ()  # Reasoning Gym's names
    candidates = {k: v for k, v in policies(tasks, frequent).items() if k not in task}
    seeds = [t["seed"] for t in tasks]
    labels, answers = [], []
    for label, given in candidates.items():
        labels += [label] * len(given)
        answers += [trainee.clean(trainee.written(a)) for a in given]
    scores = scorer.score(family, seeds * len(candidates), answers, retries=scoring.RETRIES)
    n, found = len(tasks), []
    for i, label in enumerate(candidates):
        part = scores[i * n:(i + 1) * n]
        found.append(Best(label, sum(s >= 1.0 for s in part) / n, sum(part) / n, tuple(s >= 1.0 for s in part)))
    return max(found, key=lambda b: (b.accuracy, b.mean))  # the first listed wins a tie: constants before copies


def audit(scorer, trainee, family, tasks: list[dict]) -> Audit:
    """The ceiling and the guess rate of a family for a trainee, on these tasks (Family.tasks()), its answers
    written and read as the trainee asks the family's source (Trainee.for_source)."""
    trainee = trainee.for_source(sources.parse(family).source)
    checkable = [t for t in tasks if known(t) is not None]
    ceiling, hits, source = None, (), None
    if checkable:
        written = [trainee.clean(trainee.written(known(t))) for t in checkable]
        scores = scorer.score(family, [t["seed"] for t in checkable], written, retries=scoring.RETRIES)
        hits = tuple(s >= 1.0 for s in scores)
        ceiling = sum(hits) / len(checkable)
        source = "gold answers" if all(t.get("answer") is not None for t in checkable) else "known-valid answers"
    return Audit(ceiling, len(checkable), best(scorer, trainee, family, tasks), source, hits)


def constants(scorer, trainee, family, tasks: list[dict], answers: list, frequent: str | None = None) -> dict:
    """What policies earn on these tasks, beside a model's own answers to them (extracted; None:
    nothing extracted): the share of distinct answers, what the model's most common answer would
    score on every task, and the best policy (frequent: the most frequent gold answer of the tasks
    screened, known before any training). A trained model whose accuracy such a policy matches has
    learned to game, not to solve (proof/analysis.py)."""
    seeds = [t["seed"] for t in tasks]
    given = [a for a in answers if a is not None]
    mode = Counter(given).most_common(1)[0][0] if given else None
    if mode is None:
        mine = Best("(no answer extracted)", 0.0, 0.0)
    else:
        scores = scorer.score(family, seeds, [mode] * len(seeds), retries=scoring.RETRIES)
        mine = Best(f'"{mode}"', sum(s >= 1.0 for s in scores) / len(seeds), sum(scores) / len(seeds))
    return {"distinct_answers": len(set(answers)) / len(answers), "mode": mine.as_dict(),
            "policy": best(scorer, trainee, family, tasks, frequent).as_dict()}
