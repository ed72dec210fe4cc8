import json
import math
import os
import secrets
import time

import pytest

from shortlist import sources
from shortlist.scoring import scorer
from shortlist.scoring import zygote
from shortlist import trainee
from shortlist.scoring import ScoreCounts, Scorer

MALFORMED = ["The answer is 4.", "<answer>4", "<answer></answer>", "", "\x00<answer", "</answer>4<answer>"]


@pytest.mark.parametrize("family", sources.DEFAULT)
def test_malformed_completions_score_zero_in_every_default_family(scorer, family):
    answers = [trainee.QWEN3.for_source("reasoning_gym").clean(c) for c in MALFORMED]
    assert scorer.score(family, [500] * len(answers), answers) == [0.0] * len(MALFORMED)


def test_correct_answers_score_one_and_each_task_is_its_own(scorer):
    f = sources.parse("chain_sum")
    tasks = f.tasks(range(40, 44))
    assert scorer.score(f, [t["seed"] for t in tasks], [t["answer"] for t in tasks]) == [1.0] * 4
    shifted = [t["answer"] for t in tasks[1:] + tasks[:1]]  # each answer against another task
    assert all(s < 1.0 for s in scorer.score(f, [t["seed"] for t in tasks], shifted))  # partial credit at most


def test_configured_family_is_scored_with_its_config(scorer):
    f = sources.parse("chain_sum(max_terms=2, max_digits=1)")
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
        task = sources.parse("binary_matrix").task(1)
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
    assert c["process_tree"] in ("pid_namespace", "process_group") and isinstance(c["ipc_namespace"], bool)
    assert c["scratch"] in (f"tmpfs {zygote.Limits.scratch_mb} MiB", "none: files cannot grow")
    if os.geteuid() == 0:  # root drops to nobody: the kernel then refuses what root's answers could do
        assert c["user"] == "65534:65534"
    assert all(isinstance(v, (bool, int, str, list, type(None))) for v in c.values())  # predictions.json, the report


@pytest.mark.parametrize("reply, expected", [
    pytest.param(b'{"score": 0.5, "refused": false}', ("score", 0.5, False), id="score"),
    pytest.param(b'{"score": 1, "refused": true}', ("score", 1.0, True), id="int score, refused"),
    pytest.param(b'{"error": "KeyError", "refused": false}', ("error", "KeyError", False), id="error"),
    pytest.param(b'{"error": "' + b"E" * 1000 + b'", "refused": false}', ("error", "E" * 100, False), id="long error"),
    pytest.param(b'{"score": NaN, "refused": false}', ("score", math.nan, False), id="NaN"),  # counted non_finite
    pytest.param(b'{"score": 1e999, "refused": false}', ("score", math.inf, False), id="inf"),
    pytest.param(b'{"score": 1.0, "refused": ' + b"9" * 4300 + b'}', ("crash", None, False), id="huge refused"),
    pytest.param(b'{"score": 1.0, "refused": 4300}', ("crash", None, False), id="a refused count"),
    pytest.param(b'{"score": ' + b"9" * 4300 + b', "refused": false}', ("crash", None, False), id="huge int score"),
    pytest.param(b'{"score": ' + b"9" * 5000 + b', "refused": false}', ("crash", None, False), id="too many digits"),
    pytest.param(b'{"score": true, "refused": false}', ("crash", None, False), id="bool score"),
    pytest.param(b'{"score": "1.0", "refused": false}', ("crash", None, False), id="str score"),
    pytest.param(b'{"score": [1.0], "refused": false}', ("crash", None, False), id="list score"),
    pytest.param(b'{"score": 1.0, "refused": false, "timeouts": 5}', ("crash", None, False), id="extra key"),
    pytest.param(b'{"score": 1.0}', ("crash", None, False), id="no refused"),
    pytest.param(b"[" * 60000, ("crash", None, False), id="deep list"),
    pytest.param(b'{"a":' * 30000, ("crash", None, False), id="deep object"),
    pytest.param(b"", ("crash", None, False), id="nothing"),
    pytest.param(b"\xff\xfe", ("crash", None, False), id="not utf-8"),
    pytest.param(b"null", ("crash", None, False), id="null"),
])
def test_a_reply_is_checked_field_by_field_and_nothing_in_it_can_break_the_parent(reply, expected):
    kind, value, refused = zygote._reply(reply)
    assert kind == expected[0] and refused is expected[2]
    assert value == expected[1] or (isinstance(value, float) and math.isnan(value) and math.isnan(expected[1]))
    json.dumps([0, kind, value, refused])  # what the zygote sends on


def test_forged_counts_move_no_count_and_leave_them_writable(scorer):
    before = vars(scorer.counts.get("binary_matrix", ScoreCounts())).copy()
    body = ("import os\nfor fd in range(3, 64):\n"
            "    try: os.write(fd, b'{\"score\": 1.0, \"refused\": ' + b'9' * 4300 + b'}')\n"
            "    except OSError: pass\nos._exit(0)")
    forged = f"exec({body!r}, {{}})"  # eval() runs it in binary_matrix's scorer
    assert scorer.score("binary_matrix", [1, 1], [forged, forged]) == [0.0, 0.0]
    after = vars(scorer.counts["binary_matrix"])
    assert after["refused"] == before.get("refused", 0) and after["crashes"] == before.get("crashes", 0) + 2
    json.dumps(after)  # what 01 writes: forged counts summed past int-to-str's 4300 digits made it raise


def test_the_callers_environment_is_never_touched_and_the_server_has_its_own(monkeypatch):
    """Starting the Scorer once emptied os.environ process-wide while the forkserver started: another
    thread reading the environment then saw none."""
    secret = "shortlist-" + secrets.token_hex(8)
    monkeypatch.setenv("SHORTLIST_PROBE_SECRET", secret)
    touched = []
    monkeypatch.setattr(os.environ, "clear", lambda: touched.append("clear"), raising=False)
    before = dict(os.environ)
    with Scorer(workers=1) as s:
        assert s.score("leg_counting", [1], [sources.parse("leg_counting").task(1)["answer"]]) == [1.0]
        with open(f"/proc/{s._server.process.pid}/environ", "rb") as f:
            server = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if item)
    assert touched == [] and dict(os.environ) == before
    assert server[b"PYTHONHASHSEED"] == b"0" and secret.encode() not in b"".join(server.values())


def test_a_forked_child_that_closes_the_scorer_leaves_the_parents_alone():
    """A fork of the caller (a DataLoader worker, say) runs atexit's close() too: it must neither kill
    the parent's zygotes through the shared socket nor remove the parent's scratch directory."""
    with Scorer(workers=1) as s:
        answer = sources.parse("leg_counting").task(1)["answer"]
        assert s.score("leg_counting", [1], [answer]) == [1.0]
        pid = os.fork()
        if pid == 0:
            s.close()
            os._exit(0)
        os.waitpid(pid, 0)
        assert os.path.isdir(s._scratch) and s.score("leg_counting", [1], [answer]) == [1.0]


EXITING = '''
import atexit, json, sys
from shortlist.scoring import Scorer
kept = [Scorer(workers=1)]  # the first registers the exit hook
hooks = atexit._ncallbacks()
kept += [Scorer(workers=1) for _ in range(3)]
kept[1].close()
json.dump({"added_hooks": atexit._ncallbacks() - hooks, "scratch": [s._scratch for s in kept]}, sys.stdout)
'''


def test_many_scorers_share_one_exit_hook_which_closes_those_left_open(tmp_path):
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", EXITING], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["added_hooks"] == 0 and len(seen["scratch"]) == 4  # one hook for every Scorer, not one each
    assert not any(os.path.exists(path) for path in seen["scratch"])  # the three left open were closed at exit


def test_an_answer_repeated_for_a_task_is_scored_once_and_counted_as_often_as_given():
    """A policy battery or a GRPO group gives one task the same answer many times: one process scores it (four
    hanging copies cost one deadline, not four), every copy gets its score and its count."""
    with Scorer(workers=1, deadline_s=1.0) as s:
        task = sources.parse("binary_matrix").task(1)
        s.score("binary_matrix", [1], [task["answer"]])  # warm the worker
        started = time.monotonic()
        assert s.score("binary_matrix", [1, 1, 1, 1, 1], ["9**9**9", task["answer"], "9**9**9", "9**9**9",
                                                          "9**9**9"]) == [0.0, 1.0, 0.0, 0.0, 0.0]
        assert time.monotonic() - started < 2 * 1.0 + 1.5  # one hang and one honest answer, a replacement worker
        counts = s.counts["binary_matrix"]
        assert (counts.timeouts, counts.answers) == (4, 6)


def test_the_same_answer_to_other_tasks_is_scored_against_each(scorer):
    f = sources.parse("chain_sum")
    a, b = f.tasks([40, 41])
    assert a["answer"] != b["answer"]
    assert scorer.score(f, [40, 41, 40], [a["answer"]] * 3) == [1.0, scorer.score(f, [41], [a["answer"]])[0], 1.0]
    assert scorer.score(f, [41], [a["answer"]])[0] < 1.0


def test_the_cpus_a_process_may_use_are_its_affinitys():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", "from shortlist import process; from shortlist.scoring import "
                          "scorer; print(process.cpus(), scorer.WORKERS)"], capture_output=True, text=True, check=True,
                         preexec_fn=lambda: os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]}))
    assert out.stdout.split() == ["1", "1"]


@pytest.mark.parametrize("quota, expected", [("150000 100000", 2), ("50000 100000", 1), ("max 100000", None),
                                             ("garbage", None)])
def test_the_cpus_a_process_may_use_stop_at_its_cgroups_quota(tmp_path, quota, expected):
    from shortlist import process
    (tmp_path / "cpu.max").write_text(quota + "\n")
    mine = len(os.sched_getaffinity(0))
    assert process.cpus(str(tmp_path / "cpu.max")) == (mine if expected is None else min(mine, expected))
    assert process.cpus(str(tmp_path / "absent")) == mine


def test_a_reply_for_an_answer_not_given_is_an_error_not_a_score():
    with pytest.raises(RuntimeError, match="not given"):
        list(Scorer._tally([[0, "score", 1.0, False], [7, "score", 1.0, False]], ScoreCounts(), {0: [0, 2]}))


def test_with_retries_a_hang_is_asked_again_and_counted_once_in_each_field():
    with Scorer(workers=1, deadline_s=0.5) as s:
        task = sources.parse("binary_matrix").task(1)
        s.score("binary_matrix", [1], [task["answer"]])  # warm the worker
        started = time.monotonic()
        assert s.score("binary_matrix", [1, 1, 1], ["9**9**9", task["answer"], "9**9**9"], retries=2) == [0.0, 1.0, 0.0]
        assert 3 * 0.5 <= time.monotonic() - started < 3 * 0.5 + 4.0  # three tries of the hang, not six
        counts = s.counts["binary_matrix"]
        assert (counts.timeouts, counts.retried, counts.answers) == (2, 2, 4)
        with pytest.raises(ValueError, match="retries"):
            s.score("binary_matrix", [1], ["1"], retries=-1)


class _Flaky:
    """A process layer whose every answer passes its deadline the first time it is sent (a loaded machine), then
    scores what `truth` says; `refuse`: answers whose timed-out try was flagged refused."""

    def __init__(self, truth, refuse=()):
        self.truth, self.refuse, self.sent = truth, set(refuse), []

    def __call__(self, family, jobs):
        self.sent.append([job[0] for job in jobs])
        out = []
        for index, seed, answer in jobs:
            first = (seed, answer) not in getattr(self, "seen", set())
            self.seen = getattr(self, "seen", set()) | {(seed, answer)}
            out.append([index, "timeout", None, answer in self.refuse] if first else
                       [index, "score", self.truth(family, seed, answer), False])
        return out


def _layered(results) -> Scorer:
    s = Scorer.__new__(Scorer)  # no sandbox: the process layer is `results`
    s.counts, s._results = {}, results
    return s


def test_a_timed_out_try_asked_again_gives_the_answers_own_score_and_only_the_last_try_counts():
    truth = lambda family, seed, answer: 1.0 if answer == "right" else 0.25  # noqa: E731
    layer = _Flaky(truth, refuse={"odd"})
    s = _layered(layer)
    assert s.score("chain_sum", [1, 2, 1, 3], ["right", "odd", "right", None], retries=1) == [1.0, 0.25, 1.0, 0.0]
    assert layer.sent == [[0, 1], [0, 1]]  # the repeated answer once, the unextracted never
    c = s.counts["chain_sum"]
    assert (c.answers, c.retried, c.timeouts, c.refused, c.unextracted) == (4, 3, 0, 0, 1)
    fresh = _layered(_Flaky(truth, refuse={"odd"}))
    assert fresh.score("chain_sum", [1, 2], ["right", "odd"]) == [0.0, 0.0]  # no retries: GRPO's rewards
    c = fresh.counts["chain_sum"]
    assert (c.retried, c.timeouts, c.refused) == (0, 2, 1)


def test_a_source_scored_at_its_server_is_not_retried_its_batch_has_one_budget(monkeypatch):
    monkeypatch.setattr(scorer.source_, "remote", lambda source: True)
    layer = _Flaky(lambda family, seed, answer: 1.0)
    s = _layered(layer)
    assert s.score("chain_sum", [1, 2], ["a", "b"], retries=2) == [0.0, 0.0]
    assert layer.sent == [[0, 1]] and (s.counts["chain_sum"].timeouts, s.counts["chain_sum"].retried) == (2, 0)


def test_a_retry_answered_for_an_answer_not_sent_again_is_an_error():
    def layer(family, jobs):
        return [[0, "timeout", None, False], [1, "score", 1.0, False]] if len(jobs) == 2 else \
            [[0, "score", 1.0, False], [1, "score", 1.0, False]]
    with pytest.raises(RuntimeError, match="not given"):
        _layered(layer).score("chain_sum", [1, 2], ["a", "b"], retries=1)


def test_evaluations_and_the_policies_do_not_depend_on_a_loaded_machines_timeouts():
    """What is read back or checked again (an evaluation, the policies' scores) is scored with retries: a machine
    that times every answer out once gives the numbers an idle one gives."""
    from proof import evaluate
    from shortlist import audit
    family = sources.parse("chain_sum(max_terms=2, max_digits=1)")
    tasks = family.tasks(range(10, 30))
    golds = {t["seed"]: str(t["answer"]) for t in tasks}
    truth = lambda fam, seed, answer: float(golds[seed] == answer or (answer == "1" and seed % 2))  # noqa: E731
    idle, loaded = _layered(lambda f, jobs: [[i, "score", truth(f, s_, a), False] for i, s_, a in jobs]), \
        _layered(_Flaky(truth))
    asked = trainee.SMOLLM2.for_source(family.source)
    completions = [f"Answer: {golds[t['seed']] if t['seed'] % 3 else '1'}" for t in tasks]
    seeds = [t["seed"] for t in tasks]
    a, b = (evaluate.score(s, asked, family, seeds, completions, [False] * 20, [False] * 20) for s in (idle, loaded))
    assert a.scores == b.scores and 0 < sum(a.scores) < 20
    answers = [asked.clean(c) for c in completions]
    constants = audit.constants(idle, asked, family, tasks, answers)
    assert constants == audit.constants(loaded, asked, family, tasks, answers) and constants["mode"]["mean"] > 0
    assert audit.audit(idle, asked, family, tasks) == audit.audit(loaded, asked, family, tasks)
    measured = audit.audit(idle, asked, family, tasks)
    assert measured.ceiling == 1.0 and measured.guess.answer == '"1"' and measured.guess.accuracy == 0.5


def test_a_screen_does_not_depend_on_a_loaded_machines_timeouts():
    """A screen's numbers are the committed verdict's: a machine that times every answer out once gives the screen
    an idle one gives (GRPO's rewards alone keep a timeout's 0)."""
    from shortlist import screening
    from shortlist.generation.sampling import Samples
    family = sources.parse("chain_sum(max_terms=2, max_digits=1)")
    tasks = family.tasks(range(10, 22))
    golds = {t["seed"]: str(t["answer"]) for t in tasks}
    asked = trainee.SMOLLM2.replace(group=4)

    class Replies:  # each task: its gold twice, a wrong number twice (pass@1 0.5, every group mixed)
        trainee = asked

        def sample(self, questions, k=1, greedy=False, trainee=None):
            texts = [[f"Answer: {golds[t['seed']]}"] * 2 + ["Answer: 99999"] * 2 for t in tasks]
            flags = [[False] * k for _ in questions]
            return Samples(texts, flags, flags)
    truth = lambda fam, seed, answer: float(golds[seed] == answer)  # noqa: E731
    idle = _layered(lambda f, jobs: [[i, "score", truth(f, s_, a), False] for i, s_, a in jobs])
    loaded = _layered(_Flaky(truth))
    a, b = (screening.screen_tasks(Replies(), s, family, tasks) for s in (idle, loaded))
    assert a.pass1 == b.pass1 == 0.5 and a.signal_correct == b.signal_correct == 1.0 and a.verdict == b.verdict
    assert b.scoring["retried"] == 48 and b.scoring["timeouts"] == 0 and a.scoring["retried"] == 0
