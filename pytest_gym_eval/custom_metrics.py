"""Custom metrics: named numbers a test function records for its rollout (``rollout.record_metric("boxed", 1.0)``).

A metric travels as a ``user_properties`` entry of the test (``gym_metric.<name>``, its value a float), beside the
``gym_rollout`` entry naming the rollout, so pytest-xdist's controller and JUnit see it as they see the reward.
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
