"""Greedy evaluation on held-out tasks, keeping every completion so a result can be re-scored."""
from __future__ import annotations

from proof.records import Evaluation
from shortlist import sources
from shortlist.generation.sampling import Sampler
from shortlist.scoring import Scorer
from shortlist.trainee import Trainee


def evaluate(sampler: Sampler, scorer: Scorer, family, rows: list[dict]) -> Evaluation:
    """One greedy answer per task (rows as Family.tasks builds them), scored by the family's scorer."""
    samples = sampler.sample([r["question"] for r in rows], k=1, greedy=True)
    return score(scorer, sampler.trainee, family, [r["seed"] for r in rows], samples.flat("texts"),
                 samples.flat("clipped"), samples.flat("repetitive"))


def score(scorer: Scorer, trainee: Trainee, family, seeds: list[int], completions: list[str],
          clipped: list[bool], repetitive: list[bool]) -> Evaluation:
    """The same whether fresh or re-scored: extract with the trainee's rule, score with the family's."""
    answers = [trainee.clean(c) for c in completions]
    return Evaluation(seeds, completions, answers, scorer.score(sources.parse(family), seeds, answers),
                      clipped, repetitive)


def rescore(scorer: Scorer, trainee: Trainee, family, evaluation: Evaluation) -> Evaluation:
    """Score a stored evaluation again from its completions: no model, no GPU."""
    return score(scorer, trainee, family, list(evaluation.seeds), list(evaluation.completions),
                 list(evaluation.clipped), list(evaluation.repetitive))
