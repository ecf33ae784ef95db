"""The defaults of the values a user may set, for the layers that declare them and the layers that fall back on
them: :mod:`~pytest_gym_eval.options.register` shows them in ``pytest --help`` and resolves to them; the Gym side
(:mod:`~pytest_gym_eval.gym.run`, :mod:`~pytest_gym_eval.warm`) takes them as its parameters' defaults.

A leaf that imports nothing: the options are declared on every pytest run in an environment with the plugin, so
their defaults cannot live in the modules that start Gym (importing ``run`` alone costs more than the rest of the
options), and those modules never import ``options``. Times are in seconds.
"""

from __future__ import annotations

DEFAULT_MODEL_TYPE = "openai_model"
"""Gym's model server type for the policy model (the Responses API)."""

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
"""The environment variable holding the policy model's API key."""

DEFAULT_STARTUP_TIMEOUT = 900.0
"""Seconds Gym's servers and the model endpoint get to become ready, and ``gym eval run`` to begin rolling out."""

DEFAULT_ROLLOUT_TIMEOUT = 1800.0
"""Seconds without a rollout landing after which every pending rollout errors."""

DEFAULT_MIN_REPEATS = 2
"""Repeats per task in an adaptive run's first wave."""

DEFAULT_KEEP_ALIVE = 900.0
"""Seconds an idle warm Gym stays up (``--gym-keep-alive`` without a value): 15 minutes."""
