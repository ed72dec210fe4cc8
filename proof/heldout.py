"""Held-out means reserved: evaluation questions are set aside before anything is drawn.

Per family spec, a share of its distinct questions is evaluation-only, chosen by a keyed hash of the
question's key: SHA-256 of the run's reserve_key, the family's key and the question's key, read as a number
in [0, 1). A question's key is its meaning where its family has one (shortlist/sources/meaning.py: "3 * 7"
and "7 * 3" are one question, and so are one Go board under two templates), else its text, case and
whitespace aside; so twins are one question everywhere here: reserved together, counted once in the census
and in the distinct questions. Which key a reservation drew by (with its version) is committed with it, and
it is read by that key only: a reservation committed before meanings (schema 4) is the text's. A question is
reserved when its hash lies below the family's threshold. Training and prediction tasks are the first tasks
from their seeds whose question is not reserved; the evaluation tasks are the first eval_n from eval_seed
whose question is, so they are a neutral sample of the reserved share (the hash knows nothing of how often a
question is drawn or what it asks): a constant answer scores there what it scores on any sample of the family.

The share is sized from the family's question space, estimated before anything else is drawn: a
census of census_n tasks from census_seed, its distinct questions counted with Chao1's bias-corrected
estimate (d + f1(f1 - 1) / (2(f2 + 1)), f1 and f2 the questions seen once and twice). The share is
min_unseen / estimate, within [SHARE_MIN, SHARE_MAX]: a large family gives a fifth of its questions
(the evaluation search then finds eval_n of them within its bound), a small one up to half. The
threshold sits between the hashes of the census's k-th and (k+1)-th distinct questions, k the share of
the census's distinct questions and never fewer than min(min_unseen, half of them): so a family whose
census shows at least 2 x min_unseen distinct questions always has min_unseen reserved, and is judged.
The census, the estimate, the share and the threshold are committed with the predictions.

A run committed before this design (schema 3: the evaluation tasks were the first seeds whose question
the training and prediction tasks missed, which keeps the rare questions; schema 2: held out by seed
only) is re-analysed as it was committed: select() and recover() are its rules.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field

from shortlist import sources
from shortlist.sources.meaning import QUESTION, normalized

SHARE_MIN, SHARE_MAX = 0.2, 0.5  # of a family's distinct questions, reserved for evaluation
WALK = 4  # a training or prediction draw looks at most at WALK x its count of seeds (at most half are skipped)


def question_hash(key: str, family: str, question: str) -> float:
    """The keyed hash of a question's text, in [0, 1): the hash of its key where it is reserved by its text."""
    return key_hash(key, family, normalized(question))


def key_hash(key: str, family: str, meant: str) -> float:
    """The keyed hash of a question's key (keys()), in [0, 1)."""
    digest = hashlib.sha256(f"{key}\0{family}\0{meant}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def keys(by: str):
    """The key of a task under the key `by` names: its text (QUESTION), else the "meaning" it was built
    with (Family.tasks(keyed=True))."""
    if by == QUESTION:
        return lambda task: normalized(task["question"])
    return lambda task: task["meaning"]


@dataclass(frozen=True)
class Reservation:
    """Which of a family's questions are evaluation-only, and what the share rests on."""
    key: str  # the run's reserve_key
    threshold: float  # a question is reserved when its keyed hash is below this
    share: float  # the share of distinct questions aimed at
    census: int  # tasks drawn to estimate the question space
    distinct: int  # distinct questions among them
    singletons: int  # questions seen once in the census
    doubletons: int  # questions seen twice
    estimate: float  # Chao1's estimate of the family's distinct questions
    reserved: int  # distinct census questions reserved
    meaning: str = QUESTION  # which key questions are reserved by (Family.meaning); a schema-4 run: the text

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Reservation":
        return cls(**{name: d[name] for name in cls.__dataclass_fields__ if name != "meaning"},
                   meaning=d.get("meaning", QUESTION))

    def key_of(self, task: dict) -> str:
        """A task's key under this reservation's (a task built keyed where that is a meaning)."""
        return keys(self.meaning)(task)


def chao1(counts: list[int]) -> float:
    """Chao1's bias-corrected estimate of the number of distinct questions, from their counts in a sample."""
    f1, f2 = sum(c == 1 for c in counts), sum(c == 2 for c in counts)
    return len(counts) + f1 * (f1 - 1) / (2 * (f2 + 1))


def reserve(family, settings, meaning: bool = True) -> Reservation:
    """The family's reservation, from its census (census_n tasks from census_seed): by its meaning (its
    text where it has none), or with meaning=False by its text, as before meanings."""
    family = sources.parse(family)
    return _reserve(family, settings, family.meaning if meaning else QUESTION)[0]


def _reserve(family, settings, by: str) -> tuple[Reservation, set]:
    census = family.tasks(range(settings.census_seed, settings.census_seed + settings.census_n), by != QUESTION)
    counts: dict[str, int] = {}
    for q in map(keys(by), census):
        counts[q] = counts.get(q, 0) + 1
    estimate = chao1(list(counts.values()))
    share = min(SHARE_MAX, max(SHARE_MIN, settings.min_unseen / estimate)) if estimate else SHARE_MAX
    d = len(counts)
    k = min(max(math.ceil(share * d), min(settings.min_unseen, d // 2)), max(d - 1, 0))
    hashes = sorted(key_hash(settings.reserve_key, family.environment, q) for q in counts)
    threshold = 0.0 if k == 0 else (hashes[k - 1] + hashes[k]) / 2
    return Reservation(settings.reserve_key, threshold, share, len(census), d, sum(c == 1 for c in counts.values()),
                       sum(c == 2 for c in counts.values()), estimate, k, by), set(counts)


def is_reserved(reservation: Reservation, family, task: dict) -> bool:
    """Whether a task's question is reserved, by the key its reservation was drawn by (a task built keyed
    where that key is a meaning)."""
    environment = sources.parse(family).environment
    return key_hash(reservation.key, environment, reservation.key_of(task)) < reservation.threshold


def walk(family, start: int, stop: int, count: int, keep, keyed: bool = False) -> tuple[list[dict], list[int]]:
    """The first `count` tasks from seed `start` (below `stop`) that `keep` accepts, and the seeds passed
    over; fewer where the seeds run out. keyed: the tasks carry their meaning (Family.tasks)."""
    chosen, skipped, at = [], [], start
    while len(chosen) < count and at < stop:
        end = min(stop, at + count - len(chosen))  # build no more than could still be needed (some build slowly)
        for task in family.tasks(range(at, end), keyed):
            if keep(task):
                chosen.append(task)
            else:
                skipped.append(task["seed"])
        at = end
    return chosen, skipped


@dataclass(frozen=True)
class HeldOut:
    """Which evaluation tasks a family has, and what they rest on; committed with the predictions."""
    seeds: tuple  # the evaluation tasks' seeds, in order
    skipped: tuple  # seeds looked at and passed over: their question was not reserved (seen, in schema 3)
    searched: int  # seeds looked at, from eval_seed up
    groups: tuple  # per evaluation task, the index of its distinct question (in order of first appearance)
    sha256: str  # sources.fingerprint() of the evaluation tasks
    reservation: Reservation | None = None  # None: a run committed before reservation (select())
    train: tuple = ()  # the training tasks' seeds (with a reservation: walked past reserved questions)
    predict: tuple = ()  # the prediction tasks' seeds
    reserved: int = 0  # distinct reserved questions known: the census's, and the evaluation's beyond them
    short: tuple = field(default=())  # draws that ran out of seeds before their count: ("train", found), ...

    def __post_init__(self):
        for name in ("seeds", "skipped", "groups", "train", "predict", "short"):
            object.__setattr__(self, name, tuple(tuple(x) if isinstance(x, list) else x for x in getattr(self, name)))
        if len(self.groups) != len(self.seeds) or self.searched < len(self.seeds) + len(self.skipped):
            raise ValueError("a held-out record whose counts do not add up")

    @property
    def n(self) -> int:
        return len(self.seeds)

    @property
    def distinct(self) -> int:
        return len(set(self.groups))

    def as_dict(self) -> dict:
        out = asdict(self) | {"n": self.n, "distinct": self.distinct}
        out["reservation"] = self.reservation.as_dict() if self.reservation else None
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "HeldOut":
        reservation = Reservation.from_dict(d["reservation"]) if d.get("reservation") else None
        return cls(d["seeds"], d["skipped"], d["searched"], d["groups"], d["sha256"], reservation,
                   d.get("train", ()), d.get("predict", ()), d.get("reserved", 0), d.get("short", ()))


def groups_of(tasks: list[dict], by: str = QUESTION) -> list[int]:
    """Per task, the index of its distinct question (by its text, or by the key `by` names: keys())."""
    index: dict[str, int] = {}
    return [index.setdefault(key, len(index)) for key in map(keys(by), tasks)]


def draw(family, settings, meaning: bool = True) -> tuple[HeldOut, dict]:
    """The family's reservation, then its training, prediction and evaluation tasks, each walked from
    its seed past the questions it may not hold; returns the record and {"train", "predict", "eval"}.
    meaning=False: reserved by the text, as before meanings (what a twin of a question cost: bench)."""
    family = sources.parse(family)
    by = family.meaning if meaning else QUESTION
    r, census = _reserve(family, settings, by)
    free = lambda t: not is_reserved(r, family, t)  # noqa: E731
    ranges, keyed = settings.seed_ranges(), by != QUESTION
    n_train = settings.steps * settings.prompts_per_step
    train, _ = walk(family, ranges["train"].start, ranges["train"].stop, n_train, free, keyed)
    predict, _ = walk(family, ranges["predict"].start, ranges["predict"].stop, settings.predict_tasks, free, keyed)
    evaluate, skipped = walk(family, ranges["eval"].start, ranges["eval"].stop, settings.eval_n,
                             lambda t: is_reserved(r, family, t), keyed)
    short = tuple((name, len(got)) for name, got, want in (("train", train, n_train),
                                                           ("predict", predict, settings.predict_tasks)) if len(got) < want)
    beyond = set(map(r.key_of, evaluate)) - census
    record = HeldOut([t["seed"] for t in evaluate], skipped, len(evaluate) + len(skipped), groups_of(evaluate, by),
                     sources.fingerprint(evaluate), r, [t["seed"] for t in train], [t["seed"] for t in predict],
                     r.reserved + len(beyond), short)
    return record, {"train": train, "predict": predict, "eval": evaluate}


def rebuild(family, record: HeldOut) -> dict:
    """The committed tasks of a reserved draw, built again from their seeds (keyed, where its reservation
    was drawn by a meaning this version has)."""
    family = sources.parse(family)
    keyed = record.reservation is not None and record.reservation.meaning == family.meaning != QUESTION
    return {name: family.tasks(list(seeds), keyed) for name, seeds in
            (("train", record.train), ("predict", record.predict), ("eval", record.seeds))}


def breaches(record: HeldOut, family, built: dict) -> list[str]:
    """Why a committed draw's tasks do not keep its reservation, read by the key it was drawn by: an
    evaluation task whose question is not reserved, a training or prediction task whose question is; []
    where they keep it. Not read where the draw's key is a meaning this version does not have (another
    version of its function): its tasks are the committed ones (their fingerprints), drawn as committed."""
    r, family = record.reservation, sources.parse(family)
    if r is None or r.meaning not in (QUESTION, family.meaning):
        return []
    why = []
    for name, want in (("eval", True), ("train", False), ("predict", False)):
        wrong = [t["seed"] for t in built[name] if is_reserved(r, family, t) != want]
        if wrong:
            why.append(f"{len(wrong)} of its {name} tasks (seed {wrong[0]} first) ask a question "
                       f"{'not ' if want else ''}reserved by {r.meaning}")
    return why


def select(family, settings, seen: list[dict]) -> tuple[HeldOut, list[dict]]:
    """Schema 3's evaluation tasks: the first eval_n seeds from eval_seed up whose question is not among
    the `seen` tasks (training and prediction), within the search bound; fewer where it runs out."""
    family = sources.parse(family)
    known = {normalized(t["question"]) for t in seen}
    stop = settings.eval_seed + settings.eval_search * settings.eval_n
    chosen, skipped = walk(family, settings.eval_seed, stop, settings.eval_n,
                           lambda t: normalized(t["question"]) not in known)
    record = HeldOut([t["seed"] for t in chosen], skipped, len(chosen) + len(skipped), groups_of(chosen),
                     sources.fingerprint(chosen))
    return record, chosen


def recover(family, seeds: list[int], seen: list[dict]) -> tuple[list[bool], list[int]]:
    """For a run whose evaluation seeds were held out by number only (schema 2): which of its
    evaluation tasks are unseen, and each task's distinct-question index."""
    tasks = sources.parse(family).tasks(seeds)
    known = {normalized(t["question"]) for t in seen}
    return [normalized(t["question"]) not in known for t in tasks], groups_of(tasks)


def judgeable(record: HeldOut, min_unseen: int) -> str | None:
    """Why the proof cannot judge a family from its evaluation tasks, or None: the one rule, for every
    schema (a schema-2 run's record is built from its recovered unseen tasks: evidence.py)."""
    if record.reservation is not None:
        if record.reserved < min_unseen or record.distinct == 0:
            r = record.reservation
            return (f"only {record.reserved} distinct reserved evaluation questions ({r.distinct} distinct in a census "
                    f"of {r.census}, about {r.estimate:.0f} in the family), below min_unseen={min_unseen}")
        return None
    return too_few_unseen(record.distinct, f"{record.n} tasks, {len(record.skipped)} seeds skipped as seen", min_unseen)


def too_few_unseen(distinct: int, counted_from: str, min_unseen: int) -> str | None:
    """The rule for tasks held out by question: fewer than min_unseen distinct unseen questions cannot
    judge a family. Why, or None; counted_from says of what they were counted ("200 tasks, ...")."""
    if distinct >= min_unseen:
        return None
    return f"only {distinct} distinct unseen evaluation questions (of {counted_from}), below min_unseen={min_unseen}"
