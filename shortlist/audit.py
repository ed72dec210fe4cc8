"""The scorer audit: can the trainee's extraction read a correct answer, and what does an answer that
says nothing about the question earn?

A verdict is only as good as the reward it reads. Two ways it can be wrong before any model is asked:
- the *ceiling*: the gold answer, written the way the trainee is asked to write answers (its
  `<answer>` tags, its "Answer:" line) and read back by the trainee's extraction, may not score 1.
  With the last number as the extraction, no completion can ever score on a family whose answers are
  words; "too hard" is then forced by the extraction, whatever the model knows;
- the *guess rate*: a content-free answer (empty, a common constant, the most frequent gold answer,
  another task's answer) may score well. A scorer that pays any answer, or a family whose answer is
  "0" most of the time, rewards a model for printing one string.
audit() measures both on the tasks being screened; the trainee's rule turns them into the verdicts
"unscorable" and "guessable", which come before its other thresholds (trainee.py says why). The
same content-free answers, scored on the evaluation tasks, are what a trained model must beat
for its gain to count as learning (proof/analysis.py).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass

CONSTANTS = ("", "0", "1", "2", "-1", "True", "False", "yes", "no")  # answers that say nothing of the question


@dataclass(frozen=True)
class Best:
    """The best content-free answer on a set of tasks, by share of full scores (then mean score)."""
    answer: str  # what it was, in words: '"0"', 'the most frequent gold answer "4"', "another task's gold answer"
    accuracy: float  # share of the tasks it scores 1 on
    mean: float  # its mean score

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Audit:
    ceiling: float | None  # share of the tasks with a gold answer whose gold, written as the trainee writes it, scores 1
    golds: int  # tasks with a gold answer (some families check validity and have none)
    guess: Best  # the best content-free answer on these tasks

    def as_dict(self) -> dict:
        return {"ceiling": self.ceiling, "golds": self.golds, "guess": self.guess.as_dict()}


def content_free(tasks: list[dict], frequent: str | None = None) -> dict[str, list[str]]:
    """Answers that do not depend on each task's question, one per task, by what they are: the
    constants; the most frequent gold answer (`frequent`, known from other tasks; else, for each task,
    the most frequent gold answer of the *other* tasks: a task's own answer would make any family
    look guessable on a handful of tasks); and each task answered with the next task's gold answer."""
    golds = [None if t.get("answer") is None else str(t["answer"]) for t in tasks]
    out = {f'"{c}"': [c] * len(tasks) for c in CONSTANTS}
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
    known = [g for g in golds if g is not None]
    return Counter(known).most_common(1)[0][0] if known else None


def most_frequent_gold(tasks: list[dict]) -> str | None:
    return _mode([None if t.get("answer") is None else str(t["answer"]) for t in tasks])


def best(scorer, trainee, family, tasks: list[dict], frequent: str | None = None) -> Best:
    """The best content-free answer on these tasks, each written and read back as the trainee's own
    answer would be (what a model that learned to print it would earn)."""
    candidates = content_free(tasks, frequent)
    seeds = [t["seed"] for t in tasks]
    labels, answers = [], []
    for label, given in candidates.items():
        labels += [label] * len(given)
        answers += [trainee.clean(trainee.written(a)) for a in given]
    scores = scorer.score(family, seeds * len(candidates), answers)
    n, found = len(tasks), []
    for i, label in enumerate(candidates):
        part = scores[i * n:(i + 1) * n]
        found.append(Best(label, sum(s >= 1.0 for s in part) / n, sum(part) / n))
    return max(found, key=lambda b: (b.accuracy, b.mean))


def audit(scorer, trainee, family, tasks: list[dict]) -> Audit:
    """The ceiling and the guess rate of a family for a trainee, on these tasks (Family.tasks())."""
    with_gold = [t for t in tasks if t.get("answer") is not None]
    ceiling = None
    if with_gold:
        written = [trainee.clean(trainee.written(str(t["answer"]))) for t in with_gold]
        scores = scorer.score(family, [t["seed"] for t in with_gold], written)
        ceiling = sum(s >= 1.0 for s in scores) / len(with_gold)
    return Audit(ceiling, len(with_gold), best(scorer, trainee, family, tasks))


def constants(scorer, trainee, family, tasks: list[dict], answers: list, frequent: str | None = None) -> dict:
    """What constant answers earn on these tasks, beside a model's own answers to them (extracted;
    None: nothing extracted): the share of distinct answers, what the model's most common answer
    would score on every task, and the best content-free answer (frequent: the most frequent gold
    answer of the tasks screened, known before any training). A trained model whose gain such a
    constant matches has collapsed, not learned (proof/analysis.py)."""
    seeds = [t["seed"] for t in tasks]
    given = [a for a in answers if a is not None]
    mode = Counter(given).most_common(1)[0][0] if given else None
    if mode is None:
        mine = Best("(no answer extracted)", 0.0, 0.0)
    else:
        scores = scorer.score(family, seeds, [mode] * len(seeds))
        mine = Best(f'"{mode}"', sum(s >= 1.0 for s in scores) / len(seeds), sum(scores) / len(seeds))
    return {"distinct_answers": len(set(answers)) / len(answers), "mode": mine.as_dict(),
            "content_free": best(scorer, trainee, family, tasks, frequent).as_dict()}
