import math
import os
import time

import pytest

from shortlist import sources as families
from shortlist import scoring
from shortlist.scoring import scorer
from shortlist import trainee
from shortlist.scoring import ScoreCounts, Scorer

MALFORMED = ["The answer is 4.", "<answer>4", "<answer></answer>", "", "\x00<answer", "</answer>4<answer>"]


@pytest.mark.parametrize("family", families.DEFAULT)
def test_malformed_completions_score_zero_in_every_default_family(scorer, family):
    answers = [trainee.QWEN3.clean(c) for c in MALFORMED]
    assert scorer.score(family, [500] * len(answers), answers) == [0.0] * len(MALFORMED)


def test_correct_answers_score_one_and_each_task_is_its_own(scorer):
    f = families.parse("chain_sum")
    tasks = f.tasks(range(40, 44))
    assert scorer.score(f, [t["seed"] for t in tasks], [t["answer"] for t in tasks]) == [1.0] * 4
    shifted = [t["answer"] for t in tasks[1:] + tasks[:1]]  # each answer against another task
    assert all(s < 1.0 for s in scorer.score(f, [t["seed"] for t in tasks], shifted))  # partial credit at most


def test_configured_family_is_scored_with_its_config(scorer):
    f = families.parse("chain_sum(max_terms=2, max_digits=1)")
    task = f.task(7)
    assert scorer.score(f, [7], [task["answer"]]) == [1.0]


def test_a_scorer_exception_scores_zero_and_is_counted(scorer):
    before = scorer.counts.get("prime_factorization", ScoreCounts()).exceptions
    assert scorer.score("prime_factorization", [1, 1], ["not a number", "x*y"]) == [0.0, 0.0]
    assert scorer.counts["prime_factorization"].exceptions == before + 2


def test_none_is_unextracted_and_never_reaches_the_scorer(scorer):
    scorer.score("leg_counting", [1, 2, 3], [None, None, "4"])
    assert scorer.counts["leg_counting"].unextracted >= 2


def test_a_hanging_answer_is_cut_at_the_deadline_and_the_pool_recovers():
    with Scorer(workers=1, deadline_s=0.5) as s:
        task = families.parse("binary_matrix").task(1)
        s.score("binary_matrix", [1], [task["answer"]])  # warm the worker
        started = time.monotonic()
        assert s.score("binary_matrix", [1], ["9**9**9"]) == [0.0]
        assert time.monotonic() - started < 0.5 + 1.5  # the deadline plus a replacement worker
        assert s.counts["binary_matrix"].timeouts == 1
        assert s.score("binary_matrix", [1], [task["answer"]]) == [1.0]  # the fresh worker scores


@pytest.mark.parametrize("raw, expected, counter", [
    (0.5, 0.5, None), (1, 1.0, None), (True, 1.0, None), (1.0000000000000002, 1.0, "clamped"),
    (-0.1, 0.0, "clamped"), (float("nan"), 0.0, "non_finite"), (float("inf"), 0.0, "non_finite"),
    ("0.3", 0.3, None), (object(), 0.0, "exceptions"), (None, 0.0, "exceptions"),
])
def test_normalize(raw, expected, counter):
    counts = ScoreCounts()
    value = scorer.normalize(raw, counts)
    assert type(value) is float and value == expected and math.isfinite(value)
    assert {k: v for k, v in vars(counts).items() if v} == ({counter: 1} if counter else {})


def test_settings_are_checked():
    with pytest.raises(ValueError):
        Scorer(workers=0)


def test_answer_processes_are_confined_and_the_record_is_flat(scorer):
    c = scorer.confinement
    assert c["answer_process"] == "one per answer" and c["environment"] == "emptied" and c["hash_seed"] == 0
    assert c["capabilities"] == 0 and c["dumpable"] is False and c["no_new_privs"] and "NPROC" in c["rlimits"]
    if os.geteuid() == 0:  # root drops to nobody: the kernel then refuses what the probes did
        assert c["user"] == "65534:65534"
    assert all(isinstance(v, (bool, int, str, list, type(None))) for v in c.values())  # predictions.json, the report
