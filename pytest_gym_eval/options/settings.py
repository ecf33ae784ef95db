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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gym_eval.stats import gate_kinds
from pytest_gym_eval.stats.gate_kinds import GateKind
from pytest_gym_eval.tasks.python_dataset import label_of

if TYPE_CHECKING:
    from pytest_gym_eval.stats.gates import Gate, GateSource
    from pytest_gym_eval.stats.sequential import RewardRange
    from pytest_gym_eval.tasks.model_servers import ModelServerBinding

OTHER_KEYS = ("agent", "resources_server", "repeats", "pass_threshold", "reward_range")
"""The keys of a ``gym_dataset_settings`` line that set no gate (fields of :class:`DatasetSettings`)."""
GATE_KEYS = gate_kinds.SETTINGS
"""The keys that set gates, one per gate kind (:mod:`pytest_gym_eval.stats.gate_kinds`): merged by each gate's
identity (:meth:`DatasetSettings.over`)."""
MODEL_SERVER_KEY = "model_server"
"""The key that binds a model server the dataset's environment names (``model_server=NAME=SPEC``, repeatable)."""
SETTING_KEYS = (*OTHER_KEYS[:4], *GATE_KEYS, *OTHER_KEYS[4:], MODEL_SERVER_KEY)
"""The keys a ``gym_dataset_settings`` line may set."""


@dataclass(frozen=True)
class DatasetSettings:
    """Settings one dataset may carry (a line of ``gym_dataset_settings``); None means "not set here".

    ``given`` holds the gates these settings set, of any kind (:mod:`pytest_gym_eval.stats.gate_kinds`), each with
    its source; ``reward_range`` the range every reward lies in (what ``--gym-adaptive``'s confidence sequence
    needs; [0, 1] when unset). ``source`` says where these settings come from (command line, ini file, a
    ``gym_dataset_settings`` line, a test's mark).
    """

    agent: str | None = None
    resources_server: str | None = None
    repeats: int | None = None
    pass_threshold: float | None = None
    given: tuple[Gate, ...] = ()
    reward_range: RewardRange | None = None
    source: GateSource | None = field(default=None, compare=False)
    model_servers: tuple[ModelServerBinding, ...] = ()
    """The model servers the dataset binds itself (``model_server=``), beating ``--gym-model-server``'s."""

    @property
    def gates(self) -> list[Gate]:
        """The CI gates these settings ask for (empty when none), each carrying its source; one gate per identity
        (:func:`~pytest_gym_eval.stats.gates.merge_gates`: of two ``min_metric=terse:...`` the later counts)."""
        from pytest_gym_eval.stats.gates import merge_gates

        return merge_gates(self.given)

    @property
    def threshold(self) -> float:
        """The pass threshold (default 1.0)."""
        return 1.0 if self.pass_threshold is None else self.pass_threshold

    def over(self, other: DatasetSettings) -> DatasetSettings:
        """These settings, with ``other``'s filling whatever is unset here: a gate of ``other`` stays unless these
        settings have a gate of the same identity (:func:`~pytest_gym_eval.stats.gates.merge_gates`: a pass@4 gate here
        replaces ``other``'s pass@4 gate, never its pass@1 gate, a ``terse`` metric gate never ``other``'s
        ``n_calls`` one). The result's gates keep their sources, in the order of the kinds
        (:data:`~pytest_gym_eval.stats.gate_kinds.KINDS`)."""
        from pytest_gym_eval.stats.gates import merge_gates

        values: dict[str, Any] = {}
        for name in OTHER_KEYS:
            mine = getattr(self, name)
            values[name] = mine if mine not in (None, ()) else getattr(other, name)
        gates = sorted(merge_gates(self.gates, other.gates), key=lambda gate: gate_kinds.METRICS.index(gate.metric))
        names = {binding.name for binding in self.model_servers}
        servers = (*self.model_servers, *(b for b in other.model_servers if b.name not in names))
        return DatasetSettings(**values, given=tuple(gates), model_servers=servers)

    def of_kind(self, kind: GateKind) -> list[Gate]:
        """These settings' gates of ``kind``."""
        return [gate for gate in self.gates if gate.metric == kind.metric]


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


def parse_dataset_settings(lines: Sequence[str], base: Path | None = None) -> list[tuple[str, DatasetSettings]]:
    """Parse ``gym_dataset_settings`` lines of the form ``<glob>: key=value key=value ...``; ``base`` (the ini
    file's folder; the working directory when None) resolves a ``model_server=NAME=replay:FILE``'s relative path.

    Raises :class:`pytest.UsageError` quoting the line for an unknown key or a bad value (a bad ``model_server=``
    with a URL's password redacted; :meth:`~pytest_gym_eval.options.gym_options.GymOptions.from_config` redacts
    every message).
    """
    from pytest_gym_eval.stats.gates import GateSource

    source = GateSource.DATASET
    parsed: list[tuple[str, DatasetSettings]] = []
    for line in lines:
        pattern, sep, rest = line.partition(": ")
        if not sep and line.rstrip().endswith(":"):  # a glob with no settings (yet)
            pattern, sep, rest = line.rstrip()[:-1], ":", ""
        if not sep or not pattern.strip():
            raise pytest.UsageError(f"gym_dataset_settings: expected '<glob>: key=value ...', got {line!r}")
        values: dict[str, Any] = {}
        given: list[Gate] = []
        servers: list[str] = []
        for pair in rest.split():
            key, eq, text = pair.partition("=")
            where = f"gym_dataset_settings line {line!r}"
            if not eq or key not in SETTING_KEYS:
                raise pytest.UsageError(f"{where}: unknown setting {pair!r} (known: {', '.join(SETTING_KEYS)})")
            kind = gate_kinds.kind_of_setting(key)
            if kind is not None:
                texts = text.split(",") if kind.repeatable else [text]
                given += gates_of(kind, texts, where if kind.repeatable else f"{where}: {key}", source)
            elif key == MODEL_SERVER_KEY:
                servers.append(text)
            elif key in ("agent", "resources_server"):
                values[key] = text
            elif key == "repeats":
                values[key] = _positive_int(text, f"{where}: repeats")
            elif key == "reward_range":
                values[key] = _reward_range(text, f"{where}: reward_range")
            else:
                values[key] = _number(text, f"{where}: {key}")
        if servers:
            values["model_servers"] = _model_servers(servers, base, f"gym_dataset_settings line {line!r}")
        parsed.append((pattern.strip(), DatasetSettings(**values, given=tuple(given), source=source)))
    return parsed


def _model_servers(texts: Sequence[str], base: Path | None, where: str) -> tuple[ModelServerBinding, ...]:
    """The ``model_server=`` values of one settings line (:func:`~pytest_gym_eval.tasks.model_servers.
    parse_model_servers`); raises :class:`pytest.UsageError` naming ``where``."""
    from pytest_gym_eval.core.credentials import redact_value
    from pytest_gym_eval.tasks.model_servers import ModelServerSpecError, parse_model_servers

    try:
        bindings = parse_model_servers(texts, base or Path.cwd(), f"{where}: {MODEL_SERVER_KEY}")
    except ModelServerSpecError as error:  # the line may hold a URL's password
        raise pytest.UsageError(redact_value(str(error))) from None
    if any(binding.for_policy for binding in bindings):
        raise pytest.UsageError(
            redact_value(f"{where}: {MODEL_SERVER_KEY}: NAME@POLICY is for --gym-model-server, not a dataset's line")
        )
    return bindings


def gates_of(kind: GateKind, texts: Sequence[object], where: str, source: GateSource | None = None) -> list[Gate]:
    """The gates of ``kind`` that the values ``texts`` set (as a command line, an ini file or a settings line
    writes them: a number, ``K:V``, ``NAME:BOUND``; a number may come parsed), each with ``source``; "" and None
    set nothing. Raises :class:`pytest.UsageError` naming ``where`` for a bad value."""
    from pytest_gym_eval.stats.gates import Gate

    gates = []
    for text in texts:
        if text is None or text == "":
            continue
        if kind.form == gate_kinds.NUMBER:
            number = _number(text, where)
            assert number is not None
            if kind.probability and not 0.0 <= number <= 1.0:
                article = "an" if kind.title[0] in "aeiou" else "a"
                raise pytest.UsageError(f"{where}: {article} {kind.title} lies in [0, 1], got {number:g}")
            gate = Gate(kind.metric, number)
        elif kind.form == gate_kinds.PASS_AT:
            k, threshold = parse_pass_at_k(str(text), where)
            gate = Gate(kind.metric, threshold, k=k)
        else:
            name, bound = parse_min_metric(str(text), where)
            gate = Gate(kind.metric, bound, custom=name)
        gates.append(replace(gate, source=source))
    return gates


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
