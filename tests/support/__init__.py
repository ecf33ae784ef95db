"""Importable helpers of the project's own tests (``from tests.support.<module> import ...``).

- :mod:`tests.support.fakes`: the stand-in Gym checkout (``fake_gym``), a replay recording, a warm-Gym registry;
- :mod:`tests.support.junit`: reading and validating JUnit XML;
- :mod:`tests.support.children`: child pytest processes (start, wait for a report, interrupt, stop like a runner);
- :mod:`tests.support.real_gym`: the provisioned Gym, one started Gym shared by the real-Gym tier, Gym's verdicts;
- :mod:`tests.support.live`: the live tier's local model server;
- :mod:`tests.support.browser`: headless Chromium for the HTML report.
- :mod:`tests.support.tiers`: a tier folder's ``conftest.py`` marks its tests with it.

The modules that define fixtures are loaded as plugins by the root ``conftest.py`` (``pytest_plugins``), so every
test sees the fixtures; the scripts beside them (``fake_gym.py``, ``gym_verify.py``, ...) run as child processes.
"""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
"""This folder: the stand-in scripts and the JUnit schemas."""
ROOT = SUPPORT.parent.parent
"""The repository."""
PROJECT_EXAMPLE = ROOT / "examples" / "mcqa"
"""The project's mcqa example (``examples/mcqa``): its pytest.ini, dataset and recorded answers."""
