"""Tests of a metric's gate declared beside its test (issue 39, item 4): a ``gym_rollouts`` mark's
``min_metric={"terse": 0.9}`` is a gate of its dataset only, merged by identity with the command line's, the
dataset settings' and the ini file's (command line > dataset settings > test mark > ini), carried with its source
and declaring test through the collected plan, the report's plan and back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gym_eval.options.gym_options import GymOptions
from pytest_gym_eval.options.settings import DatasetSettings, parse_dataset_settings
from pytest_gym_eval.reporting import json_reading, json_report
from pytest_gym_eval.reporting.terminal import set_where
from pytest_gym_eval.session.collect import mark_gates
from pytest_gym_eval.session.rollout_tests import check_declared, mark_arguments
from pytest_gym_eval.stats.gates import Gate, GateSource
from pytest_gym_eval.tasks.shard import CollectedPlan, DatasetTasks

MARKS = {"mcqa.jsonl": {"terse": (0.9, ("test_x.py::test_terse", "test_y.py::test_terse"))}}


def options(tmp_path: Path, *, cli: str = "", ini: str = "", own: str = "") -> GymOptions:
    """Options whose layers each may set one ``min_metric`` (``NAME:BOUND``) for every dataset."""

    def layer(text: str, source: GateSource) -> DatasetSettings:
        pairs = tuple((name, float(bound)) for name, _, bound in [text.partition(":")]) if text else ()
        return DatasetSettings(given=tuple(Gate("custom", b, custom=n, source=source) for n, b in pairs), source=source)

    lines = parse_dataset_settings([f"*.jsonl: min_metric={own}"]) if own else []
    return GymOptions(
        rootdir=tmp_path,
        cli=layer(cli, GateSource.COMMAND_LINE),
        ini=layer(ini, GateSource.INI),
        datasets=tuple(lines),
    )


def gates(opts: GymOptions, tmp_path: Path, dataset: str = "mcqa.jsonl") -> list[tuple[object, ...]]:
    return [
        (g.custom, g.threshold, g.source.value if g.source else None, g.declared_by)
        for g in opts.dataset_settings(tmp_path / dataset).gates
    ]


def test_a_marks_gate_is_its_datasets_only(tmp_path: Path) -> None:
    opts = options(tmp_path)
    assert gates(opts, tmp_path) == []  # asked before the marks are known (collection): cached ...
    opts.declare_marks(MARKS)
    assert gates(opts, tmp_path) == [("terse", 0.9, "test mark", "test_x.py::test_terse")]  # ... and asked again
    assert gates(opts, tmp_path, "other.jsonl") == []


@pytest.mark.parametrize(
    ("layers", "expected"),
    [
        pytest.param({"ini": "terse:0.5"}, [("terse", 0.9, "test mark")], id="the mark beats the ini file"),
        pytest.param({"own": "terse:0.5"}, [("terse", 0.5, "dataset settings")], id="dataset settings beat it"),
        pytest.param({"cli": "terse:0.4"}, [("terse", 0.4, "command line")], id="the command line beats it"),
        pytest.param(
            {"cli": "n_calls:3", "ini": "chars:5"},
            [("n_calls", 3.0, "command line"), ("terse", 0.9, "test mark"), ("chars", 5.0, "ini")],
            id="other metrics' gates stay beside it",
        ),
    ],
)
def test_the_mark_layer_merges_by_identity_between_dataset_settings_and_ini(
    tmp_path: Path, layers: dict[str, str], expected: list[tuple[object, ...]]
) -> None:
    opts = options(tmp_path, **layers)
    opts.declare_marks(MARKS)
    assert [gate[:3] for gate in gates(opts, tmp_path)] == expected


class FakeItem:
    """What :func:`mark_gates` reads of a collected test function: its node id and its ``gym_rollout`` param."""

    def __init__(self, nodeid: str, dataset: str, min_metric: tuple[tuple[str, float], ...]) -> None:
        from pytest_gym_eval.outcomes.rollout import RolloutRequest
        from pytest_gym_eval.tasks.dataset import Task

        request = RolloutRequest(dataset, Path(dataset), Task("q1", 1, None), 0, "agent", min_metric=min_metric)
        self.nodeid = f"{nodeid}[q1-r0]"
        self.callspec = type("CallSpec", (), {"params": {"gym_rollout": request}})()


def test_marks_are_gathered_per_dataset_and_two_bounds_of_one_gate_name_both_tests() -> None:
    items = [
        FakeItem("test_a.py::test_terse", "mcqa.jsonl", (("terse", 0.9),)),
        FakeItem("test_b.py::test_terse", "mcqa.jsonl", (("terse", 0.9), ("n_calls", 3.0))),
        FakeItem("test_c.py::test_terse", "other.jsonl", (("terse", 0.5),)),
        FakeItem("test_d.py::test_plain", "mcqa.jsonl", ()),
    ]
    items.append(FakeItem("test_a.py::test_terse", "mcqa.jsonl", (("terse", 0.9),)))  # another of its pairs
    assert mark_gates(items) == {  # type: ignore[arg-type]
        "mcqa.jsonl": {
            "terse": (0.9, ("test_a.py::test_terse", "test_b.py::test_terse")),
            "n_calls": (3.0, ("test_b.py::test_terse",)),
        },
        "other.jsonl": {"terse": (0.5, ("test_c.py::test_terse",))},
    }
    items.append(FakeItem("test_e.py::test_strict", "mcqa.jsonl", (("terse", 0.95),)))
    with pytest.raises(ValueError, match=r"test_a.py::test_terse .*0.9.* and test_e.py::test_strict .*0.95"):
        mark_gates(items)  # type: ignore[arg-type]


def test_collection_checks_each_marks_gates_against_the_earlier_ones() -> None:
    declared: dict[tuple[str, str], tuple[float, str]] = {}
    check_declared(declared, "mcqa.jsonl", [("terse", 0.9)], "test_a.py::test_terse")
    check_declared(declared, "mcqa.jsonl", [("terse", 0.9)], "test_b.py::test_terse")  # the same gate again
    check_declared(declared, "other.jsonl", [("terse", 0.5)], "test_c.py::test_terse")  # another dataset's
    assert declared == {
        ("mcqa.jsonl", "terse"): (0.9, "test_a.py::test_terse"),
        ("other.jsonl", "terse"): (0.5, "test_c.py::test_terse"),
    }
    with pytest.raises(ValueError, match=r"on mcqa.jsonl: test_a.py::test_terse .* and test_d.py::test_x "):
        check_declared(declared, "mcqa.jsonl", [("terse", 0.95)], "test_d.py::test_x")


def test_a_marks_gate_goes_with_its_tests_when_none_of_them_ran(tmp_path: Path) -> None:
    from pytest_gym_eval.session.conclude import marks_of_tests_run

    opts = options(tmp_path, ini="chars:5")
    opts.declare_marks(MARKS)
    gates = {"mcqa.jsonl": opts.dataset_settings(tmp_path / "mcqa.jsonl").gates}
    kept = [(g.custom, g.source) for g in marks_of_tests_run(gates, opts, {"test_y.py::test_terse"})["mcqa.jsonl"]]
    assert kept == [("terse", GateSource.MARK), ("chars", GateSource.INI)]  # one of its two tests ran
    dropped = marks_of_tests_run(gates, opts, {"test_z.py::test_other"})["mcqa.jsonl"]
    assert [(g.custom, g.source) for g in dropped] == [("chars", GateSource.INI)]
    assert opts.declaring_tests("other.jsonl", "terse") == ()


def test_a_marks_min_metric_is_checked() -> None:
    good = pytest.mark.gym_rollouts("d.jsonl", min_metric={"terse": 0.9, "n_calls": 3}).mark
    assert mark_arguments(good, "t.py::test").min_metric == (("terse", 0.9), ("n_calls", 3.0))
    for bad, says in [
        ({"terse": "high"}, "min_metric['terse'] must be a finite number"),
        ({"terse": True}, "must be a finite number"),
        ({"terse": float("nan")}, "must be a finite number"),
        ({"no spaces": 0.9}, "invalid metric name"),
        ([("terse", 0.9)], "min_metric must be a dict"),
        ({}, "min_metric must be a dict"),
    ]:
        with pytest.raises(ValueError, match=r"t.py::test: gym_rollouts: .*" + says.replace("[", r"\[")):
            mark_arguments(pytest.mark.gym_rollouts("d.jsonl", min_metric=bad).mark, "t.py::test")


def test_the_collected_plan_and_the_report_carry_the_marks_gate(tmp_path: Path) -> None:
    plan = CollectedPlan(None, [DatasetTasks("mcqa.jsonl", "mcqa.jsonl", 1, ["q1"], {"q1": "a"})], marks=MARKS)
    plan.save(tmp_path / "collected.json")
    assert CollectedPlan.load(tmp_path / "collected.json").marks == MARKS  # what an xdist controller reads

    gate = Gate("custom", 0.9, custom="terse", source=GateSource.MARK, declared_by="test_x.py::test_terse")
    written = json_report.plan_gate_json(gate)
    assert written["source"] == "test mark" and written["declared_by"] == "test_x.py::test_terse"
    again = json_reading._gate_from_json(json.loads(json.dumps(written)))
    assert (again, again.source, again.declared_by) == (gate, GateSource.MARK, "test_x.py::test_terse")
    assert set_where(gate) == " (set by a gym_rollouts mark of test_x.py::test_terse)"
