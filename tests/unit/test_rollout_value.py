"""The public rollout value (:class:`pytest_gym_eval.Rollout`) built from a Gym record, and the pure parts of the
``gym_rollouts`` mark: its arguments, the task filter, the pairs it asks for and their ids, and how the results
count a test function's rollout."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

import pytest_gym_eval
from pytest_gym_eval.outcomes.rollout import Rollout, RolloutRequest, ToolCall
from pytest_gym_eval.reporting.summary import RolloutResult
from pytest_gym_eval.session.item_reports import rollout_from_test_report
from pytest_gym_eval.session.results import (
    ResultsCollector,
    TestUse,
    count_rollout,
    counts_in_dataset,
    not_counted_note,
)
from pytest_gym_eval.session.rollout_tests import MarkArguments, dataset_path, mark_arguments, requests_for, task_filter
from pytest_gym_eval.tasks.dataset import Task

TOOL_RECORD = {
    "_ng_task_index": 3,
    "_ng_rollout_index": 0,
    "agent_ref": {"type": "responses_api_agents", "name": "weather_simple_agent"},
    "responses_create_params": {"input": [{"role": "user", "content": "Weather in SF?"}]},
    "response": {
        "output": [
            {"type": "function_call", "name": "get_weather", "arguments": '{"city": "SF"}', "call_id": "c1"},
            {"type": "function_call_output", "call_id": "c1", "output": '{"weather": "cold"}'},
            {"type": "function_call", "name": "get_time", "arguments": "not json", "call_id": "c2"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It is cold."}]},
        ],
        "usage": {"input_tokens": 70, "output_tokens": 40, "total_tokens": 110},
    },
    "ng_perf": {"total_latency_ms": 1500},
    "reward": 1.0,
    "expected_answer": "cold",
    "extracted_answer": "cold",
}


def test_a_rollout_is_built_from_a_gym_record() -> None:
    rollout = Rollout.from_record(
        TOOL_RECORD, task_id="w-1", repeat=1, status="passed", reward=1.0, row={"id": "w-1"},
        agent="weather_simple_agent", dataset="data/weather.jsonl", record_path=Path("out.jsonl"), record_line=4,
    )  # fmt: skip
    assert rollout.output_text == "It is cold."
    assert rollout.tool_calls == (
        ToolCall("get_weather", {"city": "SF"}, "c1", {"weather": "cold"}),
        ToolCall("get_time", "not json", "c2", None),  # no result came back
    )
    assert len(rollout.output) == 4 and rollout.output[0]["name"] == "get_weather"
    assert (rollout.input_tokens, rollout.output_tokens, rollout.latency) == (70, 40, 1.5)
    assert rollout.verifier_fields == {"expected_answer": "cold", "extracted_answer": "cold"}
    assert rollout.record["_ng_task_index"] == 3 and rollout.row == {"id": "w-1"}
    assert rollout.passed and (rollout.record_path, rollout.record_line) == (Path("out.jsonl"), 4)


@pytest.mark.parametrize("record", [{}, {"response": None}, {"response": {"output": "text"}}, {"reward": "x"}])
def test_a_record_of_any_shape_gives_an_empty_rollout(record: dict[str, object]) -> None:
    rollout = Rollout.from_record(record, task_id="t", repeat=0, status="error", reward=None)
    assert (rollout.output, rollout.output_text, rollout.tool_calls) == ([], "", ())
    assert rollout.input_tokens is None and rollout.latency is None and not rollout.passed


def test_the_package_exports_the_rollout_types() -> None:
    assert pytest_gym_eval.Rollout is Rollout and pytest_gym_eval.ToolCall is ToolCall
    with pytest.raises(AttributeError):
        pytest_gym_eval.NoSuchThing  # noqa: B018


def mark(*args: object, **kwargs: object) -> pytest.Mark:
    return pytest.mark.gym_rollouts(*args, **kwargs).mark


def test_mark_arguments_are_checked() -> None:
    assert mark_arguments(mark("d.jsonl"), "t") == MarkArguments("d.jsonl")
    assert mark_arguments(mark(dataset=Path("d.jsonl"), repeats=3, tasks=["a", "b"]), "t") == MarkArguments(
        "d.jsonl", 3, ("a", "b")
    )
    assert mark_arguments(mark("d.jsonl", repeats=3, count=True), "t") == MarkArguments("d.jsonl", 3, count=True)
    for bad, says in [
        (mark(), "0 datasets"),
        (mark("a.jsonl", "b.jsonl"), "2 datasets"),
        (mark("d.jsonl", repeat=2), "unknown argument repeat"),
        (mark("d.jsonl", repeats=0), "repeats must be a whole number >= 1, got 0"),
        (mark("d.jsonl", repeats=True), "repeats must be"),
        (mark("d.jsonl", tasks=[1]), "tasks must be an expression or a list of task ids"),
        (mark("d.jsonl", count="yes"), "count must be True or False, got 'yes'"),
        (mark(3), "the dataset must be a path"),
    ]:
        with pytest.raises(ValueError, match=r"^test_x\.py::test_a: ") as error:
            mark_arguments(bad, "test_x.py::test_a")
        assert says in str(error.value)


@pytest.mark.parametrize(
    ("tasks", "expected"),
    [
        (None, ["mcqa-001", "mcqa-002", "mcqa-010", "geo-1"]),
        ("mcqa-001 or mcqa-002", ["mcqa-001", "mcqa-002"]),
        ("mcqa-00*", ["mcqa-001", "mcqa-002"]),  # a glob; a name alone matches whole ids, not substrings
        ("mcqa-01", []),
        ("not mcqa-* and not geo-1", []),
        ("(mcqa-* and not mcqa-002) or geo-1", ["mcqa-001", "mcqa-010", "geo-1"]),
        (("geo-1", "mcqa-010"), ["mcqa-010", "geo-1"]),
    ],
)
def test_task_filter(tasks: str | tuple[str, ...] | None, expected: list[str]) -> None:
    selected = task_filter(tasks, "t")
    assert [t for t in ["mcqa-001", "mcqa-002", "mcqa-010", "geo-1"] if selected(t)] == expected


def test_a_task_filter_that_does_not_parse_names_the_test() -> None:
    with pytest.raises(ValueError, match=r"^test_x.py::test_a: gym_rollouts: tasks='a or': "):
        task_filter("a or", "test_x.py::test_a")


TASKS = [Task("q1", 1, None), Task("q2", 2, None, agent="other_agent"), Task("q3", 3, None)]


def test_requests_are_the_selected_pairs_under_the_dataset_items_node_ids() -> None:
    args = MarkArguments("d.jsonl", tasks="q2 or q3")
    requests = requests_for(TASKS, args, "data/d.jsonl", Path("/r/data/d.jsonl"), "d_simple_agent", 2, "t")
    assert [r.nodeid for r in requests] == [
        "data/d.jsonl::q2[r0]", "data/d.jsonl::q2[r1]", "data/d.jsonl::q3[r0]", "data/d.jsonl::q3[r1]",
    ]  # fmt: skip
    assert [r.test_id for r in requests] == ["q2-r0", "q2-r1", "q3-r0", "q3-r1"]
    assert requests[0].planned_row() == ("data/d.jsonl::q2[r0]", Path("/r/data/d.jsonl"), 2, "q2", 0, "other_agent")
    assert requests[2].agent == "d_simple_agent" and requests[2].dataset_tasks == ("q1", "q2", "q3")


def test_requests_name_a_missing_task_or_an_empty_selection() -> None:
    where, path = "test_x.py::test_a", Path("/r/d.jsonl")
    with pytest.raises(ValueError, match=r"^test_x.py::test_a: gym_rollouts: /r/d.jsonl has no task 'q9'$"):
        requests_for(TASKS, MarkArguments("d.jsonl", tasks=("q1", "q9")), "d.jsonl", path, "a", 1, where)
    with pytest.raises(ValueError, match=r"tasks='x\*' selects no task of /r/d.jsonl$"):
        requests_for(TASKS, MarkArguments("d.jsonl", tasks="x*"), "d.jsonl", path, "a", 1, where)


def test_a_dataset_is_found_beside_the_test_file_unless_absolute(tmp_path: Path) -> None:
    test_file = tmp_path / "tests" / "test_x.py"
    assert dataset_path("../data/d.jsonl", test_file) == tmp_path / "data" / "d.jsonl"
    assert dataset_path(str(tmp_path / "e.jsonl"), test_file) == tmp_path / "e.jsonl"


def report(nodeid: str, when: str, outcome: str, props: list[tuple[str, object]]) -> pytest.TestReport:
    location = ("f.py", 0, "")
    return pytest.TestReport(nodeid, location, {}, outcome, None, when, start=1.0, stop=2.0, user_properties=props)  # type: ignore[arg-type]


TESTED = [
    ("gym_rollout", "data/d.jsonl::q-1[r1]"), ("gym_rollout_status", "failed"), ("gym_rollout_agent", "d_agent"),
    ("reward", 0.0), ("record", "out.jsonl:3"), ("output_tokens", 9),
]  # fmt: skip


def test_a_test_functions_rollout_counts_as_its_datasets() -> None:
    result = rollout_from_test_report(report("test_x.py::test_a[q-1-r1]", "setup", "passed", TESTED))
    assert result is not None
    assert (result.nodeid, result.dataset, result.task_id, result.repeat, result.agent) == (
        "data/d.jsonl::q-1[r1]", "data/d.jsonl", "q-1", 1, "d_agent",
    )  # fmt: skip
    assert (result.status, result.reward, result.record, result.usage.output_tokens) == (
        "failed",
        0.0,
        "out.jsonl:3",
        9,
    )
    assert rollout_from_test_report(report("test_x.py::test_a[q-1-r1]", "call", "failed", TESTED)) is None
    assert rollout_from_test_report(report("test_x.py::test_b", "setup", "passed", [("reward", 1.0)])) is None


def test_the_dataset_items_own_report_wins_over_a_test_functions() -> None:
    results = ResultsCollector()
    item = [("task_id", "q-1"), ("repeat", 1), ("agent", "d_agent"), ("reward", 1.0)]
    results.pytest_runtest_logreport(report("test_x.py::test_a[q-1-r1]", "setup", "passed", TESTED))
    results.pytest_runtest_logreport(report("data/d.jsonl::q-1[r1]", "setup", "passed", item))
    results.pytest_runtest_logreport(report("data/d.jsonl::q-1[r1]", "call", "passed", item))
    results.pytest_runtest_logreport(report("test_x.py::test_b[q-1-r1]", "setup", "passed", TESTED))
    (only,) = results.rollouts()
    assert (only.nodeid, only.status, only.reward) == ("data/d.jsonl::q-1[r1]", "passed", 1.0)


def test_collection_finds_a_test_functions_request_on_its_parametrization() -> None:
    from pytest_gym_eval.session.collect import rollout_request

    one = RolloutRequest("d.jsonl", Path("/d.jsonl"), TASKS[0], 0, "a", ("q1",))
    assert one == RolloutRequest("d.jsonl", Path("/d.jsonl"), TASKS[0], 0, "a") and "dataset_tasks" not in repr(one)
    assert rollout_request(SimpleNamespace(callspec=SimpleNamespace(params={"gym_rollout": one}))) is one  # type: ignore[arg-type]
    assert rollout_request(SimpleNamespace(callspec=SimpleNamespace(params={"gym_rollout": 3}))) is None  # type: ignore[arg-type]
    assert rollout_request(SimpleNamespace()) is None  # type: ignore[arg-type]


def test_a_test_functions_pair_counts_within_the_datasets_own_repeats_unless_the_mark_opts_in() -> None:
    assert [counts_in_dataset(repeat, 1) for repeat in range(3)] == [True, False, False]
    assert [counts_in_dataset(repeat, 2) for repeat in range(3)] == [True, True, False]
    assert [counts_in_dataset(repeat, 1, count=True) for repeat in range(3)] == [True, True, True]


def test_requests_beyond_the_datasets_repeats_are_not_counted() -> None:
    args = MarkArguments("d.jsonl", repeats=3, tasks=("q1",))
    requests = requests_for(TASKS, args, "d.jsonl", Path("/d.jsonl"), "a", 3, "t", dataset_repeats=2)
    assert [(r.repeat, r.counted) for r in requests] == [(0, True), (1, True), (2, False)]
    opted = requests_for(TASKS, replace(args, count=True), "d.jsonl", Path("/d.jsonl"), "a", 3, "t", 1)
    assert all(r.counted for r in opted)


def result(status: str, nodeid: str = "d.jsonl::q1[r0]") -> RolloutResult:
    return RolloutResult(nodeid, "d.jsonl", "q1", 0, "a", status, 1.0 if status == "passed" else None)


@pytest.mark.parametrize(
    ("item", "uses", "expected"),
    [
        # The dataset item's own report counts, whatever the tests did.
        ("passed", [TestUse("t::a", True, skipped=True, result=result("failed"))], ("counted", "passed")),
        # No item: a counting test that got it and did not skip counts the rollout's own verdict.
        (None, [TestUse("t::a", True, result=result("failed"))], ("counted", "failed")),
        # Another counting test that skipped does not take it out.
        (None, [TestUse("t::a", True, True, result("passed")), TestUse("t::b", True, result=result("passed"))],
         ("counted", "passed")),
        # Every counting item skipped: left out, as a skipped dataset item is.
        (None, [TestUse("t::a", True, skipped=True, result=result("passed"))], ("skipped", None)),
        ("skipped", [TestUse("t::a", True, skipped=True)], ("skipped", None)),
        ("skipped", [], ("skipped", None)),
        ("skipped", [TestUse("t::a", False, result=result("passed"))], ("skipped", None)),
        # A skipped item, a counting test that got it: counted.
        ("skipped", [TestUse("t::a", True, result=result("passed"))], ("counted", "passed")),
        # Only tests beyond the dataset's repeats: a diagnostic, skipped or not.
        (None, [TestUse("t::a", False, result=result("passed")), TestUse("t::b", False, True)], ("beyond", None)),
        # A counting test that has not got it yet (it errored before, or never ran): unreported.
        (None, [TestUse("t::a", True)], ("unreported", None)),
        (None, [], ("unreported", None)),
    ],
)  # fmt: skip
def test_count_rollout_is_the_one_rule(item: str | None, uses: list[TestUse], expected: tuple[str, str | None]) -> None:
    why, counted = count_rollout(result(item) if item is not None else None, uses)
    assert (why, counted.status if counted is not None else None) == expected


def test_the_note_says_which_rollouts_of_test_functions_were_not_counted() -> None:
    beyond = {f"d.jsonl::q2[r{k}]": [TestUse(f"t.py::test_a[q2-r{k}]", False)] for k in (1, 2)}
    skipped = {"d.jsonl::q1[r0]": [TestUse("t.py::test_b[q1-r0]", True, skipped=True)]}
    reasons = {**dict.fromkeys(beyond, "beyond"), **dict.fromkeys(skipped, "skipped")}
    note = not_counted_note({**beyond, **skipped}, reasons, 1)  # type: ignore[arg-type]
    assert note == (
        "2 rollouts of test functions beyond the dataset's 1 repeat (t.py::test_a: repeats=3; count=True in the mark "
        "counts them); 1 skipped by its test (t.py::test_b[q1-r0])"
    )
    assert not_counted_note({}, {}, 2) == ""


ITEM = [("task_id", "q-1"), ("repeat", 1), ("agent", "d_agent"), ("reward", 1.0)]


def test_a_test_function_that_skips_after_its_rollout_leaves_it_out_unless_another_item_counts_it() -> None:
    for order in ("test first", "item first"):
        results = ResultsCollector()
        test = [
            report("test_x.py::test_a[q-1-r1]", "setup", "passed", [*TESTED, ("gym_rollout_counted", True)]),
            report("test_x.py::test_a[q-1-r1]", "call", "skipped", [*TESTED, ("gym_rollout_counted", True)]),
        ]
        for one in test:
            results.pytest_runtest_logreport(one)
        assert results.rollouts() == [] and results.left_out("data/d.jsonl::q-1[r1]")
        item = [report("data/d.jsonl::q-1[r1]", when, "passed", ITEM) for when in ("setup", "call")]
        results = ResultsCollector()
        for one in (test + item) if order == "test first" else (item + test):
            results.pytest_runtest_logreport(one)
        (only,) = results.rollouts()
        assert (only.nodeid, only.status) == ("data/d.jsonl::q-1[r1]", "passed") and not results.left_out(only.nodeid)


def test_a_test_skipped_before_it_got_its_rollout_names_it_from_collection() -> None:
    results = ResultsCollector()
    props = [("gym_rollout", "data/d.jsonl::q-1[r1]"), ("gym_rollout_counted", True)]
    results.pytest_runtest_logreport(report("test_x.py::test_a[q-1-r1]", "setup", "skipped", props))
    assert results.rollouts() == [] and results.left_out("data/d.jsonl::q-1[r1]")


def test_a_run_plan_keeps_its_uncounted_rollouts(tmp_path: Path) -> None:
    from pytest_gym_eval.tasks.plan import RunPlan

    plan = RunPlan.build([("d.jsonl::q1[r0]", Path("/d.jsonl"), 1, "q1", 0, "a"),
                          ("d.jsonl::q1[r1]", Path("/d.jsonl"), 1, "q1", 1, "a")])  # fmt: skip
    plan = replace(plan, uncounted=frozenset({"d.jsonl::q1[r1]"}))
    plan.save(tmp_path / "plan.json")
    assert RunPlan.load(tmp_path / "plan.json") == plan
