"""Statistics of the proof. paired_gain() is the seed's definition, unchanged."""
from __future__ import annotations

import numpy as np


def paired_gain(before: list[float], after: list[float], n: int = 10_000) -> dict:
    """Mean gain on the same tasks, with a paired bootstrap p-value for 'gain <= 0'.

    Exactly the seed's: 10,000 resamples of the per-task differences, rng seed 0, a 95%
    percentile interval, p = share of resampled means <= 0.
    """
    d = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    boots = np.random.default_rng(0).choice(d, (n, len(d))).mean(1)
    return {"gain": float(d.mean()), "ci95": [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))],
            "p": float(np.mean(boots <= 0))}


def improved(gain: dict, alpha: float = 0.05) -> bool:
    return gain["p"] <= alpha and gain["gain"] > 0
