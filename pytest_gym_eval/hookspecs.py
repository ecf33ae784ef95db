"""Hooks other plugins and conftest files can implement to change how pytest-gym-eval decides things.

:func:`pytest_gym_eval_task_id` (a row's task id) and :func:`pytest_gym_eval_rollout_passed` (a rollout's
verdict), implemented in a ``conftest.py`` or a plugin like any pytest hook. Both are ``firstresult`` hooks: the
first implementation returning something other than None decides. Examples: docs/hooks-and-api.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.hookspec(firstresult=True)
def pytest_gym_eval_task_id(row: dict[str, Any], path: Path, line: int) -> str | None:
    """Return the task id of a dataset row, or None to use the default rule.

    :param row: the row, parsed from JSON.
    :param path: the dataset file.
    :param line: the row's 1-based line number.

    The default is the row's ``gym_id_field`` (else the first of ``id``, ``uuid``, ``task_id``), else the
    first 12 hex digits of the sha256 of the row's canonical JSON. The id becomes part of the node id
    ``path::<task-id>[r<k>]``, so it must be stable across runs and must not contain ``::``, ``[`` or ``]``.
    Called once per row during collection (on every pytest-xdist worker), so keep it cheap and deterministic.
    """


@pytest.hookspec(firstresult=True)
def pytest_gym_eval_rollout_passed(
    item: pytest.Item, record: dict[str, Any], reward: float, threshold: float
) -> bool | None:
    """Decide whether a scored rollout passes, or return None to use ``reward >= threshold``.

    :param item: the rollout's test item (``item.task_id``, ``item.repeat``, ``item.agent``, ``item.path``).
    :param record: the whole rollout record Gym wrote (``reward``, ``response``, verifier fields...).
    :param reward: the rollout's reward, a finite float.
    :param threshold: the dataset's pass threshold.

    Only rollouts with a numeric reward reach this hook: infrastructure failures are errors before it.
    """
