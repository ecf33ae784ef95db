"""Per-dataset settings: the ``gym_dataset_settings`` lines (``<glob>: key=value ...``), the globs that match a
dataset by its name, and that name (:func:`dataset_name`, the path part of its items' node ids).

Cheap to import (the standard library and pytest): the plugin names every collected dataset with it. The gate and
reward-range parsers are imported when a settings line is parsed.
"""

from __future__ import annotations

import fnmatch
import functools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gym_eval.tasks.python_dataset import label_of

if TYPE_CHECKING:
    from pytest_gym_eval.stats.gates import Gate, GateSource
    from pytest_gym_eval.stats.sequential import RewardRange

SETTING_KEYS = (
    "agent",
    "resources_server",
    "repeats",
    "pass_threshold",
    "min_mean_reward",
    "min_pass_rate",
    "min_pass_at_k",
    "min_metric",
    "reward_range",
)
"""The keys a ``gym_dataset_settings`` line may set (the fields of :class:`DatasetSettings`)."""
GATE_KEYS = ("min_mean_reward", "min_pass_rate", "min_pass_at_k", "min_metric")
"""The keys among :data:`SETTING_KEYS` that set gates: merged by each gate's identity (:meth:`DatasetSettings.over`)."""


@dataclass(frozen=True)
class DatasetSettings:
    """Settings one dataset may carry (a line of ``gym_dataset_settings``); None means "not set here".

        ``min_pass_at_k`` holds ``(k, minimum pass@k)`` pairs, ``min_metric`` ``(custom metric, minimum mean)``
    pairs (:mod:`pytest_gym_eval.outcomes.custom_metrics`); ``reward_range`` the range every reward lies in (what
    ``--gym-adaptive``'s confidence sequence needs; [0, 1] when unset). ``source`` says where these settings come
    from (command line, ini file, a ``gym_dataset_settings`` line; its gates carry it), ``merged`` holds the gates
    of settings :meth:`over` merged (each with its own source; None for settings of one source).
    """

    agent: str | None = None
    resources_server: str | None = None
    repeats: int | None = None
    pass_threshold: float | None = None
    min_mean_reward: float | None = None
    min_pass_rate: float | None = None
    min_pass_at_k: tuple[tuple[int, float], ...] = ()
    min_metric: tuple[tuple[str, float], ...] = ()
    reward_range: RewardRange | None = None
    source: GateSource | None = field(default=None, compare=False)
    merged: tuple[Gate, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def gates(self) -> list[Gate]:
        """The CI gates these settings ask for (empty when none), each carrying its source; one gate per identity
        (:func:`~pytest_gym_eval.stats.gates.merge_gates`: of two ``min_metric=terse:...`` the later counts)."""
        from pytest_gym_eval.stats.gates import Gate, merge_gates

        if self.merged is not None:
            return list(self.merged)
        gates = []
        if self.min_mean_reward is not None:
            gates.append(Gate("mean_reward", self.min_mean_reward, source=self.source))
        if self.min_pass_rate is not None:
            gates.append(Gate("pass_rate", self.min_pass_rate, source=self.source))
        gates.extend(Gate("pass_at_k", value, k, source=self.source) for k, value in self.min_pass_at_k)
        gates.extend(Gate("custom", value, custom=name, source=self.source) for name, value in self.min_metric)
        return merge_gates(gates)

    @property
    def threshold(self) -> float:
        """The pass threshold (default 1.0)."""
        return 1.0 if self.pass_threshold is None else self.pass_threshold

    def over(self, other: DatasetSettings) -> DatasetSettings:
        """These settings, with ``other``'s filling whatever is unset here: a gate of ``other`` stays unless these
        settings have a gate of the same identity (:func:`~pytest_gym_eval.stats.gates.merge_gates`: a pass@4 gate here
        replaces ``other``'s pass@4 gate, never its pass@1 gate, a ``terse`` metric gate never ``other``'s
        ``n_calls`` one). The result's gates keep their sources, in the order mean reward, pass rate, pass@k,
        custom metrics."""
        from pytest_gym_eval.stats.gates import METRICS, merge_gates

        values: dict[str, Any] = {}
        for name in SETTING_KEYS:
            mine = getattr(self, name)
            if name not in GATE_KEYS:
                values[name] = mine if mine not in (None, ()) else getattr(other, name)
        gates = sorted(merge_gates(self.gates, other.gates), key=lambda gate: METRICS.index(gate.metric))
        return DatasetSettings(
            **values,
            min_mean_reward=next((g.threshold for g in gates if g.metric == "mean_reward"), None),
            min_pass_rate=next((g.threshold for g in gates if g.metric == "pass_rate"), None),
            min_pass_at_k=tuple((g.k, g.threshold) for g in gates if g.k is not None),
            min_metric=tuple((g.custom, g.threshold) for g in gates if g.custom is not None),
            merged=tuple(gates),
        )


def dataset_name(path: Path, rootdir: Path) -> str:
    """A dataset's name: its path relative to the rootdir, with ``../`` when it lies outside (e.g.
    ``../shared/mcqa.jsonl``), symlinks kept as found. This is the path part of its items' node ids and the name
    in every report, so it is distinct for distinct files and stable from run to run (pytest itself would give a
    file named outside the rootdir an empty path)."""
    return Path(os.path.relpath(os.path.abspath(path), os.path.abspath(rootdir))).as_posix()


def glob_matches(name: str, pattern: str) -> bool:
    """Whether a dataset's ``name`` matches a glob of ``gym_datasets`` or ``gym_dataset_settings``: ``fnmatch``, as
    pytest's own globs (``*`` matches across folders too), where ``**/`` also matches no folder at all
    (``datasets/**/*.jsonl`` matches ``datasets/a.jsonl``), as the shell's and pathlib's recursive globs do."""
    return any(fnmatch.fnmatch(name, variant) for variant in _glob_variants(pattern))


@functools.lru_cache(maxsize=256)
def _glob_variants(pattern: str) -> tuple[str, ...]:
    """``pattern`` with each combination of its ``**/`` kept or removed (fnmatch's ``**/`` needs one folder)."""
    variants = [""]
    for index, part in enumerate(pattern.split("**/")):
        variants = (
            [v + part for v in variants] if index == 0 else [v + f for v in variants for f in ("**/" + part, part)]
        )
    return tuple(dict.fromkeys(variants))


GLOB_CHARS = frozenset("*?[")
MAX_FILES_SEARCHED = 20_000
"""Files :func:`matches_no_file` looks at under one glob's folder before it gives up (and says "matched")."""


def matches_no_file(pattern: str, rootdir: Path) -> bool:
    """Whether the ``gym_dataset_settings`` glob ``pattern`` (relative to ``rootdir``, or absolute) matches no
    file on disk: a typo (``datasets/quizz.jsonl``) whose settings, gates among them, would apply to nothing.

    Only the folder before the glob's first wildcard is searched (``datasets/**/*.jsonl`` searches ``datasets/``),
    at most :data:`MAX_FILES_SEARCHED` files of it; a search that stops there counts as a match, so a large tree
    never costs more than that and never gives a false alarm. A ``../`` glob is resolved from ``rootdir``. A glob
    of Python datasets (``tests/test_weather.py:weather-*``, see :mod:`pytest_gym_eval.tasks.python_dataset`) matches
    when
    its module part matches a file."""
    module, python, _ = pattern.partition(".py:")
    if python:
        return matches_no_file(module + ".py", rootdir)
    parts = Path(pattern).parts
    fixed = next((i for i, part in enumerate(parts) if GLOB_CHARS & set(part)), len(parts))
    base = rootdir / Path(*parts[:fixed]) if fixed else rootdir
    if fixed == len(parts):
        return not base.is_file()
    if not base.is_dir():
        return True
    seen = 0
    for folder, _, files in os.walk(base):
        for file in files:
            path = Path(folder) / file
            if any(glob_matches(name, pattern) for name in _match_names(path, rootdir)):
                return False
            seen += 1
            if seen >= MAX_FILES_SEARCHED:
                return False
    return True


def _match_names(path: Path, rootdir: Path) -> list[str]:
    """The names a glob may match a dataset by: as found and, when that differs, as resolved (symlinks); a Python
    dataset's file also by its label (:func:`~pytest_gym_eval.tasks.python_dataset.label_of`)."""
    found = [dataset_name(path, rootdir), Path(os.path.abspath(path)).as_posix()]
    label = label_of(path)
    if label is not None:
        found.insert(0, label)
    real = path.resolve()
    if real != Path(os.path.abspath(path)):
        found += [dataset_name(real, rootdir.resolve()), real.as_posix()]
    return found


def parse_dataset_settings(lines: Sequence[str]) -> list[tuple[str, DatasetSettings]]:
    """Parse ``gym_dataset_settings`` lines of the form ``<glob>: key=value key=value ...``.

    Raises :class:`pytest.UsageError` quoting the line for an unknown key or a bad value.
    """
    from pytest_gym_eval.stats.gates import GateSource

    parsed: list[tuple[str, DatasetSettings]] = []
    for line in lines:
        pattern, sep, rest = line.partition(": ")
        if not sep and line.rstrip().endswith(":"):  # a glob with no settings (yet)
            pattern, sep, rest = line.rstrip()[:-1], ":", ""
        if not sep or not pattern.strip():
            raise pytest.UsageError(f"gym_dataset_settings: expected '<glob>: key=value ...', got {line!r}")
        values: dict[str, Any] = {}
        for pair in rest.split():
            key, eq, text = pair.partition("=")
            where = f"gym_dataset_settings line {line!r}"
            if not eq or key not in SETTING_KEYS:
                raise pytest.UsageError(f"{where}: unknown setting {pair!r} (known: {', '.join(SETTING_KEYS)})")
            if key in ("agent", "resources_server"):
                values[key] = text
            elif key == "repeats":
                values[key] = _positive_int(text, f"{where}: repeats")
            elif key == "reward_range":
                values[key] = _reward_range(text, f"{where}: reward_range")
            elif key == "min_pass_at_k":
                values[key] = tuple(parse_pass_at_k(part, where) for part in text.split(","))
            elif key == "min_metric":
                values[key] = tuple(parse_min_metric(part, where) for part in text.split(","))
            elif key == "min_pass_rate":
                values[key] = _fraction(text, f"{where}: {key}")
            else:
                values[key] = _number(text, f"{where}: {key}")
        parsed.append((pattern.strip(), DatasetSettings(**values, source=GateSource.DATASET)))
    return parsed


def parse_pass_at_k(text: str, where: str = "--gym-min-pass-at-k") -> tuple[int, float]:
    """``"K:V"`` as ``(k, minimum pass@k)``; raises :class:`pytest.UsageError` naming ``where``."""
    from pytest_gym_eval.stats import gates

    try:
        gate = gates.parse_pass_at_k(text)
    except ValueError as error:
        raise pytest.UsageError(f"{where}: {error}") from None
    assert gate.k is not None
    return gate.k, gate.threshold


def parse_min_metric(text: str, where: str = "--gym-min-metric") -> tuple[str, float]:
    """``"NAME:BOUND"`` as ``(custom metric, minimum mean)``; raises :class:`pytest.UsageError` naming ``where``."""
    from pytest_gym_eval.outcomes.custom_metrics import parse_bound

    try:
        return parse_bound(text)
    except (TypeError, ValueError) as error:
        raise pytest.UsageError(f"{where}: {error}") from None


def _reward_range(text: object, where: str) -> RewardRange | None:
    """``LO:HI`` as a :class:`~pytest_gym_eval.stats.sequential.RewardRange`, None when unset; raises
    :class:`pytest.UsageError` naming ``where``."""
    if text is None or text == "":
        return None
    from pytest_gym_eval.stats.sequential import parse_reward_range

    try:
        return parse_reward_range(str(text))
    except ValueError as error:
        raise pytest.UsageError(f"{where}: {error}") from None


def _positive_int(text: object, where: str) -> int | None:
    """A whole number >= 1, or None when unset; raises :class:`pytest.UsageError` naming ``where``."""
    return _whole(text, where, 1)


def _count(text: object, where: str) -> int | None:
    """A whole number >= 0, or None when unset; raises :class:`pytest.UsageError` naming ``where``."""
    return _whole(text, where, 0)


def _whole(text: object, where: str, minimum: int) -> int | None:
    if text is None or text == "":
        return None
    try:
        number = int(str(text))
    except ValueError:
        raise pytest.UsageError(f"{where}: expected a whole number, got {text!r}") from None
    if number < minimum:
        raise pytest.UsageError(f"{where}: must be at least {minimum}, got {number}")
    return number


def _fraction(text: object, where: str) -> float | None:
    """A number in [0, 1] (a pass rate), or None when unset; raises :class:`pytest.UsageError` naming ``where``."""
    number = _number(text, where)
    if number is not None and not 0.0 <= number <= 1.0:
        raise pytest.UsageError(f"{where}: a pass rate lies in [0, 1], got {number:g}")
    return number


def _number(text: object, where: str) -> float | None:
    if text is None or text == "":
        return None
    try:
        number = float(str(text))
    except ValueError:
        raise pytest.UsageError(f"{where}: expected a number, got {text!r}") from None
    if not math.isfinite(number):
        raise pytest.UsageError(f"{where}: expected a finite number, got {text!r}")
    if number < 0 and "timeout" in where:
        raise pytest.UsageError(f"{where}: a timeout cannot be negative, got {text!r}")
    return number
