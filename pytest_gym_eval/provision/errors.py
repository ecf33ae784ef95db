"""The one error provisioning raises, for a failed step or a folder that is no usable Gym checkout."""

from __future__ import annotations

from pathlib import Path


class ProvisionError(Exception):
    """Provisioning failed, or a folder is not a usable Gym checkout.

    ``step`` is the failed step's name (one of ``STEPS``) and ``log_path`` its log file, both ``None`` when
    the error belongs to no step. The message names both and ends with the last lines of the log.
    """

    def __init__(self, message: str, *, step: str | None = None, log_path: Path | None = None) -> None:
        super().__init__(message)
        self.step = step
        self.log_path = log_path
