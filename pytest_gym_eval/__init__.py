"""pytest-gym-eval: run NVIDIA NeMo Gym evaluations as pytest tests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_gym_eval.outcomes.rollout import Rollout, ToolCall
    from pytest_gym_eval.outcomes.tool_matchers import call, expect_tool_calls
    from pytest_gym_eval.tasks.python_dataset import Dataset

__version__ = "0.1.0"
__all__ = ["Dataset", "Rollout", "ToolCall", "__version__", "call", "expect_tool_calls"]


def __getattr__(name: str) -> Any:
    """``Dataset`` (:mod:`pytest_gym_eval.tasks.python_dataset`), ``Rollout`` and ``ToolCall``
    (:mod:`pytest_gym_eval.outcomes.rollout`), ``call`` and ``expect_tool_calls``
    (:mod:`pytest_gym_eval.outcomes.tool_matchers`), imported on first use: the plugin's package is imported by every
    pytest run, and a run without Gym imports nothing more for them."""
    if name in ("Rollout", "ToolCall"):
        from pytest_gym_eval.outcomes import rollout

        return getattr(rollout, name)
    if name == "Dataset":
        from pytest_gym_eval.tasks import python_dataset

        return python_dataset.Dataset
    if name in ("call", "expect_tool_calls"):
        from pytest_gym_eval.outcomes import tool_matchers

        return getattr(tool_matchers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
