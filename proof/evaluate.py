"""Greedy evaluation on held-out tasks, keeping every completion so a result can be re-scored."""
from __future__ import annotations

from proof.records import Evaluation
from shortlist import scoring, sources
from shortlist.generation.sampling import Sampler
from shortlist.scoring import Scorer
from shortlist.trainee import Trainee


def evaluate(sampler: Sampler, scorer: Scorer, family, rows: list[dict]) -> Evaluation:
    """One greedy answer per task (rows as Family.tasks builds them), scored by the family's scorer; asked
    and read as the trainee asks the family's source (Trainee.for_source)."""
    trainee = sampler.trainee.for_source(sources.parse(family).source)
    samples = sampler.sample([r["question"] for r in rows], k=1, greedy=True, trainee=trainee)
    return score(scorer, trainee, family, [r["seed"] for r in rows], samples.flat("texts"),
                 samples.flat("clipped"), samples.flat("repetitive"))


def score(scorer: Scorer, trainee: Trainee, family, seeds: list[int], completions: list[str],
          clipped: list[bool], repetitive: list[bool]) -> Evaluation:
    """The same whether fresh or re-scored: extract as the trainee reads the family, score with the family's."""
    family = sources.parse(family)
    asked = trainee.for_source(family.source)
    answers = [asked.clean(c) for c in completions]
    return Evaluation(seeds, completions, answers, scorer.score(family, seeds, answers, retries=scoring.RETRIES),
                      clipped, repetitive)


def rescore(scorer: Scorer, trainee: Trainee, family, evaluation: Evaluation) -> Evaluation:
    """Score a stored evaluation again from its completions: no model, no GPU."""
    return score(scorer, trainee, family, list(evaluation.seeds), list(evaluation.completions),
                 list(evaluation.clipped), list(evaluation.repetitive))
