"""Which JUnit ``gym-gate`` testcase carries a verdict: every kind of the gate registry is the dataset's own."""

from __future__ import annotations

import pytest

from pytest_gym_eval.reporting.junit import gate_failures, gate_testcase_id
from pytest_gym_eval.reporting.verdicts import GateVerdict
from pytest_gym_eval.stats import gate_kinds


def verdict(kind: str, subject: str = "mcqa.jsonl") -> GateVerdict:
    return GateVerdict(
        dataset="mcqa.jsonl", subject=subject, policy=None, kind=kind, gate=kind, statistic=0.1, bound=0.2,
        threshold=0.05, verdict="FAIL", message=f"{subject}: {kind} FAIL", decides=True, fails=True,
    )  # fmt: skip


@pytest.mark.parametrize("kind", gate_kinds.METRICS)
def test_every_registered_gate_kind_fails_the_datasets_own_gate_testcase(kind: str) -> None:
    # (--gym-max-error-rate's verdicts had a testcase of their own: the kinds were listed by hand)
    assert gate_testcase_id(verdict(kind)) == "mcqa.jsonl::gym-gate"


def test_a_comparison_has_a_testcase_of_its_own_and_failures_join_per_testcase() -> None:
    compared = verdict("superiority", subject="mcqa.jsonl cand vs base")
    assert gate_testcase_id(compared) == "mcqa.jsonl::gym-gate[mcqa.jsonl cand vs base superiority]"
    failures = gate_failures([verdict("mean_reward"), verdict("error_rate"), compared])
    assert failures["mcqa.jsonl::gym-gate"] == "mcqa.jsonl: mean_reward FAIL\nmcqa.jsonl: error_rate FAIL"
    assert len(failures) == 2
