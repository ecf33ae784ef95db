"""Keeping Gym warm between sessions (``--gym-keep-alive[=SECONDS]``).

A session with ``--gym-keep-alive`` looks up its Gym configuration's key (:mod:`pytest_gym_eval.gym.fingerprint`) in
the per-user registry (:mod:`pytest_gym_eval.warm.registry`), holding the key's lock: it attaches to a live warm Gym
of that key as ``--gym-head-server`` does (:mod:`~pytest_gym_eval.warm.attach`), stops and unregisters a stale one
(:meth:`~pytest_gym_eval.warm.registry.Entry.problem`), and otherwise starts a *keeper*,
``python -m pytest_gym_eval.warm HOME`` (a process in a process session of its own;
:mod:`~pytest_gym_eval.warm.keeper`, whose ``_Keeper`` docstring has its life cycle and the API-key rule), and
waits, still holding the lock, until the keeper's Gym is ready.
Modules: ``attach``, ``keeper``, ``spec``, ``status``. What users see: docs/warm-and-resume.md.
"""

from pytest_gym_eval.warm.attach import WarmGym as WarmGym
from pytest_gym_eval.warm.attach import warm_spec as warm_spec
from pytest_gym_eval.warm.keeper import keeper_main as keeper_main
from pytest_gym_eval.warm.spec import HEAD_PATIENCE as HEAD_PATIENCE
from pytest_gym_eval.warm.spec import KEEPER_MODULE as KEEPER_MODULE
from pytest_gym_eval.warm.spec import WarmSpec as WarmSpec
from pytest_gym_eval.warm.status import describe as describe
from pytest_gym_eval.warm.status import describe_starting as describe_starting
from pytest_gym_eval.warm.status import starting as starting
