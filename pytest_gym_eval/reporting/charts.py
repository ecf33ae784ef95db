"""The HTML report's reward colours, histogram and the history's sparklines and trend plot (SVG): pure functions
of rewards, outcomes and thresholds."""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Sequence

from pytest_gym_eval.reporting import fmt

PALETTE_STEPS = 20
"""Colours of the reward scale: a reward maps to one of ``PALETTE_STEPS + 1`` classes ``c0`` … ``c20``."""
DISCRETE_VALUES = 12
"""Rewards with at most this many distinct values get one histogram bar per value; more get equal bins."""
HISTOGRAM_BINS = 20
# Red, amber, green: the reward scale's stops (ColorBrewer RdYlGn, Harrower & Brewer 2003).
_STOPS = ((0.0, (215, 48, 39)), (0.5, (254, 224, 139)), (1.0, (26, 152, 80)))


# --- Colours ----------------------------------------------------------------------------------------------


def colour(fraction: float) -> str:
    """The reward scale's colour at ``fraction`` (0 = lowest reward, red; 1 = highest, green) as ``#rrggbb``;
    ``fraction`` is clamped to [0, 1]. Linear interpolation between the stops of :data:`_STOPS`."""
    fraction = min(1.0, max(0.0, fraction))
    for (x0, c0), (x1, c1) in itertools.pairwise(_STOPS):
        if fraction <= x1:
            t = (fraction - x0) / (x1 - x0)
            return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(c0, c1, strict=True))
    return "#" + "".join(f"{c:02x}" for c in _STOPS[-1][1])


def reward_range(rewards: Sequence[float]) -> tuple[float, float]:
    """The ends of the colour scale and histogram axis: [0, 1] when every reward lies there (the usual case),
    else [min(0, lowest), max(1, highest)] (rewards in the verifier's own units)."""
    if not rewards:
        return 0.0, 1.0
    return min(0.0, min(rewards)), max(1.0, max(rewards))


def palette_index(reward: float, low: float, high: float) -> int:
    """The colour class (0 … :data:`PALETTE_STEPS`) of ``reward`` on the scale [``low``, ``high``]."""
    span = high - low
    fraction = (reward - low) / span if span > 0 else 1.0
    return round(min(1.0, max(0.0, fraction)) * PALETTE_STEPS)


def palette_css() -> str:
    """CSS classes ``.c0`` … ``.c20``: background (grid cells) and fill (histogram bars), with a text colour
    that reads on the background."""
    rules = []
    for step in range(PALETTE_STEPS + 1):
        value = colour(step / PALETTE_STEPS)
        r, g, b = (int(value[i : i + 2], 16) for i in (1, 3, 5))
        ink = "#111" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#fff"
        rules.append(f".c{step}{{background:{value};fill:{value};color:{ink}}}")
    return "\n".join(rules)


# --- Histogram --------------------------------------------------------------------------------------------


def histogram_bins(rewards: Sequence[float], low: float, high: float) -> list[tuple[float, float, int]]:
    """``(from, to, count)`` bars of the rewards' histogram.

    At most :data:`DISCRETE_VALUES` distinct rewards (binary 0/1, a few grades): one bar per value, ``from ==
    to``. More (judges, partial credit): :data:`HISTOGRAM_BINS` equal bins over [``low``, ``high``], each
    [from, to) but the last, which includes ``high``. Empty for no rewards.
    """
    if not rewards:
        return []
    distinct = sorted(set(rewards))
    if len(distinct) <= DISCRETE_VALUES:
        counts = {value: 0 for value in distinct}
        for reward in rewards:
            counts[reward] += 1
        return [(value, value, count) for value, count in counts.items()]
    width = (high - low) / HISTOGRAM_BINS
    counts_by_bin = [0] * HISTOGRAM_BINS
    for reward in rewards:
        position = (reward - low) * HISTOGRAM_BINS / (high - low)  # not / width: 0.95 / 0.05 is 18.999…
        counts_by_bin[min(HISTOGRAM_BINS - 1, max(0, int(position)))] += 1
    return [(low + i * width, low + (i + 1) * width, count) for i, count in enumerate(counts_by_bin)]


def histogram_svg(rewards: Sequence[float], threshold: float, low: float, high: float) -> str:
    """An SVG histogram of ``rewards`` (:func:`histogram_bins`), bars coloured by the reward scale, the pass
    threshold marked by a dashed line; '' when there are no rewards."""
    bins = histogram_bins(rewards, low, high)
    if not bins:
        return ""
    width, height, left, right, top, bottom = 380, 170, 34, 12, 14, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    most = max(count for _, _, count in bins)
    slot = plot_w / len(bins)
    gap = min(6.0, slot * 0.15) if bins[0][0] == bins[0][1] else 1.0
    discrete = bins[0][0] == bins[0][1]
    parts = [
        f'<svg class="histogram" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="Histogram of {len(rewards)} rewards" data-total="{len(rewards)}">',
        f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}"/>',
        f'<text class="tick" x="{left - 4}" y="{top + 4}" text-anchor="end">{most}</text>',
        f'<text class="tick" x="{left - 4}" y="{top + plot_h}" text-anchor="end">0</text>',
        f'<line class="grid" x1="{left}" y1="{top}" x2="{left + plot_w}" y2="{top}"/>',
    ]
    for index, (start, stop, count) in enumerate(bins):
        bar_h = plot_h * count / most if most else 0.0
        x = left + index * slot + gap / 2
        middle = start if discrete else (start + stop) / 2
        label = short(start) if discrete else f"{short(start)} to {short(stop)}"
        parts.append(
            f'<rect class="bar c{palette_index(middle, low, high)}" x="{x:.1f}" y="{top + plot_h - bar_h:.1f}" '
            f'width="{slot - gap:.1f}" height="{bar_h:.1f}" data-from="{start:g}" data-to="{stop:g}" '
            f'data-count="{count}"><title>{html.escape(label)}: {fmt.plural(count, "rollout")}</title></rect>'
        )
        if discrete:
            parts.append(
                f'<text class="tick" x="{x + (slot - gap) / 2:.1f}" y="{top + plot_h + 14}" '
                f'text-anchor="middle">{html.escape(short(start))}</text>'
            )
    if not discrete:
        for value, anchor in ((low, "start"), ((low + high) / 2, "middle"), (high, "end")):
            x = left + plot_w * (value - low) / (high - low)
            parts.append(
                f'<text class="tick" x="{x:.1f}" y="{top + plot_h + 14}" text-anchor="{anchor}">{short(value)}</text>'
            )
    marker = _threshold_x(bins, threshold, low, high, left, plot_w, slot, discrete)
    if marker is not None:
        parts.append(
            f'<line class="threshold" x1="{marker:.1f}" y1="{top - 4}" x2="{marker:.1f}" y2="{top + plot_h}">'
            f"<title>pass threshold {fmt.threshold(threshold)}</title></line>"
        )
    parts.append(
        f'<text class="axis-label" x="{left + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle">reward'
        f"{' (dashed: pass threshold ' + fmt.threshold(threshold) + ')' if marker is not None else ''}</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


def _threshold_x(
    bins: Sequence[tuple[float, float, int]],
    threshold: float,
    low: float,
    high: float,
    left: float,
    plot_w: float,
    slot: float,
    discrete: bool,
) -> float | None:
    """Where the pass threshold line goes: on the axis for equal bins; between the last bar below it and the
    first at or above it for one bar per value (None when all bars are on one side)."""
    if not discrete:
        return left + plot_w * (threshold - low) / (high - low) if low < threshold <= high else None
    below = sum(1 for start, _, _ in bins if start < threshold)
    return left + below * slot if 0 < below < len(bins) else None


def short(value: float) -> str:
    """A reward for an axis or a cell: ``1``, ``0.5``, ``0.25``, ``37.5``; 3 significant digits past 1000."""
    if not math.isfinite(value):
        return "n/a"
    return f"{value:.3g}" if abs(value) >= 1000 else f"{round(value, 2):g}"


# --- History: a task's outcomes, a dataset's mean reward --------------------------------------------------

OUTCOME_WORDS = {"P": "pass", "F": "fail", "M": "mixed"}
"""A sparkline's letters (:attr:`pytest_gym_eval.history.stability.TaskStability.sparkline`) and their words."""


def sparkline_svg(letters: str, runs: Sequence[int]) -> str:
    """A task's outcomes over its last runs, oldest first, as a row of boxes: ``P`` (every repeat passed) green,
    ``F`` (none passed) red, ``M`` (repeats disagreed) amber and half height. ``runs`` are the runs' ids, one per
    letter; the title (a tooltip, and what a screen reader says) lists each run's outcome. '' for no outcome.
    Raises ValueError when ``letters`` and ``runs`` differ in length or a letter is not P, F or M."""
    if len(letters) != len(runs):
        raise ValueError(f"{len(letters)} outcomes but {len(runs)} runs")
    if not letters:
        return ""
    if set(letters) - set(OUTCOME_WORDS):
        raise ValueError(f"outcomes must be P, F or M, got {letters!r}")
    step, box, height = 7, 5, 14
    width = step * len(letters) - (step - box)
    said = ", ".join(f"run {run} {OUTCOME_WORDS[letter]}" for letter, run in zip(letters, runs, strict=True))
    parts = [
        f'<svg class="sparkline" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{html.escape(said)}" data-outcomes="{html.escape(letters)}">'
        f"<title>{html.escape(said)}</title>"
    ]
    for index, letter in enumerate(letters):
        top, tall = (height / 4, height / 2) if letter == "M" else (0, height)
        parts.append(f'<rect class="o-{letter}" x="{index * step}" y="{top:g}" width="{box}" height="{tall:g}"/>')
    parts.append("</svg>")
    return "".join(parts)


def trend_svg(
    points: Sequence[tuple[int, float | None, float | None, float | None, bool]], alarm_run: int | None
) -> str:
    """A dataset's mean reward over its last runs, oldest first: ``points`` are ``(run id, mean, low, high,
    reference)`` (the interval's bounds None when it has none; ``reference``: a run that only taught the drift
    alarm its scale, drawn hollow). Each run's interval is a vertical bar, the means are joined by a line, and
    ``alarm_run`` (the run at which the drift alarm fired; None: no alarm) is marked by a red point and a dashed
    line. The y axis spans [0, 1] or the values when they go beyond. '' without a run with a mean."""
    shown = [
        (run, mean, low, high, reference)
        for run, mean, low, high, reference in points
        if mean is not None and math.isfinite(mean)
    ]
    if not shown:
        return ""
    values = [v for _, mean, low, high, _ in shown for v in (mean, low, high) if v is not None and math.isfinite(v)]
    low_y, high_y = reward_range(values)
    width, height, left, right, top, bottom = 380, 170, 34, 12, 14, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    slot = plot_w / len(shown)

    def x_of(index: int) -> float:
        return left + slot * (index + 0.5)

    def y_of(value: float) -> float:
        return top + plot_h * (high_y - value) / (high_y - low_y)

    label = f"Mean reward of the last {fmt.plural(len(shown), 'run')}" + (
        f", drift alarm at run {alarm_run}" if alarm_run is not None else ", no drift alarm"
    )
    parts = [
        f'<svg class="trend" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{html.escape(label)}" data-alarm-run="{"" if alarm_run is None else alarm_run}">',
        f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}"/>',
        f'<line class="grid" x1="{left}" y1="{top}" x2="{left + plot_w}" y2="{top}"/>',
        f'<text class="tick" x="{left - 4}" y="{top + 4}" text-anchor="end">{short(high_y)}</text>',
        f'<text class="tick" x="{left - 4}" y="{top + plot_h}" text-anchor="end">{short(low_y)}</text>',
    ]
    labelled = _spaced_labels(len(shown), [index for index, point in enumerate(shown) if point[0] == alarm_run])
    line = []
    for index, (run, mean, low, high, _) in enumerate(shown):
        x = x_of(index)
        if run == alarm_run:
            parts.append(
                f'<line class="alarm-line" x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}">'
                f"<title>drift alarm at run {run}</title></line>"
            )
        if low is not None and high is not None and math.isfinite(low) and math.isfinite(high):
            parts.append(
                f'<line class="interval" x1="{x:.1f}" y1="{y_of(high):.1f}" x2="{x:.1f}" y2="{y_of(low):.1f}"/>'
            )
        line.append(f"{x:.1f},{y_of(mean):.1f}")
        if index in labelled:
            parts.append(f'<text class="tick" x="{x:.1f}" y="{top + plot_h + 14}" text-anchor="middle">{run}</text>')
    parts.append(f'<polyline class="mean-line" points="{" ".join(line)}"/>')
    for index, (run, mean, low, high, reference) in enumerate(shown):
        kind = "alarm" if run == alarm_run else "reference" if reference else "watched"
        bounds = f" [{short(low)}, {short(high)}]" if low is not None and high is not None else ""
        parts.append(
            f'<circle class="mean {kind}" cx="{x_of(index):.1f}" cy="{y_of(mean):.1f}" r="3.5" data-run="{run}" '
            f'data-mean="{mean!r}"><title>run {run}: mean reward {short(mean)}{html.escape(bounds)}'
            f"{' (learning the scale)' if reference else ''}</title></circle>"
        )
    parts.append(
        f'<text class="axis-label" x="{left + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle">run '
        "(bars: 95% interval; hollow: runs that set the alarm's scale)</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


def _spaced_labels(count: int, first: Sequence[int], most: int = 10) -> set[int]:
    """Which of ``count`` evenly spaced points get an axis label: about ``most`` of them, never two closer than
    the step between them; the points in ``first`` (the alarm), then the last and the first have priority."""
    every = max(1, math.ceil(count / most))
    chosen: list[int] = []
    for index in [*first, count - 1, *range(0, count, every)]:
        if all(abs(index - other) >= every for other in chosen):
            chosen.append(index)
    return set(chosen)
