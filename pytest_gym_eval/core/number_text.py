"""How every output prints a reward statistic: an estimate or an interval's bound (:func:`number`) and a threshold
(:func:`threshold`). One rule for the gates' lines (:mod:`.gates`), the comparisons' (:mod:`.comparison`) and the
reports (:mod:`.reporting.fmt`), so the same value never prints two ways in one session's output.

In the bottom layer (standard library only) so that the evaluation logic and the reporting above it share it.
"""

from __future__ import annotations

import math

BIG = 1e6
"""From this magnitude on, :func:`number` prints 3 significant digits instead of two decimals."""


def number(value: float) -> str:
    """An estimate or a bound: two decimals like Gym's own summaries (``0.80``), 3 significant digits from a
    million on (``1.23e+06``), "n/a" when not finite (an interval of one task has infinite bounds). A value that
    rounds to zero prints ``0.00``, never ``-0.00`` (a difference of -0.001 between two policies is no drop)."""
    if not math.isfinite(value):
        return "n/a"
    text = f"{value:.2f}" if abs(value) < BIG else f"{value:.3g}"
    return "0.00" if text == "-0.00" else text


def threshold(value: float) -> str:
    """A threshold or margin: two decimals unless that would hide digits the user typed (0.755 stays ``0.755``,
    by ``:.6g``); ``0.00`` for a negative zero; "n/a" when not finite."""
    if not math.isfinite(value):
        return "n/a"
    two = f"{value:.2f}"
    text = two if float(two) == value else f"{value:.6g}"
    return "0.00" if text == "-0.00" else text


def interval(estimate: float, low: float, high: float) -> str:
    """``0.80 [0.24, 1.36]``: the estimate and its bounds, each by :func:`number`."""
    return f"{number(estimate)} [{number(low)}, {number(high)}]"
