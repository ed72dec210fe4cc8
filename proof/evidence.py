"""What the analysis needs beside the scores, per family: which evaluation tasks were unseen and how
many distinct questions they hold, the scorer audit, what constant answers earn on the evaluation
tasks, and whether the proof can judge the family at all.

A run of this version records all of it (predictions.json: the held-out record, the audit in each
screen, the families not judged; each result: its baselines), and it is taken from there. A run
made before (schema 2, examples/smollm2) recorded none of it; it is measured here instead, from
the committed tasks and the saved answers, with a Scorer and no model: the evaluation seeds'
questions checked against the training and prediction tasks, the audit on the prediction tasks,
the constants on the evaluation tasks. `measured` says which families were measured here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from proof import commit, heldout
from shortlist import audit as audit_
from shortlist import sources
from shortlist.trainee import Trainee

MIN_UNSEEN = 40  # the floor of a run that recorded none (settings.min_unseen's default)


@dataclass(frozen=True)
class Evidence:
    family: str
    unseen: tuple  # per evaluation task: its question is in neither the training nor the prediction tasks
    groups: tuple  # per evaluation task: the index of its distinct question
    skipped: int  # evaluation seeds passed over because their question was seen
    ceiling: float | None  # the audit (audit.py), on the prediction tasks
    guess: dict  # the best content-free answer on the prediction tasks: answer, accuracy, mean
    baselines: dict  # audit.constants() on the evaluation tasks, after training ({} before a result exists)
    not_judged: tuple  # why the proof cannot judge this family; () where it can
    measured: tuple = field(default=())  # what was measured here rather than read from the run's files

    @property
    def distinct_unseen(self) -> int:
        return len({g for g, u in zip(self.groups, self.unseen) if u})


def gather(body: dict, results: dict, scorer=None) -> dict:
    """Evidence per committed family; results: family key -> FamilyResult (others are skipped).
    scorer: a shortlist.scoring.Scorer, needed only for what a run did not record."""
    from proof.records import FamilyResult
    from proof.settings import DEFAULTS
    trainee = Trainee.from_dict(body["trainee"])
    s = body["settings"]
    out = {}
    for key in body["families"]:
        result = results.get(key)
        result = result if isinstance(result, FamilyResult) else None
        screen = commit.prediction_for(body, key)
        held = commit.held_out(body, key)
        measured = []
        built = None

        def tasks():  # built once, only where something must be measured
            nonlocal built
            if built is None:
                family = sources.parse(key)
                built = {"train": family.tasks(range(*body["seed_ranges"]["train"])),
                         "predict": family.tasks(range(*body["seed_ranges"]["predict"]))}
            return built
        if held is not None:
            seeds = result.before.seeds if result else held.seeds
            unseen, groups, skipped = [True] * len(seeds), list(held.groups), len(held.skipped)
        elif result is not None:
            unseen, groups = heldout.recover(key, list(result.before.seeds), tasks()["train"] + tasks()["predict"])
            skipped = 0
            measured.append("unseen questions")
        else:
            unseen, groups, skipped = [], [], 0
        if screen.get("ceiling", None) is None and "guess" not in screen:
            a = audit_.audit(_need(scorer), trainee, key, tasks()["predict"])
            ceiling, guess = a.ceiling, a.guess.as_dict()
            measured.append("audit")
        else:
            ceiling = screen.get("ceiling")
            guess = {"answer": screen.get("guess_answer"), "accuracy": screen.get("guess"), "mean": screen.get("guess_mean")}
        baselines = {}
        if result is not None:
            baselines = result.baselines
            if not baselines:
                evaluated = sources.parse(key).tasks(list(result.after.seeds))
                baselines = audit_.constants(_need(scorer), trainee, key, evaluated, list(result.after.answers),
                                             audit_.most_frequent_gold(tasks()["predict"]))
                measured.append("constants")
        if "not_judged" in body:
            not_judged = tuple(body["not_judged"][key])
        else:  # an older run: the same rule, applied now (said so in `measured`)
            verdict = trainee.rule(screen["pass1"], screen["mean"], screen["signal_correct"], ceiling, guess["accuracy"])
            why = [f"{verdict} (ceiling {ceiling}, guess rate {guess['accuracy']} by {guess['answer']})"] \
                if verdict in ("unscorable", "guessable") else []
            floor = s.get("min_unseen", DEFAULTS.get("min_unseen", MIN_UNSEEN))
            distinct = len({g for g, u in zip(groups, unseen) if u})
            if result is not None and distinct < floor:
                why.append(f"only {distinct} distinct unseen evaluation questions (of {len(unseen)} tasks, "
                           f"{len(unseen) - sum(unseen)} seen in training or prediction), below min_unseen={floor}")
            not_judged = tuple(why)
            measured.append("judgeability")
        out[key] = Evidence(key, tuple(unseen), tuple(groups), skipped, ceiling, guess, baselines, not_judged,
                            tuple(measured))
    return out


def _need(scorer):
    if scorer is None:
        raise RuntimeError("this run recorded no held-out record, audit or constants: load it with a Scorer")
    return scorer
