"""Helpers of the HTML page's tests (unit and session tiers): rollout results of the mcqa dataset, and the page's
transcripts read back."""

from __future__ import annotations

import json
import re
from typing import Any

from pytest_gym_eval.reporting.summary import RolloutResult

DATA = "datasets/mcqa.jsonl"


def result(task: str, repeat: int, reward: float | None, record: str | None = None, **extra: Any) -> RolloutResult:
    """A rollout of ``DATA`` with threshold 1.0: reward None is an error ("agent_run_error")."""
    status = "error" if reward is None else "passed" if reward >= 1.0 else "failed"
    return RolloutResult(
        f"{DATA}::{task}[r{repeat}]", DATA, task, repeat, "mcqa_simple_agent", status, reward,
        "agent_run_error" if reward is None else None, record, **extra,
    )  # fmt: skip


def transcripts_in(page: str) -> list[Any]:
    """The page's ``gym-transcripts`` element read back: one JSON value per line, line i rollout i's."""
    found = re.search(r'<script type="application/json" id="gym-transcripts">(.*?)</script>', page, re.S)
    assert found is not None
    return [json.loads(line) for line in found.group(1).split("\n")]
