"""The report's figures. Each returns a matplotlib Figure (None where there is nothing to draw);
show() turns one into an inline PNG, so any matplotlib backend, Agg included, gives the same report."""
from __future__ import annotations

import io
import textwrap

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

from proof import analysis

COLORS = {"improves": "#1b7837", "no change": "#762a83"}
MIN_FAMILIES_FOR_RANKS = 3  # Spearman's rho needs 3 points at least; below, a sentence instead


def show(fig):
    """The figure as an inline PNG (IPython Image), closed so no backend shows it a second time."""
    if fig is None:
        return None
    from IPython.display import Image
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return Image(data=buffer.getvalue(), format="png")


def label(family: str, width: int = 40) -> str:
    """A family spec on lines of at most width characters, broken after its commas: a spec with
    five overrides is ~100 characters, wider than any axis leaves room for."""
    return textwrap.fill(family, width, break_long_words=False)


def _marks(prediction: str) -> dict:
    """Filled circles for "improves", hollow squares for "no change", in every figure."""
    color = COLORS[prediction]
    return {"marker": "o" if prediction == "improves" else "s", "color": color, "linestyle": "none",
            "markerfacecolor": color if prediction == "improves" else "white"}


def _plot_curve(ax, result, title: str) -> None:
    curve = result.reward_curve
    steps = [row["step"] for row in curve]
    for key, label, style in (("reward", "mean reward", "-"), ("frac_reward_zero_std", "share of zero-variance groups",
                                                               "--"),
                              ("clipped_ratio", "share cut at max_new_tokens", ":")):
        values = [row.get(key) for row in curve]
        if any(v is not None for v in values):
            ax.plot(steps, values, marker=".", linestyle=style, label=label)
    ax.set_ylim(-0.02, 1.02)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("GRPO step")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)


def curve(result):
    """One family's reward curve (notebook 02)."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    _plot_curve(ax, result, label(result.family))
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def curves(done: list):
    if not done:
        return None
    cols = min(3, len(done))
    rows = -(-len(done) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.2 * rows), squeeze=False)
    for ax, result in zip(axes.flat, done):
        _plot_curve(ax, result, f"{label(result.family)}\npredicted: {result.prediction['prediction']}")
    for ax in list(axes.flat)[len(done):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def unchanged(result) -> bool:
    """No evaluation task's score changed: its gain is a dot at 0 with no interval, which says nothing of spread."""
    return list(result.before.scores) == list(result.after.scores)


def forest(done: list):
    """Each family's gain in mean score with its 95% CI, marked by what was predicted; a family whose scores
    did not change is labelled so, and where none changed there is nothing to draw (None: the caption says so)."""
    if all(unchanged(r) for r in done):
        return None
    names = [label(r.family) + ("\n(no score changed)" if unchanged(r) else "") for r in reversed(done)]
    fig, ax = plt.subplots(figsize=(8, 0.3 * sum(n.count("\n") + 1 for n in names) + 0.25 * len(done) + 1.2))
    for y, result in enumerate(reversed(done)):
        g, pred = result.gain, result.prediction["prediction"]
        ax.errorbar(g["gain"], y, xerr=[[g["gain"] - g["ci95"][0]], [g["ci95"][1] - g["gain"]]], capsize=3,
                    **_marks(pred))
    ax.axvline(0, color="grey", linewidth=1)
    ax.set_yticks(range(len(done)), names, fontsize=8)
    ax.set_xlabel("gain in mean score after GRPO (95% bootstrap CI)")
    for pred in COLORS:
        ax.plot([], [], label=f"predicted: {pred}", **_marks(pred))
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def scatter(done: list, predictions: list[dict], correlations: list[dict]):
    """Each screening signal against the measured gain in mean score, one panel per signal."""
    if len(done) < MIN_FAMILIES_FOR_RANKS:
        return None
    by_family = {p["family"]: p for p in predictions}
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.4), sharey=True)
    for ax, (key, label) in zip(axes.flat, analysis.SIGNALS.items()):
        for r in done:
            ax.plot(by_family[r.family][key], r.gain["gain"], **_marks(r.prediction["prediction"]))
        rho = next(c for c in correlations if c["key"] == key)["score gain"]["rho"]
        ax.set_title(f"{label}: ρ = {rho:+.2f}" if rho is not None else label, fontsize=9)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.grid(alpha=0.3)
    low, high = axes[0, 0].get_ylim()
    if high - low < 0.02:  # every gain (near) zero: show a readable scale, not 1e-17
        axes[0, 0].set_ylim(low - 0.05, high + 0.05)
    for ax in axes[:, 0]:
        ax.set_ylabel("gain in mean score")
    fig.tight_layout()
    return fig
