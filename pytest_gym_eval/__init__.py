"""pytest-gym-eval: run NVIDIA NeMo Gym evaluations as pytest tests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_gym_eval.rollout_value import Rollout, ToolCall

__version__ = "0.1.0"
__all__ = ["Rollout", "ToolCall", "__version__"]


def __getattr__(name: str) -> Any:
    """``Rollout`` and ``ToolCall`` (:mod:`pytest_gym_eval.rollout_value`), imported on first use: the plugin's
    package is imported by every pytest run, and a run without Gym imports nothing more for them."""
    if name in ("Rollout", "ToolCall"):
        from pytest_gym_eval import rollout_value

        return getattr(rollout_value, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
