"""Tests of the gate kinds' registry (:mod:`pytest_gym_eval.stats.gate_kinds`): every kind has every field, and
everything that names gate kinds (the option table, the options' resolution from each source and its precedence,
``gym_dataset_settings``, ``merge``'s options, the JSON schema's enum) reads them from it."""

from __future__ import annotations

import argparse
import json
import string
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_gym_eval.cli import merge as merge_cli
from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.options.readers import settings_layer
from pytest_gym_eval.options.settings import SETTING_KEYS, parse_dataset_settings
from pytest_gym_eval.options.table import OPTIONS
from pytest_gym_eval.reporting import json_report
from pytest_gym_eval.stats import gate_kinds
from pytest_gym_eval.stats.gate_kinds import AT_LEAST, AT_MOST, KINDS, NAMED, NUMBER, PASS_AT, GateKind
from pytest_gym_eval.stats.gates import Gate, GateMode, GateSource, Verdict, evaluate
from pytest_gym_eval.stats.sequential import gate_values

CLI, INI, OWN, MARK = GateSource.COMMAND_LINE, GateSource.INI, GateSource.DATASET, GateSource.MARK


def written(kind: GateKind, threshold: float) -> str:
    """A value of ``kind`` as a user writes it: ``0.5``, ``1:0.5``, ``m:0.5``."""
    return {NUMBER: f"{threshold}", PASS_AT: f"1:{threshold}", NAMED: f"m:{threshold}"}[kind.form]


def gate(kind: GateKind, threshold: float, source: GateSource | None = None) -> Gate:
    k = 1 if kind.form == PASS_AT else None
    return Gate(kind.metric, threshold, k=k, custom="m" if kind.form == NAMED else None, source=source)


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.metric)
def test_every_kind_has_every_field(kind: GateKind) -> None:
    assert kind.metric and kind.metric.isidentifier() and kind.setting.isidentifier()
    assert kind.flag == "--gym-" + kind.setting.replace("_", "-") and kind.ini == "gym_" + kind.setting
    assert kind.form in (NUMBER, PASS_AT, NAMED) and kind.repeatable == (kind.form != NUMBER)
    assert kind.help.startswith("CI gate:") and kind.metavar
    assert kind.words in (AT_LEAST, AT_MOST)
    fields = {name for _, name, _, _ in string.Formatter().parse(kind.title) if name}
    assert fields <= {"k", "custom"} and kind.name_of(gate(kind, 0.5))
    # A kind is judged on a statistic of the rollouts, or (a custom metric's) on what tests recorded.
    assert (kind.statistic is None) == (kind.form == NAMED)
    if kind.wave_values is not None:  # its confidence sequence sees its statistic's observations
        assert kind.statistic is not None
    assert gate_kinds.kind(kind.metric) is kind and gate_kinds.kind_of_setting(kind.setting) is kind


def test_kind_names_are_distinct_and_unknown_ones_refused() -> None:
    assert len({k.metric for k in KINDS}) == len({k.setting for k in KINDS}) == len(KINDS)
    with pytest.raises(ValueError, match="unknown gate metric 'median'; expected one of mean_reward"):
        gate_kinds.kind("median")
    with pytest.raises(ValueError, match="unknown gate metric"):
        Gate("median", 0.5)


@pytest.mark.parametrize("kind", [k for k in KINDS if k.statistic is not None], ids=lambda kind: kind.metric)
def test_every_statistic_judges_in_its_direction(kind: GateKind) -> None:
    """Three tasks of two rollouts: the point estimate is judged against a threshold on either side of it."""
    rewards, passed = [[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]], [[True, False], [True, True], [False, True]]
    (low,) = evaluate([gate(kind, 0.0)], rewards, passed, GateMode.POINT, rollouts=7, errors=1)
    (high,) = evaluate([gate(kind, 1.0)], rewards, passed, GateMode.POINT, rollouts=7, errors=1)
    assert 0.0 < low.interval.estimate < 1.0
    expected = (Verdict.PASS, Verdict.FAIL) if kind.words is AT_LEAST else (Verdict.FAIL, Verdict.PASS)
    assert (low.verdict, high.verdict) == expected
    assert kind.words.ok in low.describe() + high.describe() and kind.words.not_ok in low.describe() + high.describe()
    if kind.wave_values is not None:
        values = gate_values(gate(kind, 0.5), rewards, passed, 0, 2)
        assert values is not None and all(0.0 <= v <= 1.0 for v in values)


def test_the_option_table_and_the_settings_keys_have_every_kind() -> None:
    options = {option.flag: option for option in OPTIONS}
    for kind in KINDS:
        option = options[kind.flag]
        assert option.help == kind.help and option.ini_name == kind.ini and option.metavar == kind.metavar
        assert option.ini_type == ("linelist" if kind.repeatable else "number")
        assert kind.setting in SETTING_KEYS


def test_merges_parser_has_every_kinds_option() -> None:
    parser = merge_cli._parser()
    flags = {flag for action in parser._actions for flag in action.option_strings}
    assert {kind.flag for kind in KINDS} <= flags
    args = parser.parse_args(["r.json", *(f"{kind.flag}={written(kind, 0.5)}" for kind in KINDS)])
    assert merge_cli._overrides(args).given == tuple(gate(kind, 0.5) for kind in KINDS)


def test_the_schema_enum_is_the_registrys() -> None:
    schema = json_report.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$defs"]["gate_metric"]["enum"] == [kind.metric for kind in KINDS]
    on_disk = json.loads(json_report.SCHEMA_PATH.read_text(encoding="utf-8"))
    assert "enum" not in on_disk["$defs"]["gate_metric"]  # no second list of the kinds to keep in step


# --- Resolution from each source, and precedence ------------------------------------------------------------


@pytest.mark.parametrize("source", [CLI, INI])
def test_every_kind_resolves_from_a_session_wide_source(source: GateSource) -> None:
    values: dict[str, Any] = {}
    for kind in KINDS:
        text = written(kind, 0.5)
        values[kind.dest] = [text] if kind.repeatable else (float(text) if source is CLI else text)
    layer = settings_layer(values.get, source)
    assert layer.gates == [gate(kind, 0.5) for kind in KINDS]
    assert {g.source for g in layer.gates} == {source}


def test_every_kind_resolves_from_a_dataset_settings_line() -> None:
    line = "d.jsonl: " + " ".join(f"{kind.setting}={written(kind, 0.5)}" for kind in KINDS)
    ((pattern, own),) = parse_dataset_settings([line])
    assert pattern == "d.jsonl" and own.gates == [gate(kind, 0.5) for kind in KINDS]
    assert {g.source for g in own.gates} == {OWN}


@pytest.mark.parametrize(
    ("source", "where"),
    [(CLI, "--gym-{}"), (INI, "gym_{}")],
)
def test_a_bad_value_names_the_option(source: GateSource, where: str) -> None:
    for kind in KINDS:
        bad = "nope" if kind.form == NUMBER else "nope:"
        with pytest.raises(
            pytest.UsageError, match=where.format(kind.setting.replace("_", "-" if source is CLI else "_"))
        ):
            settings_layer({kind.dest: [bad] if kind.repeatable else bad}.get, source)


def options(tmp_path: Path, cli: float | None, own: float | None, ini: float | None) -> GymOptions:
    """Options whose command line, dataset settings and ini file each set every kind's gate to a threshold (None:
    not set there)."""

    def layer(threshold: float | None, source: GateSource) -> Any:
        values = {k.dest: [written(k, threshold)] if k.repeatable else written(k, threshold) for k in KINDS}
        return settings_layer(values.get if threshold is not None else {}.get, source)

    lines = ["d.jsonl: " + " ".join(f"{k.setting}={written(k, own)}" for k in KINDS)] if own is not None else []
    return GymOptions(
        rootdir=tmp_path, cli=layer(cli, CLI), ini=layer(ini, INI), datasets=tuple(parse_dataset_settings(lines))
    )


@pytest.mark.parametrize(
    ("cli", "own", "mark", "ini", "expected", "source"),
    [
        (0.9, 0.8, 0.7, 0.6, 0.9, CLI),
        (None, 0.8, 0.7, 0.6, 0.8, OWN),
        (None, None, 0.7, 0.6, 0.7, MARK),
        (None, None, None, 0.6, 0.6, INI),
    ],
)
def test_precedence_is_command_line_dataset_mark_ini_for_every_kind(
    tmp_path: Path,
    cli: float | None,
    own: float | None,
    mark: float | None,
    ini: float | None,
    expected: float,
    source: GateSource,
) -> None:
    opts = options(tmp_path, cli, own, ini)
    if mark is not None:  # marks declare custom metric gates only
        opts.declare_marks({"d.jsonl": {"m": (mark, ("t.py::test_m",))}})
    gates = opts.dataset_settings(tmp_path / "d.jsonl").gates
    assert [g.metric for g in gates] == [kind.metric for kind in KINDS]  # one gate per kind, in the kinds' order
    for found in gates:
        marked = found.custom is not None and mark is not None and cli is None and own is None
        wanted = (expected, source) if found.custom is not None or source is not MARK else (ini, INI)
        assert (found.threshold, found.source) == ((mark, MARK) if marked else wanted)


def test_every_kind_resolves_from_pytests_command_line_and_ini(pytester: pytest.Pytester) -> None:
    ini_lines = "".join(f"{kind.ini} = {written(kind, 0.5)}\n" for kind in KINDS)
    pytester.makeini(f"[pytest]\n{ini_lines}")
    config = pytester.parseconfig()
    assert GymOptions.from_config(config).ini.gates == [gate(kind, 0.5) for kind in KINDS]
    config = pytester.parseconfig(*(f"{kind.flag}={written(kind, 0.25)}" for kind in KINDS))
    resolved = GymOptions.from_config(config)
    assert resolved.cli.gates == [gate(kind, 0.25) for kind in KINDS]
    assert resolved.dataset_settings(pytester.path / "d.jsonl").gates == [gate(kind, 0.25) for kind in KINDS]


def test_an_argparse_namespace_reads_like_the_command_line() -> None:
    """``merge``'s options go through the session's own reading of a command line (one parser of gate values)."""
    namespace = argparse.Namespace(**{kind.dest: None for kind in KINDS})
    assert settings_layer(lambda dest: getattr(namespace, dest, None), CLI).gates == []
