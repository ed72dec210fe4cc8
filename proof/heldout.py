"""Held-out means unseen: the evaluation tasks are questions the model was never trained or screened on.

Disjoint seeds are not enough. Easy families have few distinct questions (products(max_digits=1)
has 81, all among 400 training prompts), so evaluation seeds held out by number alone repeated
training prompts word for word: 161 of products' 200 evaluation questions in examples/smollm2.
select() takes the first eval_n seeds from eval_seed up whose question, normalized (case and
whitespace), is in neither the training nor the prediction tasks, looking at no more than
eval_search x eval_n seeds; the seeds it skipped are recorded. Questions may repeat within the
evaluation set (they are draws from the family); how many distinct ones there are is recorded,
and the secondary analysis resamples by distinct question. A family with fewer than min_unseen
distinct unseen questions is flagged when the predictions are committed: the proof cannot judge it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from shortlist import sources


def normalized(question: str) -> str:
    return " ".join(question.lower().split())


@dataclass(frozen=True)
class HeldOut:
    """Which evaluation tasks a family has, and what they rest on; committed with the predictions."""
    seeds: tuple  # the evaluation tasks' seeds, in order
    skipped: tuple  # seeds looked at whose question was seen in the training or prediction tasks
    searched: int  # seeds looked at, from eval_seed up
    groups: tuple  # per evaluation task, the index of its distinct question (in order of first appearance)
    sha256: str  # sources.fingerprint() of the evaluation tasks

    def __post_init__(self):
        for name in ("seeds", "skipped", "groups"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if len(self.groups) != len(self.seeds) or self.searched < len(self.seeds) + len(self.skipped):
            raise ValueError("a held-out record whose counts do not add up")

    @property
    def n(self) -> int:
        return len(self.seeds)

    @property
    def distinct(self) -> int:
        return len(set(self.groups))

    def as_dict(self) -> dict:
        return asdict(self) | {"n": self.n, "distinct": self.distinct}

    @classmethod
    def from_dict(cls, d: dict) -> "HeldOut":
        return cls(d["seeds"], d["skipped"], d["searched"], d["groups"], d["sha256"])


def groups_of(tasks: list[dict]) -> list[int]:
    """Per task, the index of its distinct (normalized) question."""
    index: dict[str, int] = {}
    return [index.setdefault(normalized(t["question"]), len(index)) for t in tasks]


def select(family, settings, seen: list[dict]) -> tuple[HeldOut, list[dict]]:
    """The evaluation tasks: the first eval_n seeds from eval_seed up whose question is not among
    the `seen` tasks (training and prediction), within the search bound; fewer where it runs out."""
    family = sources.parse(family)
    known = {normalized(t["question"]) for t in seen}
    chosen, skipped, searched = [], [], 0
    stop = settings.eval_seed + settings.eval_search * settings.eval_n
    start = settings.eval_seed
    while len(chosen) < settings.eval_n and start < stop:
        end = min(stop, start + settings.eval_n - len(chosen))  # build no more than could still be needed
        for task in family.tasks(range(start, end)):
            if normalized(task["question"]) in known:
                skipped.append(task["seed"])
            else:
                chosen.append(task)
        searched += end - start
        start = end
    record = HeldOut([t["seed"] for t in chosen], skipped, searched, groups_of(chosen), sources.fingerprint(chosen))
    return record, chosen


def recover(family, seeds: list[int], seen: list[dict]) -> tuple[list[bool], list[int]]:
    """For a run whose evaluation seeds were held out by number only (an older run): which of its
    evaluation tasks are unseen, and each task's distinct-question index."""
    tasks = sources.parse(family).tasks(seeds)
    known = {normalized(t["question"]) for t in seen}
    return [normalized(t["question"]) not in known for t in tasks], groups_of(tasks)


def judgeable(record: HeldOut, settings) -> str | None:
    """Why the proof cannot judge a family from its evaluation tasks, or None."""
    if record.distinct < settings.min_unseen:
        return (f"only {record.distinct} distinct unseen evaluation questions (of {record.n} tasks, "
                f"{len(record.skipped)} seeds skipped as seen), below min_unseen={settings.min_unseen}")
    return None
