"""The ``html`` benchmark: the ``--gym-html`` page of 1,000 and 10,000 rollouts: its size, the time to write it, and in
headless Chromium the time to first render and from a click to the next frame.

Run alone: ``.venv/bin/python benchmarks/run.py --only html``."""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common import (
    AGENT,
    LETTERS,
    Row,
    mcqa_question,
    recording,
)
from verdicts import Estimate, bootstrap

NAME = "html"
"""Its name in ``--only`` and the table."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--html-rollouts",
        type=int,
        action="append",
        help="html: rollouts of a page (repeatable; default 1000 and 10000)",
    )


def run(work: Path, args: argparse.Namespace, quick: bool) -> list[Row]:
    """The table's rows of this benchmark, with ``args``' settings (``quick``: scaled down)."""
    return bench_html(work, args.html_rollouts or (1_000, 10_000), 1 if quick else 3)


CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--window-size=1400,1000",
)  # fmt: skip
"""As the browser tests start Chromium (conftest.py): headless, as root, no background requests."""


PAGE_TIMINGS = """
const done = arguments[arguments.length - 1];
requestAnimationFrame(() => setTimeout(() => {  // a frame later the first paint has its entry
  const nav = performance.getEntriesByType("navigation")[0];
  const mark = performance.getEntriesByName("gym-first-render")[0];
  const paint = performance.getEntriesByType("paint").find((e) => e.name === "first-contentful-paint");
  done({render: mark.startTime, paint: paint ? paint.startTime : null, load: nav.loadEventEnd});
}, 0));
"""


NEXT_FRAME = """
const done = arguments[arguments.length - 1];
const target = document.querySelector(arguments[0]);
const start = performance.now();
if (target.tagName === "SELECT") {
  target.value = arguments[1];
  target.dispatchEvent(new Event("change"));
} else {
  target.click();
}
requestAnimationFrame(() => setTimeout(() => done(performance.now() - start), 0));
"""
"""Click (or choose a value of a select), then wait for the next frame: milliseconds from the click until the
browser has drawn the result."""


HTML_ACTIONS = (
    ("filter to failed", '.filters button[data-filter="failed"]', ""),
    ("next page", ".pager .next", ""),
    ("sort by mean", ".sort", "low"),
    ("open a transcript (the first: splits the transcripts into lines)", ".cell[data-i]", ""),
    ("open another transcript", ".grid tbody tr:nth-child(5) .cell[data-i]", ""),
)


def synthetic_session(folder: Path, rollouts: int) -> tuple[Any, list[Any], dict[str, Any]]:
    """A finished session of ``rollouts`` mcqa rollouts (4 repeats a task; each task right with its own
    probability, so some are flaky; 1 in 100 errored), its records written as Gym writes them, a gate, a
    baseline report of the same tasks and a replay flip: (conclusion, results, baseline report)."""
    from pytest_gym_eval.reporting.baseline import compare_to_baseline
    from pytest_gym_eval.reporting.conclusion import Conclusion, Flip
    from pytest_gym_eval.reporting.json_report import build_report
    from pytest_gym_eval.reporting.summary import RolloutResult, summarize
    from pytest_gym_eval.reporting.verdicts import session_verdict
    from pytest_gym_eval.stats.gates import Gate, GateMode

    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(13)
    dataset, repeats = "datasets/mcqa.jsonl", 4
    outputs, failures = folder / "rollouts.jsonl", folder / "rollouts_failures.jsonl"
    results, old = [], []
    lines = {outputs: 0, failures: 0}
    with outputs.open("w", encoding="utf-8") as good, failures.open("w", encoding="utf-8") as bad:
        for task in range(rollouts // repeats):
            row, letter, value = mcqa_question(task, rng)
            chance = rng.random()
            for repeat in range(repeats):
                stamp = {"_ng_task_index": task * repeats + repeat, "_ng_rollout_index": 0}
                if rng.random() < 0.01:
                    record = {
                        "responses_create_params": row["responses_create_params"], **stamp,
                        "_ng_failure_class": "agent_run_error", "_ng_failure_http_status": 500,
                        "_ng_failure_message": "500, message='Internal Server Error', url='http://127.0.0.1:1/run'",
                    }  # fmt: skip
                    target, handle, status, reward = failures, bad, "error", None
                else:
                    answer = letter if rng.random() < chance else LETTERS[(LETTERS.index(letter) + 1) % 4]
                    text = f"Working it out gives {value}, which is option {letter}.\n\n\\boxed{{{answer}}}"
                    reward = float(answer == letter)
                    record = {**recording(row, task, answer, text, reward), **stamp}
                    target, handle, status = outputs, good, "passed" if reward == 1.0 else "failed"
                handle.write(json.dumps(record) + "\n")
                lines[target] += 1
                task_id = row["id"]
                results.append(
                    RolloutResult(
                        f"{dataset}::{task_id}[r{repeat}]", dataset, task_id, repeat, AGENT, status, reward,
                        "agent_run_error" if reward is None else None, f"{target}:{lines[target]}",
                    )
                )  # fmt: skip
                old.append(RolloutResult(results[-1].nodeid, dataset, task_id, repeat, AGENT, "passed", 1.0))
    baseline = build_report([], old, {})
    summaries = summarize(
        results, thresholds={dataset: 1.0}, gates={dataset: [Gate("mean_reward", 0.5)]}, mode=GateMode.POINT
    )
    exit_status, reason = session_verdict(summaries, inconclusive_passes=False)
    flip = next(r for r in results if r.reward is not None)
    conclusion = Conclusion(
        summaries, compare_to_baseline(baseline, results), [Flip(flip.nodeid, flip.reward or 0.0, (0.5,))],
        exit_status, reason,
    )  # fmt: skip
    return conclusion, results, baseline


def measure_page(page: Path, profile: Path) -> dict[str, float | None]:
    """Open ``page`` in a fresh headless Chromium and time it: ``render`` (navigation start to the grids drawn,
    the page's ``gym-first-render`` mark), ``paint`` (first contentful paint), ``load`` (load event end), then
    each of :data:`HTML_ACTIONS` (click to next frame); milliseconds."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.set_script_timeout(60)
        driver.get(page.resolve().as_uri())
        timings: dict[str, float | None] = dict(driver.execute_async_script(PAGE_TIMINGS))
        for name, selector, value in HTML_ACTIONS:
            timings[name] = float(driver.execute_async_script(NEXT_FRAME, selector, value))
        return timings
    finally:
        driver.quit()


def median_known(values: Sequence[float | None]) -> float:
    """The median of the values the browser reported (None: it did not, e.g. no first-paint entry yet); nan
    when there is none."""
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else math.nan


def shown_ms(value: float) -> str:
    """Milliseconds for the table; ``not reported`` for nan (no round's browser reported the value)."""
    return "not reported" if math.isnan(value) else f"{value:.0f} ms"


def median_known_of(columns: Sequence[Sequence[float | None]], statistic: Callable[..., float]) -> Estimate:
    """:func:`verdicts.bootstrap` of ``statistic`` over rounds that may hold values the browser did not report
    (None; ``statistic`` must skip them, e.g. with :func:`median_known`)."""
    return bootstrap(columns, statistic)  # type: ignore[arg-type]


def bench_html(work: Path, sizes: Sequence[int], rounds: int) -> list[Row]:
    from pytest_gym_eval.reporting import html

    if not (Path("/usr/bin/chromium").exists() and Path("/usr/bin/chromedriver").exists()):
        raise RuntimeError(
            "html: needs /usr/bin/chromium and /usr/bin/chromedriver (apt-get install chromium chromium-driver)"
        )
    rows = []
    for size in sizes:
        folder = work / "html" / str(size)
        conclusion, results, baseline = synthetic_session(folder, size)
        page = folder / "report.html"
        start = time.perf_counter()
        html.write_page(page, conclusion, results, {"model": "benchmark"}, baseline=baseline)
        written = time.perf_counter() - start
        runs = [measure_page(page, folder / f"profile-{i}") for i in range(rounds)]
        median = {key: median_known([run[key] for run in runs]) for key in runs[0]}
        megabytes = page.stat().st_size / 1e6
        each = ", ".join(f"{run['render'] or math.nan:.0f}" for run in runs)
        load = os.getloadavg()[0]
        print(
            f"  {size:,} rollouts: {megabytes:.1f} MB, written in {written:.2f} s; first render "
            f"{median['render']:.0f} ms (runs {each}; load average {load:.1f})",
            flush=True,
        )
        actions = ", ".join(f"{name} {median[name]:.0f} ms" for name, _, _ in HTML_ACTIONS)
        render_ms = median_known_of([[run["render"] for run in runs]], lambda r: median_known(r))
        columns = [[run[name] for run in runs] for name, _, _ in HTML_ACTIONS]
        slowest = median_known_of(columns, lambda *cs: max(median_known(c) for c in cs))
        tasks = size // 4
        rows += [
            Row(
                f"HTML report: {size:,} rollouts ({tasks:,} tasks x 4 repeats, mcqa transcripts, a baseline): page "
                "size; time to write it (reading every record)",
                f"{megabytes:.1f} MB; {written:.2f} s",
            ),
            Row(
                f"HTML report: {size:,} rollouts, headless Chromium: time to first render (navigation start to "
                f"the grids drawn), median of {rounds} (runs {each} ms; load average {load:.1f})",
                f"{shown_ms(median['render'])} (first paint {shown_ms(median['paint'])}, load event "
                f"{shown_ms(median['load'])})",
                ratio=f"{render_ms.text(0)} ms",
                goal="<= 3 s (opens in a few seconds)",
                verdict=render_ms.verdict(3000),
                summary=f"html: page of {size:,} rollouts, first render in headless Chromium",
            ),
            Row(
                f"HTML report: {size:,} rollouts: from a click to the next frame drawn, median of {rounds}",
                actions,
                ratio=f"slowest {slowest.text(0)} ms",
                goal="<= 100 ms each (RAIL: a response within 100 ms feels immediate)",
                verdict=slowest.verdict(100),
                summary=f"html: page of {size:,} rollouts, a click (filter, page, sort, transcript) to the next frame",
            ),
        ]
    return rows
