"""The HTML page's history section (reporting/history_page.py) and its SVGs (reporting/charts.py), from the JSON
report's history block: each task's sparkline, each dataset's trend plot with its intervals and the drift alarm."""

from __future__ import annotations

import itertools
import re

import pytest

from pytest_gym_eval.history.drift import cusum_drift
from pytest_gym_eval.history.stability import RunOutcome, assess
from pytest_gym_eval.history.summary import DatasetHistory, summary_json
from pytest_gym_eval.reporting.charts import sparkline_svg, trend_svg
from pytest_gym_eval.reporting.history_page import history_section


def drifting_block() -> dict[str, object]:
    """Runs 11-14 of tasks a and b: one of them passes in each of three runs, then neither: with h = 0.5 the alarm
    fires at run 14 (v = 1/3, z = (0 - 0.5) / sqrt(1/6 + 1/18) = -1.061, S = 0.561 > 0.5)."""
    runs = [(11, {"a": [1.0], "b": [0.0]}), (12, {"a": [0.0], "b": [1.0]}), (13, {"a": [1.0], "b": [0.0]})]
    runs.append((14, {"a": [0.0], "b": [0.0]}))
    drift = cusum_drift("mcqa.jsonl", runs, reference_runs=3, h=0.5)
    assert drift.alarm_run == 14
    tasks = (
        assess("mcqa.jsonl", "a", [RunOutcome(run, 1, 1) for run in (11, 12, 13, 14)]),
        assess("mcqa.jsonl", "b", [*(RunOutcome(run, 1, 1) for run in (11, 12, 13)), RunOutcome(14, 0, 1)]),
    )
    history = DatasetHistory("mcqa.jsonl", "d1", "policy", 4, tasks, (), ("b",), drift)
    return {"target": "gym-history.db", "run_id": 14, "error": None, **summary_json([history])}


def test_the_drift_alarm_is_marked_on_the_trend_and_the_failing_task_comes_first() -> None:
    section = history_section(drifting_block())
    assert section.startswith('<section class="history" id="history">')
    assert "run 14 of gym-history.db" in section
    assert 'data-dataset="mcqa.jsonl" data-drift="true"' in section
    assert '<span class="badge fail drift-badge">DRIFT</span>' in section
    assert "mean reward moved down: 0.000 at run 14" in section  # the evidence, in words under the plot
    assert 'data-alarm-run="14"' in section and '<line class="alarm-line"' in section
    kinds = re.findall(r'<circle class="mean ([a-z]+)" [^>]*data-run="(\d+)"', section)
    assert kinds == [("reference", "11"), ("reference", "12"), ("reference", "13"), ("alarm", "14")]
    assert section.index('data-task="b" data-label="regressed"') < section.index("1 stable task")
    assert 'data-outcomes="PPPF"' in section and 'data-outcomes="PPPP"' in section


def test_no_block_or_no_dataset_draws_nothing() -> None:
    assert history_section(None) == ""
    assert (
        history_section({"target": "h.db", "run_id": None, "error": "gym history: not written", "datasets": {}}) == ""
    )


def test_the_trend_draws_each_runs_interval_and_skips_runs_without_a_mean() -> None:
    svg = trend_svg([(1, 0.5, 0.25, 0.75, True), (2, None, None, None, False), (3, 1.0, None, None, False)], None)
    assert svg.count("<circle") == 2 and svg.count('class="interval"') == 1  # run 3 has one task: no interval
    # y from 1 (top, 14) to 0 (bottom, 136): 0.75 at 44.5, 0.25 at 105.5
    assert '<line class="interval" x1="' in svg and 'y1="44.5"' in svg and 'y2="105.5"' in svg
    assert 'aria-label="Mean reward of the last 2 runs, no drift alarm"' in svg
    assert trend_svg([(1, None, None, None, True)], None) == ""


def test_a_sparkline_has_a_box_per_run_and_says_each_outcome() -> None:
    svg = sparkline_svg("PMF", [4, 5, 7])
    assert re.findall(r'<rect class="o-([PFM])"', svg) == ["P", "M", "F"]
    assert "<title>run 4 pass, run 5 mixed, run 7 fail</title>" in svg
    assert sparkline_svg("", []) == ""
    with pytest.raises(ValueError, match="3 outcomes but 2 runs"):
        sparkline_svg("PPF", [1, 2])
    with pytest.raises(ValueError, match="P, F or M"):
        sparkline_svg("PX", [1, 2])


def test_twenty_runs_get_about_ten_labels_the_alarms_and_the_last_among_them() -> None:
    points = [(run, 0.5, 0.4, 0.6, run <= 5) for run in range(1, 21)]
    svg = trend_svg(points, 12)
    labels = [int(text) for text in re.findall(r'<text class="tick" [^>]*text-anchor="middle">(\d+)</text>', svg)]
    assert 12 in labels and 20 in labels and 1 in labels
    assert len(labels) <= 10 and all(b - a >= 2 for a, b in itertools.pairwise(labels))
