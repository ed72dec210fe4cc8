"""How the report writes its numbers, each kind of quantity one way, in prose and tables alike:
accuracies, scores and gains with 3 decimals, shares of answers and chances with 2, p-values with 3
(a bootstrap p no resample reached as a bound), counts as integers, times in seconds. A number no
column names a format for is written by plain(): never with a float's every digit."""
from __future__ import annotations

import math
import re

ACCURACY = "{:.3f}"  # accuracies, mean scores, policy accuracies
GAIN = "{:+.3f}"
SHARE = "{:.2f}"  # shares of answers or tasks, chances, pass@1 of a screen
COUNT = "{:.0f}"  # counts stay integers where a missing row makes pandas hold a column as floats
SECONDS = "{:.0f}"


def p_bound(resamples: int, adjusted_for: int = 1) -> str:
    """The smallest bootstrap p that can be told from 0: 1/resamples, times the number of tests where Holm's
    adjustment multiplied it, rounded up to the 3 decimals every p is written with, so that it stays a bound
    ("0.001")."""
    bound = max(adjusted_for, 1) / resamples  # no test yet (nothing finished): the unadjusted resolution
    return f"{max(math.ceil(round(bound * 1000, 9)) / 1000, 0.001):.3f}"


def p_text(p: float | None, resamples: int | None = None, adjusted_for: int = 1) -> str:
    """A p-value as text: 3 decimals; a bootstrap p of 0 (no resample crossed) as '< bound', never 0."""
    if p is None or p != p:
        return "–"
    if p == 0 and resamples:
        return f"< {p_bound(resamples, adjusted_for)}"
    return f"{p:.3f}"


def p_format(resamples: int | None = None, adjusted_for: int = 1):
    """p_text() as a table column's format. Styler escapes the strings it formats, not what a callable
    returns, so the '<' of a bound is escaped here."""
    def fmt(x) -> str:
        return p_text(x, resamples, adjusted_for).replace("<", "&lt;")
    return fmt


def arrow(before, after, fmt: str = ACCURACY) -> str:
    return f"{fmt.format(before)} → {fmt.format(after)}"


def ci(g: dict | None) -> str:
    """A gain and its 95% interval."""
    return "–" if g is None else f"{g['gain']:+.3f} [{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}]"


def interval(r) -> str:
    """An analysis.Rate's share and interval: '0.xx, Wilson 95% CI a–b'."""
    return f"{r.rate:.2f}, Wilson 95% CI {r.ci95[0]:.2f}–{r.ci95[1]:.2f}" if r.n else "none"


def rate(r) -> str:
    """An analysis.Rate: 'k of n (0.xx, Wilson 95% CI a–b)'."""
    return f"{r.k} of {r.n} ({interval(r)})" if r.n else "0 of 0"


def plain(value) -> str:
    """A table cell no format was named for: a whole number as an integer (pandas holds a column with a
    missing row as floats: 0 would show as 0.000000), any other float with 3 decimals, the rest as it is."""
    if isinstance(value, float) and value == value and not isinstance(value, bool):
        return COUNT.format(value) if value.is_integer() else ACCURACY.format(value)
    return str(value)


_LONG = re.compile(r"(?<![\w.])\d+\.\d{4,}(?![\w.])")


def tidy(text: str) -> str:
    """A reason predictions.json recorded, its shares at the 2 decimals a share carries: the commitment writes
    the audit's guess rate with every digit of its float ("guess rate 0.9166666666666666"). The record is
    left as it is; only what the report shows is rounded."""
    return _LONG.sub(lambda m: SHARE.format(float(m.group())), text)
