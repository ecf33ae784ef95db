"""Custom metrics: named numbers a test function records for its rollout (``rollout.record_metric("boxed", 1.0)``).

A metric travels as a ``user_properties`` entry of the test (``gym_metric.<name>``, its value a float), beside the
``gym_rollout`` entry naming the rollout, so pytest-xdist's controller and JUnit see it as they see the reward. A
metric's reason (why it has its value: ``record_metric("terse", 0, reason="3 sentences, not 1")``) travels the same
way as a sibling entry (``gym_metric_reason.<name>``, a short string).
Each dataset's summary shows each metric's mean with the mean reward's interval (clustered by task), and
``--gym-min-metric=NAME:BOUND`` gates it. This module holds the rules for names and values (pure, standard
library only).
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable

PROPERTY_PREFIX = "gym_metric."
"""The ``user_properties`` name of a metric is this prefix and the metric's name (``gym_metric.boxed``)."""

REASON_PREFIX = "gym_metric_reason."
"""The ``user_properties`` name of a metric's reason is this prefix and the metric's name."""

REASON_LIMIT = 200
"""The most characters a reason keeps (a longer one is cut, ending in ``…``): a reason is a short explanation,
shown beside the value in the failure text, the terminal, JSON, JUnit and the page."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")

NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
"""A metric name: a letter or ``_``, then up to 63 letters, digits, ``_``, ``.`` or ``-`` (no ``:``, which
separates the name from the bound in ``--gym-min-metric``; no spaces, which JUnit and the terminal keep as is)."""


def check_name(name: object) -> str:
    """``name`` when it is a valid metric name (:data:`NAME_PATTERN`); raises TypeError for a non-string and
    ValueError for a bad string, each saying what a name may be."""
    if not isinstance(name, str):
        raise TypeError(f"a metric name must be a string, got {type(name).__name__} {name!r}")
    if NAME_PATTERN.fullmatch(name) is None:
        raise ValueError(
            f"invalid metric name {name!r}: a letter or '_', then up to 63 letters, digits, '_', '.' or '-'"
        )
    return name


def metric_value(name: str, value: object) -> float:
    """``value`` as the float a metric records: a finite real number (int, float, or a numpy scalar), or a bool as
    1.0/0.0. Raises TypeError for anything else (None, a string, a list) and ValueError for NaN or infinity,
    naming the metric."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if not isinstance(value, numbers.Real):
        raise TypeError(
            f"metric {name!r}: the value must be a finite number (or a bool: 1/0), got {type(value).__name__} {value!r}"
        )
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"metric {name!r}: the value must be a finite number, got {number!r}")
    return number


def property_name(name: str) -> str:
    """The ``user_properties`` name a metric travels under (``gym_metric.<name>``)."""
    return PROPERTY_PREFIX + name


def reason_property_name(name: str) -> str:
    """The ``user_properties`` name a metric's reason travels under (``gym_metric_reason.<name>``)."""
    return REASON_PREFIX + name


def metric_reason(name: str, reason: object) -> str:
    """``reason`` as a metric's reason is kept: control characters (newlines, tabs, escapes) each run replaced by
    one space, outer spaces stripped, cut to :data:`REASON_LIMIT` characters (the last one ``…``). Raises
    TypeError for a non-string, naming the metric."""
    if not isinstance(reason, str):
        raise TypeError(f"metric {name!r}: the reason must be a string, got {type(reason).__name__} {reason!r}")
    text = _CONTROL.sub(" ", reason).strip()
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


def reasons_of(properties: Iterable[tuple[str, object]]) -> dict[str, str]:
    """The metric reasons among a test's ``user_properties`` (metric name -> reason); a name given twice keeps its
    last reason, and an empty reason takes an earlier one back (the metric was recorded again without one).
    Entries that are not strings, or whose name is no metric name, are left out."""
    found: dict[str, str] = {}
    for key, value in properties:
        if isinstance(key, str) and key.startswith(REASON_PREFIX):
            name = key[len(REASON_PREFIX) :]
            try:
                text = metric_reason(check_name(name), value)
            except (TypeError, ValueError):
                continue
            if text:
                found[name] = text
            else:
                found.pop(name, None)
    return found


def metrics_text(metrics: dict[str, float], reasons: dict[str, str]) -> str | None:
    """The failure text's lines of a test's recorded metrics (None when it recorded none): ``metrics:``, then one
    line a metric, sorted by name, ``  terse = 0 (3 sentences, not 1)`` (the reason in brackets when given)."""
    if not metrics:
        return None
    lines = ["metrics:"]
    for name, value in sorted(metrics.items()):
        reason = reasons.get(name)
        lines.append(f"  {name} = {value:g}" + (f" ({reason})" if reason else ""))
    return "\n".join(lines)


def metrics_of(properties: Iterable[tuple[str, object]]) -> dict[str, float]:
    """The metrics among a test's ``user_properties`` (name -> value); a name recorded twice keeps its last value.
    Entries whose value is not a finite number (not written by :func:`property_name`'s recorder) are left out."""
    found: dict[str, float] = {}
    for key, value in properties:
        if isinstance(key, str) and key.startswith(PROPERTY_PREFIX):
            name = key[len(PROPERTY_PREFIX) :]
            try:
                found[name] = metric_value(check_name(name), value)
            except (TypeError, ValueError):
                continue
    return found


def parse_bound(text: str) -> tuple[str, float]:
    """``NAME:BOUND`` (``boxed:0.9``) as ``(name, minimum mean)``; BOUND is any finite number (a metric has the
    scale its test gives it). Raises ValueError with the expected form."""
    name, sep, bound = str(text).strip().rpartition(":")
    if not sep or not name:
        raise ValueError(f"invalid metric gate {text!r}: expected NAME:BOUND, e.g. boxed:0.9")
    check_name(name.strip())
    try:
        number = float(bound)
    except ValueError:
        raise ValueError(f"invalid metric gate {text!r}: BOUND must be a number, got {bound!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"invalid metric gate {text!r}: BOUND must be a finite number, got {bound!r}")
    return name.strip(), number
