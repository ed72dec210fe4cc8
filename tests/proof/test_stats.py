import numpy as np
import pytest

from proof import stats

# The seed's own paired_gain (shared/seed/grpo_proof.py) on the inputs of seeds_inputs(seed), run on
# 2026-12-01 and written down here, so that the comparison holds in any clone of this repository.
SEEDS_OUTPUT = {
    0: {"gain": 0.006750000000000001, "ci95": [-0.06675, 0.08049999999999999], "p": 0.4154},
    1: {"gain": 0.041749999999999995, "ci95": [-0.027006250000000002, 0.109], "p": 0.1109},
    2: {"gain": 0.09524999999999999, "ci95": [0.032, 0.1595], "p": 0.0018},
}


def seeds_inputs(seed: int):
    rng = np.random.default_rng(seed)
    before = rng.choice([0.0, 0.05, 1.0], 200).tolist()
    after = np.clip(np.asarray(before) + rng.choice([0.0, 0.0, 1.0, -1.0], 200), 0, 1).tolist()
    return before, after


def test_all_equal_gives_gain_zero_and_p_one():
    g = stats.paired_gain([0.5] * 200, [0.5] * 200)
    assert g == {"gain": 0.0, "ci95": [0.0, 0.0], "p": 1.0}
    assert not stats.improved(g)


def test_all_plus_one_gives_p_zero():
    g = stats.paired_gain([0.0] * 200, [1.0] * 200)
    assert g["gain"] == 1.0 and g["p"] == 0.0 and g["ci95"] == [1.0, 1.0]
    assert stats.improved(g)


def test_a_loss_is_never_an_improvement():
    g = stats.paired_gain([1.0] * 50, [0.0] * 50)
    assert g["gain"] == -1.0 and g["p"] == 1.0 and not stats.improved(g)


@pytest.mark.parametrize("seed", sorted(SEEDS_OUTPUT))
def test_reproduces_the_seeds_definition_exactly(seed):
    assert stats.paired_gain(*seeds_inputs(seed)) == SEEDS_OUTPUT[seed]


def test_improved_needs_both_significance_and_a_positive_gain():
    assert stats.improved({"gain": 0.01, "p": 0.05})
    assert not stats.improved({"gain": 0.01, "p": 0.051})
    assert not stats.improved({"gain": 0.0, "p": 0.0})


def test_holm_on_known_values_keeps_the_given_order():
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5]) == [0.5] and stats.holm([0.6, 0.6]) == [1.0, 1.0]


@pytest.mark.parametrize("k, n, low, high", [(8, 10, 0.4902, 0.9433), (0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0),
                                             (50, 100, 0.4038, 0.5962)])
def test_wilson_on_known_values(k, n, low, high):
    assert stats.wilson(k, n) == pytest.approx((low, high), abs=1e-4)


def test_tost_calls_no_difference_equivalent_and_noise_inconclusive():
    assert stats.tost([0.3] * 200, [0.3] * 200, margin=0.05)["equivalent"]
    noisy = stats.tost([1.0, 0.0] * 100, [0.0, 1.0] * 100, margin=0.05)  # mean gain 0, SD 1
    assert not noisy["equivalent"] and noisy["p"] > 0.05
    assert not stats.tost([0.0] * 200, [0.2] * 200, margin=0.05)["equivalent"]  # a real change is not "none"


def test_minimum_detectable_effect_shrinks_with_n():
    assert stats.minimum_detectable_effect(0.5, 200) == pytest.approx(0.0879, abs=1e-3)
    assert stats.minimum_detectable_effect(0.5, 800) == pytest.approx(0.0879 / 2, abs=1e-3)


def test_spearman_is_undefined_below_three_points_or_on_a_constant():
    assert stats.spearman([1, 2, 3], [2, 4, 9])["rho"] == pytest.approx(1.0)
    assert stats.spearman([1, 2], [1, 2])["rho"] is None
    assert stats.spearman([1, 1, 1], [1, 2, 3])["rho"] is None


@pytest.mark.parametrize("b, c, p", [(0, 0, 1.0), (5, 0, 0.0625), (0, 5, 0.0625), (3, 3, 1.0), (10, 2, 0.0386),
                                     (1, 0, 1.0)])
def test_mcnemar_is_the_exact_binomial_test_on_the_discordant_families(b, c, p):
    m = stats.mcnemar(b, c)
    assert m["p"] == pytest.approx(p, abs=1e-4) and m["discordant"] == b + c
