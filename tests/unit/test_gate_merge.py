"""Tests of the one merge of gate settings (:func:`pytest_gym_eval.stats.gates.merge_gates`): gates from the command
line, the ini file and a dataset's own settings merge by identity (metric, k of pass@k, custom metric name, comparison
hypothesis), precedence deciding only between two settings of the same gate; and where it is used (the session's
dataset settings, ``merge``'s gate options) and when a session-wide metric gate applies to a dataset."""

from __future__ import annotations

import json

import jsonschema
import pytest

from pytest_gym_eval.options.settings import DatasetSettings, parse_dataset_settings
from pytest_gym_eval.reporting import json_reading, json_report
from pytest_gym_eval.reporting.merge import GateOverrides
from pytest_gym_eval.reporting.summary import RolloutResult, summarize
from pytest_gym_eval.reporting.verdicts import session_verdict
from pytest_gym_eval.stats.comparison import ComparisonGate, Hypothesis, comparison_gates
from pytest_gym_eval.stats.gates import Gate, GateMode, GateSource, Verdict, applies_to, merge_gates

CLI, INI, OWN = GateSource.COMMAND_LINE, GateSource.INI, GateSource.DATASET


def settings(gates: list[Gate | ComparisonGate]) -> list[tuple[object, ...]]:
    """Each gate as (identity, threshold or margin, source): what a test compares."""
    return [
        (g.identity, g.threshold if isinstance(g, Gate) else g.margin, g.source.value if g.source else None)
        for g in gates
    ]


@pytest.mark.parametrize(
    ("cli", "ini", "merged"),
    [
        pytest.param(
            [Gate("mean_reward", 0.8, source=CLI)],
            [Gate("mean_reward", 0.5, source=INI), Gate("pass_rate", 0.4, source=INI)],
            [(("mean_reward",), 0.8, "command line"), (("pass_rate",), 0.4, "ini")],
            id="mean reward and pass rate",
        ),
        pytest.param(
            [Gate("pass_at_k", 0.9, 4, source=CLI)],
            [Gate("pass_at_k", 0.5, 1, source=INI), Gate("pass_at_k", 0.6, 4, source=INI)],
            [(("pass_at_k", 4), 0.9, "command line"), (("pass_at_k", 1), 0.5, "ini")],
            id="pass@k by k",
        ),
        pytest.param(
            [Gate("custom", 3.0, custom="n_calls", source=CLI)],
            [Gate("custom", 0.9, custom="terse", source=INI)],
            [(("custom", "n_calls"), 3.0, "command line"), (("custom", "terse"), 0.9, "ini")],
            id="custom metric by name (issue 35)",
        ),
        pytest.param(
            [ComparisonGate(Hypothesis.NON_INFERIORITY, 0.1, CLI)],
            [ComparisonGate(Hypothesis.NON_INFERIORITY, 0.2, INI), ComparisonGate(Hypothesis.SUPERIORITY, 0.05, INI)],
            [
                (("comparison", "non-inferiority"), 0.1, "command line"),
                (("comparison", "superiority"), 0.05, "ini"),
            ],
            id="comparison by hypothesis",
        ),
    ],
)
def test_each_kind_merges_by_its_identity(cli: list[Gate], ini: list[Gate], merged: list[tuple[object, ...]]) -> None:
    assert settings(merge_gates(cli, ini)) == merged
    # Precedence decides only between two settings of one gate: the other way round, ini's settings win those.
    assert {identity for identity, _, _ in settings(merge_gates(ini, cli))} == {identity for identity, _, _ in merged}


def test_three_layers_keep_every_gate_and_the_first_layer_wins_a_tie() -> None:
    own = [Gate("custom", 0.9, custom="terse", source=OWN), Gate("pass_at_k", 0.7, 2, source=OWN)]
    ini = [Gate("pass_at_k", 0.1, 2, source=INI), Gate("mean_reward", 0.5, source=INI)]
    cli = [Gate("custom", 3.0, custom="n_calls", source=CLI)]
    assert settings(merge_gates(cli, own, ini)) == [
        (("custom", "n_calls"), 3.0, "command line"),
        (("custom", "terse"), 0.9, "dataset settings"),
        (("pass_at_k", 2), 0.7, "dataset settings"),
        (("mean_reward",), 0.5, "ini"),
    ]
    assert merge_gates() == [] and merge_gates([], []) == []


def test_within_one_layer_the_later_setting_of_a_gate_wins() -> None:
    layer = [Gate("pass_at_k", 0.5, 4), Gate("pass_at_k", 0.5, 1), Gate("pass_at_k", 0.6, 4)]
    assert [(g.k, g.threshold) for g in merge_gates(layer)] == [(1, 0.5), (4, 0.6)]


def test_a_gates_source_is_no_part_of_its_equality() -> None:
    """Shards whose gates were set in different places still judge the same gates (the merge compares them)."""
    assert Gate("mean_reward", 0.5, source=CLI) == Gate("mean_reward", 0.5, source=INI)
    assert ComparisonGate(Hypothesis.SUPERIORITY, 0.1, CLI) == ComparisonGate(Hypothesis.SUPERIORITY, 0.1)
    assert Gate("pass_at_k", 0.5, 4).identity != Gate("pass_at_k", 0.5, 2).identity
    assert Gate("custom", 0.5, custom="a").identity != Gate("mean_reward", 0.5).identity


def test_the_issue_case_a_command_line_metric_gate_keeps_the_datasets_own() -> None:
    """``gym_dataset_settings = ...: min_metric=terse:0.9`` and ``--gym-min-metric=n_calls:3``: both gates."""
    ((_, own),) = parse_dataset_settings(["data.jsonl: min_metric=terse:0.9 min_pass_at_k=1:0.5,4:0.6"])
    cli = DatasetSettings(
        given=(Gate("custom", 3.0, custom="n_calls", source=CLI), Gate("pass_at_k", 0.9, 4, source=CLI)), source=CLI
    )
    ini = DatasetSettings(
        given=(Gate("mean_reward", 0.5, source=INI), Gate("pass_at_k", 0.1, 1, source=INI)), source=INI
    )
    effective = cli.over(own.over(ini))
    assert settings(effective.gates) == [
        (("mean_reward",), 0.5, "ini"),
        (("pass_at_k", 4), 0.9, "command line"),
        (("pass_at_k", 1), 0.5, "dataset settings"),
        (("custom", "n_calls"), 3.0, "command line"),
        (("custom", "terse"), 0.9, "dataset settings"),
    ]
    assert DatasetSettings(source=CLI).over(DatasetSettings()).gates == []


def test_merges_gate_options_merge_by_identity_too() -> None:
    """``python -m pytest_gym_eval merge --gym-min-pass-at-k=4:0.9`` replaced every recorded pass@k gate."""
    recorded = [
        Gate("pass_at_k", 0.5, 1, source=OWN),
        Gate("pass_at_k", 0.6, 4, source=OWN),
        Gate("custom", 0.9, custom="terse", source=OWN),
    ]
    overrides = GateOverrides(given=(Gate("pass_at_k", 0.9, 4), Gate("custom", 3.0, custom="n_calls")))
    assert settings(overrides.gates(recorded)) == [
        (("pass_at_k", 4), 0.9, "command line"),
        (("pass_at_k", 1), 0.5, "dataset settings"),
        (("custom", "n_calls"), 3.0, "command line"),
        (("custom", "terse"), 0.9, "dataset settings"),
    ]
    assert GateOverrides().gates(recorded) == recorded


def test_comparison_gates_carry_their_sources() -> None:
    gates = comparison_gates(0.1, 0.05, {Hypothesis.SUPERIORITY: INI})
    assert [(g.hypothesis, g.margin, g.source) for g in gates] == [
        (Hypothesis.NON_INFERIORITY, 0.1, None),
        (Hypothesis.SUPERIORITY, 0.05, INI),
    ]


@pytest.mark.parametrize(
    ("gate", "recorded", "anywhere", "applies"),
    [
        pytest.param(Gate("custom", 3, custom="n", source=CLI), set(), {"n"}, False, id="cli, another dataset's"),
        pytest.param(Gate("custom", 3, custom="n", source=INI), set(), {"n"}, False, id="ini, another dataset's"),
        pytest.param(Gate("custom", 3, custom="n", source=CLI), {"n"}, {"n"}, True, id="cli, recorded here"),
        pytest.param(Gate("custom", 3, custom="n", source=CLI), set(), set(), True, id="cli, recorded nowhere"),
        pytest.param(Gate("custom", 3, custom="n", source=OWN), set(), {"n"}, True, id="the dataset's own"),
        pytest.param(Gate("custom", 3, custom="n"), set(), {"n"}, True, id="source unknown"),
        pytest.param(Gate("mean_reward", 0.5, source=CLI), set(), {"n"}, True, id="a reward gate"),
    ],
)
def test_a_session_wide_metric_gate_applies_where_the_metric_is_recorded(
    gate: Gate, recorded: set[str], anywhere: set[str], applies: bool
) -> None:
    assert applies_to(gate, recorded, anywhere) is applies


def rollout(dataset: str, task: str, metrics: tuple[tuple[str, float], ...] = ()) -> RolloutResult:
    return RolloutResult(f"{dataset}::{task}[r0]", dataset, task, 0, "agent", "passed", 1.0, metrics=metrics)


def test_a_summary_lists_a_session_wide_metric_gate_as_not_applicable_and_judges_the_rest() -> None:
    n_calls = Gate("custom", 3.0, custom="n_calls", source=CLI)
    results = [rollout("a.jsonl", "t1", (("n_calls", 3.0),)), rollout("a.jsonl", "t2"), rollout("b.jsonl", "t1")]
    gates = {"a.jsonl": [n_calls], "b.jsonl": [n_calls, Gate("mean_reward", 0.5, source=CLI)]}
    a, b = summarize(results, thresholds={}, gates=gates, mode=GateMode.POINT)
    assert [(r.gate.custom, r.verdict) for r in a.gates] == [("n_calls", Verdict.PASS)] and a.not_applicable == ()
    assert [r.gate.metric for r in b.gates] == ["mean_reward"] and b.not_applicable == (n_calls,)
    assert session_verdict([a, b], inconclusive_passes=False)[0] == 0
    # b's second rollout was selected and never reported: it might have recorded n_calls, so the gate is judged.
    (_, short) = summarize(
        results,
        thresholds={},
        gates=gates,
        mode=GateMode.POINT,
        selected={"a.jsonl": {"agent": 2}, "b.jsonl": {"agent": 2}},
    )
    assert [r.gate.metric for r in short.gates] == ["mean_reward", "custom"] and short.not_applicable == ()


def test_the_json_report_keeps_each_gates_source_and_the_gates_not_applicable() -> None:
    n_calls, mean = Gate("custom", 3.0, custom="n_calls", source=CLI), Gate("mean_reward", 0.5, source=OWN)
    results = [rollout("a.jsonl", "t1", (("n_calls", 3.0),)), rollout("b.jsonl", "t1")]
    summaries = summarize(
        results, thresholds={}, gates={"a.jsonl": [n_calls], "b.jsonl": [mean, n_calls]}, mode=GateMode.POINT
    )
    written = json.loads(json.dumps(json_report.build_report(summaries, results, {})))
    jsonschema.validate(written, json.loads(json_report.SCHEMA_PATH.read_text()))
    assert [g["source"] for d in written["datasets"] for g in d["gates"]] == ["command line", "dataset settings"]
    assert written["datasets"][1]["gates_not_applicable"] == [
        {"metric": "custom", "k": None, "threshold": 3.0, "custom": "n_calls", "source": "command line"}
    ]
    conclusion, _ = json_reading.conclusion_from_report(written)
    a, b = conclusion.summaries
    assert [r.gate.source for r in a.gates] == [CLI] and [r.gate.source for r in b.gates] == [OWN]
    assert b.not_applicable == (n_calls,) and b.not_applicable[0].source is CLI
