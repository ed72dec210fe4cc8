"""The analysis beyond the seed's, on synthetic results: no model needed."""
import pytest

from proof import analysis, commit, report, rules

N = 200
HALF = [0.0] * 100 + [1.0] * 100
UP = {"before": HALF, "after": [1.0] * N}
FLAT = {"before": HALF, "after": HALF}


def test_a_gain_of_partial_credit_alone_is_no_real_learning(synthetic):
    # the measured case: accuracy 0 -> 0, the mean score up because answers got shorter
    s = synthetic({"chain_sum": {"prediction": "no change", "before": [0.04] * N, "after": [0.09] * N,
                                 "before_answers": ["12 + 7 = 19"] * N, "after_answers": ["19x"] * N}})
    r = report.load(s.out)
    assert r.results["chain_sum"].improved and not r.results["chain_sum"].held  # the seed's verdict, unchanged
    a = r.analyses["chain_sum"]
    assert a.learning == "partial credit only" and not a.accuracy_improved and not a.real
    assert a.held and a.judgement.endswith("(partial credit only)")  # "no change" in what the rule is judged on
    assert "1 significant gain GRPO made: 0 real learning" in report.statistics(r)
    assert report.format_table(r).data.iloc[0]["answer length (chars)"] == "11.0 → 3.0"


def test_real_learning_holds_an_improves_prediction(synthetic):
    a = report.load(synthetic({"chain_sum": {"prediction": "improves", **UP}}).out).analyses["chain_sum"]
    assert a.learning == "real learning" and a.real and a.held and a.judgement == "held"
    assert a.accuracy == (0.5, 1.0) and a.accuracy_gain["gain"] == 0.5


def test_a_nearly_unchanged_no_change_is_held_equivalent(synthetic):
    after = HALF[:]
    after[0], after[-1] = 1.0, 0.0  # two tasks of 200 swap: a gain of 0 with a spread, well within ±0.05
    r = report.load(synthetic({"chain_sum": {"prediction": "no change", "before": HALF, "after": after}}).out)
    assert r.analyses["chain_sum"].judgement == "held (equivalent)"


def test_an_unchanged_no_change_has_no_spread_and_cannot_be_judged_equivalent(synthetic):
    r = report.load(synthetic({"chain_sum": {"prediction": "no change", **FLAT}}).out)
    a = r.analyses["chain_sum"]
    assert a.held and a.difference_sd == 0 and a.judgement == "held (equivalence cannot be judged)"


def test_a_noisy_no_change_is_held_inconclusive(synthetic):
    s = synthetic({"chain_sum": {"prediction": "no change", "before": [1.0, 0.0] * 100, "after": [0.0, 1.0] * 100}})
    a = report.load(s.out).analyses["chain_sum"]
    assert a.judgement == "held (inconclusive)" and a.mde > 0.05  # eval_n could not have shown ±0.05


def test_the_committed_margin_decides_not_the_current_one(synthetic):
    s = synthetic({"chain_sum": {"prediction": "no change", "before": [1.0, 0.0] * 100, "after": [0.0, 1.0] * 100}},
                  equivalence_margin=0.5)
    assert "±0.5" in commit.verified(s)[0]["analysis"]["equivalence"]
    assert report.load(s.out).analyses["chain_sum"].judgement == "held (equivalent)"


def test_holm_adjusts_across_families_in_their_order(synthetic):
    small, large = [0.0] * 150 + [1.0] * 50, [0.0] * 50 + [1.0] * 150
    s = synthetic({"chain_sum": {"prediction": "improves", "before": small, "after": large},
                   "leg_counting": {"prediction": "improves", **FLAT},
                   "products": {"prediction": "improves", "before": small,  # 20 tasks up, 12 down
                                "after": [1.0] * 20 + [0.0] * 130 + [0.0] * 12 + [1.0] * 38}})
    r = report.load(s.out)
    raw = [r.results[k].gain["p"] for k in s.families]
    assert raw[0] < raw[2] < raw[1] == 1.0  # ranks: chain_sum, products, leg_counting
    assert r.across.holm["score"] == pytest.approx([3 * raw[0], 1.0, max(3 * raw[0], min(1.0, 2 * raw[2]))])
    assert report.outcome_row(r, "leg_counting")["p (Holm)"] == 1.0


def test_rule_against_comparators_and_confusion(synthetic):
    s = synthetic({
        # the rule says improves and it did: pass@1 in band, signals high
        "chain_sum": {"prediction": "improves", **UP, "screen": {"pass1": 0.5, "signal_raw": 0.9, "signal_correct": 0.9}},
        # too hard, and nothing moved; raw signal high from partial credit
        "leg_counting": {"prediction": "no change", **FLAT, "screen": {"pass1": 0.0, "signal_raw": 0.8,
                                                                       "signal_correct": 0.0}},
        # the rule says improves, nothing moved
        "products": {"prediction": "improves", **FLAT, "screen": {"pass1": 0.3, "signal_raw": 0.5, "signal_correct": 0.5}},
    })
    r = report.load(s.out)
    by = {c.rule: c for c in r.across.comparisons}
    assert by[rules.RULE].hits.k == 2 and by["always improves"].hits.k == 1 and by["never improves"].hits.k == 2
    assert by["pass@1 in [0.05, 0.9)"].hits.k == 2
    assert by["signal (raw) ≥ 0.25"].hits.k == 1 and by["signal (correctness) ≥ 0.25"].hits.k == 2
    c = r.across.confusion
    assert (c[True, True], c[True, False], c[False, True], c[False, False]) == (1, 1, 0, 1)
    assert r.across.held.rate == pytest.approx(2 / 3) and r.across.held.ci95 == pytest.approx((0.2077, 0.9385), abs=1e-3)


def test_both_sides_are_measured_precision_on_improves_and_the_miss_rate_on_too_hard(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", **UP},
                   "products": {"prediction": "improves", **FLAT},
                   "leg_counting": {"prediction": "no change", **UP, "screen": {"pass1": 0.02}},  # boundary, learned
                   "aiw": {"prediction": "no change", **FLAT, "screen": {"pass1": 0.0}}})  # too hard at 0
    sides = report.load(s.out).across.sides
    assert (sides["improves"].k, sides["improves"].n) == (1, 2)  # precision 1/2
    assert (sides["boundary"].k, sides["boundary"].n) == (1, 1) and (sides["too hard"].k, sides["too hard"].n) == (0, 1)


def test_correlations_rank_signals_against_gains(synthetic):
    cases = {}
    for i, name in enumerate(["chain_sum", "leg_counting", "products", "basic_arithmetic"]):
        cases[name] = {"prediction": "improves", "before": HALF, "after": [0.0] * (100 - 20 * i) + [1.0] * (100 + 20 * i),
                       "screen": {"pass1": 0.1 * (i + 1), "learnability": 0.2 - 0.01 * i}}
    r = report.load(synthetic(cases).out)
    by = {c["key"]: c for c in r.across.correlations}
    assert by["pass1"]["score gain"]["rho"] == pytest.approx(1.0)
    assert by["learnability"]["accuracy gain"]["rho"] == pytest.approx(-1.0)
    assert by["signal_raw"]["score gain"]["rho"] is None  # the same for every family
    assert len(report.SECTIONS["correlations"].figure(r).axes) == len(analysis.SIGNALS)


def test_the_plan_and_what_each_comparison_could_show_are_committed_with_the_predictions(synthetic):
    cases = {name: {"prediction": "improves" if i < 3 else "no change", **FLAT, "screen": {"pass1": 0.3}}
             for i, name in enumerate(["chain_sum", "products", "aiw", "leg_counting"])}
    s = synthetic(cases)
    plan = commit.verified(s)[0]["analysis"]
    assert {"primary", "outcome", "judged", "sides", "comparisons", "borderline", "power"} <= set(plan)
    assert f"eval_n = {N}" in plan["minimum_detectable_effect"]
    power = plan["power"]
    assert power["judged"] == 4 and power["sides"] == {"improves": 3, "too hard": 1}
    always = power["comparisons"]["always improves"]
    assert always["disagree"] == 1 and always["where it says no change"] == 1 and always["best_p"] == 1.0
    never = power["comparisons"]["never improves"]  # three disagreements: all the rule's way gives 2 x 0.5^3
    assert never["disagree"] == 3 and never["best_p"] == pytest.approx(0.25)
    assert power["comparisons"]["pass@1 > 0"]["disagree"] == 1
    assert {c.rule: c.best_p for c in report.load(s.out).across.comparisons}["never improves"] == pytest.approx(0.25)


def test_a_trained_model_that_prints_one_answer_is_no_real_learning_and_stays_judged(synthetic, scorer):
    from shortlist import audit, sources, trainee
    key = "coin_flip(max_trials=3)"
    family = sources.parse(key)
    tasks = family.tasks(range(100_000, 100_000 + N))
    zero = scorer.score(family, [t["seed"] for t in tasks], ["0"] * N)  # "0" is right most of the time here
    before = [0.0 if i % 2 else z for i, z in enumerate(zero)]  # half of those right before
    baselines = audit.constants(scorer, trainee.QWEN3, family, tasks, ["0"] * N)
    s = synthetic({key: {"prediction": "improves", "before": before, "after": zero, "after_answers": ["0"] * N,
                         "baselines": baselines},
                   "chain_sum": {"prediction": "improves", **UP}})
    r = report.load(s.out)
    a = r.analyses[key]
    assert r.results[key].improved and a.improved and a.accuracy_improved  # the seed's analysis calls it a gain...
    assert a.learning == "matched by a policy" and not a.real  # ...that printing "0" matches
    assert a.judged and not a.held and a.judgement == "did not hold (matched by a policy)"  # a failure, counted
    assert r.across.judged == (key, "chain_sum") and r.across.held.k == 1
    assert baselines["distinct_answers"] == 1 / N and baselines["mode"]["accuracy"] == r.results[key].after.accuracy
    assert any(w.startswith(f"{key}: its gain is matched by a policy") for w in report.warnings(r))
    assert "matched by a policy; did not hold." in report.family_line(r, key)


def test_a_collapse_holds_a_no_change_prediction(synthetic):
    s = synthetic({"chain_sum": {"prediction": "no change", **UP,
                                 "baselines": {"distinct_answers": 0.005, "mode": {"answer": '"1"', "accuracy": 1.0,
                                                                                  "mean": 1.0}, "policy": None}}})
    a = report.load(s.out).analyses["chain_sum"]
    assert a.learning == "matched by a policy" and a.judged and a.held


def test_a_family_the_commitment_does_not_judge_is_trained_and_reported_apart(synthetic):
    # eight distinct questions among 200 evaluation tasks: below min_unseen
    s = synthetic({"chain_sum": {"prediction": "improves", **UP, "groups": [i % 8 for i in range(N)]},
                   "leg_counting": {"prediction": "improves", **UP}}, min_unseen=40)
    r = report.load(s.out)
    assert r.analyses["chain_sum"].distinct == 8 and not r.analyses["chain_sum"].judged
    assert "only 8 distinct unseen evaluation questions" in r.body["not_judged"]["chain_sum"][0]
    assert r.across.judged == ("leg_counting",) and r.across.comparisons[0].hits.n == 1
    assert "Trained, not judged (as committed; 1): chain_sum (too few evaluation questions)" in report.statistics(r)
    assert "not judged: only 8 distinct" in report.family_line(r, "chain_sum")
    assert "did not hold" not in report.family_line(r, "chain_sum")
    assert r.analyses["chain_sum"].by_question["gain"] == pytest.approx(0.5)  # each of the 8 questions counted once


def test_the_rule_and_a_simpler_rule_are_compared_where_they_disagree(synthetic):
    cases = {}
    # pass@1 > 0 everywhere, so "pass@1 > 0" says improves everywhere; the rule says it on the first four
    for i, name in enumerate(["chain_sum", "leg_counting", "products", "basic_arithmetic", "letter_counting", "aiw"]):
        cases[name] = {"prediction": "improves" if i < 4 else "no change", **(UP if i < 4 else FLAT),
                       "screen": {"pass1": 0.3}}
    r = report.load(synthetic(cases).out)
    m = {c.rule: c for c in r.across.comparisons}["pass@1 > 0"]
    assert m.disagree == 2 and (m.mcnemar["only_first"], m.mcnemar["only_second"]) == (2, 0)
    assert m.mcnemar["p"] == pytest.approx(0.5) and m.best_p == pytest.approx(0.5)
    text = report.rules_text(r)
    assert "Against 'pass@1 > 0', the rule alone was right on 2 specs and it alone on 0; the rule does better" in text
    assert "'pass@1 > 0', where the rule alone was right on 2 specs and it alone on 0 (exact McNemar p 0.500" in \
        report.statistics(r)
    assert "not significant" in text and "rests on 6 judged specs" in text


def test_borderline_verdicts_are_counted_apart(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", **UP, "screen": {"flip": 0.4}},
                   "products": {"prediction": "improves", **FLAT, "screen": {"flip": 0.0}},
                   "aiw": {"prediction": "improves", **UP, "screen": {"flip": 0.01}}})
    b = report.load(s.out).across.borderline
    assert b["borderline"] == 1 and (b["all"].k, b["all"].n) == (2, 3)
    assert (b["without borderline"].k, b["without borderline"].n) == (1, 2)
    assert "1 judged verdict was borderline" in report.statistics(report.load(s.out))


def test_a_judged_spec_whose_training_failed_still_counts_as_failed(synthetic):
    # design v2: a failure is not a dropped spec; it counts against the rule on its side
    s = synthetic({"chain_sum": {"prediction": "improves", **UP},
                   "products": {"prediction": "improves", "failed": "CUDA error"},
                   "leg_counting": {"prediction": "no change", "failed": "killed", "screen": {"pass1": 0.0}}})
    r = report.load(s.out)
    a = r.across
    assert a.failed == ("products", "leg_counting") and set(a.judged) == {"chain_sum", "products", "leg_counting"}
    assert (a.held.k, a.held.n) == (1, 3)  # a failed "no change" is not held either
    assert (a.sides["improves"].k, a.sides["improves"].n) == (1, 2)  # no learning: precision down
    assert (a.sides["too hard"].k, a.sides["too hard"].n) == (1, 1)  # a miss: the miss rate up
    assert a.confusion[True, None] == 1 and a.confusion[False, None] == 1
    by = {c.rule: c for c in a.comparisons}
    assert by["never improves"].hits.n == 3 and by["never improves"].hits.k == 0  # right for no rule
    assert "2 judged specs failed to train" in report.statistics(r)


def test_primary_comparisons_are_adjusted_among_themselves(synthetic):
    cases = {name: {"prediction": "improves" if i < 2 else "no change", **FLAT, "screen": {"pass1": 0.3 if i < 2 else 0.0}}
             for i, name in enumerate(["chain_sum", "products", "aiw", "leg_counting", "basic_arithmetic"])}
    s = synthetic(cases)
    power = commit.verified(s)[0]["analysis"]["power"]
    assert tuple(power["primary"]) == rules.PRIMARY
    rows = power["comparisons"]
    always, any_ = rows["always improves"], rows["pass@1 > 0"]  # 3 disagreements, and none
    assert always["primary"] and any_["primary"] and not rows["never improves"]["primary"]
    assert (always["best_p"], any_["best_p"]) == (pytest.approx(0.25), 1.0)
    assert always["best_p_holm"] == pytest.approx(0.5)  # x2 among the two primary ones, not x8 among all
    by = {c.rule: c for c in report.load(s.out).across.comparisons}
    assert by["always improves"].primary and by["pass@1 > 0"].primary and not by["never improves"].primary


def test_comparisons_of_a_commitment_without_primaries_stay_one_holm_family():
    ps = [0.01, 0.02, 0.04]
    assert rules.holm_by_family(["a", "b", "c"], ps, ()) == pytest.approx([0.03, 0.04, 0.04])
    assert rules.holm_by_family(["a", "b", "c"], ps, ("a", "c")) == pytest.approx([0.02, 0.02, 0.04])
