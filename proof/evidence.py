"""What the analysis needs beside the scores, per family: which evaluation tasks the result rests on and
how many distinct questions they hold, the scorer audit, what the policies that do not solve a task
earn on those same tasks, and whether the proof judges the family at all.

A run of this version records all of it (predictions.json: the held-out record with its reservation,
the audit in each screen, the families not judged; each result: its baselines), and it is taken from
there. A run committed before is re-analysed as it was committed, with what this version measures
beside it, from its committed tasks and saved answers, with a Scorer and no model (`measured` says
what):
- schema 3 chose its evaluation tasks among questions its training draw missed: all of them count;
- schema 2 held them out by seed only: only its unseen tasks count (recovered task by task), and its
  judged set is this version's rule applied to them;
- both are audited again with this version's policies (audit.py), on their committed prediction tasks:
  `verdict_now` is what this version's rule says of the same screen, beside the committed verdict
  (which stays the prediction: it was committed); and the policies are scored on the counted
  evaluation tasks, so accuracy, the best policy and the gain rest on one task set.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from proof import commit, heldout
from proof.settings import Settings
from shortlist import audit as audit_
from shortlist import sources
from shortlist.trainee import Trainee

MIN_UNSEEN = Settings.min_unseen  # the floor of a run that recorded none: the settings' default


@dataclass(frozen=True)
class Evidence:
    family: str
    unseen: tuple  # per evaluation task: the result rests on it (reserved, or unseen in an older run)
    groups: tuple  # per evaluation task: the index of its distinct question
    skipped: int  # evaluation seeds passed over (not reserved; in an older run: seen)
    ceiling: float | None  # the audit (audit.py), on the prediction tasks
    guess: dict  # the best policy on the prediction tasks: answer, accuracy, mean
    baselines: dict  # audit.constants() on the counted evaluation tasks, after training ({} before a result)
    not_judged: tuple  # why the proof cannot judge this family; () where it can
    verdict_now: str  # what this version's rule says of the committed screen (the committed verdict if unchanged)
    reservation: dict | None = None  # heldout.Reservation, where the run reserved its evaluation questions
    measured: tuple = field(default=())  # what was measured here rather than read from the run's files

    @property
    def distinct_unseen(self) -> int:
        return len({g for g, u in zip(self.groups, self.unseen) if u})


class CommittedTasks:
    """A committed family's training and prediction tasks, built once, only where something is measured."""

    def __init__(self, body: dict, key: str, held):
        self.body, self.key, self.held, self._built = body, key, held, None

    def __getitem__(self, name: str) -> list[dict]:
        if self._built is None:
            family = sources.parse(self.key)
            if self.held is not None and self.held.reservation is not None:
                self._built = heldout.rebuild(family, self.held)
            else:
                ranges = self.body["seed_ranges"]
                self._built = {n: family.tasks(range(*ranges[n])) for n in ("train", "predict")}
        return self._built[name]


def gather(body: dict, results: dict, scorer=None) -> dict:
    """Evidence per committed family; results: family key -> FamilyResult (others are skipped).
    scorer: a shortlist.scoring.Scorer, needed only for what a run did not record."""
    from proof.records import FamilyResult
    out = {}
    for key in body["families"]:
        result = results.get(key)  # each family read as it was screened (commit.asked)
        out[key] = one(body, key, result if isinstance(result, FamilyResult) else None, commit.asked(body, key),
                       scorer)
    return out


def one(body: dict, key: str, result, trainee: Trainee, scorer) -> Evidence:
    screen, held = commit.prediction_for(body, key), commit.held_out(body, key)
    tasks, measured = CommittedTasks(body, key, held), []
    if held is not None:
        seeds = result.before.seeds if result else held.seeds
        unseen, groups, skipped = [True] * len(seeds), list(held.groups), len(held.skipped)
    elif result is not None:
        unseen, groups = heldout.recover(key, list(result.before.seeds), tasks["train"] + tasks["predict"])
        skipped = 0
        measured.append("unseen questions")
    else:
        unseen, groups, skipped = [], [], 0
    ceiling, guess, verdict_now = _audit(body, screen, tasks, trainee, scorer, measured)
    baselines = {}
    if result is not None:
        baselines = result.baselines
        if "policy" not in baselines:  # recorded before the policies that read the question: measure them
            counted = [i for i, u in enumerate(unseen) if u]
            evaluated = sources.parse(key).tasks([result.after.seeds[i] for i in counted])
            baselines = audit_.constants(_need(scorer), trainee, key, evaluated,
                                         [result.after.answers[i] for i in counted],
                                         audit_.most_frequent_gold(tasks["predict"])) if counted else {}
            measured.append("policies")
    if "not_judged" in body:
        not_judged = tuple(body["not_judged"][key])
    else:  # schema 2: the same rule, applied now to its unseen tasks (said so in `measured`)
        floor = body["settings"].get("min_unseen", MIN_UNSEEN)
        distinct = len({g for g, u in zip(groups, unseen) if u})
        few = None if result is None else heldout.too_few_unseen(
            distinct, f"{len(unseen)} tasks, {len(unseen) - sum(unseen)} seen in training or prediction", floor)
        not_judged = tuple(commit.not_judged(screen | {"verdict": verdict_now, "ceiling": ceiling,
                                                       "guess": guess["accuracy"], "guess_answer": guess["answer"]},
                                             few))
        measured.append("judgeability")
    return Evidence(key, tuple(unseen), tuple(groups), skipped, ceiling, guess, baselines, not_judged, verdict_now,
                    held.reservation.as_dict() if held is not None and held.reservation else None, tuple(measured))


def _audit(body: dict, screen: dict, tasks: CommittedTasks, trainee: Trainee, scorer, measured: list):
    """The committed screen's audit, or (for a run older than this version's policies) the audit
    measured now on its prediction tasks, and the verdict this version's rule gives the screen with it."""
    if body.get("schema", 0) >= commit.AUDITED:
        guess = {"answer": screen.get("guess_answer"), "accuracy": screen.get("guess"), "mean": screen.get("guess_mean")}
        return screen.get("ceiling"), guess, screen["verdict"]
    a = audit_.audit(_need(scorer), trainee, screen["family"], tasks["predict"])
    measured.append("audit")
    verdict = trainee.rule(screen["pass1"], screen["mean"], screen["signal_correct"], a.ceiling, a.guess.accuracy,
                           a.verified)
    return a.ceiling, a.guess.as_dict(), verdict


def _need(scorer):
    if scorer is None:
        raise RuntimeError("this run recorded no reservation, audit or policies of this version: load it with a Scorer")
    return scorer
