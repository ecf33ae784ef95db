"""Where the plugin keeps its state on the pytest config (``config.stash``), in a module light enough for
:mod:`pytest_gym_eval.plugin` to import in every pytest run, Gym datasets or not."""

from __future__ import annotations

from typing import Any

import pytest

SESSION_KEY = pytest.StashKey[Any]()
"""The session's :class:`~pytest_gym_eval.session.gym_session.GymSession`, once made (absent in a run without Gym
datasets).
Typed as :data:`pytest_gym_eval.session.gym_session.SESSION_KEY` (the same key), which the modules below the plugin
use."""

SOFT_FAILURES_KEY = pytest.StashKey[list[str]]()
"""On a test item: the messages of the soft expectations (``rollout.expect``) that failed in it so far; the plugin
fails the test with them once its function has returned."""
