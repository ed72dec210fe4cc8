"""Greedy evaluation on held-out tasks, keeping every completion so a result can be re-scored."""
from __future__ import annotations

from shortlist import families as families_
from shortlist import trainee
from shortlist.sampling import Sampler
from shortlist.scoring import Scorer


def evaluate(sampler: Sampler, scorer: Scorer, family, seeds: range) -> dict:
    family = families_.parse(family)
    rows = family.tasks(seeds)
    completions = [group[0] for group in sampler.complete([r["question"] for r in rows], k=1, greedy=True)]
    return score(scorer, family, list(seeds), completions)


def score(scorer: Scorer, family, seeds: list[int], completions: list[str]) -> dict:
    """Accuracy, mean score and format of completions: the same whether fresh or re-scored."""
    answers = [trainee.clean(c) for c in completions]
    return summarize(seeds, completions, answers, scorer.score(family, seeds, answers))


def summarize(seeds: list[int], completions: list[str], answers: list, scores: list[float]) -> dict:
    extracted = [a for a in answers if a is not None]
    n = len(scores)
    return {"accuracy": sum(s >= 1.0 for s in scores) / n, "mean_score": sum(scores) / n,
            "extracted": len(extracted) / n,
            "answer_chars": sum(map(len, extracted)) / len(extracted) if extracted else None,
            "completion_chars": sum(map(len, completions)) / n,
            "seeds": seeds, "scores": scores, "answers": answers, "completions": completions}


def rescore(scorer: Scorer, family, evaluation: dict) -> dict:
    """Score a stored evaluation again from its completions: no model, no GPU."""
    return score(scorer, family, evaluation["seeds"], evaluation["completions"])
