"""The adaptive_margin benchmark (benchmarks/adaptive_margin.py) in its small size: its rows are computed through
the wave planner and the session's comparison, and a partial run's rows go into the tables already written
(benchmarks/verdicts.py's merge_rows)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import adaptive_margin  # noqa: E402
import verdicts  # noqa: E402


def test_the_cases_drop_by_exactly_the_margin() -> None:
    for case in adaptive_margin.cases(20):
        drop = sum(c - b for b, c in zip(case.baseline, case.candidate, strict=True)) / 20
        assert abs(drop + adaptive_margin.MARGIN) < 1e-12
    one_sided = adaptive_margin.cases(20)[1]
    assert set(one_sided.baseline) == {1.0} and set(one_sided.candidate) == {0.9}  # differences 0 or -1 only


def test_its_rows_are_computed_in_the_small_size(tmp_path: Path) -> None:
    """10 tasks, 6 runs a case, ceiling 4 (waves of 2 and 4): each case's row gives both wrong-verdict rates with
    their Monte-Carlo interval, now and under the rule before issue 35, and a verdict against alpha/2."""
    rows = adaptive_margin.bench_adaptive_margin(10, 6, tmp_path, max_repeats=4)
    assert [row.summary for row in rows] == [
        "adaptive comparison at the margin, ceiling reached, symmetric",
        "adaptive comparison at the margin, ceiling reached, rare one-sided drops",
    ]
    for row in rows:
        assert "10 tasks x 2 policies, up to 4 repeats (waves to [2, 4])" in row.benchmark
        assert row.plugin.startswith("wrong PASS ") and ", wrong FAIL " in row.plugin and "%-" in row.plugin
        assert row.baseline.startswith("the fixed-sample interval at the ceiling (before issue 35): wrong PASS ")
        assert row.goal == "each wrong verdict <= 2.5% (alpha/2)"
        assert row.verdict in {"met", "unclear", "not met"}
        assert row.verdict != "met"  # 6 runs: the Wilson interval's upper end of 0 of 6 is 39%, above 2.5%
    assert list(tmp_path.iterdir()) == []  # the scratch folder is removed


def test_a_partial_runs_rows_replace_their_namesakes_and_join_their_kin(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    table = ["Machine: m.  ", "", "| benchmark | a |", "|---|---|", "| adaptive: x | 1 |", "| warm: y | 2 |"]
    page.write_text("intro\n" + verdicts.TABLE_BEGIN + "\n" + "\n".join(table) + "\n" + verdicts.TABLE_END + "\nend\n")
    assert verdicts.merge_rows(page, ["| adaptive: x | 3 |", "| adaptive margin | 4 |"], "Rows of `--only z`: run 1")
    assert verdicts.merge_rows(page, ["| adaptive margin | 5 |"], "Rows of `--only z`: run 2")
    text = page.read_text()
    body = text[text.index(verdicts.TABLE_BEGIN) + len(verdicts.TABLE_BEGIN) : text.index(verdicts.TABLE_END)]
    merged = ["| adaptive: x | 3 |", "| adaptive margin | 5 |", "| warm: y | 2 |", "", "Rows of `--only z`: run 2"]
    assert body.strip().split("\n") == [*table[:4], *merged]
    assert text.startswith("intro\n") and text.endswith(verdicts.TABLE_END + "\nend\n")
    # A label that quotes its rounds' values is the same row when only those values change; sizes are not values.
    quoted = "| warm: y (rounds 1.25, 1.31 s) | 6 |"
    assert verdicts.merge_rows(page, [quoted, "| warm: y (50 tasks x 4) | 7 |"], "Rows of `--only z`: run 3")
    assert verdicts.merge_rows(page, ["| warm: y (rounds 1.40, 1.52 s) | 8 |"], "Rows of `--only z`: run 4")
    body = page.read_text().split(verdicts.TABLE_BEGIN)[1].split(verdicts.TABLE_END)[0]
    assert [line for line in body.split("\n") if line.startswith("| warm")] == [
        "| warm: y (rounds 1.40, 1.52 s) | 8 |",
        "| warm: y (50 tasks x 4) | 7 |",
    ]
    unmarked = tmp_path / "other.md"
    unmarked.write_text("no table\n")
    assert not verdicts.merge_rows(unmarked, ["| a | 1 |"], "note") and unmarked.read_text() == "no table\n"
