import ast
from pathlib import Path

import numpy as np
import pytest

from proof import stats

SEED = Path(__file__).resolve().parents[2] / "shared" / "seed" / "grpo_proof.py"


def seeds_paired_gain():
    """The seed's own paired_gain, lifted out of grpo_proof.py without running the rest of it."""
    tree = ast.parse(SEED.read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "paired_gain")
    namespace = {"np": np}
    exec(compile(ast.Module([fn], type_ignores=[]), str(SEED), "exec"), namespace)
    return namespace["paired_gain"]


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


@pytest.mark.skipif(not SEED.exists(), reason="../shared/seed is not beside this checkout")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reproduces_the_seeds_definition_exactly(seed):
    rng = np.random.default_rng(seed)
    before = rng.choice([0.0, 0.05, 1.0], 200).tolist()
    after = np.clip(np.asarray(before) + rng.choice([0.0, 0.0, 1.0, -1.0], 200), 0, 1).tolist()
    assert stats.paired_gain(before, after) == seeds_paired_gain()(before, after)


def test_improved_needs_both_significance_and_a_positive_gain():
    assert stats.improved({"gain": 0.01, "p": 0.05})
    assert not stats.improved({"gain": 0.01, "p": 0.051})
    assert not stats.improved({"gain": 0.0, "p": 0.0})
