"""The HTML report's reward colours and histogram (SVG): pure functions of rewards and thresholds."""

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
