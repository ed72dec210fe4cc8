"""Statistics of the proof. paired_gain() is the seed's definition, unchanged."""
from __future__ import annotations

import numpy as np


def paired_gain(before: list[float], after: list[float], n: int = 10_000) -> dict:
    """Mean gain on the same tasks, with a paired bootstrap p-value for 'gain <= 0'.

    Exactly the seed's: 10,000 resamples of the per-task differences, rng seed 0, a 95%
    percentile interval, p = share of resampled means <= 0.
    """
    d = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    boots = bootstrap_means(d, n)
    return {"gain": float(d.mean()), "ci95": [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))],
            "p": float(np.mean(boots <= 0))}


def improved(gain: dict, alpha: float = 0.05) -> bool:
    return gain["p"] <= alpha and gain["gain"] > 0


def bootstrap_means(d, n: int = 10_000) -> np.ndarray:
    """The resampled means paired_gain uses: same rng, same draws."""
    d = np.asarray(d, dtype=float)
    return np.random.default_rng(0).choice(d, (n, len(d))).mean(1)


def tost(before: list[float], after: list[float], margin: float, alpha: float = 0.05, n: int = 10_000) -> dict:
    """Two one-sided tests that the mean gain lies within ±margin, on the same bootstrap as paired_gain.

    p is the larger of the two one-sided p-values; equivalent when p <= alpha, i.e. when the
    (1 - 2 alpha) percentile interval of the gain lies inside (-margin, margin)."""
    boots = bootstrap_means(np.asarray(after, dtype=float) - np.asarray(before, dtype=float), n)
    p = float(max(np.mean(boots <= -margin), np.mean(boots >= margin)))
    return {"margin": margin, "p": p, "equivalent": p <= alpha}


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment, in the order given."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials (95% by default)."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (float(max(0.0, centre - half)), float(min(1.0, centre + half)))


def minimum_detectable_effect(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest mean gain a one-sided paired test at alpha detects with this power, for per-task
    differences of standard deviation sd over n tasks (normal approximation)."""
    from scipy.stats import norm
    return float((norm.ppf(1 - alpha) + norm.ppf(power)) * sd / np.sqrt(n))


def spearman(x: list[float], y: list[float]) -> dict:
    """Spearman's rho and its p-value; None where it is undefined (under 3 points, or a constant)."""
    from scipy.stats import spearmanr
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return {"rho": None, "p": None, "n": len(x)}
    result = spearmanr(x, y)
    return {"rho": float(result.statistic), "p": float(result.pvalue), "n": len(x)}


def mcnemar(b: int, c: int) -> dict:
    """The exact McNemar test of two rules on the same families: b families only the first got right,
    c only the second. Two-sided p = the binomial(b + c, 1/2) probability of a split at least as uneven;
    1.0 where they never disagree (the evidence cannot tell them apart)."""
    from scipy.stats import binom
    n = b + c
    p = 1.0 if n == 0 else float(min(1.0, 2 * binom.cdf(min(b, c), n, 0.5)))
    return {"only_first": b, "only_second": c, "discordant": n, "p": p}
