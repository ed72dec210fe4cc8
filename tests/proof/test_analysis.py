"""The analysis beyond the seed's, on synthetic results: no model needed."""
import pytest

from proof import analysis, commit, report

N = 200
HALF = [0.0] * 100 + [1.0] * 100


def test_a_gain_of_partial_credit_alone_is_labelled_and_headlined(synthetic):
    # the measured case: accuracy 0 -> 0, the mean score up because answers got shorter
    s = synthetic({"chain_sum": {"prediction": "no change", "before": [0.04] * N, "after": [0.09] * N,
                                 "before_answers": ["12 + 7 = 19"] * N, "after_answers": ["19x"] * N}})
    r = report.load(s.out)
    result = r.results["chain_sum"]
    assert result.improved and not result.held  # the seed's verdict, unchanged
    a = r.analyses["chain_sum"]
    assert a["learning"] == "partial credit only" and not a["accuracy_improved"]
    assert a["judgement"] == "did not hold (partial credit only)"
    assert "gain GRPO made: 0 real learning (more correct answers than before and than any constant answer), 1 " \
           "partial credit only, 0 collapse." in report.headline(r)
    fmt = report.format_table(r).data.iloc[0]
    assert fmt["answer length (chars)"] == "11.0 → 3.0"


def test_real_learning_is_labelled_accuracy(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HALF, "after": [1.0] * N}})
    a = report.load(s.out).analyses["chain_sum"]
    assert a["learning"] == "accuracy" and a["judgement"] == "held" and a["accuracy_gain"]["gain"] == 0.5


def test_an_unchanged_no_change_is_held_equivalent(synthetic):
    s = synthetic({"chain_sum": {"prediction": "no change", "before": HALF, "after": HALF}})
    r = report.load(s.out)
    assert r.analyses["chain_sum"]["judgement"] == "held (equivalent)"
    assert "1 shown to be no change within ±0.05, 0 inconclusive" in report.headline(r)


def test_a_noisy_no_change_is_held_inconclusive(synthetic):
    s = synthetic({"chain_sum": {"prediction": "no change", "before": [1.0, 0.0] * 100, "after": [0.0, 1.0] * 100}})
    a = report.load(s.out).analyses["chain_sum"]
    assert a["judgement"] == "held (inconclusive)" and a["mde"] > 0.05  # eval_n could not have shown ±0.05


def test_the_committed_margin_decides_not_the_current_one(synthetic):
    s = synthetic({"chain_sum": {"prediction": "no change", "before": [1.0, 0.0] * 100, "after": [0.0, 1.0] * 100}},
                  equivalence_margin=0.5)
    assert "±0.5" in commit.verified(s)[0]["analysis"]["equivalence"]
    assert report.load(s.out).analyses["chain_sum"]["judgement"] == "held (equivalent)"


def test_holm_adjusts_across_families_in_their_order(synthetic):
    small, large = [0.0] * 150 + [1.0] * 50, [0.0] * 50 + [1.0] * 150
    s = synthetic({"chain_sum": {"prediction": "improves", "before": small, "after": large},
                   "leg_counting": {"prediction": "improves", "before": HALF, "after": HALF},
                   "products": {"prediction": "improves", "before": small,  # 20 tasks up, 12 down
                                "after": [1.0] * 20 + [0.0] * 130 + [0.0] * 12 + [1.0] * 38}})
    r = report.load(s.out)
    raw = [r.results[k].gain["p"] for k in s.families]
    assert raw[0] < raw[2] < raw[1] == 1.0  # ranks: chain_sum, products, leg_counting
    assert r.across["holm"]["score"] == pytest.approx([3 * raw[0], 1.0, max(3 * raw[0], min(1.0, 2 * raw[2]))])
    assert report.outcome_row(r, "leg_counting")["p (Holm)"] == 1.0


def test_rule_against_alternatives_and_confusion(synthetic):
    up = {"before": HALF, "after": [1.0] * N}
    flat = {"before": HALF, "after": HALF}
    s = synthetic({
        # the rule says improves and it did: pass@1 in band, signals high
        "chain_sum": {"prediction": "improves", **up, "screen": {"pass1": 0.5, "signal_raw": 0.9, "signal_correct": 0.9}},
        # too hard, and nothing moved; raw signal high from partial credit
        "leg_counting": {"prediction": "no change", **flat,
                         "screen": {"pass1": 0.0, "signal_raw": 0.8, "signal_correct": 0.0}},
        # the rule says improves, nothing moved
        "products": {"prediction": "improves", **flat, "screen": {"pass1": 0.3, "signal_raw": 0.5, "signal_correct": 0.5}},
    })
    r = report.load(s.out)
    rules = {row["rule"]: row for row in r.across["rules"]}
    assert rules["Shortlist's rule"]["hits"] == 2 and rules["always improves"]["hits"] == 1
    assert rules["pass@1 in [0.05, 0.9)"]["hits"] == 2
    assert rules["signal (raw) ≥ 0.25"]["hits"] == 1 and rules["signal (correctness) ≥ 0.25"]["hits"] == 2
    c = r.across["confusion"]
    assert (c["improves, improved"], c["improves, not improved"], c["no change, improved"],
            c["no change, not improved"]) == (1, 1, 0, 1)
    assert c["accuracy"] == pytest.approx(2 / 3) and c["ci95"] == pytest.approx((0.2077, 0.9385), abs=1e-3)


def test_correlations_rank_signals_against_gains(synthetic):
    cases = {}
    for i, name in enumerate(["chain_sum", "leg_counting", "products", "basic_arithmetic"]):
        cases[name] = {"prediction": "improves", "before": HALF, "after": [0.0] * (100 - 20 * i) + [1.0] * (100 + 20 * i),
                       "screen": {"pass1": 0.1 * (i + 1), "learnability": 0.2 - 0.01 * i}}
    r = report.load(synthetic(cases).out)
    by = {c["key"]: c for c in r.across["correlations"]}
    assert by["pass1"]["score gain"]["rho"] == pytest.approx(1.0)
    assert by["learnability"]["accuracy gain"]["rho"] == pytest.approx(-1.0)
    assert by["signal_raw"]["score gain"]["rho"] is None  # the same for every family
    assert len(report.scatter_figure(r).axes) == len(analysis.SIGNALS)


def test_the_plan_is_committed_with_the_predictions(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HALF, "after": HALF}})
    plan = commit.verified(s)[0]["analysis"]
    assert set(plan) == {"primary", "correctness", "format", "equivalence", "minimum_detectable_effect",
                         "multiplicity", "alternatives", "correlations", "unseen", "collapse"}
    assert f"eval_n = {N}" in plan["minimum_detectable_effect"]


def test_a_trained_model_that_prints_one_answer_has_collapsed_and_is_not_counted_held(synthetic, scorer):
    from shortlist import audit, sources, trainee
    key = "coin_flip(max_trials=3)"
    family = sources.parse(key)
    tasks = family.tasks(range(100_000, 100_000 + N))
    zero = scorer.score(family, [t["seed"] for t in tasks], ["0"] * N)  # "0" is right most of the time here
    before = [0.0 if i % 2 else z for i, z in enumerate(zero)]  # half of those right before
    constants = audit.constants(scorer, trainee.QWEN3, family, tasks, ["0"] * N)
    s = synthetic({key: {"prediction": "improves", "before": before, "after": zero, "after_answers": ["0"] * N,
                         "baselines": constants},
                   "chain_sum": {"prediction": "improves", "before": HALF, "after": [1.0] * N}})
    r = report.load(s.out)
    a = r.analyses[key]
    assert r.results[key].improved and a["improved"]  # the seed's analysis calls it a gain...
    assert a["learning"] == "collapsed" and not a["judged"]  # ...that a constant answer matches
    assert a["judgement"] == "held (collapsed)" and r.across["judged"] == ["chain_sum"]
    assert constants["distinct_answers"] == 1 / N and constants["mode"]["accuracy"] == r.results[key].after.accuracy
    text = report.headline(r)
    assert "The rule held on 1 of 1 judged family" in text and ", 1 collapse." in text
    assert f"Trained but not judged (1): {key} (collapsed)" in text
    assert any(w.startswith(f"{key}: its gain is collapse, not learning") for w in report.warnings(r))
    assert "collapsed" in report.family_line(r, key) and "not judged: collapsed" in report.family_line(r, key)


def test_a_family_the_proof_cannot_judge_is_trained_and_reported_apart(synthetic):
    # eight distinct questions among 200 evaluation tasks: below min_unseen
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HALF, "after": [1.0] * N,
                                 "groups": [i % 8 for i in range(N)]},
                   "leg_counting": {"prediction": "improves", "before": HALF, "after": [1.0] * N}}, min_unseen=40)
    r = report.load(s.out)
    assert r.analyses["chain_sum"]["distinct"] == 8 and not r.analyses["chain_sum"]["judged"]
    assert "only 8 distinct unseen evaluation questions" in r.body["not_judged"]["chain_sum"][0]
    assert r.across["judged"] == ["leg_counting"] and r.across["rules"][0]["of"] == 1
    assert "Trained but not judged (1): chain_sum (too few unseen questions)" in report.headline(r)
    by_question = r.analyses["chain_sum"]["by_question"]
    assert by_question["gain"] == pytest.approx(0.5)  # each of the 8 questions counted once


def test_the_rule_and_a_simpler_rule_are_compared_where_they_disagree(synthetic):
    up = {"before": HALF, "after": [1.0] * N}
    flat = {"before": HALF, "after": HALF}
    cases = {}
    # pass@1 > 0 everywhere, so "pass@1 > 0" says improves everywhere; the rule says it on the first four
    for i, name in enumerate(["chain_sum", "leg_counting", "products", "basic_arithmetic", "letter_counting", "aiw"]):
        cases[name] = {"prediction": "improves" if i < 4 else "no change", **(up if i < 4 else flat),
                       "screen": {"pass1": 0.3}}
    r = report.load(synthetic(cases).out)
    rules = {row["rule"]: row for row in r.across["rules"]}
    m = rules["pass@1 > 0"]
    assert m["disagree"] == 2 and (m["mcnemar"]["only_first"], m["mcnemar"]["only_second"]) == (2, 0)
    assert m["mcnemar"]["p"] == pytest.approx(0.5)
    text = report.rules_text(r)
    assert "Against 'pass@1 > 0': 2 families only the rule got right, 0 only it did" in text
    assert "(not significant)" in text and "rests on 6 judged families" in text
