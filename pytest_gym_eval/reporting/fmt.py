"""Text formatting shared by the reporting outputs (terminal, Markdown, HTML): numbers, intervals, counts,
durations, and trimming to a width."""

from __future__ import annotations

import math
import textwrap
import unicodedata

from pytest_gym_eval.core import number_text
from pytest_gym_eval.core.number_text import number as number
from pytest_gym_eval.core.number_text import threshold as threshold
from pytest_gym_eval.stats.gates import Familywise
from pytest_gym_eval.stats.intervals import Interval, PairedComparison
from pytest_gym_eval.stats.power import Hint

MIN_WIDTH = 40
"""Narrowest width the terminal text is laid out for."""
LABEL_WIDTH = 11  # "mean reward", "flaky tasks"
"""Width of the label column of :func:`labelled`."""


def title(dataset: str, agent: str | None, policy: str | None = None) -> str:
    """``dataset (policy NAME)`` with a policy, else ``dataset (agent NAME)`` with an agent, else ``dataset``."""
    if policy is not None:
        return f"{dataset} (policy {policy})"
    return dataset if agent is None else f"{dataset} (agent {agent})"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def interval(interval: Interval) -> str:
    """``0.80 [0.24, 1.36]``; infinite bounds print as n/a (:func:`pytest_gym_eval.core.number_text.interval`)."""
    return number_text.interval(interval.estimate, interval.low, interval.high)


def change(paired: PairedComparison) -> str:
    sign = "+" if math.isfinite(paired.mean_difference) and paired.mean_difference >= 0 else ""
    return f"{sign}{number(paired.mean_difference)} [{number(paired.low)}, {number(paired.high)}]"


def p_value(p_value: float) -> str:
    if math.isnan(p_value):
        return "p n/a"
    return "p < 0.001" if p_value < 0.001 else f"p = {p_value:.3f}"


def percent(confidence: float) -> str:
    return f"{confidence * 100:.6g}%"


def duration(seconds: float) -> str:
    """``12.3 s``, ``4m 05s`` or ``2h 03m``."""
    if seconds < 60.0:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def shorten_left(text: str, limit: int) -> str:
    """``text`` cut from the left to ``limit`` characters, marked with "…"."""
    return text if len(text) <= limit else "…" + text[len(text) - limit + 1 :]


def trim_end(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def columns(text: str) -> int:
    """Terminal columns ``text`` takes: 2 for a wide or full-width character (East Asian Width W or F: CJK, most
    emoji), 0 for a combining mark, 1 for any other (Unicode Standard Annex #11)."""
    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(char) else 2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text
    )


def pad(text: str, width: int) -> str:
    """``text`` left-aligned in ``width`` terminal columns (:func:`columns`), like ``str.ljust`` on ASCII."""
    return text + " " * max(0, width - columns(text))


def trim_middle(text: str, limit: int) -> str:
    """``text`` with its middle replaced by "…" to fit ``limit`` characters (keeps both ends of an id)."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    tail = limit - 1 - head
    return text[:head] + "…" + text[len(text) - tail :]


def wrap(text: str, width: int, indent: str, continuation: str) -> list[str]:
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=indent,
        subsequent_indent=continuation,
        break_long_words=True,
        break_on_hyphens=False,
    )


def labelled(label: str, value: str, width: int) -> list[str]:
    """``  label       value`` with the label in a fixed column, wrapped under the value to fit ``width``."""
    return wrap(value, width, f"  {label:<{LABEL_WIDTH}} ", " " * (LABEL_WIDTH + 3))


def judged_note(familywise: Familywise | None, hint: Hint | None) -> str:
    """What the terminal adds to a gate's verdict, for the Markdown summary and the HTML page: how it was judged
    as one of the session's family (``family-wise: Holm over 3 gates: 98.3% interval, p 0.038``) and, for an
    INCONCLUSIVE verdict, how much more data would likely decide it (the gate's :class:`~pytest_gym_eval.stats.gates.
    Hint`); "" when neither. Taken from the judged result, never judged again."""
    parts = [] if familywise is None else [f"family-wise: {familywise.describe()}"]
    return "; ".join([*parts, *([] if hint is None else [hint.text])])
